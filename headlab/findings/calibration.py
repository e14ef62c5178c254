"""How often the verdict rule is wrong, and how often it finds a true effect, at the book's own settings (issue #46,
item 12): every registered claim is simulated with a planted truth and judged by the real
:func:`headlab.findings.verdicts.judge`, over many simulated scorecards.

Why: a verdict is worth what its error rates are. The rule widens each interval for the family and a page's search
(Bonferroni), so a wrong "holds" or "opposite" on a scorecard where nothing is true should be rarer than 5%; and a
claim whose smallest effect of interest comes from the study's own number should be found ("holds") when the truth is
twice that size. Both depend on the design (pairs, draws, degrees of freedom, search), which is read here from the
pages' parameters (:func:`page_parameters`), the model's shape and the default preset's rows of
``results/scorecard.csv``, never typed.

**What is simulated**, per claim and planted truth (:data:`TRUTHS`, in the claim's own unit), for each scorecard:

- the estimate: truth + the pairs' error N(0, se_pairs²) + the mean of ``n_draws`` random draws' deviations
  N(0, tau²) (random head sets), where se² = se_pairs² + tau² / n_draws is the claim's realistic standard error:
  (hi - lo) / 3.92 of the default preset's row (:func:`book_designs` says where each comes from);
- its 95% interval as the book computes it: over pairs alone (one mask) point ± 1.96 se, as the paired bootstrap on
  ~700 to 1400 pairs gives; over draws a t interval on the two-stage bootstrap's standard error,
  sqrt(se_pairs² + var(draws) / n_draws) with the draws' spread drawn anew in every scorecard, and Welch–Satterthwaite
  degrees of freedom (:func:`headlab.core.stats.draws_df`), as ``relative_change`` and ``versus_random`` compute it;
- the claim's own choice: a claim about every one of ``weakest_of`` conditions is judged at the weakest (as the pages
  do); a row chosen among ``search`` candidates (a head among heads) takes the one reaching furthest in the claimed
  direction, the truth planted in one candidate and the others at no effect; "most heads change nothing" is a count
  of heads with a Clopper–Pearson interval, as page 02 computes it.

Then the real ``judge`` decides each row with the page's df, search and the claim's family.

**What is approximated**: per-pair right/wrong data are replaced by their sufficient statistic, a normal estimate with
the realistic standard error (a mean of 0/1 per pair over ~700 pairs or more is close to normal), and the bootstrap's
own Monte Carlo error is left out; the share of the variance due to the draws is not in the scorecard, so it is taken
as :data:`DRAW_SHARE`; claims are simulated independently (in the book they share test pairs: Bonferroni bounds the
familywise rate under any dependence) and so are a search's candidates; no condition sits at the floor (saturation
is not simulated). The scorecard's rows may come from an older rule (``rule_version``): their intervals still give the
precision of the pairs and draws, which is all that is read from them.

``python -m headlab.findings.calibration --out results/calibration.csv`` writes the table (:func:`calibration_table`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from scipy import special
from scipy import stats as sps

from headlab.core.stats import draws_df
from headlab.findings import verdicts as verdicts_module
from headlab.findings.claims import STUDY_CLAIMS
from headlab.findings.importance import collapse_shares
from headlab.findings.layer_dependence import (
    STUDY_GAIN_LAYERS,
    study_layers_to_ours,
)
from headlab.findings.verdicts import FAMILIES, StudyClaim, judge
from headlab.lab.pages import page

REPO = Path(__file__).resolve().parents[2]  # the repository (not headlab.lab.params: it loads torch)
N_SIM = 500  # simulated scorecards per planted truth
SEED = 0
DRAW_SHARE = 0.5  # assumed share of an estimate's variance due to its random draws (the scorecard does not split it)
NEARLY_NOISE_FREE = 0.1  # reachability: intervals down to this share of the book's width (ten times the precision)
Z95 = float(sps.norm.ppf(0.975))
WRONG = {"effect": ("holds", "opposite"), "compare": ("holds", "opposite"), "no_effect": ("does not hold",)}
DECISIVE: dict[str, tuple[str, ...]] = {
    "effect": ("holds", "does not hold", "opposite"),
    "compare": ("holds", "does not hold", "opposite"),
    "no_effect": ("holds", "does not hold"),
}  # the verdicts that decide, which every claim of a kind must be able to reach
RATES = ("holds", "does not hold", "opposite", "cannot tell")
# a row whose unit the scorecard's own row does not share: its precision is taken from this row (same pairs, unit)
BORROWED_SE = {
    "cls_head.reads_matching_heads": "cls_head.spreads_without_matching",
    "cls_head.matching_heads_hurt": "cls_head.masking_hurts",  # one head masked alone, on the same held-out pairs
    # the objectives: one model's single mask (or segmentation gain) on the same pairs, differenced between two models
    "objectives.nsp_made_matching_heads": "term_matching.lower_half_costs",
    "objectives.mlm_made_segmentation_heads": "word_segmentation.single_head",
}
TWO_MODELS = ("objectives.nsp_made_matching_heads", "objectives.mlm_made_segmentation_heads")  # se x sqrt(2)
# rows the scorecard's older rule judged by an empirical p: their interval is the named heads' change alone
NAMED_ONLY = ("term_matching.matching_costs", "term_matching.matching_keep_lower_half")


def truths(spec: StudyClaim) -> dict[str, float]:
    """The planted truths, in the claim's unit: no effect, the smallest effect of interest, twice it, and the opposite
    at twice it (a no-effect claim: no effect, the margin itself, twice the margin)."""
    if spec.kind == "no_effect":
        return {
            "no effect": spec.null,
            "at the margin": spec.null + spec.margin,
            "twice the margin": spec.null + 2 * spec.margin,
        }
    step = spec.direction * spec.min_size
    return {
        "no effect": spec.null,
        "smallest effect": spec.null + step,
        "twice the smallest": spec.null + 2 * step,
        "opposite, twice": spec.null - 2 * step,
    }


@dataclass(frozen=True)
class Design:
    """A claim's design at the book's defaults: what its row is computed over and how it is judged."""

    claim_id: str
    n_examples: int  # test pairs the row is measured on
    se: float  # the realistic standard error of its estimate, in its unit
    se_source: str  # where ``se`` comes from
    n_draws: int = 1  # random draws averaged in the estimate (1: a fixed mask)
    judged_df: str = "pairs"  # the df judge reads: "pairs" (infinite), "welch" (the interval's), "draws - 1"
    search: int = 1  # candidates the row is chosen among on its page
    weakest_of: int = 1  # conditions the claim names every one of, judged at the weakest
    heads: int = 0  # > 0: a share of this many heads, with a Clopper–Pearson interval over them
    family: int = 0  # the claims of its tally


def page_parameters(page_id: str) -> dict:
    """The default parameters of a page (:mod:`headlab.lab.pages`), so the designs follow the pages."""
    return page(page_id).defaults()


def _share_grid(steps: int) -> list[float]:
    return [0.5 * i / steps for i in range(1, steps + 1)]  # page 02's shares of all heads within one half


def book_designs(
    scorecard: Path = REPO / "results" / "scorecard.csv", preset: str = "default", repo: Path = REPO
) -> dict[str, Design]:
    """Every registered claim's :class:`Design` at the book's defaults: draws from the pages' parameters, the
    model's shape from ``results/models.csv``, pairs and the realistic standard error from the preset's rows of
    ``results/scorecard.csv`` ((hi - lo) / 3.92), and df, search and weakest-of as the finding modules pass them."""
    models = pd.read_csv(repo / "results" / "models.csv").set_index("preset")
    layers, heads = int(models.at[preset, "layers"]), int(models.at[preset, "heads"])
    rows = pd.read_csv(scorecard)
    rows = rows[rows["preset"] == preset].set_index("claim_id")
    p01, p02, p04 = (page_parameters(p) for p in ("01_redundancy", "02_layer_dependence", "04_word_order"))
    p05, p07, p09 = (page_parameters(p) for p in ("05_term_matching", "07_cls_head", "09_patching"))
    p10 = page_parameters("10_pruning")
    grid = _share_grid(int(p02["HALF_STEPS"]))
    collapse_points = len(collapse_shares(grid))
    wiring: dict[str, dict] = {  # as the finding modules build each row (headlab/findings/<page>.py)
        "redundancy.no_loss_below_20": dict(
            n_draws=p01["REDUNDANCY_DRAWS"], judged_df="welch", weakest_of=sum(0 < s < 0.2 for s in p01["SHARES"])
        ),
        "redundancy.falls_steadily": dict(n_draws=p01["REDUNDANCY_DRAWS"], judged_df="welch"),
        # layer_dependence._collapse/_costs_less: the half gap's Welch–Satterthwaite df; both points judged
        "layer_dependence.low_heads_collapse": dict(
            n_draws=p02["DECIDING_DRAWS"], judged_df="welch", weakest_of=collapse_points
        ),
        "layer_dependence.high_heads_cost_less": dict(
            n_draws=p02["DECIDING_DRAWS"], judged_df="welch", weakest_of=collapse_points
        ),
        "layer_dependence.layers_5_9_gain": dict(weakest_of=len(study_layers_to_ours(STUDY_GAIN_LAYERS, layers))),
        "layer_dependence.most_heads_change_nothing": dict(heads=layers * heads),
        "cls_head.matching_heads_hurt": dict(weakest_of=int(p07["K_MATCHING"])),  # each of 05's heads alone
        "layer_dependence.some_heads_improve": dict(search=layers * heads),
        "word_order.order_heads_carry_order": dict(n_draws=p04["ORDER_DRAWS"], judged_df="welch"),
        "term_matching.random_no_change": dict(n_draws=p05["MATCHING_DRAWS"], judged_df="welch"),
        "term_matching.matching_costs": dict(n_draws=p05["MATCHING_DRAWS"], judged_df="welch"),
        "term_matching.matching_keep_lower_half": dict(n_draws=p05["KEEP_DRAWS"], judged_df="welch"),
        "cls_head.reads_matching_heads": dict(n_draws=p07["CLS_CONTROL_DRAWS"], judged_df="welch"),
        # patching.claims passes n_draws without df: Claim.measured's default, n_draws - 1
        "patching.matching_heads_carry_matching": dict(n_draws=p09["PATCH_DRAWS"], judged_df="draws - 1"),
        # students.student_claim: each kind's seeds are its draws, the kappa contrast's Welch–Satterthwaite df
        "pruning.keep_low_heads": dict(n_draws=p10["STUDENT_SEEDS"], judged_df="welch"),
    }
    designs = {}
    for claim_id, spec in STUDY_CLAIMS.items():
        wired = wiring.get(claim_id, {})
        n_draws = int(wired.get("n_draws", 1))
        se, source = _realistic_se(claim_id, spec, rows, n_draws)
        designs[claim_id] = Design(
            claim_id,
            int(rows.at[BORROWED_SE.get(claim_id, claim_id), "n_examples"]),
            se,
            source,
            family=FAMILIES[spec.tally],
            **{**wired, "n_draws": n_draws},
        )
    return designs


def _realistic_se(claim_id: str, spec: StudyClaim, rows: pd.DataFrame, n_draws: int) -> tuple[float, str]:
    """The standard error the simulation gives a claim's estimate, and where it comes from: the row's (hi - lo) /
    3.92, or, where the row measured a part of what the rule now judges, that part's with the draws' share added."""
    source_id = BORROWED_SE.get(claim_id, claim_id)
    row = rows.loc[source_id]
    se = float(row["hi"] - row["lo"]) / (2 * Z95)
    where = f"the default row of results/scorecard.csv ({source_id})"
    if claim_id in TWO_MODELS:
        return se * math.sqrt(2), f"{where}: one model's, times √2 for the difference of two independent models"
    if source_id != claim_id:
        return se / math.sqrt(1 - DRAW_SHARE), f"{where}: the same pairs and unit, as the pairs' part; draws added"
    if claim_id in NAMED_ONLY:
        return se / math.sqrt(1 - DRAW_SHARE), f"{where}: the named heads' interval, as the pairs' part; draws added"
    return se, where


@dataclass(frozen=True)
class Row:
    """One simulated row, as a page hands it to ``judge``."""

    ours: float
    lo: float
    hi: float
    df: float  # the df judge reads
    search: int
    n_examples: int
    draw_differences: np.ndarray | None = None  # each draw's own estimate (for a rule that reads an empirical p)
    se: float = math.nan  # the standard error the interval rests on (for a rule that builds its own)


Decide = Callable[[str, Row], SimpleNamespace | verdicts_module.Judgement]


def current_rule(claim_id: str, row: Row) -> verdicts_module.Judgement:
    """The book's rule: :func:`headlab.findings.verdicts.judge` on the registered claim, as ``Claim.measured`` does."""
    return judge(
        STUDY_CLAIMS[claim_id], row.ours, row.lo, row.hi, df=row.df, search=row.search, n_examples=row.n_examples
    )


