"""The statistics every reported effect stands on: paired bootstrap, McNemar, Holm, draw intervals, verdicts."""

import numpy as np
import pytest

from headlab.core.stats import (
    boot_means,
    bootstrap_weights,
    by_interval,
    draw_counts,
    equivalent,
    holm,
    mcnemar,
    mean_interval,
    relative_change,
    versus_random,
)


def test_bootstrap_weights_resample_n_examples_each_and_repeat_with_the_seed():
    w = bootstrap_weights(50, 200, seed=3)
    assert w.shape == (200, 50) and (w.sum(axis=1) == 50).all()
    assert np.array_equal(w, bootstrap_weights(50, 200, seed=3)) and not np.array_equal(
        w, bootstrap_weights(50, 200, 4)
    )


def test_bootstrap_weights_are_drawn_once_and_cannot_be_changed_by_a_caller(monkeypatch):
    from headlab.core import stats

    fresh = stats._bootstrap_weights.__wrapped__(60, 100, 7)
    first = bootstrap_weights(60, 100, 7)
    assert bootstrap_weights(60, 100, 7) is first and np.array_equal(first, fresh)  # the same resamples, reused
    with pytest.raises(ValueError):
        first[0, 0] = 5.0
    monkeypatch.setattr(stats, "CACHED_WEIGHTS", 100)
    big = bootstrap_weights(60, 100, 7)
    assert big is not first and np.array_equal(big, fresh)  # too big to keep: drawn again, the same


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


def test_random_draws_widen_the_interval_two_stage_bootstrap():
    """Which heads were drawn is chance too: draws that disagree must widen the interval, not vanish in their mean."""
    rng = np.random.default_rng(1)
    base = (rng.random(600) < 0.6).astype(int)
    draws = np.tile(base, (10, 1))
    for d in range(5):  # half the draws lose 120 right answers, half lose none
        draws[d, np.flatnonzero(base)[:120]] = 0
    two_stage = relative_change(draws, base, n_boot=1000)
    pairs_only = relative_change(draws.mean(axis=0), base, n_boot=1000)
    assert two_stage["rel_change"] == pytest.approx(pairs_only["rel_change"])
    assert two_stage["interval"] == "draws and pairs" and pairs_only["interval"] == "pairs"
    assert (two_stage["hi"] - two_stage["lo"]) > 2 * (pairs_only["hi"] - pairs_only["lo"])
    assert two_stage["lo"] < two_stage["lo90"] < two_stage["rel_change"] < two_stage["hi90"] < two_stage["hi"]
    # the draws' spread dominates, so the t interval takes the draws' few degrees of freedom, not a normal quantile
    assert 9 <= two_stage["df"] < 20


def test_named_heads_against_random_sets_is_a_paired_difference_with_the_draws_spread():
    rng = np.random.default_rng(3)
    base = (rng.random(800) < 0.6).astype(float)
    named = base.copy()
    named[np.flatnonzero(base)[:200]] = 0  # the named heads lose 200 right answers
    draws = np.tile(base, (20, 1))
    for d in range(20):
        draws[d, np.flatnonzero(base)[d * 5 : d * 5 + 10 * (d % 3)]] = 0  # random sets lose 0, 10 or 20
    versus = versus_random(named, draws, base, n_boot=500)
    expected = (named.mean() - draws.mean()) / base.mean()
    assert versus["difference"] == pytest.approx(expected)
    assert versus["difference_lo"] < expected < versus["difference_hi"] < 0 and versus["rank"] == 0
    assert versus["n_draws"] == 20 and 19 <= versus["df"] <= 799
    # the draws' spread is in the interval: the same mean with identical draws is narrower
    flat = versus_random(named, np.tile(draws.mean(axis=0), (20, 1)), base, n_boot=500)
    assert flat["difference"] == pytest.approx(expected)
    assert flat["difference_hi"] - flat["difference_lo"] < versus["difference_hi"] - versus["difference_lo"]


def test_one_draw_is_the_paired_bootstrap_and_identical_draws_add_no_width():
    rng = np.random.default_rng(2)
    base = (rng.random(300) < 0.5).astype(int)
    masked = base.copy()
    masked[:40] = 1
    one = relative_change(masked, base, n_boot=400)
    same = relative_change(np.tile(masked, (7, 1)), base, n_boot=400)
    # identical draws: no between-draw variance, so the pairs' degrees of freedom and the same width
    assert same["df"] == 299 and one["df"] == float("inf")
    assert same["hi"] - same["lo"] == pytest.approx(one["hi"] - one["lo"], rel=0.05)
    counts = draw_counts(7, 400, seed=0)
    assert counts.shape == (400, 7) and (counts.sum(axis=1) == 7).all() and draw_counts(1, 5, 0).tolist() == [[1]] * 5


def test_boot_means_resamples_draws_and_pairs_with_the_given_weights():
    values = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    w = bootstrap_weights(4, 300, seed=0)
    means = boot_means(values, w, draw_seed=0)
    assert means.shape == (300,) and 0 <= means.min() and means.max() <= 1
    np.testing.assert_allclose(boot_means(values[:1], w, 0), w @ values[0] / 4)


def test_equivalence_needs_the_whole_90_percent_interval_inside_the_margin():
    assert equivalent(-0.01, 0.015, margin=0.02)
    assert not equivalent(-0.03, 0.01, margin=0.02)  # cannot exclude a 3% loss: no claim of "no effect"
    assert not equivalent(0.0, 0.02, margin=0.02)
