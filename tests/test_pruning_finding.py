"""Heads ordered by importance: the least important go first, within the layers asked for, at shares of all heads."""
import pandas as pd
import pytest

from headlab.findings.pruning import importance_order, importance_specs, least_important


def _importance():
    # 4 layers x 2 heads; the normalized score and the raw one disagree on purpose
    rows = [(0, 0, 0.9, 5.0), (0, 1, 0.1, 0.1), (1, 0, 0.5, 0.2), (1, 1, 0.3, 3.0),
            (2, 0, 0.2, 0.3), (2, 1, 0.8, 0.4), (3, 0, 0.1, 9.0), (3, 1, 0.7, 0.5)]
    return pd.DataFrame(rows, columns=["layer", "head", "importance", "importance_raw"])


def test_the_least_important_heads_go_first_ties_by_layer():
    assert importance_order(_importance())[:4] == [(0, 1), (3, 0), (2, 0), (1, 1)]
    assert importance_order(_importance(), "importance_raw")[:2] == [(0, 1), (1, 0)]
    assert least_important(_importance(), 0.25) == [(0, 1), (3, 0)]
    assert least_important(_importance(), 0.0) == []
    with pytest.raises(ValueError, match="share must lie in"):
        least_important(_importance(), 1.5)


def test_importance_masks_stay_in_their_half_at_shares_of_all_heads():
    imp = _importance()
    every = importance_specs(imp, 4, 2, [0.25, 0.5])
    assert [s.dropped for s in every] == [((0, 1), (3, 0)), ((0, 1), (1, 1), (2, 0), (3, 0))]
    lower = importance_specs(imp, 4, 2, [0.25], "lower")
    upper = importance_specs(imp, 4, 2, [0.25], "upper")
    assert lower[0].dropped == ((0, 1), (1, 1)) and upper[0].dropped == ((2, 0), (3, 0))
    assert lower[0].kind == "importance-lower" and lower[0].meta == {"share": 0.25, "where": "lower"}
    with pytest.raises(ValueError, match=r"share 0.75 means 6 heads, but 'lower' allows 4 of 8"):
        importance_specs(imp, 4, 2, [0.75], "lower")