def _t(p, df):
    """scipy.stats' t and normal quantiles by the special functions they call, without the per-call overhead."""
    return special.stdtrit(df, p) if np.isfinite(df) else special.ndtri(p)


FAST_STATS = SimpleNamespace(
    t=SimpleNamespace(ppf=lambda p, df: float(special.stdtrit(df, p))),
    norm=SimpleNamespace(ppf=lambda p: float(special.ndtri(p))),
)


@contextlib.contextmanager
def fast_quantiles(*modules) -> Iterator[None]:
    """``judge`` with scipy.stats' ``t.ppf``/``norm.ppf`` replaced by the special functions they evaluate
    (``stdtrit``, ``ndtri``; equal to the last bit, tests/test_verdict_calibration.py), so ~10^5 verdicts take
    seconds, not minutes; the rule's logic is untouched."""
    modules = modules or (verdicts_module,)
    saved = [m.sps for m in modules]
    try:
        for m in modules:
            m.sps = FAST_STATS
        yield
    finally:
        for m, s in zip(modules, saved):
            m.sps = s


def _rng(seed: int, claim_id: str, truth: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(claim_id.encode()), zlib.crc32(truth.encode())])


def _rows(spec: StudyClaim, d: Design, values: np.ndarray, rng: np.random.Generator) -> list[Row]:
    """One simulated row per value of ``values`` (the truths of the candidates), computed as the design does."""
    if d.heads:  # a share of heads: a count over the heads, Clopper–Pearson
        count = rng.binomial(d.heads, np.clip(values, 0, 1))
        lo = np.nan_to_num(sps.beta.ppf(0.025, count, d.heads - count + 1), nan=0.0)
        hi = np.nan_to_num(sps.beta.ppf(0.975, count + 1, d.heads - count), nan=1.0)
        return [Row(c / d.heads, a, b, math.inf, d.search, d.n_examples) for c, a, b in zip(count, lo, hi)]
    if d.n_draws == 1:
        ours = values + rng.normal(0, d.se, len(values))
        return [Row(o, o - Z95 * d.se, o + Z95 * d.se, math.inf, d.search, d.n_examples, None, d.se) for o in ours]
    se_pairs = d.se * math.sqrt(1 - DRAW_SHARE)
    tau = d.se * math.sqrt(DRAW_SHARE * d.n_draws)
    deviations = rng.normal(0, tau, (len(values), d.n_draws))
    draws = values[:, None] + rng.normal(0, se_pairs, len(values))[:, None] + deviations
    out = []
    for each in draws:
        var_total = se_pairs**2 + float(np.var(each, ddof=1)) / d.n_draws  # as headlab.core.stats.two_stage
        df = draws_df(var_total, se_pairs**2, d.n_draws, d.n_examples)
        half = float(_t(0.975, df)) * math.sqrt(var_total)
        judged = df if d.judged_df == "welch" else float(d.n_draws - 1)
        o = float(each.mean())
        out.append(Row(o, o - half, o + half, judged, d.search, d.n_examples, each, math.sqrt(var_total)))
    return out


