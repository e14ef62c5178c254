import math

import numpy as np
import pandas as pd
import pytest

from headlab.findings.claims import claims_file, number_text
from headlab.findings.sharpening import (
    CHANGES,
    UNIT,
    choose_heads,
    claims,
    deltas,
    no_op_table,
    scope_changes,
    split_pairs,
    verdict,
)

IDS = [
    "sharpening.match_rises",
    "sharpening.match_rises/all_heads",
    "sharpening.match_rises/excess",
    "sharpening.match_rises/excess_all_heads",
    "sharpening.self_falls",
    "sharpening.self_falls/all_heads",
    "sharpening.sep_falls",
    "sharpening.sep_falls/all_heads",
]


def role_table(rng, examples=30, heads=3, shift=None):
    """A per-example role table of a 1-layer model with every change's metric; ``shift`` adds to metrics."""
    table = pd.DataFrame(
        {"example": np.repeat(np.arange(examples), heads), "layer": 0, "head": np.tile(np.arange(heads), examples)}
    )
    for change in CHANGES:
        table[change.metric] = rng.uniform(0.2, 0.3, len(table))
    for metric, value in (shift or {}).items():
        table[metric] += value
    return table


def _by_id(changes, chosen_on=None):
    return {c.claim_id: c for c in claims(changes, chosen_on)}


def test_claims_hold_when_the_shares_move_as_the_study_says():
    rng = np.random.default_rng(0)
    before = role_table(rng)
    after = before.copy()
    after[["match", "match_excess"]] += 0.1
    after[["self", "sep"]] -= 0.05
    after["cls"] += 0.001
    choose, measure = split_pairs(before["example"], seed=0)
    delta = deltas(before, after, heads=[(0, 0), (0, 1)], measure=measure, n_boot=200)
    assert delta.loc[delta["matching"], "head"].tolist() == [0, 1] * len(CHANGES)
    changes = scope_changes(delta)
    assert changes["scope"].tolist() == ["term-matching heads", "all heads"] * len(CHANGES)
    row = changes.set_index(["metric", "scope"]).loc[("self", "all heads")]
    assert row["delta"] == pytest.approx(-0.05) and row["relative"] == pytest.approx(-0.05 / row["before"])
    rows = claims(changes, chosen_on=len(choose))
    found = {c.claim_id: c for c in rows}
    # one row per claimed change and scope: [CLS] is context, not a claim of the study
    assert list(found) == IDS
    assert {c.verdict for c in found.values()} == {"holds"}
    claim = found["sharpening.self_falls/all_heads"]
    assert (claim.ours, claim.lo, claim.hi, claim.n_examples) == (row["delta"], row["lo"], row["hi"], len(measure))
    assert claim.study is None and claim.page == "06_finetune_delta"
    assert claims_file(rows) == "claims_06_finetune_delta"
    assert (
        f"chosen by their score on the fine-tuned model over the other {len(choose)} pairs"
        in found["sharpening.match_rises"].reason
    )
    assert "no choice of heads" in found["sharpening.match_rises/all_heads"].reason
    assert "points" in number_text(0.1, UNIT) and "-5.0 points" in number_text(claim.ours, claim.unit)


def test_all_heads_and_excess_are_sub_rows_of_the_registered_claims():
    rng = np.random.default_rng(3)
    before = role_table(rng)
    after = before.copy()
    after["match"] += 0.1
    found = _by_id(scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=100)), chosen_on=15)
    assert {c.study_claim for c in found.values()} == {
        "sharpening.match_rises",
        "sharpening.self_falls",
        "sharpening.sep_falls",
    }
    main, everyone = found["sharpening.match_rises"], found["sharpening.match_rises/all_heads"]
    assert main.claim == "Attention between identical query/title terms rises with fine-tuning"
    assert everyone.claim.endswith("(all heads)") and everyone.quote == main.quote and everyone.kind == "effect"
    excess = found["sharpening.match_rises/excess"]
    assert "identity-blind" in excess.claim and excess.claim.endswith("(term-matching heads)")
    assert found["sharpening.match_rises/excess_all_heads"].claim.endswith("(all heads)")
    assert found["sharpening.sep_falls/all_heads"].study_claim == "sharpening.sep_falls"


