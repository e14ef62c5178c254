"""The statistics every reported effect stands on: paired bootstrap, McNemar, Holm, draw intervals, verdicts."""

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from headlab.core import stats
from headlab.core.stats import (
    at_floor,
    boot_means,
    bootstrap_weights,
    by_interval,
    draw_counts,
    draws_ratio_of_means,
    equivalent,
    holm,
    kappa_contrast,
    kappa_lost,
    kappa_lost_point,
    mcnemar,
    mean_interval,
    modal_share,
    quadratic_kappa,
    relative_change,
    versus_random,
)


def test_bootstrap_weights_resample_n_examples_each_and_repeat_with_the_seed():
    w = bootstrap_weights(50, 200, seed=3)
    assert w.shape == (200, 50) and (w.sum(axis=1) == 50).all()
    assert np.array_equal(w, bootstrap_weights(50, 200, seed=3)) and not np.array_equal(
        w, bootstrap_weights(50, 200, 4)
    )


def test_zero_resamples_are_refused_not_an_empty_interval():
    with pytest.raises(ValueError, match="n_boot must be at least 1"):
        bootstrap_weights(50, 0, seed=3)


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
    assert result.rel_change == pytest.approx(-60 / base.sum())
    assert result.lo < result.rel_change < result.hi < 0
    assert relative_change(base, base, n_boot=200).rel_change == 0
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
    assert two_stage.rel_change == pytest.approx(pairs_only.rel_change)
    assert two_stage.interval == "draws and pairs" and pairs_only.interval == "pairs"
    assert (two_stage.hi - two_stage.lo) > 2 * (pairs_only.hi - pairs_only.lo)
    assert two_stage.lo < two_stage.lo90 < two_stage.rel_change < two_stage.hi90 < two_stage.hi
    # the draws' spread dominates, so the t interval takes the draws' few degrees of freedom, not a normal quantile
    assert 9 <= two_stage.df < 20


def test_a_replicate_whose_baseline_got_nothing_right_is_left_out_not_a_nan_interval():
    base = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])  # many resamples of 8 pairs miss the one right answer
    named, draws = np.zeros(8), np.tile(base, (2, 1))
    versus = versus_random(named, draws, base, n_boot=200)
    assert versus["difference"] == -1.0 and np.isfinite([versus["difference_lo"], versus["difference_hi"]]).all()


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
    assert same.df == 299 and one.df == float("inf")
    assert same.hi - same.lo == pytest.approx(one.hi - one.lo, rel=0.05)
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


def textbook_kappa(predicted, gold, weights=None, n_grades=5):
    """Quadratic kappa the textbook way: 1 - sum(w * observed) / sum(w * expected) over the confusion matrix."""
    observed = np.zeros((n_grades, n_grades))
    np.add.at(observed, (np.asarray(predicted) - 1, np.asarray(gold) - 1), 1 if weights is None else weights)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    w = np.subtract.outer(np.arange(n_grades), np.arange(n_grades)) ** 2 / (n_grades - 1) ** 2
    return 1 - (w * observed).sum() / (w * expected).sum()


def test_quadratic_kappa_matches_hand_computed_values_and_the_confusion_matrix_formula():
    # by hand: disagreement mean (0 + 1 + 0) / 3 = 1/3; chance var p + var g + (mean p - mean g)^2 = 2/3 + 8/9 + 1/9
    assert quadratic_kappa([1, 2, 3], [1, 3, 3]) == pytest.approx(1 - (1 / 3) / (15 / 9)) == pytest.approx(0.8)
    assert quadratic_kappa([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]) == pytest.approx(-1.0)  # reversed: worse than chance
    assert quadratic_kappa([1, 1, 5, 5], [1, 5, 1, 5]) == pytest.approx(0.0)  # independent
    rng = np.random.default_rng(0)
    for _ in range(20):
        gold = rng.integers(1, 6, 60)
        predicted = np.clip(gold + rng.integers(-2, 3, 60), 1, 5)
        counts = rng.integers(0, 4, 60)
        assert quadratic_kappa(predicted, gold) == pytest.approx(textbook_kappa(predicted, gold))
        assert quadratic_kappa(predicted, gold, weights=counts) == pytest.approx(
            textbook_kappa(predicted, gold, counts)
        )


def test_quadratic_kappa_equals_sklearn_on_the_five_grades():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    gold = rng.integers(1, 6, 200)
    predicted = np.clip(gold + rng.integers(-1, 2, 200), 2, 4)  # grades 1 and 5 never predicted
    counts = rng.integers(0, 3, 200)
    grades = [1, 2, 3, 4, 5]  # sklearn's weights count label positions: name every grade
    assert quadratic_kappa(predicted, gold) == pytest.approx(
        metrics.cohen_kappa_score(predicted, gold, labels=grades, weights="quadratic")
    )
    assert quadratic_kappa(predicted, gold, weights=counts) == pytest.approx(
        metrics.cohen_kappa_score(predicted, gold, labels=grades, weights="quadratic", sample_weight=counts)
    )


