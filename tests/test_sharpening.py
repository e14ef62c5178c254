import numpy as np
import pandas as pd
import pytest

from headlab.findings.sharpening import CLAIMS, claims_table, deltas, no_op_table, verdict


def role_table(rng, examples=30, heads=3, shift=None):
    """A per-example role table of a 1-layer model with every claim's metric; ``shift`` adds to metrics."""
    table = pd.DataFrame({"example": np.repeat(np.arange(examples), heads), "layer": 0,
                          "head": np.tile(np.arange(heads), examples)})
    for claim in CLAIMS:
        table[claim.metric] = rng.uniform(0.2, 0.3, len(table))
    for metric, value in (shift or {}).items():
        table[metric] += value
    return table


def test_claims_hold_when_the_shares_move_as_the_study_says():
    rng = np.random.default_rng(0)
    before = role_table(rng)
    after = before.copy()
    after[["match", "match_excess"]] += 0.1
    after[["self", "sep"]] -= 0.05
    after["cls"] += 0.001  # a sure but tiny change
    delta = deltas(before, after, heads=[(0, 0), (0, 1)], n_boot=200)
    assert delta.loc[delta["matching"], "head"].tolist() == [0, 1] * len(CLAIMS)
    table = claims_table(delta)
    assert table["scope"].tolist() == ["term-matching heads", "all heads"] * len(CLAIMS)
    holds = table.set_index(["metric", "scope"])["holds"]
    assert (holds.drop(index="cls", level=0) == "holds").all() and (holds.loc["cls"] == "not claimed").all()
    row = table.set_index(["metric", "scope"]).loc[("self", "all heads")]
    assert row["delta"] == pytest.approx(-0.05) and row["relative"] == pytest.approx(-0.05 / row["before"])


def test_claims_opposite_tiny_and_unclear():
    rng = np.random.default_rng(1)
    before = role_table(rng)
    after = before.copy()
    after["match"] -= 0.1  # the opposite
    after["self"] -= 0.001  # sure but under 5% of the level
    after["sep"] += rng.normal(0, 0.05, len(after))  # noise
    holds = claims_table(deltas(before, after, heads=[(0, 0)], n_boot=200)).set_index(["metric", "scope"])["holds"]
    assert holds[("match", "all heads")] == "opposite"
    assert holds[("self", "all heads")] == "holds, tiny"
    assert holds[("sep", "term-matching heads")] == "no change distinguishable from zero"


def test_no_op_table_and_verdict_name_the_sink():
    rng = np.random.default_rng(2)
    before = role_table(rng)
    after = before.copy()
    after["cls"] = 0.6  # every head parks on [CLS] after fine-tuning
    no_op = no_op_table(before, after)
    assert no_op["model"].tolist() == ["pretrained", "fine-tuned"]
    assert no_op.loc[1, "heads_cls_over_sep"] == 3 and no_op.loc[1, "cls"] == pytest.approx(0.6)
    text = verdict(claims_table(deltas(before, after, heads=[(0, 0)], n_boot=100)), no_op)
    assert "[CLS] plays the no-op role" in text and "3 of 3 heads" in text
    assert text.count("\n- ") == len(CLAIMS)  # one line per claim and one on the no-op token
