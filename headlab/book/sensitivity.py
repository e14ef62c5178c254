"""Which verdicts hang on the smallest effect of interest (verdicts v4, issue #64, item 7): every judged row of
``results/scorecard.csv`` judged again by the rule as it is now, from the row's own numbers, at half its size, at its
size and at twice it (a no-effect claim: its margin halved and doubled).

Why: a size is a choice, fixed before the results by a written rule, but a reader should see which verdicts it
decides. The column at the size itself is also each row's numbers under the current rule: where the row was judged
by an older rule (``rule_version``), the difference between its kept verdict and that column is the rule's alone,
not new data's.

A row keeps what the rule reads (its interval, df, draws, pairs, search, floor); the weakest-of count comes from the
row, or for a row written before it was kept, from the page's parameters
(:func:`headlab.book.calibration.weakest_of`); an existential row's far end over all its candidates
(``far_adj``) is kept from rule 4 on; before, the rows hold the chosen candidate alone, so such a row is "not
judged" here.

A new rule reaches committed rows before their rebuild the same way (:func:`judged_again`): each older row judged
again from its own numbers, under the sizes policy (:mod:`headlab.judging.sizes`), saying so and what its old rule
said; the rebuild replaces them. A row whose claim the policy moved to another scale takes its number on that scale
from the row (``term_matching.lower_half_costs``: its κ lost, kept beside the accuracy); a comparison whose one
condition sat at the floor is censored (read from the row's floor words); a row whose number itself hangs on a margin
the policy moved (:data:`REMEASURED`) keeps its older rule until the rebuild measures it again.

``python -m headlab.book.sensitivity`` writes ``results/sensitivity.csv`` (``--judge-again``: first the
scorecard's older rows).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from headlab.book.calibration import REPO, weakest_of
from headlab.core.stats import floor_bound
from headlab.judging.sizes import POLICY, POLICY_VERSION, Scale
from headlab.judging.units import KAPPA_START, in_current_units, unit_of
from headlab.judging.verdicts import RULE_VERSION, Judgement, Kind, Verdict, judge, signs_on_both_scales, study_claim_id
from headlab.pages.claims import STUDY_CLAIMS, registered

SCALES = {"half": 0.5, "size": 1.0, "twice": 2.0}  # the size (or margin) each column judges at


REJECTING = (Verdict.DOES_NOT_HOLD, Verdict.OPPOSITE)
REMEASURED = {  # rows whose number itself was measured with a margin the sizes policy moved: the rebuild re-counts them
    "layer_dependence.most_heads_change_nothing": "its number counts the heads shown within a per-head margin, "
    "which the sizes policy moved from ±2% to the no-change margin; only the per-head intervals of a rebuild can "
    "count them again",
    "term_matching.matching_keep_lower_half": "its number compares the kept sets on accuracy; the sizes policy reads "
    "the claim on κ (the mask removes more heads than the study's collapse point), which the row did not keep",
}
FIRST_SIDE = {  # how the first condition a row's floor words name enters its difference (+1 plus, -1 minus)
    "layer_dependence.high_heads_cost_less": 1,  # "lower half: ...; upper half: ...", lower minus upper
    "pruning.keep_low_heads": -1,  # "low heads kept: ...; high heads kept: ...", high-kept minus low-kept
}
FLOORED = ("reaches 0", "get one grade")  # the words headlab.core.stats.at_floor writes for a condition at the floor


def censored_from(floor_reason, claim_id: str) -> int:
    """Which way a row's floor words (``side: words; side: words``) bound its difference when one of its two
    conditions, not both, sits at the floor (:func:`headlab.core.stats.floor_bound`): +1 at least as measured, -1 at
    most, 0 neither; a claim whose sides' order is not in :data:`FIRST_SIDE` is an error that names it."""
    if not isinstance(floor_reason, str) or ": " not in floor_reason:
        return 0
    sides = [part for part in re.split(r"; (?=[^;]*?: )", floor_reason) if ": " in part]
    if len(sides) != 2:
        return 0
    if claim_id not in FIRST_SIDE:
        raise KeyError(f"claim {claim_id!r}: say how its first floor condition enters its difference (FIRST_SIDE)")
    first, second = (any(word in side for word in FLOORED) for side in sides)
    return FIRST_SIDE[claim_id] * floor_bound(first, second)


def _censored(row) -> int:
    kept = getattr(row, "censored", math.nan)
    if isinstance(kept, (bool, int, float)) and not pd.isna(kept):
        return int(kept)
    if registered(row.claim_id).kind != Kind.COMPARE:
        return 0
    return censored_from(getattr(row, "floor_reason", ""), study_claim_id(row.claim_id))


