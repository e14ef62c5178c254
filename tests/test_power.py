"""The design planner (issue #64, item 3): a row's MDE projected at more pairs or draws, from its spread alone."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from headlab.core.stats import draws_df
from headlab.findings.calibration import REPO
from headlab.findings.claims import STUDY_CLAIMS
from headlab.findings.power import (
    DRAWS_CAP,
    Design,
    Purchase,
    power_table,
    projected_mde,
    purchases,
    underpowered_counts,
)
from headlab.findings.verdicts import each_level, judge, minimum_detectable, quantile

LOSS = STUDY_CLAIMS["cls_head.masking_hurts"]  # a directional claim on pairs alone
NONE = STUDY_CLAIMS["term_matching.random_no_change"]  # a no-effect claim over random draws
AT = dict(each=each_level(LOSS), weakest_of=1)


def test_at_its_own_design_the_projection_is_the_verdicts_mde():
    """Planned as built, a row's MDE is the one judge gives it: the planner reads the verdict's own rule."""
    for df, design in ((math.inf, Design(690, 1)), (14.0, Design(690, 15)), (40.0, Design(1379, 10))):
        half = float(quantile(0.975, df)) * 0.03
        judged = judge(
            LOSS, -0.05, -0.05 - half, -0.05 + half, df=df, n_draws=design.n_draws, n_examples=design.n_examples
        )
        assert projected_mde(LOSS, -0.05 - half, -0.05 + half, df, design, design, **AT) == pytest.approx(judged.mde)


def test_the_effect_never_enters_the_plan():
    """Moving the interval (not its width) leaves every projection alone: planning on the committed rows chooses no
    verdict."""
    built, planned = Design(690, 15), Design(1379, 60)
    at_zero = projected_mde(NONE, -0.04, 0.04, 20.0, built, planned, **AT)
    assert projected_mde(NONE, -0.14, -0.06, 20.0, built, planned, **AT) == pytest.approx(at_zero)


def test_pairs_shrink_the_pairs_part_and_draws_the_draws_part():
    """A row on pairs alone: k times the pairs take its MDE's distance past the size down by sqrt(k). A row whose
    draws carry all its variance (df = D - 1) gains nothing from pairs and gains from draws."""
    built = Design(690, 1)
    now = projected_mde(LOSS, -0.08, -0.02, math.inf, built, built, **AT)
    doubled = projected_mde(LOSS, -0.08, -0.02, math.inf, built, Design(1380, 1), **AT)
    assert doubled - LOSS.min_size == pytest.approx((now - LOSS.min_size) / math.sqrt(2))
    drawn = Design(690, 15)
    as_built = projected_mde(NONE, -0.1, 0.02, 14.0, drawn, drawn, **AT)
    assert projected_mde(NONE, -0.1, 0.02, 14.0, drawn, Design(2760, 15), **AT) == pytest.approx(as_built)
    assert projected_mde(NONE, -0.1, 0.02, 14.0, drawn, Design(690, 60), **AT) < as_built / 1.9


def test_the_planned_df_follows_the_split():
    """The planned design's df is Welch–Satterthwaite's over its own parts: more draws raise it."""
    se2, share = 0.02**2, 0.5
    built, planned = Design(690, 15), Design(690, 60)
    df_built = float(draws_df(se2, share * se2, built.n_draws, built.n_examples))
    var_pairs, var_draws = share * se2, (1 - share) * se2 * built.n_draws / planned.n_draws
    assert float(draws_df(var_pairs + var_draws, var_pairs, planned.n_draws, planned.n_examples)) > df_built


def test_purchases_apply_where_the_design_allows_them():
    """Cross-fitting only for a row measured on a half of the test pairs; more draws only for a row over draws;
    dev + test pools the dev pairs after cross-fitting."""
    half = purchases(Design(690, 15), n_test=1379, n_dev=1500)
    assert half[Purchase.CROSS_FIT] == Design(1379, 15)
    assert half[Purchase.DRAWS] == Design(690, 15 * DRAWS_CAP)
    assert half[Purchase.DEV_AND_TEST] == Design(round(1379 * 2879 / 1379), 15)
    whole = purchases(Design(1379, 1), n_test=1379, n_dev=1500)
    assert Purchase.CROSS_FIT not in whole and Purchase.DRAWS not in whole
    assert whole[Purchase.ALL] == Design(2879, 1)


def test_counts_leave_decided_rows_alone_and_fall_only_where_a_purchase_decides():
    """Only rows that read underpowered are counted; a purchase that does not apply leaves a row as built."""
    table = pd.DataFrame(
        {
            "preset": ["a", "a", "a", "b"],
            "tally": ["study", "study", "ours", "study"],
            "verdict": ["underpowered", "underpowered", "underpowered", "holds"],
            **{f"decided {p.value}": pd.Series([False] * 4, dtype=object) for p in Purchase},
        }
    )
    table.loc[1, f"decided {Purchase.ALL.value}"] = True
    table.loc[0, f"decided {Purchase.CROSS_FIT.value}"] = np.nan
    counts = underpowered_counts(table)
    assert counts.loc["a", Purchase.NONE.value] == 2 and counts.loc["a", Purchase.ALL.value] == 1
    assert counts.loc["a", Purchase.CROSS_FIT.value] == 2 and counts.loc["b", Purchase.NONE.value] == 0


def test_on_the_committed_rows_as_built_is_each_rows_mde():
    """Every committed row planned at its own design gives the MDE its verdict printed (the planner and the rule
    read the same design), and the table counts exactly the rows that read underpowered."""
    table = power_table()
    rows = pd.read_csv(REPO / "results" / "scorecard.csv").set_index(["preset", "claim_id"])
    mde = rows.loc[list(zip(table["preset"], table["claim_id"])), "mde"].to_numpy()
    kept = np.isfinite(mde)
    assert kept.sum() > 100
    np.testing.assert_allclose(table[f"mde {Purchase.NONE.value}"].to_numpy()[kept], mde[kept], rtol=1e-3)
    study = rows[rows["verdict"].eq("underpowered")].reset_index()
    study = study[study["claim_id"].map(lambda c: c in STUDY_CLAIMS and STUDY_CLAIMS[c].tally == "study")]
    assert underpowered_counts(table)[Purchase.NONE.value].sum() == len(study)
    committed = pd.read_csv(REPO / "results" / "power.csv")  # docs/judging.md renders it: rewritten with the rows
    pd.testing.assert_frame_equal(committed, pd.read_csv(io.StringIO(table.to_csv(index=False, float_format="%.6g"))))


def test_minimum_detectable_is_what_the_plan_reads():
    """The planner's as-built MDE is minimum_detectable at the row's own interval (not a copy of the rule)."""
    lo, hi = -0.09, -0.01
    assert projected_mde(LOSS, lo, hi, math.inf, Design(690, 1), Design(690, 1), **AT) == pytest.approx(
        float(minimum_detectable(LOSS, lo, hi, math.inf, **AT, n_examples=690))
    )