def _reach(spec: StudyClaim, judged) -> float:
    """How far an adjusted interval's end nearest no effect lies in the claimed direction (weakest: smallest)."""
    near = judged.lo_adj if spec.direction > 0 else judged.hi_adj
    return spec.direction * (near - spec.null)


def simulate(
    claim_id: str,
    truth: str,
    design: Design,
    n_sim: int = N_SIM,
    seed: int = SEED,
    decide: Decide = current_rule,
    spec: StudyClaim | None = None,
) -> np.ndarray:
    """The verdicts of ``n_sim`` simulated scorecards for one claim at one planted truth (see the module's
    docstring): ``decide`` (default the book's rule) judges each row; ``spec`` plants the truths (default the
    registered claim)."""
    spec = spec or STUDY_CLAIMS[claim_id]
    value = truths(spec)[truth]
    rng = _rng(seed, claim_id, truth)
    k, m = design.weakest_of, design.search
    candidates = np.full(k * m, spec.null, dtype=float)
    candidates[::m] = value  # the truth in one candidate of each search (all of them when nothing is searched)
    verdicts = []
    for _ in range(n_sim):
        rows = _rows(spec, design, candidates, rng)
        if m > 1:  # the candidate reaching furthest in the claimed direction, in each group searched
            rows = [max(rows[i : i + m], key=lambda r: spec.direction * r.ours) for i in range(0, len(rows), m)]
        judged = [decide(claim_id, r) for r in rows]
        verdicts.append((min(judged, key=lambda j: _reach(spec, j)) if len(judged) > 1 else judged[0]).verdict)
    return np.array(verdicts)


