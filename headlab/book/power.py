"""What would decide an underpowered row (verdicts v4, issue #64, item 3): each judged row's minimum detectable effect
projected at the designs the data allow, from the row's own spread, never its effect.

Why: "buy power where it is sound and cheap" needs to know what each purchase buys before the time is spent. A row
keeps its 95% interval, its degrees of freedom, its draws and its pairs; its variance splits into the pairs' part
and the draws' part (:func:`headlab.core.stats.pairs_share`, solved from the Welch–Satterthwaite df the row was
drawn with). A design with ``k`` times the pairs divides the pairs' part by ``k``; one with ``D'`` draws scales the
draws' part by ``D / D'``; its df follows (:func:`headlab.core.stats.draws_df`) and its MDE is read exactly as the
verdict reads the row (:func:`headlab.judging.verdicts.minimum_detectable`: the same tally, search and weakest-of
widening). A row over draws whose df sits at ``D - 1`` does not say how its variance splits (its page kept no
Welch–Satterthwaite df), so it is planned at both ends (all pairs, all draws) and the worse is kept. The designs:

- :attr:`Purchase.CROSS_FIT`: a row that chose on the pairs it measures, made to choose on one half and measure on
  the other, both ways: a row measured on one half of the test pairs (its heads chosen on the other) gets twice the
  pairs; a row chosen among ``search`` candidates on its own pairs is read as one candidate (the allowance for
  choosing on half the pairs is not modelled, so this flatters it);
- :attr:`Purchase.DEV_AND_TEST`: the dev pairs beside the test pairs (the learning rate and epochs were chosen on
  dev, so the pooled rows would say so), after cross-fitting where it applies; never for a claim whose page chose on
  the dev pairs (:data:`DEV_CHOSE`) or that is not measured on the grading pairs (:data:`OTHER_PAIRS`);
- :attr:`Purchase.DRAWS`: :data:`DRAWS_CAP` times the draws (or seeds), for rows over random draws;
- :attr:`Purchase.ALL`: every purchase that applies to the row, at once.

A row's design is powered where its MDE is at most twice its size (for no effect: its margin,
:func:`headlab.judging.verdicts.underpowered`). The rows planned are every judged row whose design is not powered
as built, whatever its verdict: a purchase extends every row of its claim, never only the undecided ones, which
would be optional continuation. ``python -m headlab.book.power`` writes ``results/power.csv``;
``docs/judging.md`` renders its counts.
"""

from __future__ import annotations

import argparse
import enum
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.book.calibration import REPO
from headlab.book.sensitivity import _design, on_policy_scale
from headlab.core.stats import draws_df, pairs_share
from headlab.judging.units import in_current_units
from headlab.judging.verdicts import Kind, Tally, Verdict, each_level, minimum_detectable, quantile, underpowered
from headlab.pages.claims import STUDY_CLAIMS, registered

DRAWS_CAP = 4  # the most draws a purchase multiplies a row's by: each is one more mask on every pair (or a student)
DEV_CHOSE = ("pruning.", "sharpening.")  # claims whose pages choose on the dev pairs: pooling dev would reuse them
OTHER_PAIRS = ("word_segmentation.",)  # claims measured on other sentences than the grading pairs


class Purchase(enum.Enum):
    """A design the data allow beside the row's own (see the module's docstring)."""

    NONE = "as built"
    CROSS_FIT = "cross-fitted"
    DEV_AND_TEST = "dev + test"
    DRAWS = "more draws"
    ALL = "all that apply"


@dataclass(frozen=True)
class Design:
    """How a row was (or would be) measured: its pairs, its random draws (1: none) and the candidates it was chosen
    among on those pairs (1: none)."""

    n_examples: int
    n_draws: int
    search: int = 1


def projected_mde(spec, lo: float, hi: float, df: float, built: Design, planned: Design, weakest_of: int = 1) -> float:
    """The MDE of a row measured as ``built`` (95% interval ``lo, hi`` at ``df``) had it been measured as ``planned``:
    the pairs' part of its variance scaled by the pairs, the draws' part by the draws, read by the verdict's own
    :func:`minimum_detectable` at the planned search. A row over draws at ``df = D - 1`` (no split kept) is planned
    at both ends of the split and the worse kept; a row of zero width has none (NaN)."""
    if not hi > lo:
        return math.nan
    se = (hi - lo) / 2 / float(quantile(0.975, df))
    if built.n_draws <= 1:
        shares = [1.0]
    elif df <= built.n_draws - 1 + 1e-9:
        shares = [0.0, 1.0]
    else:
        shares = [float(pairs_share(df, built.n_draws, built.n_examples))]
    each = each_level(spec, planned.search)
    mdes = []
    for share in shares:
        var_pairs = share * se**2 * built.n_examples / planned.n_examples
        var_draws = (1 - share) * se**2 * built.n_draws / planned.n_draws
        total = var_pairs + var_draws
        new_df = float(draws_df(total, var_pairs, planned.n_draws, planned.n_examples)) if planned.n_draws > 1 else df
        half = float(quantile(0.975, new_df)) * math.sqrt(total)
        design = dict(n_draws=planned.n_draws, n_examples=planned.n_examples)
        mdes.append(float(minimum_detectable(spec, -half, half, new_df, each=each, weakest_of=weakest_of, **design)))
    return max(mdes)


