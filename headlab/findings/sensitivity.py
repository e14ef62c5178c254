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

A new rule reaches committed rows before their rebuild the same way (:func:`judged_again`): each older row judged
again from its own numbers, saying so and what its old rule said; the rebuild replaces them.

``python -m headlab.findings.sensitivity`` writes ``results/sensitivity.csv`` (``--judge-again``: first the
scorecard's older rows).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd

from headlab.findings.calibration import REPO, weakest_of
from headlab.findings.claims import STUDY_CLAIMS, registered
from headlab.findings.units import unit_of
from headlab.findings.verdicts import RULE_VERSION, Judgement, judge, study_claim_id

SCALES = {"half": 0.5, "size": 1.0, "twice": 2.0}  # the size (or margin) each column judges at


REJECTING = ("does not hold", "opposite")


def judgement(row, layers: int, scale: float = 1.0) -> Judgement | None:
    """A scorecard row judged by the current rule from its own numbers, its claim's size (or margin) times
    ``scale``; None where the row cannot be: an existential row written before it kept every candidate's far end
    (``far_adj``) whose one kept candidate would reject the claim (rejecting "some head improves" needs every
    head; a kept head that holds, or cannot reject, gives the same verdict with the others as without them)."""
    spec = registered(row.claim_id)
    spec = replace(spec, min_size=spec.min_size * scale, margin=spec.margin * scale)
    kept, far = getattr(row, "weakest_of", math.nan), getattr(row, "far_adj", math.nan)
    judged = judge(
        spec,
        row.ours,
        row.lo,
        row.hi,
        df=row.df if pd.notna(row.df) else math.inf,
        search=int(row.search),
        weakest_of=int(kept) if pd.notna(kept) and kept > 0 else weakest_of(study_claim_id(row.claim_id), layers),
        every_far=float(far) if spec.existential and pd.notna(far) else None,
        n_draws=int(row.n_draws),
        at_floor=bool(row.at_floor),
        unit=unit_of(row.unit) if isinstance(row.unit, str) and row.unit else None,
        n_examples=int(row.n_examples),
    )
    return None if spec.existential and pd.isna(far) and judged.verdict in REJECTING else judged


def rejudged(row, scale: float, layers: int) -> str:
    """A scorecard row's verdict by the current rule at its size times ``scale`` (:func:`judgement`); "not judged"
    where the row cannot be judged again."""
    judged = judgement(row, layers, scale)
    return "not judged" if judged is None else judged.verdict


MEAN_SENTENCE = re.compile(
    r" With each removed head's output replaced by its mean.*?\(mean-ablation\): "
    r"(?P<same>.*?), (?P<ours>[^\[]+) \[(?P<lo>[^,]+), (?P<hi>[^\]]+)\]\."
)


def _number(text: str) -> float:
    """A number as a page printed it (:meth:`headlab.findings.units.Unit.number`): "-5.1%", "+97.0 points", "0.41"."""
    text = text.strip()
    for suffix in ("%", " points"):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) / 100
    return float(text)


def judged_again(table: pd.DataFrame, layers: dict[str, int]) -> pd.DataFrame:
    """Every row of ``table`` judged by an older rule, judged again by the current rule from its own numbers,
    without a new run: verdict, adjusted interval, far end, MDE, weakest-of and rule version replaced, and the row's
    text saying so, with the verdict its old rule gave. A mean-ablation verdict is judged again from the interval the
    row prints for it (to its printed precision) with the row's own design. A row the rule cannot judge again
    (:func:`judgement`) keeps its old rule, and the scorecard keeps marking it."""
    out = table.reindex(columns=list(dict.fromkeys([*table.columns, "weakest_of", "far_adj", "mde"])))
    for i, row in enumerate(table.itertuples()):
        if int(row.rule_version) >= RULE_VERSION or study_claim_id(row.claim_id) not in STUDY_CLAIMS:
            continue
        measured = not math.isnan(row.ours)
        judged = judgement(row, layers[row.preset]) if measured else None
        if measured and judged is None:
            continue
        update: dict = {"rule_version": RULE_VERSION}
        if judged is not None:
            update |= {"lo_adj": judged.lo_adj, "hi_adj": judged.hi_adj, "level": judged.level}
        if judged is not None and row.verdict not in ("not comparable", "not judged"):
            spec = registered(row.claim_id)
            k = int(row.weakest_of) if pd.notna(getattr(row, "weakest_of", math.nan)) else 0
            k = k or weakest_of(row.claim_id, layers[row.preset])
            update |= {"verdict": judged.verdict, "far_adj": judged.far_adj, "mde": judged.mde, "weakest_of": k}
            reason = str(row.reason)
            mean = MEAN_SENTENCE.search(reason)
            shown = " (the condition shown is the one the old rule chose as the weakest)" if k > 1 else ""
            note = (
                f" Judged again by rule {RULE_VERSION} from these numbers, without a new run (rule "
                f"{int(row.rule_version)} said: {row.verdict}){shown}: {judged.why}"
            )
            if mean is None:
                update["reason"] = reason + note
            else:
                other = judge(
                    spec,
                    *(_number(mean[part]) for part in ("ours", "lo", "hi")),
                    df=row.df if pd.notna(row.df) else math.inf,
                    search=int(row.search),
                    weakest_of=k,
                    n_draws=int(row.n_draws),
                    n_examples=int(row.n_examples),
                ).verdict
                same = "the same verdict" if other == judged.verdict else f"**{other}** (the verdict changes)"
                sentence = mean[0].replace(f": {mean['same']}, ", f": {same}, ")
                update |= {"mean_ablation": other, "reason": reason.replace(mean[0], "") + note + sentence}
        for column, value in update.items():
            out.at[out.index[i], column] = value
    return out


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
    """Write :func:`sensitivity_table` to ``--out`` (default ``results/sensitivity.csv``); with ``--judge-again``,
    first rewrite ``results/scorecard.csv`` with its older rows judged again by the current rule
    (:func:`judged_again`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "sensitivity.csv")
    parser.add_argument("--judge-again", action="store_true", help="judge results/scorecard.csv's older rows again")
    args = parser.parse_args(argv)
    if args.judge_again:
        path = REPO / "results" / "scorecard.csv"
        layers = pd.read_csv(REPO / "results" / "models.csv").set_index("preset")["layers"].astype(int).to_dict()
        before = pd.read_csv(path)
        after = judged_again(before, layers)
        after.to_csv(path, index=False, float_format="%.6g")
        moved = (before["verdict"] != after["verdict"]).sum()
        kept = (after["rule_version"] < RULE_VERSION).sum()
        print(f"rewrote {path}: {moved} verdicts moved; {kept} rows keep their older rule")
    table = sensitivity_table()
    table.to_csv(args.out, index=False)
    print(f"wrote {args.out}: {len(table)} rows, {int(table['moves'].sum())} whose verdict moves with the size")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["SCALES", "judged_again", "judgement", "rejudged", "sensitivity_table"]