def test_heads_are_chosen_on_one_half_and_measured_on_the_other():
    rng = np.random.default_rng(4)
    before = role_table(rng, examples=40, heads=4)
    choose, measure = split_pairs(before["example"], seed=2)
    assert set(choose).isdisjoint(measure) and sorted([*choose, *measure]) == list(range(40))
    assert abs(len(choose) - len(measure)) <= 1
    assert split_pairs(before["example"], seed=2)[0].tolist() == choose.tolist()
    assert split_pairs(before["example"], seed=3)[0].tolist() != choose.tolist()
    after = before.copy()
    on_choose, on_measure = after["example"].isin(choose), after["example"].isin(measure)
    after.loc[on_choose & (after["head"] == 1), "match_excess"] += 0.2  # head 1 matches on the choosing pairs
    after.loc[on_measure & (after["head"] == 3), "match_excess"] += 0.5  # head 3 only where nothing is chosen
    heads, ranking = choose_heads(after, choose, k=1, among_layers=[0])
    assert heads == [(0, 1)] and ranking.loc[0, "match_excess"] == pytest.approx(
        after[on_choose & (after["head"] == 1)]["match_excess"].mean()
    )
    delta = deltas(before, after, heads, measure=measure, n_boot=100)
    assert set(delta["n_examples"]) == {len(measure)}
    # the change is that of the measuring pairs alone: head 1's rise on the choosing pairs is not in it
    own = delta[(delta["metric"] == "match_excess") & (delta["scope"] == "subset")].iloc[0]
    assert own["delta"] == pytest.approx(0) and own["lo"] == pytest.approx(0)
    alone = deltas(before[before["example"].isin(measure)], after[after["example"].isin(measure)], heads, n_boot=100)
    pd.testing.assert_frame_equal(delta, alone)


def test_claims_opposite_and_unclear():
    rng = np.random.default_rng(1)
    before = role_table(rng)
    after = before.copy()
    after["match"] -= 0.1  # the opposite
    after["self"] -= 0.001  # sure, however small: no word-only threshold
    after["sep"] += rng.normal(0, 0.05, len(after))  # noise
    found = _by_id(scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=200)))
    assert found["sharpening.match_rises/all_heads"].verdict == "opposite"
    small = found["sharpening.self_falls/all_heads"]
    assert small.verdict == "holds" and "tiny" not in small.reason
    unclear = found["sharpening.sep_falls"]
    assert unclear.verdict == "cannot tell" and unclear.lo < 0 < unclear.hi
    assert "The heads were chosen on the same pairs" in unclear.reason


def test_the_verdict_is_the_adjusted_interval_s():
    """A hand-made table: the verdict follows the adjusted interval (Bonferroni over the model's claims), whatever
    the point estimate or the raw interval says."""
    changes = pd.DataFrame(
        {
            "claim": "x",
            "metric": "sep",
            "scope": ["term-matching heads", "all heads"],
            "expected": "falls",
            "before": [0.5, 0.5],
            "after": [0.4, 0.52],
            "delta": [-0.1, 0.02],
            "lo": [-0.2, 0.001],
            "hi": [0.01, 0.04],
            "relative": [-0.2, 0.04],
            "n_examples": [40, 40],
        }
    )
    found = _by_id(changes)
    assert found["sharpening.sep_falls"].verdict == "cannot tell"  # a large fall, but the interval reaches 0
    raw_only = found["sharpening.sep_falls/all_heads"]  # the raw interval above 0, the adjusted one not
    assert raw_only.verdict == "cannot tell" and raw_only.lo_adj < 0 < raw_only.lo
    assert (raw_only.ours, raw_only.lo, raw_only.hi, raw_only.n_examples) == (0.02, 0.001, 0.04, 40)
    opposite = _by_id(changes.assign(lo=[-0.2, 0.01], hi=[0.01, 0.03]))["sharpening.sep_falls/all_heads"]
    assert opposite.verdict == "opposite" and opposite.lo_adj > 0


def test_a_change_not_measured_cannot_be_told():
    found = _by_id(
        scope_changes(pd.DataFrame(columns=["metric", "scope", "before", "after", "delta", "lo", "hi", "n_examples"]))
    )
    assert list(found) == IDS
    claim = found["sharpening.match_rises"]
    assert claim.verdict == "cannot tell" and math.isnan(claim.ours) and claim.reason.startswith("Not measured")


def test_no_op_table_and_verdict_name_the_sink():
    rng = np.random.default_rng(2)
    before = role_table(rng)
    after = before.copy()
    after["cls"] = 0.6  # every head parks on [CLS] after fine-tuning
    no_op = no_op_table(before, after)
    assert no_op["model"].tolist() == ["pretrained", "fine-tuned"]
    assert no_op.loc[1, "heads_cls_over_sep"] == 3 and no_op.loc[1, "cls"] == pytest.approx(0.6)
    changes = scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=100))
    rows = claims(changes)
    text = verdict(rows, changes, no_op)
    assert "[CLS] plays the no-op role" in text and "3 of 3 heads" in text
    # a line per claim and scope (rendered from the rows given), one on [CLS] and one on the no-op token
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(lines) == len(rows) + 2
    assert text.count("**cannot be told** here") == 8
    assert "- Attention to [CLS] (not in the study): term-matching heads:" in text
