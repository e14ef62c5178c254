"""The statistics every reported effect stands on: paired bootstrap, McNemar, Holm, draw intervals, verdicts."""
import numpy as np
import pytest

from headlab.stats import bootstrap_weights, by_interval, holm, mcnemar, mean_interval, relative_change


def test_bootstrap_weights_resample_n_examples_each_and_repeat_with_the_seed():
    w = bootstrap_weights(50, 200, seed=3)
    assert w.shape == (200, 50) and (w.sum(axis=1) == 50).all()
    assert np.array_equal(w, bootstrap_weights(50, 200, seed=3)) and not np.array_equal(w, bootstrap_weights(50, 200, 4))


def test_relative_change_is_exact_and_its_interval_covers_it():
    rng = np.random.default_rng(0)
    base = (rng.random(400) < 0.6).astype(int)
    masked = base.copy()
    masked[np.flatnonzero(base)[:60]] = 0  # 60 right answers lost
    result = relative_change(masked, base, n_boot=500)
    assert result["rel_change"] == pytest.approx(-60 / base.sum())
    assert result["lo"] < result["rel_change"] < result["hi"] < 0
    assert relative_change(base, base, n_boot=200)["rel_change"] == 0
    with pytest.raises(ValueError, match="cover 10 examples, baseline 400"):
        relative_change(masked[:10], base)


def test_mcnemar_counts_only_the_discordant_pairs():
    a = np.array([1] * 30 + [0] * 2 + [1] * 100, dtype=bool)
    b = np.array([0] * 30 + [1] * 2 + [1] * 100, dtype=bool)
    assert mcnemar(a, b) < 1e-6  # 30 against 2
    assert mcnemar(a, a) == 1.0
    assert mcnemar(a[:32], b[:32]) == pytest.approx(mcnemar(a, b))  # agreeing pairs change nothing


def test_holm_adjusts_in_order_and_never_above_one():
    adjusted = holm([0.01, 0.04, 0.03, 0.5])
    np.testing.assert_allclose(adjusted, [0.04, 0.09, 0.09, 0.5])
    assert (holm([0.9, 0.8]) <= 1).all()


def test_mean_interval_widens_with_spread_and_needs_two_draws():
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and lo < 2.0 < hi
    assert np.isnan(mean_interval([1.0])[1])


def test_by_interval_names_the_side_of_zero():
    words = ("up", "down", "unclear")
    assert [by_interval(lo, hi, *words) for lo, hi in ((0.1, 0.2), (-0.2, -0.1), (-0.1, 0.1))] == list(words)
