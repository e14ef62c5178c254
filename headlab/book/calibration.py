"""How often the verdict rule is wrong, and how often it finds a true effect, on the designs the rows really use
(verdicts v4, issue #64): every judged row of every preset is simulated with a planted truth and decided by the rule's
own core (:func:`headlab.judging.verdicts.decide`, the function :func:`~headlab.judging.verdicts.judge` words),
over many simulated scorecards.

Why: a verdict is worth what its error rates are, and they are worst where a claim's truth sits *at* its smallest
effect of interest (for no effect: at the margin): there "holds" and "does not hold" are both wrong, and each side of
the adjusted interval spends its share of the family's 5%. So the familywise rate of a wrong decisive verdict is
simulated at the null *and* at the smallest effect, per tally and per preset, with a Clopper–Pearson bound.

**The design of a row** (:class:`Design`, :func:`preset_designs`) is read off that preset's own row of
``results/scorecard.csv``, never from a stand-in: the standard error from its 95% interval ((hi - lo) / 2 over the
interval's own t quantile), its pairs, draws and degrees of freedom, its search; how much of its variance the random
draws carry is solved from its Welch–Satterthwaite df (:func:`pairs_share`: the df the two-stage bootstrap gave is a
function of that share); the weakest-of count from the row (``weakest_of``) or, for a row written before it was kept,
from the page's parameters and the model's shape (:func:`weakest_of`); a share of heads from the model's shape.

**What is simulated**, per row and planted truth (:func:`truths`):

- a fixed mask: the estimate N(truth, se²) and its 95% interval ± z se;
- random draws (D): the pairs' error N(0, f se²), the draws' mean N(0, (1 - f) se²) and their sample variance
  (1 - f) se² D χ²(D - 1) / (D - 1) (independent for normal draws), the interval a t interval with
  Welch–Satterthwaite df recomputed from them (:func:`headlab.core.stats.draws_df`), as the pages compute it;
- a share of heads: a binomial count over the model's heads with a Clopper–Pearson interval (page 02); the truth
  planted is the share of heads the per-head equivalence test passes, which is what the row estimates (a
  conservative stand-in for the share of heads whose effect lies within the margin);
- a search (the row chosen among ``search`` candidates): the truth planted in *every* candidate (a truth in one only
  hides the search's error: ``tests/test_verdict_calibration.py``), the row the candidate with the highest widened
  end, and an existential claim (``StudyClaim.existential``: some candidate has the effect) told "does not hold" or
  "opposite" only when every candidate's far end says so;
- weakest of k: k conditions at the truth, the row the one reaching least far (as the pages choose), its far end
  widened for k.

**What is approximated**: a row's per-pair data by the normal sufficient statistic (a mean of 0/1 over ~150 to 1400
pairs, or a bootstrap's spread), the bootstrap's own Monte Carlo error left out; a search's candidates and a
weakest-of's conditions as independent with the row's precision; claims as independent of each other (in the book
they share test pairs: Bonferroni bounds the familywise rate under any dependence, so the simulated rate, taken as
independent, is the harder case); no condition at the floor (saturation is not simulated). A row not measured or not
comparable on a preset is no design there (the objectives, judged on two models no site builds, have none yet),
nor is a row whose interval has no width (zh-char's chosen head changes no grade). The MDE (:func:`headlab.judging.
verdicts.minimum_detectable`) treats the standard error as known: for rows over few random draws, whose spread is
itself estimated, "holds" at the stated MDE falls a little short of 80% (the tests say by how much); the planted
truths put every candidate or condition at the same truth, which for a weakest-of row is not the worst case of a
wrong "holds" (one condition at the size, the others far past it): Bonferroni still bounds each row by its share.

``python -m headlab.book.calibration --out results/calibration.csv`` writes the table (:func:`calibration_table`).
"""

from __future__ import annotations

import argparse
import math
import zlib
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import ndtri

from headlab.core.stats import draws_df, pairs_share
from headlab.judging.units import in_current_units
from headlab.judging.verdicts import (
    ALPHA,
    DECISIVE,
    FAMILIES,
    KINDS,
    POWER,
    VERDICTS,
    Kind,
    StudyClaim,
    Tally,
    Verdict,
    decide,
    each_level,
    far_end,
    minimum_detectable,
    quantile,
)
from headlab.lab.pages import page
from headlab.measures.halves import collapse_shares
from headlab.measures.study_layers import STUDY_GAIN_LAYERS, study_layers_to_ours
from headlab.pages.claims import STUDY_CLAIMS