def simulate_all(
    designs: dict[str, Design] | None = None, n_sim: int = N_SIM, seed: int = SEED, decide: Decide = current_rule
) -> dict[tuple[str, str], np.ndarray]:
    """Every claim at every planted truth: (claim_id, truth) -> the verdicts of ``n_sim`` scorecards; scorecard i of
    every claim at "no effect" together make one simulated scorecard with nothing true."""
    designs = designs or book_designs()
    with fast_quantiles():
        return {
            (claim_id, truth): simulate(claim_id, truth, designs[claim_id], n_sim, seed, decide)
            for claim_id, spec in STUDY_CLAIMS.items()
            for truth in truths(spec)
        }


def familywise(verdicts: dict[tuple[str, str], np.ndarray], tally: str) -> float:
    """The share of simulated scorecards with nothing true on which some claim of the tally gets a wrong decisive
    verdict: "holds" or "opposite" for an effect, "does not hold" for a no-effect claim."""
    wrong = [
        np.isin(verdicts[(claim_id, "no effect")], WRONG[spec.kind])
        for claim_id, spec in STUDY_CLAIMS.items()
        if spec.tally == tally
    ]
    return float(np.any(wrong, axis=0).mean())


POWER = 0.8  # the share of scorecards on which a claim sized by the study should hold at twice its size


