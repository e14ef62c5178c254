"""headlab.findings.two_tower: conditions against the cross-encoder, the equivalence test and its three verdicts."""
import numpy as np
import pytest

from headlab.findings.claims import render
from headlab.findings.two_tower import (
    REFERENCE,
    claims,
    condition_table,
    equivalence,
    error_overlap,
    pretraining_note,
    verdict,
)

GRADES = np.array([1, 2, 3, 4, 5] * 40)


def _predictions(right_share: float, seed: int) -> np.ndarray:
    """Predictions right on about ``right_share`` of the pairs (wrong ones are off by one grade)."""
    rng = np.random.default_rng(seed)
    wrong = rng.random(len(GRADES)) > right_share
    return np.where(wrong, np.where(GRADES < 5, GRADES + 1, 1), GRADES)


def test_the_reference_row_changes_nothing_and_others_are_paired_against_it():
    predicted = {REFERENCE: _predictions(0.8, 0), "worse": _predictions(0.4, 1)}
    table = condition_table(predicted, GRADES, n_boot=300, study={"worse": -0.5}).set_index("label")
    assert table.loc[REFERENCE, "rel_change"] == 0 and np.isnan(table.loc[REFERENCE, "p_mcnemar"])
    worse = table.loc["worse"]
    assert worse.rel_change == pytest.approx(worse.accuracy / table.loc[REFERENCE, "accuracy"] - 1)
    assert worse.hi < 0 and worse.p_mcnemar < 0.001 and worse.study == -0.5
    assert worse.acc_lo < worse.accuracy < worse.acc_hi


def test_equivalence_holds_does_not_hold_or_cannot_tell():
    cross = _predictions(0.8, 0)
    same = equivalence({REFERENCE: cross, "a": cross, "b": cross}, GRADES, "a", "b", margin=0.02, n_boot=300)
    assert same["verdict"] == "holds" and same["difference"] == 0
    apart = equivalence({REFERENCE: cross, "a": cross, "b": _predictions(0.3, 2)}, GRADES, "a", "b", 0.02, 300)
    assert apart["verdict"] == "does not hold" and apart["lo"] > 0
    noisy = {REFERENCE: cross, "a": _predictions(0.6, 3), "b": _predictions(0.6, 4)}
    unsure = equivalence(noisy, GRADES, "a", "b", margin=0.01, n_boot=300)
    assert unsure["verdict"] == "cannot tell" and unsure["lo"] < 0 < unsure["hi"]
    conditions = condition_table(noisy, GRADES, n_boot=300)
    rows = claims(conditions, [unsure], "b", "a")
    assert [c.verdict for c in rows] == ["holds", "cannot tell"]  # a: 60% right against 80%; b about as bad
    text = verdict(conditions, [unsure], "b", "a")
    assert text.startswith(render(rows)) and "cannot be told" in text and "±1%" in text
    worse = condition_table({REFERENCE: cross, "a": _predictions(0.3, 5), "b": cross}, GRADES, n_boot=300)
    apart = equivalence({REFERENCE: cross, "a": _predictions(0.3, 5), "b": cross}, GRADES, "a", "b", 0.02, 300)
    assert [c.verdict for c in claims(worse, [apart], "b", "a")] == ["holds", "does not hold"]


def test_error_overlap_counts_every_pair_once():
    cross = np.array([1, 1, 0, 0, 0], dtype=bool)
    lexical = np.array([1, 0, 1, 0, 0], dtype=bool)
    table = error_overlap(cross, lexical).set_index("outcome")
    assert table["pairs"].tolist() == [1, 1, 1, 2] and table["share"].sum() == pytest.approx(1)
    assert table.attrs["lexical_right_on_cross_errors"] == pytest.approx(1 / 3)


def test_the_pretraining_confound_is_named_per_model():
    assert "two-tower" in pretraining_note("minilm") and "never as a two-tower" in pretraining_note("zh-char")
    assert "not recorded" in pretraining_note("/some/folder")