REPO = Path(__file__).resolve().parents[2]  # the repository (not headlab.lab.params: it loads torch)
N_SIM = 20_000  # simulated scorecards per planted truth: a 5% rate's Clopper–Pearson bound within about ±0.3 points
SEED = 0
RATES = (Verdict.HOLDS, Verdict.DOES_NOT_HOLD, Verdict.OPPOSITE, Verdict.CANNOT_TELL, Verdict.UNDERPOWERED)
NULL, SMALLEST = "no effect", "smallest effect"  # the two points the familywise rate is held at
WRONG_AT: dict[str, dict[str, tuple[str, ...]]] = {
    NULL: {
        Kind.EFFECT: (Verdict.HOLDS, Verdict.OPPOSITE),
        Kind.COMPARE: (Verdict.HOLDS, Verdict.OPPOSITE),
        Kind.NO_EFFECT: (Verdict.DOES_NOT_HOLD,),
    },
    SMALLEST: dict.fromkeys(KINDS, DECISIVE),  # at the smallest effect any verdict on one side is wrong
}


def truths(spec: StudyClaim) -> dict[str, float]:
    """The planted truths, in the claim's unit: no effect, the smallest effect of interest (a no-effect claim: the
    margin), twice it, and the opposite at twice it."""
    size = spec.margin if spec.kind == Kind.NO_EFFECT else spec.min_size
    step = (spec.direction or 1) * size
    return {
        NULL: spec.null,
        SMALLEST: spec.null + step,
        "twice it": spec.null + 2 * step,
        "opposite": spec.null - 2 * step,
    }


@dataclass(frozen=True)
class Design:
    """A row's design, as judged on one preset: what it is computed over and how it is judged."""

    preset: str
    claim_id: str
    n_examples: int  # test pairs the row is measured on
    se: float  # its standard error, from its own 95% interval
    n_draws: int = 1  # random draws averaged in the estimate (1: a fixed mask)
    df: float = math.inf  # the df the row was judged at
    pairs_share: float = 1.0  # the share of its variance from the pairs (the rest from the draws)
    search: int = 1  # candidates the row is chosen among on its page
    weakest_of: int = 1  # conditions the claim names every one of, judged at the weakest
    heads: int = 0  # > 0: a share of this many heads, with a Clopper–Pearson interval over them
    family: int = 0  # the claims of its tally

    @property
    def spec(self) -> StudyClaim:
        """The registered claim the row judges."""
        return STUDY_CLAIMS[self.claim_id]

    @property
    def mde(self) -> float:
        """The design's minimum detectable effect, as its row states it."""
        half = quantile(0.975, self.df) * self.se
        return float(
            minimum_detectable(
                self.spec,
                -half,
                half,
                self.df,
                each=each_level(self.spec, self.search),
                weakest_of=self.weakest_of,
                n_draws=self.n_draws,
                n_examples=self.n_examples,
            )
        )


def page_parameters(page_id: str) -> dict:
    """The default parameters of a page (:mod:`headlab.lab.pages`), so the designs follow the pages."""
    return page(page_id).defaults()


def weakest_of(claim_id: str, layers: int) -> int:
    """How many conditions a claim names every one of, as its page judges it at the defaults: for rows written
    before the row kept it (``weakest_of``)."""
    shares = page_parameters("01_redundancy")["SHARES"]
    steps = int(page_parameters("02_layer_dependence")["HALF_STEPS"])
    collapse_points = len(collapse_shares([0.5 * i / steps for i in range(1, steps + 1)]))
    return {
        "redundancy.no_loss_below_20": sum(0 < s < 0.2 for s in shares),
        "layer_dependence.low_heads_collapse": collapse_points,
        "layer_dependence.high_heads_cost_less": collapse_points,
        "layer_dependence.layers_5_9_gain": len(study_layers_to_ours(STUDY_GAIN_LAYERS, layers)),
        "cls_head.matching_heads_hurt": int(page_parameters("07_cls_head")["K_MATCHING"]),
    }.get(claim_id, 1)


