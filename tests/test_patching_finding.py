"""headlab.findings.patching: restored shares with their intervals, overlap against chance, rank agreement and the
specificity of a mask's cost to pairs that share terms."""

import numpy as np
import pandas as pd
import pytest

from headlab.findings.patching import masking_specificity, rank_agreement, restored_shares, top_heads, top_overlap


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


def test_rank_agreement_of_two_scores():
    rng = np.random.default_rng(0)
    a = rng.normal(size=72)
    same = rank_agreement(a, a + rng.normal(0, 0.1, 72), n_boot=300)
    assert same["rho"] > 0.9 and same["lo"] > 0.8
    none = rank_agreement(a, rng.normal(size=72), n_boot=300)
    assert none["lo"] < 0 < none["hi"]


def test_a_mask_that_costs_only_where_terms_are_shared_is_specific():
    rng = np.random.default_rng(0)
    shares = rng.random(400) < 0.5
    base = np.ones(400)
    masked = np.where(shares, rng.random(400) > 0.4, 1.0)  # loses 40% of the sharing pairs, none of the others
    result = masking_specificity(masked, base, shares, n_boot=500)
    assert result["cost_none"] == 0 and result["difference"] == pytest.approx(result["cost_sharing"])
    assert result["hi"] < -0.25
    even = masking_specificity(np.where(rng.random(400) > 0.3, 1.0, 0.0), base, shares, n_boot=500)
    assert even["lo"] < 0 < even["hi"]


def test_a_cost_that_follows_the_grade_is_not_specific_within_grades():
    """Pairs that share terms are mostly high grades; a mask that costs only on high grades looks specific to shared
    terms overall and is not within grades."""
    rng = np.random.default_rng(1)
    grades = rng.integers(1, 6, 2000)
    shares = rng.random(2000) < np.where(grades >= 4, 0.9, 0.2)
    base = np.ones(2000)
    masked = np.where(grades >= 4, rng.random(2000) > 0.5, 1.0)
    pooled = masking_specificity(masked, base, shares, n_boot=500)
    assert pooled["hi"] < -0.15  # confounded: looks specific
    within = masking_specificity(masked, base, shares, n_boot=500, strata=grades)
    assert within["lo"] < 0 < within["hi"] and within["n_strata"] == 5 and within["n_left_out"] == 0
    few = masking_specificity(masked, base, shares, n_boot=100, strata=grades, min_group=300)
    assert few["n_strata"] < 5 and few["n_left_out"] > 0
    none = masking_specificity(masked, base, shares, n_boot=100, strata=grades, min_group=5000)
    assert np.isnan(none["difference"]) and none["n_left_out"] == 2000


def test_a_contrast_that_does_not_move_the_metric_its_way_is_gated():
    from headlab.findings.patching import gap_moves

    assert gap_moves({"gap_lo": 0.1, "gap_hi": 0.5}, 1) and not gap_moves({"gap_lo": -0.1, "gap_hi": 0.5}, 1)
    assert gap_moves({"gap_lo": -0.5, "gap_hi": -0.1}, -1) and not gap_moves({"gap_lo": 0.1, "gap_hi": 0.5}, -1)


def test_a_patch_against_random_draws_covers_pairs_and_draws():
    from headlab.findings.patching import restored_against_draws

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
    result = rank_agreement(np.zeros(16), np.arange(16.0), n_boot=50)
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
    from headlab.findings.patching import restored_against_draws

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
