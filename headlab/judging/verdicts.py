"""The one verdict rule, and the rows it writes: a claim of the study (:class:`StudyClaim`, declared by the page
module that measures it), measured on a run (:class:`Claim`), judged by :func:`judge`, rendered on its page and saved
for the scorecard (the registry of every claim: :mod:`headlab.pages.claims`).

A :class:`StudyClaim` holds the study's sentence (``quote``, word for word), the page that tests it, its *tally*
(:data:`TALLIES`: the study's claims; our own predictions that its reading implies; its objectives) and its *kind*:
an ``effect`` in a stated direction of at least its smallest effect of interest (``min_size``, with why: half the
study's own number, its words such as "collapse", or the test split's precision); ``no_effect`` beyond a ``margin``
(an equivalence test); ``compare``, a difference of two effects (named heads against random ones) judged as an effect.

:func:`judge` is the one verdict rule. "holds": the adjusted interval lies beyond the smallest effect of interest in
the claimed direction (or, for no effect, within the margin); "does not hold": it lies short of that size (or outside
the margin); "opposite": it lies beyond no effect in the other direction; "cannot tell": the data decide neither, with
the reason; "underpowered": a "cannot tell" whose design could not have decided it (its minimum detectable effect,
:func:`minimum_detectable`, beyond twice the size, or for no effect beyond the margin); "not comparable": the
measurement cannot speak to the claim on this model (e.g. a tokenizer that already marks the word ends a head is
scored on). A row shown as the weakest of several conditions is rejected on its far end widened for them; an
existential claim (some candidate has the effect) only when every candidate's far end rejects it (:func:`decide`).
A comparison whose two conditions both sit at the model's floor is *saturated* (cannot tell); a single effect that
reaches the floor is judged as measured (a collapse to the floor is the collapse claimed). Sub-rows
(``<claim>/<part>``) are evidence shown under their claim, outside the family: "not judged".

A correction across claims (Bonferroni): the family is one model's claims of one tally (:data:`FAMILIES`), each
judged at ``ALPHA / family``; a claim whose row was chosen among ``search`` candidates on the page (a head among the
heads of some layers) is judged at ``ALPHA / (family * search)``: the interval is widened once, for both. The page's
95% interval is widened to that level, each side at half of it, by the ratio of quantiles: the interval's own for
pairs alone, and for random draws each part of the variance at its own (:func:`judged_quantile`), so an adjusted
interval is never narrower than the raw one, and the verdict a page shows is the verdict the scorecard shows. Raw and
adjusted intervals are both kept in the row, with the MDE and :data:`RULE_VERSION`. The rule's error rates on the
rows' own designs: :mod:`headlab.book.calibration`.

"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import pandas as pd
from scipy import special

from headlab.core.enums import Words
from headlab.core.stats import pairs_share
from headlab.judging.sizes import POLICY, Source, readable_quote
from headlab.judging.units import KAPPA_START, Unit, unit_of
from headlab.lab.lab import Lab
from headlab.lab.pages import headings


class Kind(Words):
    """What a claim asserts (:data:`RULES` says how each is judged): an effect of at least its size, no effect
    beyond its margin, or one condition past another."""

    EFFECT = "effect"
    NO_EFFECT = "no_effect"
    COMPARE = "compare"


KINDS = tuple(Kind)


class Tally(Words):
    """Whose claim it is, counted apart and each its own Bonferroni family: the study's claims, our own predictions
    that its reading implies, and its credit of its pretraining objectives."""

    STUDY = "study"
    OURS = "ours"
    OBJECTIVES = "objectives"


TALLIES = {
    Tally.STUDY: "the study's claims",
    Tally.OURS: "our own predictions",
    Tally.OBJECTIVES: "the study's credit of its pretraining objectives (two Chinese models compared)",
}  # tally -> its heading; the objectives are judged on two models' results at once (headlab.pages.objectives)
# Each tally's Bonferroni family, stated (rule 3): a claim added or removed changes the level every verdict of its
# tally is judged at, so it is a new rule: state the new family here and raise RULE_VERSION with it.
FAMILIES = {Tally.STUDY: 26, Tally.OURS: 10, Tally.OBJECTIVES: 2}
FAMILY = FAMILIES[Tally.STUDY]  # the study's claims on one model's scorecard: the family its correction is over
# where a claim's smallest effect of interest comes from: the sizes policy's sources (headlab.judging.sizes)
SIZE_SOURCES = tuple(s.value for s in Source)
OTHER_FINDINGS = {"objectives": "the pretraining objectives: MLM+NSP against MLM alone"}  # claims on no one page


@dataclass(frozen=True)
class StudyClaim:
    """One claim of the study as the book tests it: what the study says (``quote``) and how a verdict is reached."""

    claim_id: str
    page: str
    claim: str
    quote: str
    kind: str
    direction: int = 0  # +1 / -1: the sign of the effect the claim expects (0 for no_effect)
    min_size: float = 0.0  # the least effect the claim's words ask for, in the claim's unit, from `null` (sizes)
    size_why: str = ""  # why min_size (or the margin) has its value (a registered claim: from the sizes policy)
    margin: float = 0.0  # no_effect: the equivalence margin, in the claim's unit
    null: float = 0.0  # the value that means "no effect" in the claim's unit
    size_source: str = "precision"  # where min_size (or the margin) comes from: one of SIZE_SOURCES
    tally: Tally = Tally.STUDY  # the study's claim, or a prediction of ours: each tally is its own family
    existential: bool = False  # "some candidate has the effect": not holding needs every candidate short (judge)
    counts_heads: bool = False  # its number is a share of the model's heads, its interval Clopper–Pearson over them

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.claim_id}: kind {self.kind!r} is not one of {KINDS}")
        if not self.size_why and self.claim_id in POLICY:  # a registered claim takes the policy's size (test_sizes)
            size = POLICY[self.claim_id]
            for name, value in dict(
                min_size=size.min_size, margin=size.margin, size_why=size.why, size_source=size.source.value
            ).items():
                object.__setattr__(self, name, value)
        if self.kind == Kind.NO_EFFECT and not self.margin > 0:
            raise ValueError(f"claim {self.claim_id}: a no_effect claim needs a margin above 0")
        if self.kind != Kind.NO_EFFECT and self.direction not in (-1, 1):
            raise ValueError(f"claim {self.claim_id}: a {self.kind} claim needs a direction of +1 or -1")
        if self.kind != Kind.NO_EFFECT and not self.min_size > 0:
            raise ValueError(f"claim {self.claim_id}: a {self.kind} claim needs a smallest effect of interest above 0")
        if self.tally in TALLIES:
            object.__setattr__(self, "tally", Tally(self.tally))  # typed, whichever way it was spelled
        if not self.size_why or self.size_source not in SIZE_SOURCES or self.tally not in TALLIES:
            raise ValueError(
                f"claim {self.claim_id}: say why its size is what it is (size_why), from one of {SIZE_SOURCES}, in "
                f"one of the tallies {sorted(TALLIES)}"
            )

    @property
    def family(self) -> int:
        """How many claims this claim's tally holds: the Bonferroni family it is judged in."""
        return FAMILIES[self.tally]

    @property
    def finding(self) -> str:
        """The name of the finding (notebook) the claim belongs to, e.g. ``word_order``."""
        return {**headings(), **OTHER_FINDINGS}[self.page]