def preset_designs(
    preset: str, scorecard: Path = REPO / "results" / "scorecard.csv", repo: Path = REPO
) -> dict[str, Design]:
    """Every judged row's :class:`Design` on ``preset``, read off its row of ``scorecard``: claims the preset did not
    measure, or cannot compare, have none."""
    models = pd.read_csv(repo / "results" / "models.csv").set_index("preset")
    layers, heads = int(models.at[preset, "layers"]), int(models.at[preset, "heads"])
    rows = in_current_units(pd.read_csv(scorecard))
    rows = rows[(rows["preset"] == preset) & rows["claim_id"].isin(list(STUDY_CLAIMS))].set_index("claim_id")
    designs = {}
    for claim_id, row in rows.iterrows():
        if (
            row["verdict"] in (Verdict.NOT_COMPARABLE, Verdict.NOT_JUDGED)
            or not np.isfinite([row["lo"], row["hi"]]).all()
        ):
            continue
        if not row["hi"] > row["lo"]:  # an interval of no width (a head that changes no grade): no error to simulate
            continue
        df = float(row["df"]) if pd.notna(row["df"]) else math.inf
        n_draws, n_examples = int(row["n_draws"]), int(row["n_examples"])
        kept = row.get("weakest_of")
        designs[claim_id] = Design(
            preset,
            str(claim_id),
            n_examples,
            float(row["hi"] - row["lo"]) / 2 / quantile(0.975, df),
            n_draws,
            df,
            pairs_share(df, n_draws, n_examples),
            int(row["search"]),
            int(kept) if pd.notna(kept) and int(kept) > 0 else weakest_of(str(claim_id), layers),
            layers * heads if STUDY_CLAIMS[str(claim_id)].counts_heads else 0,
            FAMILIES[STUDY_CLAIMS[str(claim_id)].tally],
        )
    return designs


def presets(scorecard: Path = REPO / "results" / "scorecard.csv") -> list[str]:
    """The presets the scorecard holds, in its order."""
    return list(dict.fromkeys(pd.read_csv(scorecard, usecols=["preset"])["preset"]))


def _rng(seed: int, *keys: str) -> np.random.Generator:
    return np.random.default_rng([seed, *(zlib.crc32(k.encode()) for k in keys)])


def simulated_rows(d: Design, truth: np.ndarray, rng: np.random.Generator):
    """Rows measured as ``d`` measures them, one per value of ``truth`` (any shape): (ours, lo, hi, df)."""
    if d.heads:  # a share of heads: a count over the heads, Clopper–Pearson
        count = rng.binomial(d.heads, np.clip(truth, 0, 1))
        lo = np.nan_to_num(sps.beta.ppf(0.025, count, d.heads - count + 1), nan=0.0)
        hi = np.nan_to_num(sps.beta.ppf(0.975, count + 1, d.heads - count), nan=1.0)
        return count / d.heads, lo, hi, np.full(truth.shape, math.inf)
    if d.n_draws <= 1:
        ours = truth + rng.normal(0, d.se, truth.shape)
        half = quantile(0.975, math.inf) * d.se
        return ours, ours - half, ours + half, np.full(truth.shape, math.inf)
    f, n = d.pairs_share, d.n_draws
    var_pairs = f * d.se**2
    var_draw = (1 - f) * d.se**2 * n  # one draw's variance about the draws' mean
    ours = (
        truth + rng.normal(0, math.sqrt(var_pairs), truth.shape) + rng.normal(0, math.sqrt(var_draw / n), truth.shape)
    )
    sample_var = var_draw * rng.chisquare(n - 1, truth.shape) / (n - 1)
    var_total = var_pairs + sample_var / n  # as headlab.core.stats.two_stage
    df = draws_df(var_total, var_pairs, n, d.n_examples)
    half = quantile(0.975, df) * np.sqrt(var_total)
    return ours, ours - half, ours + half, df


