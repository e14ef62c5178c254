import math

import numpy as np
import pandas as pd
import pytest

from headlab.findings.sharpening import CHANGES, claims, deltas, no_op_table, scope_changes, verdict


def role_table(rng, examples=30, heads=3, shift=None):
    """A per-example role table of a 1-layer model with every change's metric; ``shift`` adds to metrics."""
    table = pd.DataFrame({"example": np.repeat(np.arange(examples), heads), "layer": 0,
                          "head": np.tile(np.arange(heads), examples)})
    for change in CHANGES:
        table[change.metric] = rng.uniform(0.2, 0.3, len(table))
    for metric, value in (shift or {}).items():
        table[metric] += value
    return table


def _by_id(changes):
    return {c.claim_id: c for c in claims(changes)}


def test_claims_hold_when_the_shares_move_as_the_study_says():
    rng = np.random.default_rng(0)
    before = role_table(rng)
    after = before.copy()
    after[["match", "match_excess"]] += 0.1
    after[["self", "sep"]] -= 0.05
    after["cls"] += 0.001  # a sure but tiny change
    delta = deltas(before, after, heads=[(0, 0), (0, 1)], n_boot=200)
    assert delta.loc[delta["matching"], "head"].tolist() == [0, 1] * len(CHANGES)
    changes = scope_changes(delta)
    assert changes["scope"].tolist() == ["term-matching heads", "all heads"] * len(CHANGES)
    row = changes.set_index(["metric", "scope"]).loc[("self", "all heads")]
    assert row["delta"] == pytest.approx(-0.05) and row["relative"] == pytest.approx(-0.05 / row["before"])
    found = _by_id(changes)
    # one row per claimed change and scope: [CLS] is context, not a claim of the study
    assert list(found) == [f"sharpening.{slug}{scope}" for slug in ("match_rises", "match_excess_rises", "self_falls",
                                                                     "sep_falls") for scope in ("", ".all_heads")]
    assert {c.verdict for c in found.values()} == {"holds"}
    claim = found["sharpening.self_falls.all_heads"]
    assert (claim.ours, claim.lo, claim.hi, claim.n_examples) == (row["delta"], row["lo"], row["hi"], 30)
    assert claim.study is None and claim.finding == "06 fine-tuning sharpens term matching"
    assert "chosen on the fine-tuned model" in found["sharpening.match_rises"].reason
    assert "chosen on the fine-tuned model" not in found["sharpening.match_rises.all_heads"].reason


def test_claims_opposite_tiny_and_unclear():
    rng = np.random.default_rng(1)
    before = role_table(rng)
    after = before.copy()
    after["match"] -= 0.1  # the opposite
    after["self"] -= 0.001  # sure but under 5% of the level
    after["sep"] += rng.normal(0, 0.05, len(after))  # noise
    found = _by_id(scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=200)))
    assert found["sharpening.match_rises.all_heads"].verdict == "opposite"
    tiny = found["sharpening.self_falls.all_heads"]
    assert tiny.verdict == "holds" and "the change is tiny: under 5% of its level before" in tiny.reason
    unclear = found["sharpening.sep_falls"]
    assert unclear.verdict == "cannot tell" and unclear.lo < 0 < unclear.hi
    assert "no change distinguishable from zero" in unclear.reason


def test_the_verdict_is_decided_by_the_interval_alone():
    """A hand-made table: the verdict follows the interval's side, whatever the point estimate says."""
    changes = pd.DataFrame({"claim": "x", "metric": "sep", "scope": ["term-matching heads", "all heads"],
                            "expected": "falls", "before": [0.5, 0.5], "after": [0.4, 0.52], "delta": [-0.1, 0.02],
                            "lo": [-0.2, 0.001], "hi": [0.01, 0.04], "relative": [-0.2, 0.04], "n_examples": [40, 40]})
    found = _by_id(changes)
    assert found["sharpening.sep_falls"].verdict == "cannot tell"  # a large fall, but the interval reaches 0
    opposite = found["sharpening.sep_falls.all_heads"]
    assert opposite.verdict == "opposite" and "tiny" in opposite.reason
    assert (opposite.ours, opposite.lo, opposite.hi, opposite.n_examples) == (0.02, 0.001, 0.04, 40)


def test_a_change_not_measured_cannot_be_told():
    found = _by_id(scope_changes(pd.DataFrame(columns=["metric", "scope", "before", "after", "delta", "lo", "hi",
                                                       "n_examples"])))
    assert len(found) == 8
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
    text = verdict(changes, no_op)
    assert "[CLS] plays the no-op role" in text and "3 of 3 heads" in text
    # a line per claim and scope (rendered from the rows), one on [CLS] and one on the no-op token
    lines = text.splitlines()
    assert len(lines) == len(claims(changes)) + 2 and all(line.startswith("- ") for line in lines)
    assert text.count("**cannot be told** here") == 8
    assert "- Attention to [CLS] (not in the study): term-matching heads:" in text