def study_claim_id(claim_id: str) -> str:
    """The registered claim a row's id belongs to: ``<id>`` itself, or ``<id>`` of a sub-row ``<id>/<part>``."""
    return str(claim_id).split("/")[0]


def quote_in(text: str, quote: str) -> bool:
    """Whether ``quote`` is in ``text`` word for word (line breaks and runs of spaces read as one space)."""
    squash = lambda s: re.sub(r"\s+", " ", s).strip()  # noqa: E731
    return squash(quote) in squash(text)


class Verdict(Words):
    """What a row says of its claim (the module's docstring defines each)."""

    HOLDS = "holds"
    DOES_NOT_HOLD = "does not hold"
    OPPOSITE = "opposite"
    CANNOT_TELL = "cannot tell"
    UNDERPOWERED = "underpowered"
    NOT_COMPARABLE = "not comparable"
    NOT_JUDGED = "not judged"


VERDICTS = tuple(Verdict)  # in the order tables and legends list them
DECISIVE = (
    Verdict.HOLDS,
    Verdict.DOES_NOT_HOLD,
    Verdict.OPPOSITE,
)  # the verdicts that put the effect on one side of its size or of 0
ALPHA = 0.05
POWER = 0.8  # a design is powered for a claim when it gives "holds" this often at twice the smallest effect
RULE_VERSION = 6  # the verdict rule's version, kept in every row (older rows are marked, never silently mixed)
RULES: dict[str, str] = {
    Kind.EFFECT: "holds when the adjusted interval lies beyond the smallest effect of interest in the claimed "
    "direction; does not hold when it lies short of that size; opposite when it lies beyond no effect in the other "
    "direction",
    Kind.NO_EFFECT: "holds when the adjusted interval (two one-sided tests) lies within the margin; does not hold "
    "when it lies outside it",
    Kind.COMPARE: "as an effect, on the difference of the two conditions; saturated (cannot tell) when both sit at the "
    "model's floor; censored (holds, or cannot tell) when one of them does",
}


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of the study on one run: its number and ours, the evidence's size, the verdict and why.

    Build it with :meth:`measured` or :meth:`not_measured`; both judge it with :func:`judge`. Its fields are
    keyword-only, each named where it is set.
    """

    claim_id: str
    finding: str
    claim: str
    quote: str
    kind: str
    study: float | None
    ours: float
    lo: float
    hi: float
    unit: str
    method: str
    n_examples: int
    n_draws: int
    p: float | None
    verdict: str
    reason: str
    rule: str = ""
    min_size: float = 0.0
    margin: float = 0.0
    size_why: str = ""
    level: float = 1 - ALPHA / FAMILY
    lo_adj: float = math.nan
    hi_adj: float = math.nan
    kappa_lost: float = math.nan  # share of the unmasked quadratic kappa lost (accuracy claims), with its interval
    kappa_lost_lo: float = math.nan
    kappa_lost_hi: float = math.nan
    at_floor: bool = False  # the condition(s) the claim judges sit at the kappa floor (stats.at_floor)
    floor_reason: str = ""  # what was checked to decide at_floor
    study_unit: str = ""
    page: str = ""
    mean_ablation: str = ""  # the verdict with removed heads mean-ablated instead of zeroed ("" when not run)
    df: float = math.inf  # the interval's degrees of freedom (infinite: pairs alone)
    search: int = 1  # how many candidates the row was chosen among on its page (widens its interval once)
    tally: Tally = Tally.STUDY  # the family it is judged in
    size_source: str = ""  # where min_size (or the margin) comes from (SIZE_SOURCES)
    rule_version: int = RULE_VERSION
    weakest_of: int = 1  # the conditions the row is the weakest of (its far end widened for them)
    far_adj: float = math.nan  # the far end "does not hold" / "opposite" were read off (judge)
    mde: float = math.nan  # the design's minimum detectable effect (POWER), in the claim's unit (minimum_detectable)
    censored: int = 0  # one condition compared, not all, at the floor: the difference is a bound, +1 at least as
    # measured (the floored condition enters it positively), -1 at most (it enters negatively), 0 neither (judge)
    accuracy: float = math.nan  # a claim on kappa: the relative change of accuracy beside it, with its interval
    accuracy_lo: float = math.nan
    accuracy_hi: float = math.nan
    other_scale: str = ""  # the sign the other scale shows (kappa beside accuracy and back; sign_shown; "" not kept)
    scale_flip: bool = False  # the other scale shows another sign than this one (on_other_scale)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim_id}: verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def study_claim(self) -> str:
        """The registered claim this row belongs to (:func:`study_claim_id`)."""
        return study_claim_id(self.claim_id)

    @classmethod
    def measured(
        cls,
        spec: StudyClaim,
        *,
        ours: float,
        lo: float,
        hi: float,
        unit: Unit,
        method: str,
        n_examples: int,
        reason: str,
        n_draws: int = 1,
        p: float | None = None,
        df: float | None = None,
        search: int = 1,
        weakest_of: int = 1,
        every_far: float | None = None,
        study: float | None = None,
        study_unit: Unit | None = None,
        kappa=None,
        accuracy=None,
        at_floor: bool = False,
        censored: int = 0,
        floor_reason: str = "",
        claim: str | None = None,
        part: str = "",
        not_comparable: str = "",
    ) -> Claim:
        """A claim measured on this run, judged by :func:`judge`.

        ``ours``/``lo``/``hi``: our number and its 95% interval, by ``method`` (e.g. "paired bootstrap over test
        pairs"). ``df``: the interval's degrees of freedom (default: infinite for one draw, else ``n_draws - 1``, the
        most cautious reading of draws resampled; pass the Welch–Satterthwaite value where the page has it).
        ``search``: how many candidates the page chose this row among (a head among a layer's heads), so the verdict's
        interval is widened once for them and for the family. ``weakest_of``: the row is the weakest of that many
        conditions the claim names every one of; ``every_far``: an existential row's far end over all its candidates
        (:func:`judge`). ``p``: an exact test's p, kept beside the interval.
        ``kappa``: for a claim on accuracy, the share of quadratic kappa the judged condition loses, shown beside the
        accuracy (a mapping with kappa_lost, kappa_lost_lo, kappa_lost_hi: a row of a sweep summary or share curve,
        :func:`headlab.core.sweep.kappa_columns`). ``at_floor``: the conditions compared all sit at the kappa floor
        (decided from their predictions, :func:`headlab.core.stats.at_floor`; ``floor_reason`` says what was checked),
        which makes a comparison saturated; ``censored``: one of them does, not all, and which way that bounds the
        difference (:func:`judge`). ``accuracy``:
        for a claim on kappa, the relative change of accuracy (rel_change, lo, hi). The claim is judged again on the
        other scale, the same size read there (:func:`on_other_scale`), and ``other_scale`` keeps that verdict.
        ``study``: the study's number, only in ``unit``, or in
        ``study_unit`` when the study gave it in another. ``not_comparable``: why this run cannot speak to the claim.
        ``part`` makes the row a sub-row of ``spec``, ``<claim_id>/<part>``, with its own ``claim`` sentence: it is
        shown with its intervals but not judged (outside the family).
        """
        lost, lost_lo, lost_hi = (
            (float(kappa["kappa_lost"]), float(kappa["kappa_lost_lo"]), float(kappa["kappa_lost_hi"]))
            if kappa is not None
            else (math.nan, math.nan, math.nan)
        )
        at_floor = bool(at_floor)
        acc, acc_lo, acc_hi = (
            (float(accuracy["rel_change"]), float(accuracy["lo"]), float(accuracy["hi"]))
            if accuracy is not None
            else (math.nan, math.nan, math.nan)
        )
        df = draws_df_default(n_draws) if df is None else float(df)
        other = (lost, lost_lo, lost_hi) if not unit.label.startswith(KAPPA_START) else (acc, acc_lo, acc_hi)
        other_sign, flip = (
            ("", False)
            if not_comparable or part or every_far is not None  # an existential row's twin needs every candidate
            else signs_on_both_scales(
                spec, (ours, lo, hi), other, df, search, weakest_of, int(n_draws), int(n_examples)
            )
        )
        judged = judge(
            spec,
            ours,
            lo,
            hi,
            df=df,
            search=search,
            weakest_of=weakest_of,
            every_far=every_far,
            n_draws=int(n_draws),
            at_floor=at_floor,
            censored=int(censored),
            unit=unit,
            n_examples=int(n_examples),
        )
        verdict, why = (
            (Verdict.NOT_COMPARABLE, not_comparable)
            if not_comparable
            else (Verdict.NOT_JUDGED, SUB_ROW)
            if part
            else (judged.verdict, judged.why)
        )
        return cls(
            **_declared(spec, part, claim),
            study=study,
            ours=float(ours),
            lo=float(lo),
            hi=float(hi),
            unit=unit.label,
            method=method,
            n_examples=int(n_examples),
            n_draws=int(n_draws),
            p=None if p is None else float(p),
            verdict=verdict,
            reason=_sentence(reason) + (f" {why}" if why else ""),
            level=judged.level,
            lo_adj=judged.lo_adj,
            hi_adj=judged.hi_adj,
            kappa_lost=lost,
            kappa_lost_lo=lost_lo,
            kappa_lost_hi=lost_hi,
            at_floor=at_floor,
            floor_reason=floor_reason,
            study_unit=study_unit.label if study_unit else "",
            df=df,
            search=int(search),
            weakest_of=int(weakest_of),
            far_adj=judged.far_adj if not (not_comparable or part) else math.nan,
            mde=judged.mde if not (not_comparable or part) else math.nan,
            censored=int(censored),
            accuracy=acc,
            accuracy_lo=acc_lo,
            accuracy_hi=acc_hi,
            other_scale=other_sign,
            scale_flip=flip,
        )

    @classmethod
    def not_measured(
        cls,
        spec: StudyClaim,
        *,
        reason: str,
        unit: Unit | None = None,
        study: float | None = None,
        claim: str | None = None,
        part: str = "",
    ) -> Claim:
        """A claim this run could not measure (``reason`` says why): "cannot tell", with no number."""
        nan = math.nan
        return cls(
            **_declared(spec, part, claim),
            study=study,
            ours=nan,
            lo=nan,
            hi=nan,
            unit=unit.label if unit else "",
            method="",
            n_examples=0,
            n_draws=0,
            p=None,
            verdict=Verdict.CANNOT_TELL,
            reason=_sentence(reason),
        )


def _declared(spec: StudyClaim, part: str, claim: str | None) -> dict:
    """The fields a row takes from its registered claim (its id, or a sub-row's ``<id>/<part>``; its sentence unless
    ``claim`` words it otherwise; its kind's rule, size, page and tally): the same for a measured row and one not
    measured."""
    return dict(
        claim_id=f"{spec.claim_id}/{part}" if part else spec.claim_id,
        finding=spec.finding,
        claim=claim or spec.claim,
        quote=spec.quote,
        kind=spec.kind,
        rule=RULES[spec.kind],
        min_size=spec.min_size,
        margin=spec.margin,
        size_why=spec.size_why,
        page=spec.page,
        tally=spec.tally,
        size_source=spec.size_source,
    )


def with_mean_ablation(zeroed: list[Claim], mean_ablated: list[Claim]) -> list[Claim]:
    """``zeroed`` (the study's HEAD-MASK) with each claim's verdict under mean-ablation beside it, matched by claim id:
    a verdict that changes with the method is an artefact of zeroing, or of the mean, and the row says so."""
    by_id = {c.claim_id: c for c in mean_ablated}
    rows = []
    for c in zeroed:
        other = by_id.get(c.claim_id)
        if other is None or math.isnan(other.ours):  # not run with mean-ablation
            rows.append(c)
            continue
        number = f"{unit_of(other.unit).number(other.ours)}{_interval(other)}"
        same = "the same verdict" if other.verdict == c.verdict else f"**{other.verdict}** (the verdict changes)"
        number = f", {number}"
        rows.append(
            replace(
                c,
                mean_ablation=other.verdict,
                reason=f"{c.reason} With each removed head's output replaced by its mean over training "
                f"pairs instead of zero (mean-ablation): {same}{number}.",
            )
        )
    return rows


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" or text.endswith((".)", ".*", ".**")) else text + "."


@dataclass(frozen=True)
class Judgement:
    """:func:`judge`'s answer: the verdict, why in one sentence, the adjusted interval it rests on, the far end a
    "does not hold" or "opposite" was read off (widened for a weakest-of choice; every candidate's for an existential
    row), and the design's minimum detectable effect (:func:`minimum_detectable`)."""

    verdict: str
    why: str
    level: float
    lo_adj: float
    hi_adj: float
    far_adj: float = math.nan
    mde: float = math.nan


def draws_df_default(n_draws) -> float:
    """The most cautious degrees of freedom of an interval over ``n_draws`` random draws, where the page has no
    Welch–Satterthwaite value: ``n_draws - 1`` (infinite for one draw, whose interval is over pairs alone)."""
    return math.inf if int(n_draws) <= 1 else float(int(n_draws) - 1)


SUB_ROW = "A sub-row: evidence shown under its claim, outside the family, so not judged on its own."


def quantile(p, df):
    """The t quantile with ``df`` degrees of freedom (normal where ``df`` is infinite), elementwise on arrays: the
    special functions scipy.stats' ``t.ppf`` and ``norm.ppf`` evaluate, so the calibration's ~10^7 rows take seconds."""
    p, df = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
    finite = np.isfinite(df)
    out = special.ndtri(p)
    if finite.any():
        out = np.where(finite, special.stdtrit(np.where(finite, df, 1.0), p), out)
    return out if out.ndim else float(out)


def each_level(spec: StudyClaim, search: int = 1, family: int | None = None, alpha: float = ALPHA) -> float:
    """The error each claim is judged at: ``alpha / (family * search)`` (Bonferroni over the claim's tally and the
    candidates its row was chosen among)."""
    return alpha / ((spec.family if family is None else family) * max(1, int(search)))


def judged_quantile(p, df, n_draws: int = 1, n_examples: int = 0):
    """The quantile a verdict reads its adjusted interval at (rule 4). Pairs alone: the t (or normal) quantile at
    the interval's own ``df``. Over random draws the Welch–Satterthwaite df the 95% interval was drawn with is too
    liberal in the family's far tails (the calibration found it above the nominal rate, most of all for few draws),
    so each part of the variance is read at its own quantile: the pairs' share f (solved from ``df``,
    :func:`headlab.core.stats.pairs_share`) at ``n_examples - 1`` degrees of freedom, the draws' at ``n_draws - 1``,
    combined as sqrt(f q_pairs² + (1 - f) q_draws²); without ``n_examples``, the draws' quantile alone (the most
    cautious). Arrays welcome."""
    if int(n_draws) <= 1:
        return quantile(p, df)
    draws = quantile(p, float(int(n_draws) - 1))
    if n_examples <= 1:
        return draws
    f = pairs_share(df, int(n_draws), int(n_examples))
    return np.sqrt(f * quantile(p, float(n_examples - 1)) ** 2 + (1 - f) * draws**2)


def far_end(
    spec: StudyClaim, ours, lo, hi, df, each: float, weakest_of: int = 1, n_draws: int = 1, n_examples: int = 0
):
    """The ends of the adjusted interval at the level a "does not hold" or "opposite" is read at: a row shown as the
    weakest of ``weakest_of`` conditions was chosen among them on that side, so its far end is widened for them too
    (``each / weakest_of``). ``df``: the 95% interval's degrees of freedom (its standard error), re-read at
    :func:`judged_quantile`. Arrays welcome."""
    ours, lo, hi = (np.asarray(x, dtype=float) for x in (ours, lo, hi))
    k = max(1, int(weakest_of))
    tail = each / (2 * k)  # each side at half the claim's error, so a truth at the boundary errs at most `each`
    scale = judged_quantile(1 - tail, df, n_draws, n_examples) / quantile(0.975, df)
    return ours - (ours - lo) * scale, ours + (hi - ours) * scale


def decide(
    spec: StudyClaim,
    ours,
    lo,
    hi,
    df=math.inf,
    *,
    each: float,
    weakest_of: int = 1,
    every_far=None,
    n_draws: int = 1,
    n_examples: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rule's decision, elementwise on arrays (the one place it is written: :func:`judge` adds the words, the
    calibration simulates with it): the index of each verdict in :data:`VERDICTS` (holds, does not hold, opposite or
    cannot tell; saturation, power and missing numbers are :func:`judge`'s), the adjusted interval and the far end.

    "holds" reads the end nearest no effect at ``each``; "does not hold" and "opposite" read the far end
    (:func:`far_end`), widened for ``weakest_of``. ``every_far``: for an existential row (some candidate has the
    effect) the far end reached by *any* of its candidates in the claimed direction, so "does not hold" or "opposite"
    needs every candidate short (and the row chosen among them is not the only one asked)."""
    ours, lo, hi = (np.asarray(x, dtype=float) for x in (ours, lo, hi))
    null = spec.null
    if spec.kind == Kind.NO_EFFECT:
        # two one-sided tests, each at half the claim's error: a truth at the margin is wrongly "holds" or "does not
        # hold" at most `each` in all, as an effect at its smallest size
        scale = judged_quantile(1 - each / 2, df, n_draws, n_examples) / quantile(0.975, df)
        a, b = ours - (ours - lo) * scale, ours + (hi - ours) * scale
        fa, fb = far_end(spec, ours, lo, hi, df, each, weakest_of, n_draws, n_examples)
        m = spec.margin
        code = np.where((a - null > -m) & (b - null < m), 0, np.where((fa - null > m) | (fb - null < -m), 1, 3))
        far = np.where(fa - null > m, fa, fb)
        return code, a, b, far
    scale = judged_quantile(1 - each / 2, df, n_draws, n_examples) / quantile(0.975, df)
    a, b = ours - (ours - lo) * scale, ours + (hi - ours) * scale
    d, m = spec.direction, spec.min_size
    fa, fb = far_end(spec, ours, lo, hi, df, each, weakest_of, n_draws, n_examples)
    near = d * ((a if d > 0 else b) - null)
    far = fb if d > 0 else fa
    reach = d * (far - null) if every_far is None else d * (np.asarray(every_far, dtype=float) - null)
    code = np.where(near > m, 0, np.where(reach < 0, 2, np.where(reach < m, 1, 3)))
    return code, a, b, far if every_far is None else np.asarray(every_far, dtype=float)


def minimum_detectable(
    spec: StudyClaim,
    lo,
    hi,
    df=math.inf,
    *,
    each: float,
    weakest_of: int = 1,
    n_draws: int = 1,
    n_examples: int = 0,
    power: float = POWER,
):
    """The design's minimum detectable effect: the smallest true effect, from no effect in the claimed direction, at
    which a row measured as precisely as this one gives "holds" ``power`` of the time (for no effect: the smallest
    margin a true null would be shown within that often). The standard error is the 95% interval's half-width over
    its quantile; "holds" needs the end nearest no effect past the size at ``each`` (which carries any search's
    widening), in every one of ``weakest_of`` conditions (each at ``power ** (1 / k)``, taken as independent). A row
    chosen among candidates must find the effect in the one that has it: the power to find *some* head with the
    effect is not borrowed from others having it too. Both terms at the quantiles the verdict reads
    (:func:`judged_quantile`). Arrays welcome."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    se = (hi - lo) / 2 / quantile(0.975, df)
    each_power = power ** (1 / max(1, int(weakest_of)))
    q = lambda p: judged_quantile(p, df, n_draws, n_examples)  # noqa: E731
    if spec.kind == Kind.NO_EFFECT:  # |estimate| + q se within the margin, in every condition
        return (q(1 - each / 2) + q(0.5 + each_power / 2)) * se
    return spec.min_size + (q(1 - each / 2) + q(each_power)) * se


def reach(spec: StudyClaim, j: Judgement) -> float:
    """How far a judged row's adjusted end nearest no effect lies in the claimed direction: a page showing the
    weakest of several conditions shows the one reaching least far, judged with its whole design (draws, pairs), so
    "holds" for all of them is "holds" for it."""
    near = j.lo_adj if spec.direction >= 0 else j.hi_adj
    return (spec.direction or 1) * (near - spec.null)


def underpowered(spec: StudyClaim, mde: float) -> bool:
    """Whether the design cannot decide the claim where it is most favourable: "holds" less than :data:`POWER` of
    the time at twice the smallest effect of interest (for no effect: at no effect itself, within the margin)."""
    limit = spec.margin if spec.kind == Kind.NO_EFFECT else 2 * spec.min_size
    return bool(mde > limit)


def judge(
    spec: StudyClaim,
    ours: float,
    lo: float,
    hi: float,
    *,
    df: float = math.inf,
    search: int = 1,
    weakest_of: int = 1,
    every_far: float | None = None,
    n_draws: int = 1,
    at_floor: bool = False,
    censored: int = 0,
    alpha: float = ALPHA,
    family: int | None = None,
    unit: Unit | None = None,
    n_examples: int = 0,
) -> Judgement:
    """The one verdict rule (see the module's docstring), at ``alpha / (family * search)`` for every claim; ``family``
    defaults to the claim's tally's (:data:`FAMILIES`). ``weakest_of``: the row is the weakest of that many
    conditions the claim names every one of, so "does not hold" and "opposite" are read with its far end widened for
    them. ``every_far``: an existential row's farthest end over all its candidates (:func:`decide`). ``df`` is the 95%
    interval's; a row over ``n_draws`` random draws is read at :func:`judged_quantile`. A "cannot tell"
    whose design could not show twice the claim's size (:func:`minimum_detectable`, :func:`underpowered`) reads
    "underpowered". ``unit`` (the number's) writes the margin and size in it; ``n_examples`` lets an undecided row say
    how much evidence would decide it. ``censored`` (a comparison with one condition at the floor, not all): that
    condition's loss is a bound, not a measure (its true loss is at least the floor's), so the difference is a bound:
    +1 when it can only be larger than measured, -1 smaller. Where that bound lies in the claimed direction, "holds"
    stands and a rejection reads "cannot tell"; where it lies against it, "does not hold" and "opposite" stand and
    "holds" reads "cannot tell", each saying what the numbers alone would read."""
    family = spec.family if family is None else family
    each = each_level(spec, search, family, alpha)
    level = 1 - each
    widened = []
    if search > 1:
        widened.append(f"the {search} candidates it was chosen among")
    if weakest_of > 1:
        widened.append(f"its far end for the {weakest_of} conditions it is the weakest of")
    searched = f" (widened once for the {family} claims, {' and '.join(widened)})" if widened else ""
    if any(math.isnan(x) for x in (ours, lo, hi)):
        return Judgement(
            Verdict.CANNOT_TELL, "No interval was measured, so nothing can be decided.", level, math.nan, math.nan
        )
    design = dict(n_draws=n_draws, n_examples=n_examples)
    code, a, b, far = (
        float(x)
        for x in decide(spec, ours, lo, hi, df, each=each, weakest_of=weakest_of, every_far=every_far, **design)
    )
    verdict = VERDICTS[int(code)]
    mde = float(minimum_detectable(spec, lo, hi, df, each=each, weakest_of=weakest_of, **design))
    if spec.kind == Kind.NO_EFFECT:
        m = spec.margin
        size = _size(m, unit)
        rejecting = f"its far end, widened for the {weakest_of} conditions ({_size(far, unit)})"
        why = {
            Verdict.HOLDS: f"The adjusted interval lies within ±{size}",
            Verdict.DOES_NOT_HOLD: f"The adjusted interval lies outside ±{size}"
            + (f", by {rejecting}" if weakest_of > 1 else ""),
            Verdict.CANNOT_TELL: f"The adjusted interval reaches past ±{size}, so it shows neither"
            + (f" ({rejecting} does not lie outside the margin)" if weakest_of > 1 else ""),
        }[verdict]
        needed = _pairs_needed(ours - spec.null, a, b, m, n_examples, df) if verdict == Verdict.CANNOT_TELL else ""
        judged = Judgement(verdict, f"{why}{searched} (margin: {spec.size_why}).{needed}", level, a, b, far, mde)
        return _powered(spec, judged, unit, n_examples, df, past_margin=abs(ours - spec.null) >= m)
    d, m = spec.direction, spec.min_size
    sized = f" by at least {_size(m, unit)} ({spec.size_why})"
    every = "every candidate's adjusted interval lies" if every_far is not None else "the adjusted interval lies"
    if verdict == Verdict.HOLDS:
        why = f"The adjusted interval lies beyond no effect in the claimed direction{sized}."
    elif verdict == Verdict.OPPOSITE:
        why = f"{every[0].upper()}{every[1:]} beyond no effect in the other direction."
    elif verdict == Verdict.DOES_NOT_HOLD:
        why = f"{every[0].upper()}{every[1:]} short of the smallest effect of interest{sized}."
    else:
        why = "The adjusted interval reaches both sides, so the data decide neither way."
        if d * ((a if d > 0 else b) - spec.null) > 0:  # beyond no effect, astride the size: the direction is shown
            why = (
                "The adjusted interval lies beyond no effect in the claimed direction but reaches both sides of the "
                f"smallest effect of interest{sized}: an effect is shown, not its size."
            )
            gap = abs(d * (ours - spec.null) - m)  # how far the estimate lies from the size it must clear or miss
            if n_examples > 0 and gap > 0:
                more = _more_evidence((b - a) / 2 / gap, n_examples, df)
                why += f" At the effect and spread measured, {more} would decide it."
    if at_floor and spec.kind == Kind.COMPARE and verdict != Verdict.HOLDS:
        saturated = (
            "Saturated: both conditions sit at the model's floor, so their difference says nothing about the claim."
        )
        weak = (
            f", beyond {_reach_needed(spec, unit)}, so this design could not have decided it either: underpowered at "
            "this design as well as saturated"
        )
        weak = weak if underpowered(spec, mde) else ""
        saturated = f"{saturated[:-1]}{searched}. {_mde_sentence(spec, mde, unit)}{weak}."  # the floor decides
        return Judgement(Verdict.CANNOT_TELL, saturated, level, a, b, far, mde)
    stands = (Verdict.HOLDS,) if censored * d > 0 else (Verdict.DOES_NOT_HOLD, Verdict.OPPOSITE)
    if censored and spec.kind == Kind.COMPARE and verdict in DECISIVE and verdict not in stands:
        numbers = _powered(spec, Judgement(verdict, why[:-1] + searched + ".", level, a, b, far, mde), unit, 0, df)
        way = "at least" if censored > 0 else "at most"
        censored_why = (
            "Censored: one of the two conditions sits at the model's floor, so its loss is a bound, not a measure, "
            f"and the difference is {way} what was measured: it can show {' or '.join(stands)} but not this; the "
            f"numbers alone would read {numbers.verdict} ({numbers.why})"
        )
        return Judgement(Verdict.CANNOT_TELL, censored_why, level, a, b, far, mde)
    return _powered(spec, Judgement(verdict, why[:-1] + searched + ".", level, a, b, far, mde), unit, n_examples, df)


SIGN_ONLY = 1e-12  # a size that asks for no more than the sign (on_other_scale)


def on_other_scale(spec: StudyClaim) -> StudyClaim | None:
    """The claim's direction as the other scale reads it (the sizes policy): the two scales have no common size (a
    relative change of accuracy and a share of kappa swing apart from model to model), so the other scale asks only
    for the sign: "holds" there means the adjusted interval lies beyond no effect in the claimed direction, with the
    direction turned over (a loss of accuracy is a gain of kappa lost). None for a no-effect claim and a comparison,
    whose margin or two conditions the rows do not keep on the other scale."""
    if spec.kind != Kind.EFFECT:
        return None
    return replace(spec, direction=-spec.direction, min_size=SIGN_ONLY)


def signs_on_both_scales(
    spec: StudyClaim, own, other, df: float, search: int, weakest_of: int, n_draws: int, n_examples: int
) -> tuple[str, bool]:
    """The sign the other scale's numbers ``other`` (value, lo, hi) show (:func:`sign_shown`), and whether it differs
    from the sign the row's own numbers ``own`` show, both read with the row's design; ("", False) where the claim has
    no twin (:func:`on_other_scale`) or the other scale kept no numbers."""
    twin = on_other_scale(spec)
    if twin is None or any(x is None or math.isnan(float(x)) for x in other):
        return "", False
    design = dict(df=df, search=search, weakest_of=weakest_of, n_draws=n_draws, n_examples=n_examples)
    shown = sign_shown(judge(twin, *other, **design).verdict)  # type: ignore[arg-type]
    mine = sign_shown(judge(replace(spec, min_size=SIGN_ONLY), *own, **design).verdict)  # type: ignore[arg-type]
    return shown, shown != mine


def sign_shown(verdict: str) -> str:
    """What a verdict says of the effect's sign: the claimed direction shown ("holds", "does not hold" beyond no
    effect is not told apart here), the other, or neither; the scale marks compare these (:func:`on_other_scale`)."""
    signs: dict[str, str] = {Verdict.HOLDS: "claimed", Verdict.OPPOSITE: "other"}
    return signs.get(verdict, "neither")


def _mde_sentence(spec: StudyClaim, mde: float, unit: Unit | None) -> str:
    what = (
        "the smallest margin a true null would be shown within"
        if spec.kind == Kind.NO_EFFECT
        else "the minimum detectable effect"
    )
    return f"At this design {what} ({POWER:.0%} power) is {_size(mde, unit)}"


def _reach_needed(spec: StudyClaim, unit: Unit | None) -> str:
    """What a powered design must be able to show, in words: the margin, or twice the smallest effect of interest."""
    twice = _size(2 * spec.min_size, unit)
    return "the margin" if spec.kind == Kind.NO_EFFECT else f"twice the smallest effect of interest ({twice})"


def _powered(
    spec: StudyClaim, j: Judgement, unit: Unit | None, n_examples: int, df: float, past_margin: bool = False
) -> Judgement:
    """A "cannot tell" whose design could not decide the claim (:func:`underpowered`) reads "underpowered", saying
    the minimum detectable effect beside the size and how much more evidence would bring it down to twice the size
    (for no effect: to the margin; not where the estimate itself lies at or past the margin, ``past_margin``: no
    evidence would show that one within); every other verdict keeps its label and says its MDE."""
    target = spec.margin if spec.kind == Kind.NO_EFFECT else 2 * spec.min_size
    stated = f" {_mde_sentence(spec, j.mde, unit)}"
    if j.verdict != Verdict.CANNOT_TELL or not underpowered(spec, j.mde):
        return replace(j, why=f"{j.why}{stated}.")
    room = target - (0 if spec.kind == Kind.NO_EFFECT else spec.min_size)  # what the quantile terms may take up
    more = (
        f": {_more_evidence((j.mde - target + room) / room, n_examples, df)} would bring it to {_size(target, unit)}"
        if n_examples > 0 and not past_margin
        else ""
    )
    limit = _reach_needed(spec, unit)
    return replace(
        j,
        verdict=Verdict.UNDERPOWERED,
        why=f"{j.why}{stated}, beyond {limit}, so this design could not have decided it{more}.",
    )


def _more_evidence(ratio: float, n_examples: int, df: float) -> str:
    """How much more evidence would shrink the adjusted half-width by ``ratio`` (half-widths shrink with the square
    root of the evidence): pairs, for an interval over pairs alone (infinite ``df``); for one over random draws too,
    the draws as much as the pairs, since more pairs alone do not narrow the draws' part."""
    factor = ratio**2
    if math.isfinite(df):
        return f"about {factor:.3g} times the evidence (random draws and pairs alike; df {df:.3g})"
    return f"about {math.ceil(n_examples * factor)} pairs (not {n_examples})"


def _pairs_needed(effect: float, a: float, b: float, margin: float, n_examples: int, df: float) -> str:
    """How much evidence an undecided equivalence would need for its adjusted interval to fit within the margin, at
    the effect and spread measured (:func:`_more_evidence`)."""
    room = margin - abs(effect)
    if n_examples <= 0 or not (b - a) > 0:
        return ""
    if room <= 0:
        return " The effect measured lies at or past the margin itself, so no number of pairs would show it within."
    return f" At the spread measured, {_more_evidence((b - a) / 2 / room, n_examples, df)} would decide it."


def _size(x: float, unit: Unit | None) -> str:
    """A margin or smallest size (never signed) in the claim's unit; three digits without one."""
    return unit.size(x) if unit else f"{x:.3g}"


COLUMNS = [f.name for f in fields(Claim)]


def claims_table(claims: list[Claim]) -> pd.DataFrame:
    """The claims as a tidy table, one row each, in the order given."""
    return pd.DataFrame([asdict(c) for c in claims], columns=COLUMNS)


def claims_file(claims: list[Claim]) -> str:
    """The table name a page saves its claims under, from the page its claims belong to (never typed by hand)."""
    pages = {c.page for c in claims}
    if len(pages) != 1:
        raise ValueError(f"claims of one page expected, got pages {sorted(pages)}")
    return f"claims_{pages.pop()}"


def _interval(c: Claim) -> str:
    """Our number's interval as the page writes it; empty for a number measured without one."""
    return (
        ""
        if math.isnan(c.lo) or math.isnan(c.hi)
        else f" [{unit_of(c.unit).number(c.lo)}, {unit_of(c.unit).number(c.hi)}]"
    )


def _adjusted_text(c: Claim) -> str:
    if math.isnan(c.lo_adj) or math.isnan(c.hi_adj):
        return ""
    return f", adjusted [{unit_of(c.unit).number(c.lo_adj)}, {unit_of(c.unit).number(c.hi_adj)}]"


def floor_text(c: Claim) -> str:
    """The share of the unmasked model's kappa the effect takes away (beside an accuracy number), and whether the
    judged conditions sit at the kappa floor, with what was checked."""
    mark = (
        f"; at the floor: {c.floor_reason}" if c.at_floor and c.floor_reason else "; at the floor" if c.at_floor else ""
    )
    if math.isnan(c.kappa_lost) or c.unit.startswith(KAPPA_START):
        return f" ({mark[2:]})" if mark else ""
    share = lambda x: "NaN" if math.isnan(x) else f"{0.0 if abs(x) < 0.005 else x:.0%}"  # noqa: E731  (no "-0%")
    interval = "" if math.isnan(c.kappa_lost_lo) else f" [{share(c.kappa_lost_lo)}, {share(c.kappa_lost_hi)}]"
    return f" ({share(c.kappa_lost)}{interval} of the unmasked quadratic κ lost{mark})"


def save_claims(lab: Lab, rows: list[Claim]) -> None:
    """Save the page's claims of the study in ``lab`` (a :class:`headlab.lab.lab.Lab`) as its one claims table
    (``claims_<page>``, which the scorecard reads)."""
    lab.save_table(claims_table(rows), claims_file(rows))


VERDICT_LEGEND = {
    Verdict.HOLDS: "the adjusted interval lies past the claim's smallest effect, the claimed way (a no-change claim: "
    "within its margin)",
    Verdict.DOES_NOT_HOLD: "it lies short of that size (a no-change claim: outside its margin)",
    Verdict.OPPOSITE: "it lies past no effect, the other way",
    Verdict.CANNOT_TELL: "it reaches both sides of a line that decides",
    Verdict.UNDERPOWERED: "cannot tell, and this design would miss the claim's size more often than not",
    Verdict.NOT_COMPARABLE: "our measure cannot be put on the study's",
    Verdict.NOT_JUDGED: "shown as evidence beside a judged row",
}


def legend() -> str:
    """The verdict words once per page, under its verdict table: what each means of the adjusted interval (the
    rule in full is :data:`RULES`, folded under each verdict)."""
    return "*How to read a verdict.* " + "; ".join(f"**{v}**: {VERDICT_LEGEND[v]}" for v in VERDICTS) + "."


def verdict_table(rows: list[Claim]) -> str:
    """Every page's last cell: its claims at a glance, one row each (the claim, the verdict, our number with its
    interval, the study's number), then :func:`legend`; the reasons are where each claim is measured."""
    lines = ["| the study's claim | verdict | ours | the study |", "|---|---|---|---|"]
    for c in rows:
        ours = "not measured" if math.isnan(c.ours) else f"{unit_of(c.unit).number(c.ours)}{_interval(c)}"
        study = (
            ""
            if c.study is None or (isinstance(c.study, float) and math.isnan(c.study))
            else unit_of(c.study_unit or c.unit).number(c.study)
        )
        lines.append(f"| {c.claim} | **{c.verdict}** | {ours.strip()} | {study} |")
    return "\n".join(lines) + "\n\n" + legend()


def method_flip(c: Claim) -> str:
    """A verdict that changes when removed heads are mean-ablated instead of zeroed, said beside the verdict (the
    reader should not find the conflict in the folded reasons); "" when it does not change or was not run."""
    if not c.mean_ablation or c.mean_ablation == c.verdict:
        return ""
    return (
        f" With removed heads mean-ablated instead of zeroed it reads **{c.mean_ablation}**: the verdict depends on "
        "the method."
    )


def callout(c: Claim) -> str:
    """One claim's answer in one sentence, as a callout: the verdict, the claim, our number with its adjusted
    interval and the study's number (and a verdict that moves with the ablation method)."""
    ours = (
        "not measured" if math.isnan(c.ours) else f"{unit_of(c.unit).number(c.ours)}{_interval(c)}{_adjusted_text(c)}"
    )
    study = (
        ""
        if c.study is None or (isinstance(c.study, float) and math.isnan(c.study))
        else f"; the study: {unit_of(c.study_unit or c.unit).number(c.study)}"
        + (f" ({c.study_unit})" if c.study_unit else "")
    )
    return f"> **{c.verdict}** · *{_sentence(c.claim)}* Ours: {ours}{study}.{method_flip(c)}"


def folded(summary: str, text: str) -> str:
    """``text`` (Markdown) folded under ``summary``: what a reader opens on demand ("" for no text)."""
    return f"<details><summary>{summary}</summary>\n\n{text.strip()}\n\n</details>\n" if text.strip() else ""


def render(claims: list[Claim]) -> str:
    """Per claim: the :func:`callout`, then its reasons folded in a ``<details>`` block (a reader opens them): the
    unit and method, the kappa lost, why the verdict, the study's words and the rule."""
    blocks = []
    for c in claims:
        measured = "" if math.isnan(c.ours) else f"Measured in {c.unit}, {c.method}{floor_text(c)}. "
        why = f"{measured}{c.reason}\n\nThe study: {readable_quote(c.quote)}. The rule ({c.kind}): {c.rule}."
        blocks.append(f"{callout(c)}\n\n{folded(f'Why {c.verdict}, and the rule', why)}")
    return "\n".join(blocks)