def simulate(
    d: Design,
    truth: str,
    n_sim: int = N_SIM,
    seed: int = SEED,
    *,
    search_widened: bool = True,
    planted_in_every: bool = True,
) -> np.ndarray:
    """The verdicts of ``n_sim`` simulated scorecards for one row at one planted truth (see the module's
    docstring), as indices into :data:`headlab.judging.verdicts.VERDICTS`. ``search_widened=False`` judges a
    searched row as if it had not been chosen (no widening for the search) and ``planted_in_every=False`` plants the
    truth in one candidate only, the others at no effect: both only to show what the design guards against."""
    spec = d.spec
    value = truths(spec)[truth]
    rng = _rng(seed, d.preset, d.claim_id, truth)
    k, m = d.weakest_of, d.search
    each = each_level(spec, m if search_widened else 1)
    sign = spec.direction or 1
    every_far = None
    if m > 1 and planted_in_every and d.n_draws <= 1 and not d.heads:
        # m fixed masks of one precision, all at the truth: the one chosen is the largest in the claimed direction,
        # and so is every candidate's far end; the largest of m normals drawn at once (its inverse CDF)
        top = ndtri(rng.random((n_sim, k)) ** (1 / m))
        ours = value + sign * d.se * top
        half = quantile(0.975, math.inf) * d.se
        lo, hi, df = ours - half, ours + half, np.full(ours.shape, math.inf)
        if spec.existential:
            every_far = far_end(spec, ours, lo, hi, df, each, k)[1 if sign > 0 else 0]
    else:
        planted = np.full((n_sim, k, m), value)
        if not planted_in_every:
            planted[:, :, 1:] = spec.null
        ours, lo, hi, df = simulated_rows(d, planted, rng)
        if m > 1:  # the candidate whose adjusted interval reaches furthest in the claimed direction
            ends = far_end(spec, ours, lo, hi, df, each, 1, d.n_draws, d.n_examples)
            pick = np.argmax(sign * ends[0 if sign > 0 else 1], axis=2)[..., None]
            if spec.existential:
                far = far_end(spec, ours, lo, hi, df, each, k, d.n_draws, d.n_examples)[1 if sign > 0 else 0]
                every_far = sign * np.max(sign * far, axis=2)
            ours, lo, hi, df = (np.take_along_axis(x, pick, axis=2)[..., 0] for x in (ours, lo, hi, df))
        else:
            ours, lo, hi, df = (x[..., 0] for x in (ours, lo, hi, df))
    design = dict(n_draws=d.n_draws, n_examples=d.n_examples)
    code, a, b, _ = decide(spec, ours, lo, hi, df, each=each, weakest_of=k, every_far=every_far, **design)
    mde = minimum_detectable(spec, lo, hi, df, each=each, weakest_of=k, **design)
    limit = spec.margin if spec.kind == Kind.NO_EFFECT else 2 * spec.min_size
    code = np.where(
        (code == VERDICTS.index(Verdict.CANNOT_TELL)) & (mde > limit), VERDICTS.index(Verdict.UNDERPOWERED), code
    )
    if k > 1:  # the row is the condition reaching least far in the claimed direction (as the pages choose)
        if spec.kind == Kind.NO_EFFECT:
            reach = -np.maximum(np.abs(a - spec.null), np.abs(b - spec.null))
        else:
            reach = sign * ((a if sign > 0 else b) - spec.null)
        return np.take_along_axis(code, np.argmin(reach, axis=1)[:, None], axis=1)[:, 0]
    return code[:, 0]


def clopper_pearson(x: int, n: int) -> tuple[float, float]:
    """The exact 95% interval of a rate seen ``x`` times in ``n``."""
    lo = float(sps.beta.ppf(0.025, x, n - x + 1)) if x > 0 else 0.0
    hi = float(sps.beta.ppf(0.975, x + 1, n - x)) if x < n else 1.0
    return lo, hi


