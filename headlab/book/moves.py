"""Which verdicts a rebuild moved, and why (verdicts v4, issue #64, item 8): every claim of every column, its verdict
before (as kept, by the rule of its time), the same old numbers judged by the current rule (:mod:`sensitivity`), and
the rebuild's verdict.

Why: a rebuild changes two things at once, the rule (sizes, power, the widening for a choice) and the data (more
draws, new measures, a new checkpoint). Judging the old numbers by the new rule tells them apart: where the old
verdict differs from the old numbers' new one, the rule moved it; where the old numbers' new verdict differs from the
rebuild's, the data did.

``python -m headlab.book.moves NEW_SCORECARD`` (a build's ``runs/scorecard.csv``) writes
``results/verdict_moves.csv`` against ``results/scorecard.csv`` (before it is replaced) and prints, per column, the
moves and the underpowered study claims before and after.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from headlab.book.calibration import REPO
from headlab.book.sensitivity import rejudged
from headlab.judging.units import in_current_units
from headlab.judging.verdicts import RULE_VERSION, Tally, Verdict, study_claim_id
from headlab.pages.claims import STUDY_CLAIMS

UNJUDGED = (Verdict.NOT_COMPARABLE, Verdict.NOT_JUDGED)  # verdicts the rule does not give from a row's numbers
CAUSE_WORDS = {
    "rule": "by the rule",
    "data": "by the data",
    "rule and data": "by both",
    "not judged again": "old numbers not judged again",
    "new claim": "new claims",
    "dropped": "dropped",
}


def _cause(before: str, rule: str, after: str) -> str:
    """What moved a verdict: the rule (the old numbers judged anew), the data (the rebuild), both, or nothing."""
    by_rule, by_data = before != rule, rule != after
    return {(False, False): "", (True, False): "rule", (False, True): "data", (True, True): "rule and data"}[
        (by_rule, by_data)
    ]


def verdict_moves(before: pd.DataFrame, after: pd.DataFrame, layers: dict[str, int]) -> pd.DataFrame:
    """One row per column and claim of either scorecard: ``before`` (its verdict and rule version as kept),
    ``rule`` (the before row's numbers judged by the current rule; the kept verdict where the rule gives none from
    numbers, the row is in a unit since replaced, or it cannot be judged again), ``after`` and ``cause``
    (:func:`_cause`; "new claim" or "dropped" where one side lacks the row). ``layers`` maps a column to its model's
    layers (the study's depth map)."""
    for name, table in (("before", before), ("after", after)):
        doubled = table[table.duplicated(["preset", "claim_id"])]
        if not doubled.empty:
            raise ValueError(f"the {name} scorecard holds {doubled.iloc[0]['claim_id']} twice for one column")
    older = after[after["rule_version"] != RULE_VERSION]
    if not older.empty:
        raise ValueError(
            f"the rebuild's rows must be judged by rule {RULE_VERSION}: {older.iloc[0]['claim_id']} "
            f"({older.iloc[0]['preset']}) was judged by rule {older.iloc[0]['rule_version']}"
        )
    current = set(in_current_units(before).index)  # a row in a unit since replaced is not judged again
    old = {(r.preset, r.claim_id): (r, i in current) for i, r in zip(before.index, before.itertuples(index=False))}
    new = {(r.preset, r.claim_id): r for r in after.itertuples(index=False)}
    rows = []
    for key in sorted(set(old) | set(new)):
        preset, claim_id = key
        (kept, judgeable), rebuilt = old.get(key, (None, False)), new.get(key)
        study = study_claim_id(claim_id)
        rule: str | None = None
        again: str = Verdict.NOT_JUDGED
        if kept is not None:
            judged = judgeable and study in STUDY_CLAIMS and kept.verdict not in UNJUDGED
            again = rejudged(kept, 1.0, layers[preset]) if judged else Verdict.NOT_JUDGED
            rule = kept.verdict if again == Verdict.NOT_JUDGED else again
        if kept is None or rule is None:
            cause = "new claim"
        elif rebuilt is None:
            cause = "dropped"
        elif again == Verdict.NOT_JUDGED and kept.verdict != rebuilt.verdict:
            cause = "not judged again"  # the rule's part cannot be told from the data's
        else:
            cause = _cause(kept.verdict, rule, rebuilt.verdict)
        rows.append(
            {
                "preset": preset,
                "claim_id": claim_id,
                "tally": STUDY_CLAIMS[study].tally if study in STUDY_CLAIMS else "",
                "before": None if kept is None else kept.verdict,
                "before_rule": None if kept is None else int(kept.rule_version) if pd.notna(kept.rule_version) else 2,
                "rule": rule,
                "after": None if rebuilt is None else rebuilt.verdict,
                "after_rule": None if rebuilt is None else int(rebuilt.rule_version),
                "cause": cause,
            }
        )
    return pd.DataFrame(rows)


def _said(verdict) -> str:
    return "—" if not isinstance(verdict, str) else verdict


def moves_text(moves: pd.DataFrame) -> str:
    """Markdown for a closing note: per column, how many verdicts moved and by what, each moved claim old → old
    numbers under the new rule → new, and the underpowered study claims before (the old numbers under the new rule)
    and after."""
    lines = []
    for preset, rows in moves.groupby("preset", sort=False):
        moved = rows[rows["cause"] != ""]
        study = rows[rows["tally"] == Tally.STUDY]
        counts = moved["cause"].value_counts().to_dict()
        lines.append(
            f"**{preset}**: {len(moved)} of {len(rows)} rows moved ("
            + (", ".join(f"{CAUSE_WORDS[cause]}: {n}" for cause, n in counts.items()) or "none")
            + f"); underpowered study claims {int((study['rule'] == 'underpowered').sum())} before (the old numbers "
            f"under the new rule), {int((study['after'] == 'underpowered').sum())} after."
        )
        lines += [
            f"- `{r.claim_id}`: {_said(r.before)} → {_said(r.rule)} → {_said(r.after)} ({r.cause})"
            for r in moved.itertuples()
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Write :func:`verdict_moves` of ``new`` against ``--before`` to ``--out``; print :func:`moves_text`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("new", type=Path, help="the rebuild's scorecard (a build's runs/scorecard.csv)")
    parser.add_argument("--before", type=Path, default=REPO / "results" / "scorecard.csv")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "verdict_moves.csv")
    args = parser.parse_args(argv)
    layers = pd.read_csv(REPO / "results" / "models.csv").set_index("preset")["layers"].astype(int).to_dict()
    moves = verdict_moves(pd.read_csv(args.before), pd.read_csv(args.new), layers)
    moves.to_csv(args.out, index=False)
    print(moves_text(moves))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["moves_text", "verdict_moves"]