def on_policy_scale(row):
    """A row as the sizes policy's scale reads it: a row kept on accuracy whose claim the policy reads on κ takes
    its κ lost as its number (the accuracy moving beside it); any other row as it is."""
    size = POLICY.get(study_claim_id(row.claim_id))
    kept_on_kappa = isinstance(row.unit, str) and row.unit.startswith(KAPPA_START)
    if size is None or size.scale is not Scale.KAPPA or kept_on_kappa or pd.isna(getattr(row, "kappa_lost", math.nan)):
        return row
    return SimpleNamespace(
        **{
            **row._asdict(),
            "ours": row.kappa_lost,
            "lo": row.kappa_lost_lo,
            "hi": row.kappa_lost_hi,
            "unit": size.unit.label,
            "study_unit": row.unit,
            "accuracy": row.ours,
            "accuracy_lo": row.lo,
            "accuracy_hi": row.hi,
            "kappa_lost": math.nan,
            "kappa_lost_lo": math.nan,
            "kappa_lost_hi": math.nan,
        }
    )


def _design(row, layers: int) -> dict:
    kept = getattr(row, "weakest_of", math.nan)
    return dict(
        df=row.df if pd.notna(row.df) else math.inf,
        search=int(row.search),
        weakest_of=int(kept) if pd.notna(kept) and kept > 0 else weakest_of(study_claim_id(row.claim_id), layers),
        n_draws=int(row.n_draws),
        n_examples=int(row.n_examples),
    )


def other_scale(row, layers: int) -> tuple[str, bool]:
    """The sign the row's other scale shows (:func:`headlab.judging.verdicts.on_other_scale`; its κ lost beside an
    accuracy, its accuracy beside a κ), and whether it differs from the sign its own numbers show; ("", False) where
    it keeps none, for an existential claim (the twin would need every candidate) and for a sub-row. The κ interval
    is read with the row's own design: rows keep no κ degrees of freedom of their own."""
    spec = registered(row.claim_id)
    on_kappa = isinstance(row.unit, str) and row.unit.startswith(KAPPA_START)
    names = ("accuracy", "accuracy_lo", "accuracy_hi") if on_kappa else ("kappa_lost", "kappa_lost_lo", "kappa_lost_hi")
    if spec.existential or "/" in str(row.claim_id):
        return "", False
    return signs_on_both_scales(
        spec, (row.ours, row.lo, row.hi), [getattr(row, name, math.nan) for name in names], **_design(row, layers)
    )


def judgement(row, layers: int, scale: float = 1.0) -> Judgement | None:
    """A scorecard row judged by the current rule from its own numbers, its claim's size (or margin) times
    ``scale``; None where the row cannot be: an existential row written before it kept every candidate's far end
    (``far_adj``) whose one kept candidate would reject the claim (rejecting "some head improves" needs every
    head; a kept head that holds, or cannot reject, gives the same verdict with the others as without them)."""
    if study_claim_id(row.claim_id) in REMEASURED and int(row.rule_version) < RULE_VERSION:
        return None
    row = on_policy_scale(row)
    spec = registered(row.claim_id)
    spec = replace(spec, min_size=spec.min_size * scale, margin=spec.margin * scale)
    far = getattr(row, "far_adj", math.nan)
    judged = judge(
        spec,
        row.ours,
        row.lo,
        row.hi,
        **_design(row, layers),
        every_far=float(far) if spec.existential and pd.notna(far) else None,
        at_floor=bool(row.at_floor),
        censored=_censored(row),
        unit=unit_of(row.unit) if isinstance(row.unit, str) and row.unit else None,
    )
    return None if spec.existential and pd.isna(far) and judged.verdict in REJECTING else judged


def rejudged(row, scale: float, layers: int) -> str:
    """A scorecard row's verdict by the current rule at its size times ``scale`` (:func:`judgement`); "not judged"
    where the row cannot be judged again."""
    judged = judgement(row, layers, scale)
    return Verdict.NOT_JUDGED if judged is None else judged.verdict


MEAN_SENTENCE = re.compile(
    r" With each removed head's output replaced by its mean.*?\(mean-ablation\): "
    r"(?P<same>.*?), (?P<ours>[^\[]+) \[(?P<lo>[^,]+), (?P<hi>[^\]]+)\]\."
)


def _number(text: str) -> float:
    """A number as a page printed it (:meth:`headlab.judging.units.Unit.number`): "-5.1%", "+97.0 points", "0.41"."""
    text = text.strip()
    for suffix in ("%", " points"):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) / 100
    return float(text)


PREVIOUS_NOTE = re.compile(
    r" Judged again by rule \d+ from these numbers.*?(?= With each removed head's output|$)", re.S
)
NEW_COLUMNS = (
    "weakest_of",
    "far_adj",
    "mde",
    "censored",
    "accuracy",
    "accuracy_lo",
    "accuracy_hi",
    "other_scale",
    "scale_flip",
)
JUDGE_WORDS = re.compile(r" (?:The adjusted interval|Every candidate's adjusted interval|Saturated:|Censored:)")