def calibration_table(
    scorecard: Path = REPO / "results" / "scorecard.csv", n_sim: int = N_SIM, seed: int = SEED, repo: Path = REPO
) -> pd.DataFrame:
    """The tidy table: per preset, row and planted truth the rates of each verdict, with the design it was
    simulated at and its MDE; then per preset, tally and point (no effect, smallest effect) the familywise rate of a
    wrong decisive verdict with its Clopper–Pearson interval.

    Columns: preset, claim_id, tally, kind, truth, truth_value, n_sim, holds, does_not_hold, opposite, cannot_tell,
    underpowered, wrong (at no effect and at the smallest effect), mde, and the design's fields; the familywise rows
    have claim_id "familywise (<tally>)", wrong, wrong_lo, wrong_hi and family (the claims the tally holds) beside
    claims (the rows it has on that preset).
    """
    rows = []
    for preset in presets(scorecard):
        designs = preset_designs(preset, scorecard, repo)
        wrong: dict[tuple[str, str], list[np.ndarray]] = {}
        for claim_id, d in designs.items():
            spec = d.spec
            for truth, value in truths(spec).items():
                codes = np.asarray(VERDICTS)[simulate(d, truth, n_sim, seed)]
                row = {
                    "preset": preset,
                    "claim_id": claim_id,
                    "tally": spec.tally,
                    "kind": spec.kind,
                    "truth": truth,
                    "truth_value": value,
                    "n_sim": n_sim,
                    **{rate.replace(" ", "_"): float(np.mean(codes == rate)) for rate in RATES},
                    "wrong": math.nan,
                    "mde": d.mde,
                    **{f.name: getattr(d, f.name) for f in fields(Design) if f.name not in ("preset", "claim_id")},
                }
                if truth in WRONG_AT:
                    hit = np.isin(codes, WRONG_AT[truth][spec.kind])
                    row["wrong"] = float(hit.mean())
                    wrong.setdefault((spec.tally, truth), []).append(hit)
                rows.append(row)
        for (tally, truth), hits in wrong.items():
            x = int(np.any(hits, axis=0).sum())
            lo, hi = clopper_pearson(x, n_sim)
            rows.append(
                {"preset": preset, "claim_id": f"familywise ({tally})", "tally": tally, "truth": truth, "n_sim": n_sim}
                | {
                    "wrong": x / n_sim,
                    "wrong_lo": lo,
                    "wrong_hi": hi,
                    "family": FAMILIES[Tally(tally)],
                    "claims": len(hits),
                }
            )
    return pd.DataFrame(rows)


# --- reachability: can each decisive verdict be reached by some data at the book's own precision? -----------------


def reachable(d: Design) -> dict[str, float | None]:
    """For each decisive verdict a claim's kind allows, a planted value at which a row as precise as ``d``'s (the
    book's own interval width, steady draws) reaches it, or None where no value does: effects from -4 to +4 times
    the smallest effect of interest (or the margin) and from -40 to +40 standard errors; a share of heads over every
    possible count."""
    spec = d.spec
    scale = spec.margin if spec.kind == Kind.NO_EFFECT else spec.min_size
    allowed = (Verdict.HOLDS, Verdict.DOES_NOT_HOLD) if spec.kind == Kind.NO_EFFECT else DECISIVE
    if d.heads:
        counts = np.arange(d.heads + 1)
        values = counts / d.heads
        lo = np.nan_to_num(sps.beta.ppf(0.025, counts, d.heads - counts + 1), nan=0.0)
        hi = np.nan_to_num(sps.beta.ppf(0.975, counts + 1, d.heads - counts), nan=1.0)
        df = math.inf
    else:
        steps = np.concatenate([scale * np.linspace(-4, 4, 161), d.se * np.linspace(-40, 40, 1601)])
        values = spec.null + (spec.direction or 1) * np.sort(steps)
        half = quantile(0.975, d.df) * d.se
        lo, hi, df = values - half, values + half, d.df
    each = each_level(spec, d.search)
    code = decide(
        spec, values, lo, hi, df, each=each, weakest_of=d.weakest_of, n_draws=d.n_draws, n_examples=d.n_examples
    )[0]
    found: dict[str, float | None] = dict.fromkeys(allowed)
    for verdict in allowed:
        at = np.flatnonzero(code == VERDICTS.index(verdict))
        found[verdict] = float(values[at[0]]) if len(at) else None
    return found


def unreachable(designs: dict[str, Design]) -> list[str]:
    """Every (claim, verdict) no data reach at the book's own precision, as "claim_id: verdict"."""
    return [f"{c}: {v}" for c, d in designs.items() for v, where in reachable(d).items() if where is None]


def main(argv=None) -> int:
    """Write :func:`calibration_table` to ``--out`` (default ``results/calibration.csv``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "calibration.csv")
    parser.add_argument("--n-sim", type=int, default=N_SIM)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    table = calibration_table(n_sim=args.n_sim, seed=args.seed)
    table.to_csv(args.out, index=False, float_format="%.6g")
    print(f"wrote {args.out}: {len(table)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "ALPHA",
    "Design",
    "POWER",
    "calibration_table",
    "clopper_pearson",
    "preset_designs",
    "presets",
    "reachable",
    "simulate",
    "truths",
    "unreachable",
    "weakest_of",
]
