"""headlab.pages.patching: restored shares with their intervals, overlap against chance, rank agreement and the
specificity of a mask's cost to pairs that share terms."""

import numpy as np
import pandas as pd
import pytest

from headlab.pages.patching import ablation_specificity, rank_correlation, restored_shares, top_heads, top_overlap


def _table(n=200, seed=0):
    rng = np.random.default_rng(seed)
    source = rng.uniform(3, 5, n)
    target = source - rng.uniform(0.5, 1.5, n)
    gap = source - target
    rows = {
        "source": source,
        "target": target,
        "0.0": target,
        "0.1": target + gap,
        "1.0": target + 0.5 * gap,
        "1.1": target + 0.1 * gap + rng.normal(0, 0.2, n),
    }
    return pd.concat(
        [pd.DataFrame({"patch": k, "example": np.arange(n), "expected": v, "grade_logit": v}) for k, v in rows.items()]
    )


def test_a_patch_restores_its_share_of_the_difference_with_an_interval():
    shares = restored_shares(_table(), n_boot=500).set_index("patch")
    assert shares.loc["0.0", "restored"] == pytest.approx(0.0)
    assert shares.loc["0.1", "restored"] == pytest.approx(1.0) and shares.loc["1.0", "restored"] == pytest.approx(0.5)
    noisy = shares.loc["1.1"]
    assert noisy.lo < noisy.restored < noisy.hi and noisy.lo < 0.1 < noisy.hi and noisy.hi - noisy.lo < 0.2
    assert (shares.loc["1.0", ["layer", "head"]] == [1, 0]).all()
    assert top_heads(shares.reset_index(), k=2) == [(0, 1), (1, 0)]


def test_a_contrast_that_moves_nothing_is_refused():
    table = _table()
    table.loc[table["patch"] == "target", "expected"] = table.loc[table["patch"] == "source", "expected"].to_numpy()
    with pytest.raises(ValueError, match="does not change the expected on average"):
        restored_shares(table, metric="expected")


def test_overlap_is_set_against_chance():
    result = top_overlap([(0, 1), (0, 2), (1, 3)], [(0, 1), (0, 2), (2, 2)], n_heads=72)
    assert result["shared"] == 2 and result["chance"] == pytest.approx(9 / 72) and result["p"] < 0.01
    assert top_overlap([(0, 1)], [(2, 2)], 72)["p"] == pytest.approx(1.0)


def test_rank_correlation_of_two_scores():
    rng = np.random.default_rng(0)
    a = rng.normal(size=72)
    same = rank_correlation(a, a + rng.normal(0, 0.1, 72), n_boot=300)
    assert same["rho"] > 0.9 and same["lo"] > 0.8
    none = rank_correlation(a, rng.normal(size=72), n_boot=300)
    assert none["lo"] < 0 < none["hi"]


def _grades_and_logits(rng, n):
    """Gold grades, sharing mostly at high grades, and an unablated grade logit that rises with the grade and, within
    a grade, with sharing (a model that uses term overlap)."""
    grades = rng.integers(1, 6, n)
    shares = rng.random(n) < np.where(grades >= 4, 0.8, 0.3)
    base = grades + 0.8 * shares + rng.normal(0, 0.5, n)
    return grades, shares, base


def test_an_ablation_that_takes_only_from_sharing_pairs_is_specific_against_random_heads():
    rng = np.random.default_rng(0)
    grades, shares, base = _grades_and_logits(rng, 1500)
    named = np.where(shares, -1.0, 0.0) + rng.normal(0, 0.5, 1500)
    drawn = rng.normal(0, 0.5, (4, 1500))
    result = ablation_specificity(np.vstack([named, drawn]), base, shares, grades, n_boot=400)
    assert result["hi"] < -1 and abs(result["random"]) < 0.2 and result["n_draws"] == 4
    assert result["difference"] == pytest.approx(result["named"] - result["random"])
    assert result["move_sharing"] < result["move_none"] and result["n_strata"] == 5


def test_a_pull_toward_the_average_is_not_specific_once_the_starting_logit_is_held():
    """Every ablation pulls each pair toward the average: pairs that share terms start higher within their grade and
    lose more, for named and random heads alike. Within grades alone that looks specific; at the same starting
    logit it is not, and against random heads it is not either."""
    rng = np.random.default_rng(1)
    grades, shares, base = _grades_and_logits(rng, 2000)
    pull = lambda strength: -strength * (base - base.mean()) + rng.normal(0, 0.3, 2000)  # noqa: E731
    moved = np.vstack([pull(0.6), *(pull(0.3) for _ in range(4))])
    named_alone = ablation_specificity(moved[:1], base, shares, grades, n_boot=400)
    assert named_alone["named_lo"] < 0 < named_alone["named_hi"]  # the starting logit held: no term effect left
    assert np.isnan(named_alone["difference"])  # no random sets: nothing to judge against
    naive = [moved[0][(grades == g) & shares].mean() - moved[0][(grades == g) & ~shares].mean() for g in range(1, 6)]
    assert max(naive) < -0.2  # within grades alone, it would have looked specific
    judged = ablation_specificity(moved, base, shares, grades, n_boot=400)
    assert judged["lo"] < 0 < judged["hi"]