def judged_again(table: pd.DataFrame, layers: dict[str, int]) -> pd.DataFrame:
    """Every row of ``table`` judged by an older rule, judged again by the current rule and the sizes policy from its
    own numbers, without a new run: its sizes, verdict, adjusted interval, far end, MDE, weakest-of, censoring, the
    verdict on the other scale and rule version replaced; a row the policy moved to another scale takes its number
    there (:func:`on_policy_scale`). The row's text says so, with the verdict its old rule gave, in place of an
    earlier such note. A mean-ablation verdict is judged again from the interval the row prints for it (to its
    printed precision) with the row's own design; where the scale moved, the run kept none on the new scale, and the
    row says so. A row the rule cannot judge again (:func:`judgement`) keeps its old rule, and the scorecard keeps
    marking it."""
    out = table.reindex(columns=list(dict.fromkeys([*table.columns, *NEW_COLUMNS])))
    for column in ("other_scale", "scale_flip", "censored", "unit", "study_unit", "mean_ablation", "claim"):
        out[column] = out[column].astype(object)
    for i, row in enumerate(out.itertuples()):
        if int(row.rule_version) >= RULE_VERSION or study_claim_id(row.claim_id) not in STUDY_CLAIMS:
            continue
        measured = not math.isnan(row.ours)
        judged = judgement(row, layers[row.preset]) if measured else None
        if measured and judged is None:
            continue
        spec = registered(row.claim_id)
        update: dict = {
            "rule_version": RULE_VERSION,
            "min_size": spec.min_size,
            "margin": spec.margin,
            "size_why": spec.size_why,
            "size_source": spec.size_source,
            "claim": spec.claim if "/" not in str(row.claim_id) else row.claim,
        }
        moved = on_policy_scale(row)
        rescaled = moved is not row
        if rescaled:
            update |= {
                name: getattr(moved, name)
                for name in ("ours", "lo", "hi", "unit", "study_unit", *NEW_COLUMNS[4:7], "kappa_lost")
            }
            update |= {"kappa_lost_lo": math.nan, "kappa_lost_hi": math.nan}
        if judged is not None:
            update |= {"lo_adj": judged.lo_adj, "hi_adj": judged.hi_adj, "level": judged.level}
        if judged is not None and row.verdict not in (Verdict.NOT_COMPARABLE, Verdict.NOT_JUDGED):
            design = _design(moved, layers[row.preset])
            update |= {
                "verdict": judged.verdict,
                "far_adj": judged.far_adj,
                "mde": judged.mde,
                "weakest_of": design["weakest_of"],
                "censored": _censored(row),
            }
            update["other_scale"], update["scale_flip"] = other_scale(moved, layers[row.preset])
            mean = MEAN_SENTENCE.search(str(row.reason))
            reason = PREVIOUS_NOTE.sub("", str(row.reason).replace(mean[0], "") if mean else str(row.reason))
            reason = JUDGE_WORDS.split(reason, maxsplit=1)[0]  # the page's words; the old rule's reading is replaced
            shown = (
                " (the condition shown is the one the old rule chose as the weakest)"
                if design["weakest_of"] > 1
                else ""
            )
            scale = f", on {unit_of(moved.unit).label} (the sizes policy's scale for this claim)" if rescaled else ""
            note = (
                f" Judged again by rule {RULE_VERSION} and sizes policy {POLICY_VERSION} from these numbers{scale}, "
                f"without a new run (rule {int(row.rule_version)} said: {row.verdict}){shown}: {judged.why}"
            )
            if mean is None:
                update["reason"] = reason + note
            elif rescaled:
                update |= {
                    "mean_ablation": "",
                    "reason": reason
                    + note
                    + " The mean-ablation run kept this condition's accuracy only: its verdict on the new scale "
                    "awaits the rebuild.",
                }
            else:
                other = judge(
                    spec,
                    *(_number(mean[part]) for part in ("ours", "lo", "hi")),
                    **design,
                ).verdict  # not censored: the mean-ablated run's own floor was not kept
                same = "the same verdict" if other == judged.verdict else f"**{other}** (the verdict changes)"
                sentence = mean[0].replace(f": {mean['same']}, ", f": {same}, ")
                update |= {"mean_ablation": other, "reason": reason + note + sentence}
        for column, value in update.items():
            out.at[out.index[i], column] = value
    return out


def sensitivity_table(scorecard: Path = REPO / "results" / "scorecard.csv", repo: Path = REPO) -> pd.DataFrame:
    """Per preset and judged row: its kept verdict and rule version, then the current rule's verdict at half, at and
    at twice its size, and ``moves`` (whether those three differ)."""
    layers = pd.read_csv(repo / "results" / "models.csv").set_index("preset")["layers"]
    rows = in_current_units(pd.read_csv(scorecard))
    judged = rows[
        rows["claim_id"].isin(list(STUDY_CLAIMS)) & ~rows["verdict"].isin([Verdict.NOT_COMPARABLE, Verdict.NOT_JUDGED])
    ]
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


__all__ = [
    "REMEASURED",
    "SCALES",
    "censored_from",
    "judged_again",
    "judgement",
    "other_scale",
    "rejudged",
    "sensitivity_table",
]
