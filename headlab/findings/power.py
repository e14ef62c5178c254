"""What would decide an underpowered row (verdicts v4, issue #64, item 3): each judged row's minimum detectable effect
projected at the designs the data allow, from the row's own spread, never its effect.

Why: "buy power where it is sound and cheap" needs to know what each purchase buys before the time is spent. A row
keeps its 95% interval, its degrees of freedom, its draws and its pairs; its variance splits into the pairs' part
and the draws' part (:func:`headlab.core.stats.pairs_share`, solved from the Welch–Satterthwaite df the row was
drawn with). A design with ``k`` times the pairs divides the pairs' part by ``k``; one with ``D'`` draws scales the
draws' part by ``D / D'``; its df follows (:func:`headlab.core.stats.draws_df`) and its MDE is read exactly as the
verdict reads the row (:func:`headlab.findings.verdicts.minimum_detectable`: the same tally, search and weakest-of
widening). Only the spread enters, so planning on committed rows chooses no verdict (a blinded sample-size
re-estimation). The designs:

- :attr:`Purchase.CROSS_FIT`: a row measured on one half of the test pairs (its heads chosen on the other) measured
  on both, each half's heads chosen on the other half (twice the pairs; only for such rows);
- :attr:`Purchase.DEV_AND_TEST`: the dev pairs beside the test pairs (the learning rate and epochs were chosen on dev,
  so the pooled rows say so), after cross-fitting where it applies;
- :attr:`Purchase.DRAWS`: :data:`DRAWS_CAP` times the draws, for rows over random draws;
- :attr:`Purchase.ALL`: all three at once.

A row is underpowered where its MDE exceeds twice its size (for no effect: its margin,
:func:`headlab.findings.verdicts.underpowered`); the table says which purchase, if any, would bring it within.
``python -m headlab.findings.power`` writes ``results/power.csv``; ``docs/judging.md`` renders its counts.
"""

from __future__ import annotations

import argparse
import enum
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.stats import draws_df, pairs_share
from headlab.findings.calibration import REPO
from headlab.findings.claims import STUDY_CLAIMS, registered
from headlab.findings.sensitivity import _design, on_policy_scale
from headlab.findings.verdicts import each_level, minimum_detectable, quantile, underpowered

DRAWS_CAP = 4  # the most draws a purchase multiplies a row's by: each draw is one more mask on every pair


class Purchase(enum.Enum):
    """A design the data allow beside the row's own (see the module's docstring)."""

    NONE = "as built"
    CROSS_FIT = "cross-fitted"
    DEV_AND_TEST = "dev + test"
    DRAWS = "more draws"
    ALL = "all three"


@dataclass(frozen=True)
class Design:
    """How a row was (or would be) measured: its pairs and its random draws (1: none)."""

    n_examples: int
    n_draws: int


def projected_mde(spec, lo: float, hi: float, df: float, built: Design, planned: Design, **judged) -> float:
    """The MDE of a row measured as ``built`` (95% interval ``lo, hi`` at ``df``) had it been measured as ``planned``:
    the pairs' part of its variance scaled by the pairs, the draws' part by the draws, read by the verdict's own
    :func:`minimum_detectable` (``judged``: its ``each`` and ``weakest_of``)."""
    se = (hi - lo) / 2 / float(quantile(0.975, df))
    share = float(pairs_share(df, built.n_draws, built.n_examples)) if built.n_draws > 1 else 1.0
    var_pairs = share * se**2 * built.n_examples / planned.n_examples
    var_draws = (1 - share) * se**2 * built.n_draws / planned.n_draws
    total = var_pairs + var_draws
    new_df = float(draws_df(total, var_pairs, planned.n_draws, planned.n_examples)) if planned.n_draws > 1 else df
    half = float(quantile(0.975, new_df)) * math.sqrt(total)
    return float(
        minimum_detectable(spec, -half, half, new_df, n_draws=planned.n_draws, n_examples=planned.n_examples, **judged)
    )


def purchases(built: Design, n_test: int, n_dev: int) -> dict[Purchase, Design]:
    """The designs each :class:`Purchase` gives a row built as ``built`` on a split of ``n_test`` test and ``n_dev``
    dev pairs (a row measured on at most half the test pairs is cross-fitted to all of them)."""
    halved = built.n_examples <= math.ceil(n_test / 2)
    crossed = min(2 * built.n_examples, n_test) if halved else built.n_examples  # both halves, each measured once
    pooled = crossed * (n_test + n_dev) / n_test
    draws = built.n_draws * DRAWS_CAP if built.n_draws > 1 else 1
    out = {Purchase.NONE: built, Purchase.DEV_AND_TEST: Design(round(pooled), built.n_draws)}
    if halved:
        out[Purchase.CROSS_FIT] = Design(round(crossed), built.n_draws)
    if built.n_draws > 1:
        out[Purchase.DRAWS] = Design(built.n_examples, draws)
    out[Purchase.ALL] = Design(round(pooled), draws)
    return out


def power_table(scorecard: Path = REPO / "results" / "scorecard.csv", repo: Path = REPO) -> pd.DataFrame:
    """Per preset and judged row of a registered claim (decisive or not): its MDE as built and under each purchase,
    the limit it must reach (twice its size; for no effect its margin), and whether each purchase would reach it."""
    models = pd.read_csv(repo / "results" / "models.csv").set_index("preset")
    rows = pd.read_csv(scorecard)
    judged = rows[
        ~rows["claim_id"].str.contains("/", regex=False)
        & ~rows["verdict"].isin(["not comparable", "not judged", "not measured"])
        & rows["claim_id"].isin(list(STUDY_CLAIMS))
    ]
    out = []
    for raw in judged.itertuples():
        row = on_policy_scale(raw)
        model = models.loc[row.preset]
        design = _design(row, int(model["layers"]))
        spec = registered(row.claim_id)
        if not all(np.isfinite([row.lo, row.hi])):
            continue
        judged_at = dict(each=each_level(spec, design["search"]), weakest_of=design["weakest_of"])
        built = Design(design["n_examples"], design["n_draws"])
        limit = spec.margin if spec.kind == "no_effect" else 2 * spec.min_size
        mdes = {
            purchase: projected_mde(spec, row.lo, row.hi, design["df"], built, planned, **judged_at)
            for purchase, planned in purchases(built, int(model["n_test"]), int(model["n_dev"])).items()
        }
        out.append(
            {
                "preset": row.preset,
                "claim_id": row.claim_id,
                "tally": spec.tally,
                "verdict": raw.verdict,
                "limit": limit,
                "n_examples": built.n_examples,
                "n_draws": built.n_draws,
                **{f"mde {p.value}": mdes.get(p, math.nan) for p in Purchase},
                **{
                    f"decided {p.value}": (not underpowered(spec, mdes[p])) if p in mdes else math.nan for p in Purchase
                },
            }
        )
    return pd.DataFrame(out)


def underpowered_counts(table: pd.DataFrame, tally: str = "study") -> pd.DataFrame:
    """Per preset, how many of ``tally``'s claims read "underpowered" as built and how many of them would still be
    under each purchase (one that does not apply to a row leaves it as built). A decisive or powered row stays so."""
    rows = table[(table["tally"] == tally) & (table["verdict"] == "underpowered")]
    counts = {}
    for p in Purchase:
        decided = rows[f"decided {p.value}"].fillna(rows[f"decided {Purchase.NONE.value}"]).astype(bool)
        counts[p.value] = (~decided).groupby(rows["preset"]).sum()
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


__all__ = ["DRAWS_CAP", "Design", "Purchase", "power_table", "projected_mde", "purchases", "underpowered_counts"]