def test_grades_too_small_to_compare_are_left_out_and_counted():
    rng = np.random.default_rng(2)
    grades, shares, base = _grades_and_logits(rng, 600)
    moved = rng.normal(0, 1, (3, 600))
    few = ablation_specificity(moved, base, shares, grades, n_boot=100, min_group=60)
    assert few["n_strata"] < 5 and few["n_left_out"] == 600 - few["n_sharing"] - few["n_none"] > 0
    none = ablation_specificity(moved, base, shares, grades, n_boot=100, min_group=5000)
    assert np.isnan(none["difference"]) and none["n_left_out"] == 600


def test_a_contrast_that_does_not_move_the_metric_its_way_is_gated():
    from headlab.pages.patching import gap_moves

    assert gap_moves({"gap_lo": 0.1, "gap_hi": 0.5}, 1) and not gap_moves({"gap_lo": -0.1, "gap_hi": 0.5}, 1)
    assert gap_moves({"gap_lo": -0.5, "gap_hi": -0.1}, -1) and not gap_moves({"gap_lo": 0.1, "gap_hi": 0.5}, -1)


def test_a_patch_against_random_draws_covers_pairs_and_draws():
    from headlab.pages.patching import restored_against_draws

    table = _table()
    rng = np.random.default_rng(2)
    wide = table.pivot(index="example", columns="patch", values="expected")
    gap = wide["source"] - wide["target"]
    draws = []
    for d in range(20):
        name = f"draw{d}"
        share = rng.uniform(0.0, 0.2)
        draws.append(pd.DataFrame({"patch": name, "example": wide.index, "expected": wide["target"] + share * gap}))
    table = pd.concat([table, *draws])
    result = restored_against_draws(table, "1.0", [f"draw{d}" for d in range(20)], n_boot=500, metric="expected")
    assert result["tested"] == pytest.approx(0.5) and 0.0 < result["draws_mean"] < 0.2
    assert result["difference"] == pytest.approx(result["tested"] - result["draws_mean"])
    assert 0.25 < result["lo"] < result["difference"] < result["hi"] < 0.5  # wider than the pairs alone give
    assert result["n_draws"] == 20
    assert result["gap"] == pytest.approx(gap.mean())
    assert 0.5 < result["gap_lo"] < result["gap"] < result["gap_hi"] < 1.5


def test_a_constant_score_has_no_rank_correlation():
    result = rank_correlation(np.zeros(16), np.arange(16.0), n_boot=50)
    assert np.isnan(result["rho"]) and np.isnan(result["lo"]) and result["n_heads"] == 16


def _with_random_sets(table, shares, seed=2):
    wide = table.pivot(index="example", columns="patch", values="grade_logit")
    gap = wide["source"] - wide["target"]
    rng = np.random.default_rng(seed)
    extra = [
        pd.DataFrame({"patch": f"draw{d}", "example": wide.index, "grade_logit": wide["target"] + s * gap})
        for d, s in enumerate(rng.uniform(*shares, 10))
    ]
    return pd.concat([table, *extra])


def test_draws_of_the_replacement_words_are_averaged_and_widen_the_interval():
    from headlab.pages.patching import restored_against_draws

    names = [f"draw{d}" for d in range(10)]
    one = _with_random_sets(_table(), (0.0, 0.1))
    single = restored_against_draws(one, "1.0", names, n_boot=400)
    twice = restored_against_draws([one, one], "1.0", names, n_boot=400)
    assert twice["difference"] == pytest.approx(single["difference"]) and twice["n_replacements"] == 2
    other = one.copy()
    wide = one.pivot(index="example", columns="patch", values="grade_logit")
    moved = (wide["target"] + 0.9 * (wide["source"] - wide["target"])).to_numpy()
    other.loc[other["patch"] == "1.0", "grade_logit"] = moved  # another draw of words: the heads restore 90%
    both = restored_against_draws([one, other], "1.0", names, n_boot=400)
    assert both["tested"] == pytest.approx(0.7)
    assert both["hi"] - both["lo"] > 3 * (single["hi"] - single["lo"])  # which words were drawn is in the interval
    with pytest.raises(ValueError, match="the same pairs"):
        restored_against_draws([one, one[one["example"] > 0]], "1.0", names, n_boot=50)