def resolvable(spec: StudyClaim, d: Design) -> bool:
    """Whether the design can find a true effect of twice the smallest effect of interest at least :data:`POWER` of
    the time, by the textbook power sum: the smallest effect must be at least (adjusted quantile + the power's
    normal quantile) standard errors, with the cautious df of the draws (a no-effect claim: the margin against the
    same sum). Where it is not, the book's precision cannot show the study's size, and the rows say how many pairs
    would (:func:`headlab.findings.verdicts.judge`)."""
    level = 1 - verdicts_module.ALPHA / (2 * d.family * d.search)
    df = math.inf if d.n_draws <= 1 else float(d.n_draws - 1)
    q = float(_t(level, df)) + float(sps.norm.ppf(POWER))
    size = spec.margin if spec.kind == "no_effect" else spec.min_size
    return bool(size >= q * d.se)


def calibration_table(designs: dict[str, Design] | None = None, n_sim: int = N_SIM, seed: int = SEED) -> pd.DataFrame:
    """The tidy table: per claim and planted truth the rates of each verdict (and of a wrong one at no effect), with
    the design it was simulated at; then one row per tally with the familywise rate of a wrong verdict.

    Columns: claim_id, tally, kind, size_source, truth, truth_value, n_sim, holds, does_not_hold, opposite,
    cannot_tell, wrong (no effect only: the rate of a wrong decisive verdict), resolvable (:func:`resolvable`),
    n_examples, se, se_source, n_draws, judged_df, search, weakest_of, heads, family.
    """
    designs = designs or book_designs()
    verdicts = simulate_all(designs, n_sim, seed)
    rows = []
    for (claim_id, truth), v in verdicts.items():
        spec, d = STUDY_CLAIMS[claim_id], designs[claim_id]
        rows.append(
            {
                "claim_id": claim_id,
                "tally": spec.tally,
                "kind": spec.kind,
                "size_source": spec.size_source,
                "truth": truth,
                "truth_value": truths(spec)[truth],
                "n_sim": len(v),
                **{rate.replace(" ", "_"): float(np.mean(v == rate)) for rate in RATES},
                "wrong": float(np.isin(v, WRONG[spec.kind]).mean()) if truth == "no effect" else math.nan,
                "resolvable": resolvable(spec, d),
                **{f.name: getattr(d, f.name) for f in fields(Design) if f.name != "claim_id"},
            }
        )
    for tally in FAMILIES:
        rows.append(
            {"claim_id": f"familywise ({tally})", "tally": tally, "truth": "no effect", "n_sim": n_sim}
            | {"wrong": familywise(verdicts, tally), "family": FAMILIES[tally]}
        )
    return pd.DataFrame(rows)