def purchases(claim_id: str, built: Design, n_test: int, n_dev: int) -> dict[Purchase, Design]:
    """The designs each :class:`Purchase` that applies gives claim ``claim_id``'s row built as ``built``, on a split
    of ``n_test`` test and ``n_dev`` dev pairs (see the module's docstring)."""
    out = {Purchase.NONE: built}
    if claim_id.startswith(OTHER_PAIRS):
        plan = built
    else:
        halved = built.n_examples <= math.ceil(n_test / 2)
        if halved or built.search > 1:  # chosen on the other half, or on its own pairs: choose and measure apart
            plan = Design(min(2 * built.n_examples, n_test) if halved else built.n_examples, built.n_draws, 1)
            out[Purchase.CROSS_FIT] = plan
        else:
            plan = built
        if not claim_id.startswith(DEV_CHOSE):
            plan = Design(round(plan.n_examples * (n_test + n_dev) / n_test), plan.n_draws, plan.search)
            out[Purchase.DEV_AND_TEST] = plan
    if built.n_draws > 1:
        out[Purchase.DRAWS] = Design(built.n_examples, built.n_draws * DRAWS_CAP, built.search)
        plan = Design(plan.n_examples, built.n_draws * DRAWS_CAP, plan.search)
    if len(out) > 1:
        out[Purchase.ALL] = plan
    return out


def power_table(scorecard: Path = REPO / "results" / "scorecard.csv", repo: Path = REPO) -> pd.DataFrame:
    """Per preset and judged row of a registered claim (decisive or not): its MDE as built and under each purchase
    that applies, the limit it must reach (twice its size; for no effect its margin), and whether each design is
    powered (its MDE within the limit)."""
    models = pd.read_csv(repo / "results" / "models.csv").set_index("preset")
    rows = in_current_units(pd.read_csv(scorecard))
    judged = rows[  # a sub-row's id (claim/part) is no registered claim's
        rows["claim_id"].isin(list(STUDY_CLAIMS))
        & ~rows["verdict"].isin([Verdict.NOT_COMPARABLE, Verdict.NOT_JUDGED, "not measured"])
    ]
    out = []
    for raw in judged.itertuples():
        row = on_policy_scale(raw)
        model = models.loc[row.preset]
        design = _design(row, int(model["layers"]))
        spec = registered(row.claim_id)
        built = Design(design["n_examples"], design["n_draws"], design["search"])
        mde = {
            purchase: projected_mde(spec, row.lo, row.hi, design["df"], built, planned, design["weakest_of"])
            for purchase, planned in purchases(row.claim_id, built, int(model["n_test"]), int(model["n_dev"])).items()
        }
        if not np.isfinite(mde[Purchase.NONE]):
            continue
        limit = spec.margin if spec.kind == Kind.NO_EFFECT else 2 * spec.min_size
        out.append(
            {
                "preset": row.preset,
                "claim_id": row.claim_id,
                "tally": spec.tally,
                "verdict": raw.verdict,
                "limit": limit,
                "n_examples": built.n_examples,
                "n_draws": built.n_draws,
                "search": built.search,
                **{f"mde {p.value}": mde.get(p, math.nan) for p in Purchase},
                **{f"powered {p.value}": (not underpowered(spec, mde[p])) if p in mde else math.nan for p in Purchase},
            }
        )
    return pd.DataFrame(out)


def underpowered_counts(table: pd.DataFrame, tally: Tally = Tally.STUDY) -> pd.DataFrame:
    """Per preset, how many of ``tally``'s rows have a design that is not powered as built (whatever their verdict)
    and how many would still not be under each purchase (one that does not apply leaves a row as built)."""
    rows = table[(table["tally"] == tally) & (table[f"powered {Purchase.NONE.value}"].astype(str) == "False")]
    counts = {}
    for p in Purchase:
        powered = rows[f"powered {p.value}"].fillna(False).astype(str) == "True"
        counts[p.value] = (~powered).groupby(rows["preset"]).sum()
    presets = table["preset"].drop_duplicates()
    return pd.DataFrame(counts).reindex(presets).fillna(0).astype(int)


def main(argv=None) -> int:
    """Write :func:`power_table` to ``--out`` (default ``results/power.csv``) and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "power.csv")
    args = parser.parse_args(argv)
    table = power_table()
    table.to_csv(args.out, index=False, float_format="%.6g")
    print(f"wrote {args.out}: {len(table)} rows")
    print(underpowered_counts(table).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "DEV_CHOSE",
    "DRAWS_CAP",
    "OTHER_PAIRS",
    "Design",
    "Purchase",
    "power_table",
    "projected_mde",
    "purchases",
    "underpowered_counts",
]