def test_quadratic_kappa_is_0_for_a_constant_predictor_1_for_a_perfect_one_and_never_nan():
    gold = np.array([1, 2, 2, 3, 5, 4, 4])
    assert quadratic_kappa(gold, gold) == 1.0
    for grade in range(1, 6):
        assert quadratic_kappa(np.full(7, grade), gold) == 0.0
    assert quadratic_kappa([3, 3, 3], [3, 3, 3]) == 0.0  # 0/0: a constant predictor, defined as 0
    assert quadratic_kappa([1, 2, 3], [3, 3, 3]) == 0.0  # constant gold: no covariance
    with pytest.raises(ValueError, match="whole numbers from 0"):
        quadratic_kappa([-1, 1, 2], [1, 2, 3])  # no scale has a grade below 0
    with pytest.raises(ValueError, match="whole numbers from 0"):
        quadratic_kappa([1.0, np.nan, 2.0], [1, 2, 3])
    with pytest.raises(ValueError, match="whole numbers from 0"):
        quadratic_kappa([1.5, 1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="positive total"):
        quadratic_kappa([1, 2], [1, 2], weights=[0, 0])
    with pytest.raises(ValueError, match="same pairs"):
        quadratic_kappa([1, 2], [1, 2, 3])


def test_kappa_weights_count_a_pair_as_often_as_repeating_it():
    rng = np.random.default_rng(2)
    gold = rng.integers(1, 6, 40)
    predicted = np.clip(gold + rng.integers(-1, 2, 40), 1, 5)
    counts = rng.integers(0, 4, 40)  # 0 drops a pair
    repeated = quadratic_kappa(np.repeat(predicted, counts), np.repeat(gold, counts))
    assert quadratic_kappa(predicted, gold, weights=counts) == pytest.approx(repeated, abs=1e-12)
    assert quadratic_kappa(predicted, gold, weights=np.ones(40)) == quadratic_kappa(predicted, gold)


def _graded(n=500, seed=3):
    """Gold grades, an unmasked model that mostly agrees, and a worse masked one."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(1, 6, n)
    base = np.clip(gold + rng.integers(-1, 2, n), 1, 5)
    masked = np.where(rng.random(n) < 0.4, rng.integers(1, 6, n), base)
    return gold, base, masked


def test_kappa_lost_point_is_the_closed_form_and_its_interval_covers_it():
    gold, base, masked = _graded()
    draws = np.stack([masked, np.roll(masked, 7), base])
    result = kappa_lost(draws, base, gold, n_boot=500)
    kappas = [quadratic_kappa(d, gold) for d in draws]
    assert result["kappa_base"] == quadratic_kappa(base, gold)
    assert result["kappa_masked"] == pytest.approx(np.mean(kappas))
    assert result["kappa_lost"] == pytest.approx(1 - np.mean(kappas) / quadratic_kappa(base, gold))
    assert result["kappa_lost_lo"] < result["kappa_lost"] < result["kappa_lost_hi"] and result["kappa_reason"] == ""
    assert result["kappa_masked_lo"] < result["kappa_masked"] < result["kappa_masked_hi"]
    assert result["kappa_base_lo"] < result["kappa_base"] < result["kappa_base_hi"]
    # over draws: a t interval on the replicates' SD with the Welch–Satterthwaite df
    t = sps.t.ppf(0.975, result["kappa_df"])
    assert 2 <= result["kappa_df"] <= 499
    assert result["kappa_lost_hi"] - result["kappa_lost_lo"] == pytest.approx(2 * t * result["kappa_lost_se"])


def test_kappa_lost_replicates_recompute_both_kappas_on_the_accuracy_intervals_pairs_and_draws():
    """Replicate b is kappa on bootstrap_weights' row b (the pairs relative_change resamples) for the base and for
    each draw, the draws weighted by draw_counts' row b: rebuilt here one replicate at a time."""
    gold, base, masked = _graded(n=80)
    draws = np.stack([masked, np.roll(masked, 3), np.roll(masked, 11)])
    n_boot = 60
    result = kappa_lost(draws, base, gold, n_boot=n_boot, seed=5, draw_seed=[5, 9])
    w, counts = bootstrap_weights(80, n_boot, 5), draw_counts(3, n_boot, [5, 9])
    lost = []
    for b in range(n_boot):
        per_draw = [quadratic_kappa(d, gold, weights=w[b]) for d in draws]
        lost.append(1 - np.dot(counts[b], per_draw) / 3 / quadratic_kappa(base, gold, weights=w[b]))
    # the draws' part of the variance is scaled by D / (D - 1): resampling 3 draws gives their variance over 3
    fixed = [
        1 - np.mean([quadratic_kappa(d, gold, weights=w[b]) for d in draws]) / quadratic_kappa(base, gold, weights=w[b])
        for b in range(n_boot)
    ]
    var_pairs = np.var(fixed, ddof=1)
    se = np.sqrt(var_pairs + (np.var(lost, ddof=1) - var_pairs) * 3 / 2)
    assert result["kappa_lost_se"] == pytest.approx(se)
    half = sps.t.ppf(0.975, result["kappa_df"]) * se
    assert result["kappa_lost_lo"] == pytest.approx(result["kappa_lost"] - half)
    single = kappa_lost(masked, base, gold, n_boot=n_boot, seed=5)  # one mask: the percentile interval over pairs
    one = [
        1 - quadratic_kappa(masked, gold, weights=w[b]) / quadratic_kappa(base, gold, weights=w[b])
        for b in range(n_boot)
    ]
    assert single["kappa_lost_lo"] == pytest.approx(np.quantile(one, 0.025)) and single["kappa_df"] == np.inf


def test_the_denominator_is_resampled_so_an_unchanged_model_loses_exactly_nothing():
    """Masked = unmasked: every replicate loses 0. Holding kappa_base at its point would leave the numerator's
    resampling noise in the interval."""
    gold, base, _ = _graded()
    result = kappa_lost(base, base, gold, n_boot=500)
    assert [result[k] for k in ("kappa_lost", "kappa_lost_lo", "kappa_lost_hi", "kappa_lost_se")] == [0.0] * 4
    resampled = [quadratic_kappa(base, gold, weights=w) for w in bootstrap_weights(len(gold), 500, 0)]
    fixed = 1 - np.array(resampled) / result["kappa_base"]
    assert np.quantile(fixed, 0.975) - np.quantile(fixed, 0.025) > 0.02  # what a fixed denominator would print


def test_disagreeing_draws_widen_the_kappa_interval(monkeypatch):
    gold, base, masked = _graded(n=600)
    draws = np.stack([base] * 5 + [masked] * 5)  # half the draws lose nothing, half lose much
    two_stage = kappa_lost(draws, base, gold, n_boot=1000)
    monkeypatch.setattr(stats, "draw_counts", lambda n_draws, n_boot, seed: np.ones((n_boot, n_draws)))  # pairs only
    pairs_only = kappa_lost(draws, base, gold, n_boot=1000)
    assert two_stage["kappa_lost"] == pairs_only["kappa_lost"]
    width = two_stage["kappa_lost_hi"] - two_stage["kappa_lost_lo"]
    assert width > 2 * (pairs_only["kappa_lost_hi"] - pairs_only["kappa_lost_lo"])


def test_kappa_lost_is_never_clipped_and_is_nan_with_a_reason_without_kappa_to_lose():
    gold, base, _ = _graded()
    worse_than_chance = kappa_lost(6 - gold, base, gold, n_boot=300)
    assert worse_than_chance["kappa_lost"] > 1 and worse_than_chance["kappa_lost_hi"] > 1
    constant = kappa_lost(base, np.full_like(base, 3), gold, n_boot=300)
    assert constant["kappa_base"] == 0.0 and np.isnan(constant["kappa_lost"]) and np.isnan(constant["kappa_lost_lo"])
    assert "no agreement beyond chance" in constant["kappa_reason"]
    assert constant["kappa_masked"] == quadratic_kappa(base, gold)  # the masked kappa is still a number
    weak_gold = np.array([1, 5] * 10)
    weak = np.array([1, 5] * 6 + [5, 1] * 4)  # 12 of 20 agree: kappa 0.2, often <= 0 on a resample
    result = kappa_lost(weak, weak, weak_gold, n_boot=300)
    assert result["kappa_base"] == pytest.approx(0.2) and np.isnan(result["kappa_lost_hi"])
    assert re.fullmatch(r"unmasked kappa <= 0 in \d+ of 300 bootstrap replicates", result["kappa_reason"])


def test_modal_share_and_the_floor_are_decided_from_the_predictions_and_say_what_was_checked():
    assert modal_share([1, 1, 1, 2]) == 0.75
    assert modal_share([[3, 3, 3, 3], [1, 2, 2, 2]]) == 0.875  # the mean over draws
    nearly_constant = np.array([3] * 49 + [4])
    assert at_floor(nearly_constant, kappa_masked_lo=0.1) == (True, "98% of pairs get one grade")
    assert at_floor(np.array([3] * 19 + [4]), 0.1) == (True, "95% of pairs get one grade")  # the limit counts
    spread = np.array([1, 2, 3, 4, 5, 3, 3, 2, 4, 1])
    assert at_floor(spread, kappa_masked_lo=-0.01) == (True, "κ interval reaches 0")
    assert at_floor(spread, kappa_masked_lo=0.2) == (False, "κ interval above 0; 30% of pairs get the commonest grade")
    assert at_floor(np.full(10, 2), 0.0) == (True, "κ interval reaches 0; 100% of pairs get one grade")
    with pytest.raises(ValueError, match="NaN"):
        at_floor(spread, float("nan"))


def test_kappa_contrast_is_a_signed_sum_of_shares_lost_with_one_bootstrap_for_all():
    rng = np.random.default_rng(4)
    gold = rng.integers(1, 6, 300)
    base = np.where(rng.random(300) < 0.8, gold, rng.integers(1, 6, 300))
    worse = np.where(rng.random((4, 300)) < 0.5, gold, rng.integers(1, 6, (4, 300)))  # 4 draws
    slightly = np.where(rng.random(300) < 0.7, gold, rng.integers(1, 6, 300))  # one mask
    a, b = kappa_lost(worse, base, gold, 500, 1), kappa_lost(slightly, base, gold, 500, 1)
    gap = kappa_contrast([worse, slightly], [1.0, -1.0], base, gold, 500, 1)
    assert gap["contrast"] == pytest.approx(a["kappa_lost"] - b["kappa_lost"]) and gap["reason"] == ""
    assert gap["lo"] < gap["contrast"] < gap["hi"] and gap["n_draws"] == 4 and 3 <= gap["df"] < 300
    # paired: what the two conditions share cancels, so the difference is narrower than the two intervals combined
    assert gap["hi"] - gap["lo"] < (a["kappa_lost_hi"] - a["kappa_lost_lo"]) + (b["kappa_lost_hi"] - b["kappa_lost_lo"])
    mean = kappa_contrast([worse, slightly], [0.5, 0.5], base, gold, 500, 1)
    assert mean["contrast"] == pytest.approx((a["kappa_lost"] + b["kappa_lost"]) / 2)
    same = kappa_contrast([slightly, slightly], [1.0, -1.0], base, gold, 500, 1)
    assert (same["contrast"], same["lo"], same["hi"], same["df"]) == (0.0, 0.0, 0.0, math.inf)
    flat = kappa_contrast([slightly], [1.0], np.full(300, 3), gold, 500, 1)  # a constant model has no kappa to lose
    assert math.isnan(flat["contrast"]) and "no agreement beyond chance" in flat["reason"]
    with pytest.raises(ValueError, match="one sign per condition"):
        kappa_contrast([worse], [1.0, -1.0], base, gold)


def test_a_model_within_ten_points_of_its_majority_grade_is_warned_of_as_near_its_floor():
    from headlab.core.stats import Floor

    assert Floor(0.55, 0.25, 1379).near_floor_warning() == ""
    warning = Floor(0.398, 0.319, 1361).near_floor_warning()
    assert "near its floor" in warning and "7.9 points" in warning and "1361 pairs" in warning


def test_a_mean_ratio_over_draws_resamples_the_draws_where_the_pairs_agree():
    """Each draw moves every pair alike (no spread between pairs): every replicate is the mean of the resampled
    draws' values, exactly; with one value for every draw, no spread at all."""
    values = np.array([0.1, 0.4, 0.2, 0.9])
    numerators, denominator = np.repeat(values[:, None], 30, axis=1) * 2.0, np.full(30, 2.0)
    weights, counts = bootstrap_weights(30, 500, 1), draw_counts(4, 500, 1)
    point, boot = draws_ratio_of_means(numerators, denominator, weights, counts)
    assert point == pytest.approx(values.mean())
    np.testing.assert_allclose(boot, counts @ values / 4)
    assert boot.std() > 0.05
    _, flat = draws_ratio_of_means(np.full((4, 30), 3.0), denominator, weights, counts)
    np.testing.assert_allclose(flat, 1.5)


def test_the_point_of_kappa_lost_is_kappa_losts_own_without_a_bootstrap():
    rng = np.random.default_rng(3)
    gold = rng.integers(1, 6, 300)
    base = np.where(rng.random(300) < 0.7, gold, rng.integers(1, 6, 300))
    masked = np.stack([np.where(rng.random(300) < 0.5, gold, rng.integers(1, 6, 300)) for _ in range(3)])
    for predicted in (masked[0], masked):  # one mask, and draws x pairs
        assert kappa_lost_point(predicted, base, gold) == pytest.approx(
            kappa_lost(predicted, base, gold, 200)["kappa_lost"]
        )
    assert math.isnan(kappa_lost_point(masked, np.full(300, 3), gold))  # a constant base: no kappa scale