# --- reachability: can each decisive verdict be reached by some data at the defaults? ----------------------------


def _steady_row(d: Design, value: float, width: float) -> Row:
    """A row with nothing left to chance but the pairs: draws that agree (their df the pairs'), ``width`` times the
    book's standard error."""
    se = d.se * width
    df = float(d.n_examples - 1) if d.n_draws > 1 else math.inf  # draws_df when the draws agree
    half = float(_t(0.975, df)) * se
    judged = df if d.judged_df in ("welch", "pairs") else float(d.n_draws - 1)
    draws = np.full(d.n_draws, value) if d.n_draws > 1 else None
    return Row(value, value - half, value + half, judged, d.search, d.n_examples, draws, se)


def reachable(
    claim_id: str, design: Design, decide: Decide = current_rule, spec: StudyClaim | None = None
) -> dict[str, tuple[float, float] | None]:
    """For each decisive verdict the claim's kind allows, a (planted value, interval width as a share of the book's)
    at which the rule reaches it, or None where no data do: effects from -4 to +4 times the smallest effect of
    interest (or the margin), intervals from the book's width down to :data:`NEARLY_NOISE_FREE` of it; a share of
    heads over every possible count."""
    spec = spec or STUDY_CLAIMS[claim_id]
    scale = spec.margin if spec.kind == "no_effect" else spec.min_size
    step = spec.direction or 1
    found: dict[str, tuple[float, float] | None] = dict.fromkeys(DECISIVE[spec.kind])
    if design.heads:
        candidates = []
        for count in range(design.heads + 1):
            lo = float(sps.beta.ppf(0.025, count, design.heads - count + 1)) if count else 0.0
            hi = float(sps.beta.ppf(0.975, count + 1, design.heads - count)) if count < design.heads else 1.0
            candidates.append((count / design.heads, 1.0, Row(count / design.heads, lo, hi, math.inf, 1, 0)))
    else:
        values = [spec.null + step * x * scale for x in (-4, -2, -1, -0.5, 0, 0.25, 0.5, 0.75, 1, 1.5, 2, 4)]
        widths = [1.0, 0.5, 0.2, NEARLY_NOISE_FREE]
        candidates = [(v, w, _steady_row(design, v, w)) for v in values for w in widths]
    with fast_quantiles():
        for value, width, row in candidates:
            verdict = decide(claim_id, row).verdict
            if verdict in found and found[verdict] is None:
                found[verdict] = (value, width)
    return found


def unreachable(designs: dict[str, Design] | None = None, decide: Decide = current_rule) -> list[str]:
    """Every (claim, verdict) no data reach at the defaults, as "claim_id: verdict"."""
    designs = designs or book_designs()
    return [
        f"{claim_id}: {verdict}"
        for claim_id in STUDY_CLAIMS
        for verdict, where in reachable(claim_id, designs[claim_id], decide).items()
        if where is None
    ]


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
    "Design",
    "Row",
    "book_designs",
    "calibration_table",
    "current_rule",
    "familywise",
    "page_parameters",
    "reachable",
    "simulate",
    "simulate_all",
    "truths",
    "unreachable",
]
