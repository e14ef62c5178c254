"""Which verdicts hang on the smallest effect of interest (verdicts v4, issue #64, item 7): every judged row of
``results/scorecard.csv`` judged again by the rule as it is now, from the row's own numbers, at half its size, at its
size and at twice it (a no-effect claim: its margin halved and doubled).

Why: a size is a choice, fixed before the results by a written rule, but a reader should see which verdicts it
decides. The column at the size itself is also each row's numbers under the current rule: where the row was judged
by an older rule (``rule_version``), the difference between its kept verdict and that column is the rule's alone,
not new data's.

A row keeps what the rule reads (its interval, df, draws, pairs, search, floor); the weakest-of count comes from the
row, or for a row written before it was kept, from the page's parameters
(:func:`headlab.findings.calibration.weakest_of`); an existential row's far end over all its candidates
(``far_adj``) is kept from rule 4 on; before, the rows hold the chosen candidate alone, so such a row is "not
judged" here.

``python -m headlab.findings.sensitivity`` writes ``results/sensitivity.csv``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from headlab.findings.calibration import REPO, weakest_of
from headlab.findings.claims import STUDY_CLAIMS
from headlab.findings.verdicts import RULE_VERSION, judge

SCALES = {"half": 0.5, "size": 1.0, "twice": 2.0}  # the size (or margin) each column judges at


def rejudged(row, scale: float, layers: int) -> str:
    """A scorecard row's verdict under the current rule with its claim's size (or margin) times ``scale``; "not
    judged" for an existential row written before it kept every candidate's far end (``far_adj``): the rule cannot
    reject that claim on the one candidate kept."""
    spec = STUDY_CLAIMS[row.claim_id]
    spec = replace(spec, min_size=spec.min_size * scale, margin=spec.margin * scale)
    kept = getattr(row, "weakest_of", math.nan)
    far = getattr(row, "far_adj", math.nan)
    if spec.existential and pd.isna(far):
        return "not judged"
    return judge(
        spec,
        row.ours,
        row.lo,
        row.hi,
        df=row.df if pd.notna(row.df) else math.inf,
        search=int(row.search),
        weakest_of=int(kept) if pd.notna(kept) and kept > 0 else weakest_of(row.claim_id, layers),
        every_far=float(far) if spec.existential and pd.notna(far) else None,
        n_draws=int(row.n_draws),
        at_floor=bool(row.at_floor),
        n_examples=int(row.n_examples),
    ).verdict


def sensitivity_table(scorecard: Path = REPO / "results" / "scorecard.csv", repo: Path = REPO) -> pd.DataFrame:
    """Per preset and judged row: its kept verdict and rule version, then the current rule's verdict at half, at and
    at twice its size, and ``moves`` (whether those three differ)."""
    layers = pd.read_csv(repo / "results" / "models.csv").set_index("preset")["layers"]
    rows = pd.read_csv(scorecard)
    judged = rows[rows["claim_id"].isin(list(STUDY_CLAIMS)) & ~rows["verdict"].isin(["not comparable", "not judged"])]
    out = []
    for row in judged.itertuples():
        at = {name: rejudged(row, scale, int(layers[row.preset])) for name, scale in SCALES.items()}
        out.append(
            {
                "preset": row.preset,
                "claim_id": row.claim_id,
                "tally": STUDY_CLAIMS[row.claim_id].tally,
                "kept": row.verdict,
                "kept_rule": int(row.rule_version) if pd.notna(row.rule_version) else 2,
                **at,
                "rule": RULE_VERSION,
                "moves": len(set(at.values())) > 1,
            }
        )
    return pd.DataFrame(out)


def main(argv=None) -> int:
    """Write :func:`sensitivity_table` to ``--out`` (default ``results/sensitivity.csv``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "sensitivity.csv")
    args = parser.parse_args(argv)
    table = sensitivity_table()
    table.to_csv(args.out, index=False)
    print(f"wrote {args.out}: {len(table)} rows, {int(table['moves'].sum())} whose verdict moves with the size")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["SCALES", "rejudged", "sensitivity_table"]
