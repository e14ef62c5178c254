"""The design planner (issue #64, item 3): a row's MDE projected at more pairs or draws, from its spread alone."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from headlab.book.calibration import REPO
from headlab.book.power import DRAWS_CAP, Design, Purchase, power_table, projected_mde, purchases, underpowered_counts
from headlab.core.stats import draws_df
from headlab.judging.verdicts import ALPHA, each_level, judge, minimum_detectable, quantile
from headlab.pages.claims import STUDY_CLAIMS

LOSS = STUDY_CLAIMS["cls_head.masking_hurts"]  # a directional claim on pairs alone
NONE = STUDY_CLAIMS["term_matching.random_no_change"]  # a no-effect claim over random draws


def test_at_its_own_design_the_projection_is_the_verdicts_mde():
    """Planned as built, a row's MDE is the one judge gives it: the planner reads the verdict's own rule."""
    for df, design in ((math.inf, Design(690, 1)), (40.0, Design(690, 15)), (60.0, Design(1379, 10, 72))):
        half = float(quantile(0.975, df)) * 0.03
        judged = judge(
            LOSS,
            -0.05,
            -0.05 - half,
            -0.05 + half,
            df=df,
            search=design.search,
            n_draws=design.n_draws,
            n_examples=design.n_examples,
        )
        assert projected_mde(LOSS, -0.05 - half, -0.05 + half, df, design, design) == pytest.approx(judged.mde)


def test_the_split_is_recovered_from_the_rows_df_and_each_part_scales_with_its_own_evidence():
    """A row built from a known pairs part and draws part: with pairs a thousandfold only the draws part is left,
    with draws a thousandfold only the pairs part, each read at its own Welch–Satterthwaite df."""
    var_pairs, var_draws, n, draws = 0.012**2, 0.02**2, 690, 15
    total = var_pairs + var_draws
    df = float(draws_df(total, var_pairs, draws, n))
    assert draws - 1 < df < n - 1
    half = float(quantile(0.975, df)) * math.sqrt(total)
    built = Design(n, draws)
    at = dict(each=each_level(NONE), weakest_of=1)
    for planned, left_pairs, left_draws in (
        (Design(n * 1000, draws), var_pairs / 1000, var_draws),
        (Design(n, draws * 1000), var_pairs, var_draws / 1000),
    ):
        kept = left_pairs + left_draws
        new_df = float(draws_df(kept, left_pairs, planned.n_draws, planned.n_examples))
        width = float(quantile(0.975, new_df)) * math.sqrt(kept)
        design = dict(n_draws=planned.n_draws, n_examples=planned.n_examples)
        expected = float(minimum_detectable(NONE, -width, width, new_df, **at, **design))
        assert projected_mde(NONE, -half, half, df, built, planned) == pytest.approx(expected, rel=1e-3)


def test_a_row_that_kept_no_split_is_planned_at_its_worse_end():
    """At df = D - 1 the row does not say how its variance splits: more pairs alone buy nothing (were the draws to
    carry it all, the pairs would change nothing), and more draws alone no more than the pairs' end allows (were the
    pairs to carry it all, it would be read at their df)."""
    built, df = Design(690, 15), 14.0
    as_built = projected_mde(NONE, -0.1, 0.02, df, built, built)
    assert projected_mde(NONE, -0.1, 0.02, df, built, Design(2760, 15)) == pytest.approx(as_built)
    se = 0.06 / float(quantile(0.975, df))
    pairs_end = float(quantile(0.975, 689.0)) * se
    at_pairs_end = float(
        minimum_detectable(
            NONE, -pairs_end, pairs_end, 689.0, each=each_level(NONE), n_draws=60, n_examples=690, weakest_of=1
        )
    )
    drawn = projected_mde(NONE, -0.1, 0.02, df, built, Design(690, 60))
    assert at_pairs_end - 1e-9 <= drawn < as_built


def test_the_effect_never_enters_the_plan(tmp_path):
    """Every committed row moved by a constant (its interval's width kept) plans the same: only the spread enters."""
    rows = pd.read_csv(REPO / "results" / "scorecard.csv")
    for column in ("ours", "lo", "hi", "kappa_lost", "kappa_lost_lo", "kappa_lost_hi"):
        rows[column] = rows[column] + 0.013
    rows.to_csv(tmp_path / "scorecard.csv", index=False)
    moved, kept = power_table(tmp_path / "scorecard.csv"), power_table()
    columns = [c for c in kept.columns if c.startswith(("mde", "powered"))]
    pd.testing.assert_frame_equal(moved[columns], kept[columns])


def test_purchases_apply_only_where_the_design_allows_them():
    """Cross-fitting for a row measured on half the test pairs (twice the pairs) or chosen among candidates on its
    own pairs (one candidate); no dev pairs where the page chose on them, no pair purchase for other sentences."""
    half = purchases("term_matching.random_no_change", Design(690, 15), n_test=1379, n_dev=1500)
    assert half[Purchase.CROSS_FIT] == Design(1379, 15)
    assert half[Purchase.DEV_AND_TEST] == Design(2879, 15)
    assert half[Purchase.DRAWS] == Design(690, 15 * DRAWS_CAP)
    assert half[Purchase.ALL] == Design(2879, 15 * DRAWS_CAP)
    searched = purchases("layer_dependence.some_heads_improve", Design(1379, 1, 72), n_test=1379, n_dev=1500)
    assert searched[Purchase.CROSS_FIT] == Design(1379, 1, 1) and searched[Purchase.ALL] == Design(2879, 1, 1)
    whole = purchases("cls_head.masking_hurts", Design(1379, 1), n_test=1379, n_dev=1500)
    assert set(whole) == {Purchase.NONE, Purchase.DEV_AND_TEST, Purchase.ALL}
    pruned = purchases("pruning.keep_low_heads", Design(1379, 3), n_test=1379, n_dev=1500)
    assert Purchase.DEV_AND_TEST not in pruned and pruned[Purchase.ALL] == Design(1379, 3 * DRAWS_CAP)
    assert set(purchases("word_segmentation.single_head", Design(148, 1), n_test=1379, n_dev=1500)) == {Purchase.NONE}


def test_counts_take_every_row_not_powered_as_built_whatever_its_verdict():
    """A decisive row whose design is not powered is counted (a purchase extends it too); a powered one is not; a
    purchase that does not apply leaves a row as built."""
    powered = {p: pd.Series([False, False, False, True], dtype=object) for p in Purchase}
    powered[Purchase.ALL] = pd.Series([False, True, False, True], dtype=object)
    powered[Purchase.CROSS_FIT] = pd.Series([np.nan, False, False, True], dtype=object)
    table = pd.DataFrame(
        {
            "preset": ["a", "a", "a", "a"],
            "tally": ["study", "study", "ours", "study"],
            "verdict": ["holds", "underpowered", "underpowered", "cannot tell"],
            **{f"powered {p.value}": powered[p] for p in Purchase},
        }
    )
    counts = underpowered_counts(table)
    assert counts.loc["a", Purchase.NONE.value] == 2 and counts.loc["a", Purchase.ALL.value] == 1
    assert counts.loc["a", Purchase.CROSS_FIT.value] == 2


def test_on_the_committed_rows_as_built_is_each_rows_mde():
    """Every committed row planned at its own design gives the MDE its verdict printed (the planner and the rule
    read the same design), where it was judged at the level its family has now (a family changed by a newer rule
    moves the MDE of its rows until they are rebuilt), and results/power.csv is the table of the rows committed
    beside it."""
    table = power_table()
    rows = pd.read_csv(REPO / "results" / "scorecard.csv").set_index(["preset", "claim_id"])
    planned = rows.loc[list(zip(table["preset"], table["claim_id"]))]
    family = np.array([STUDY_CLAIMS[c].family for c in table["claim_id"]])
    level_now = 1 - ALPHA / (family * planned["search"].to_numpy())
    mde = planned["mde"].to_numpy()
    kept = np.isfinite(mde) & np.isclose(planned["level"].to_numpy(), level_now, rtol=0, atol=1e-6)  # 6 digits kept
    assert kept.sum() > 100
    np.testing.assert_allclose(table[f"mde {Purchase.NONE.value}"].to_numpy()[kept], mde[kept], rtol=1e-3)
    committed = pd.read_csv(REPO / "results" / "power.csv")  # docs/judging.md renders it: rewritten with the rows
    pd.testing.assert_frame_equal(committed, pd.read_csv(io.StringIO(table.to_csv(index=False, float_format="%.6g"))))
