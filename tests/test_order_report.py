"""Finding 4's claims (one per part of the page), judged by the one rule of headlab.judging.verdicts, and the verdicts
rendered from them, with the numbers behind them."""

import math

import numpy as np
import pandas as pd
import pytest

from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE, GradeScale
from headlab.judging.sizes import SHUFFLE_PRECISION
from headlab.judging.units import unit_of
from headlab.judging.verdicts import claims_file, render
from headlab.measures.order import CONDITIONS, case_shares, order_heads, sensitivity_reduction
from headlab.pages import word_order as order_report
from headlab.pages.claims import STUDY_CLAIMS
from headlab.pages.word_order import (
    case_grades,
    case_thresholds,
    masking_claims,
    order_heads_claims,
    shuffle_claims,
    verdict_case,
    verdict_masking,
    verdict_order_heads,
    verdict_shuffle,
)


def _order_table(scores=(0.9, 0.6, 0.1), half=0.05):
    scores = np.asarray(scores, dtype=float)
    return pd.DataFrame(
        {
            "layer": [0, 1, 2],
            "head": [2, 0, 1],
            "score": scores,
            "score_lo": scores - half,
            "score_hi": scores + half,
            "direction": ["prev", "next", "prev"],
            "rank": [1, 2, 3],
            "n_examples": 50,
        }
    )


def test_verdict_order_heads():
    table = _order_table()
    [row] = order_heads_claims(table)
    assert (row.claim_id, row.verdict, row.ours, row.n_examples) == ("word_order.clean_diagonal", "holds", 0.9, 50)
    assert "2 of 3 heads" in row.reason and "L0H2" in row.reason
    text = verdict_order_heads(table, k=2, mean_tokens=20, rows=[row])
    assert text.startswith(render([row]) + "\n")
    assert text == verdict_order_heads(table, k=2, mean_tokens=20)  # by default the same row, built the same way
    assert "Ours: 90.0% [85.0%, 95.0%]" in text and "share of a token's attention on one neighbour" in text
    assert "L0H2, puts 90%" in text and "previous token" in text and "about 5%" in text
    assert "between 60% and 90%" in text
    # "clean" is at least three quarters on one neighbour: judged against 50% + 25 points, adjusted over the claims
    assert order_heads_claims(_order_table((0.52, 0.2, 0.1)))[0].verdict == "does not hold"
    assert order_heads_claims(_order_table((0.8, 0.2, 0.1)))[0].verdict == "cannot tell"
    assert order_heads_claims(_order_table((0.3, 0.2, 0.1)))[0].verdict == "opposite"


def test_the_clean_diagonal_has_an_interval():
    """It used to be a mean over pairs with no interval; now the clearest head's per-pair shares are bootstrapped."""
    [row] = order_heads_claims(_order_table())
    assert (row.lo, row.hi) == (pytest.approx(0.85), pytest.approx(0.95))
    assert row.lo_adj < row.lo and row.hi < row.hi_adj and "bootstrap over pairs" in row.method
    [unmeasured] = order_heads_claims(_order_table().drop(columns=["score_lo", "score_hi"]))
    assert unmeasured.verdict == "cannot tell" and math.isnan(unmeasured.ours) and "no interval" in unmeasured.reason


class Tok:
    all_special_ids = [1, 2]
    pad_token_id = 0


def test_order_heads_bootstrap_the_score_over_pairs():
    """Head 0 puts 0.6, 0.7, ..., 1.0 on the previous token in the five pairs: its interval lies around 0.8."""
    ids = [1, 5, 6, 7, 2]
    encoded = Encoded([ids] * 5, [[0] * 5] * 5, np.zeros(5), 0, STUDY_SCALE)

    def attention():
        for example, share in enumerate((0.6, 0.7, 0.8, 0.9, 1.0)):
            maps = np.full((1, 2, 5, 5), 0.0)
            maps[0, 0, np.arange(1, 5), np.arange(4)] = share
            maps[0, 1, np.arange(4), np.arange(1, 5)] = 0.5  # head 1: always 0.5 on the next token
            yield example, maps

    table = order_heads(attention(), encoded, Tok(), k=1, n_boot=500).set_index("head")
    assert table.loc[0, "score"] == pytest.approx(0.8) and table.loc[0, "direction"] == "prev"
    assert 0.6 <= table.loc[0, "score_lo"] < 0.8 < table.loc[0, "score_hi"] <= 1.0
    assert (table.loc[1, "score_lo"], table.loc[1, "score_hi"]) == (pytest.approx(0.5), pytest.approx(0.5))


def _by_grade(shift, lo, hi):
    return pd.DataFrame(
        {
            "grade": ["4", "5", "all"],
            "n_examples": [10, 10, 30],
            "expected": [4.0, 4.5, 3.0],
            "expected_shuffled": [3.5, 4.0, 2.7],
            "shift": [-0.5, -0.5, shift],
            "lo": [-0.7, -0.6, lo],
            "hi": [-0.3, -0.4, hi],
            "tv": [0.2, 0.2, 0.1],
        }
    )


def test_verdict_shuffle():
    by_grade = _by_grade(-1.5, -1.7, -1.3)
    shares = pd.DataFrame(
        {"condition": ["original"] * 2 + ["shuffled"] * 2, "grade": [4, 5, 4, 5], "share": [0.5, 0.5, 0.7, 0.3]}
    )
    [row] = shuffle_claims(by_grade, STUDY_SCALE)
    assert (row.claim_id, row.verdict) == ("word_order.shuffle_lowers_grade", "holds")
    assert (row.ours, row.lo, row.hi, row.n_examples) == (-1.5, -1.7, -1.3, 30)
    assert row.method == "bootstrap over pairs"
    text = verdict_shuffle(by_grade, shares, STUDY_SCALE, [row])
    assert text.startswith(render([row]) + "\n")
    assert "-1.5 [-1.7, -1.3]" in text and "gold grade 5 (10)" in text and "20.0% of the pairs" in text
    # the study's one pair (grade 4 to 2) gives a direction, not a size: the size is the policy's stated precision
    size = SHUFFLE_PRECISION
    assert (row.min_size, row.size_source) == (size, "direction only") and "direction, not a size" in row.reason
    assert (
        shuffle_claims(_by_grade(-1.0, -1.3, -0.7), STUDY_SCALE)[0].verdict == "holds"
    )  # a grade: no longer half of two grades
    flat = shuffle_claims(_by_grade(-1.2 * size, -1.6 * size, -0.8 * size), STUDY_SCALE)[0]
    assert flat.verdict == "cannot tell" and "an effect is shown, not its size" in flat.reason  # astride the size
    small = shuffle_claims(_by_grade(-0.3 * size, -0.5 * size, -0.1 * size), STUDY_SCALE)[
        0
    ]  # moves, by less than the precision
    assert small.verdict == "does not hold" and "a stated precision" in small.reason
    assert shuffle_claims(_by_grade(0.2, 0.1, 0.3), STUDY_SCALE)[0].verdict == "opposite"
    assert "**cannot tell** ·" in verdict_shuffle(_by_grade(-1.2 * size, -1.6 * size, -0.8 * size), shares, STUDY_SCALE)
    # the reason describes the evidence; the verdict is the rule's alone
    for r in (row, flat):
        evidence = r.reason.split(". The adjusted")[0]
        assert not any(word in evidence for word in ("holds", "small amount", "clear amount"))


def test_the_studys_two_grades_are_not_put_beside_our_mean_as_the_same_number():
    [row] = shuffle_claims(_by_grade(-0.025, -0.04, -0.01), STUDY_SCALE)
    assert row.study == -2 and row.study_unit and row.study_unit != row.unit and "one example pair" in row.study_unit
    assert unit_of(row.unit).number(row.ours) == "-0.025"
    text = render([row])
    assert f"the study: -2 ({row.study_unit})" in text and "not the same number" in row.reason


def _comparison(order_tv: float, draws: int, diff_lo: float, diff_hi: float, df: float = 19.0, insensitive: int = 0):
    conditions = pd.DataFrame(
        {
            "measure": "tv",
            "condition": ["no mask", "order heads", "random heads"],
            "value": [0.2, order_tv, 0.18],
            "lo": [0.18, order_tv - 0.01, 0.17],
            "hi": [0.22, order_tv + 0.01, 0.19],
            "n_examples": 100,
            "draw_lo": [np.nan, np.nan, 0.16],
            "draw_hi": [np.nan, np.nan, 0.2],
            "n_draws": [np.nan, np.nan, draws],
        }
    )
    tests = pd.DataFrame(
        [
            {
                "measure": "tv",
                "order_heads": order_tv,
                "random_mean": 0.18,
                "n_as_insensitive": insensitive,
                "difference": order_tv - 0.18,
                "difference_lo": diff_lo,
                "difference_hi": diff_hi,
                "df": df,
            }
        ]
    )
    return conditions, tests


def _masking(*args, **kwargs):
    return masking_claims(*_comparison(*args, **kwargs))[0]


def test_the_masking_claim_is_the_difference_from_random_heads_judged_with_its_degrees_of_freedom():
    """Masking the order heads cuts the shuffle's move by 13 points more than random heads: it holds with 19 degrees
    of freedom; the same interval over 3 draws (2 degrees of freedom) is too wide for the design to decide it."""
    row = _masking(0.05, 20, -0.15, -0.11)
    assert (row.claim_id, row.verdict, row.n_draws, row.df) == ("word_order.order_heads_carry_order", "holds", 20, 19)
    assert (row.ours, row.lo, row.hi, row.n_examples) == pytest.approx((0.05 - 0.18, -0.15, -0.11, 100))
    assert "0 of the 20 draws" in row.reason and "not the verdict" in row.reason
    assert _masking(0.05, 20, -0.17, -0.09, df=19).verdict == "holds"
    few = _masking(0.05, 3, -0.17, -0.09, df=2)
    assert few.verdict == "underpowered" and few.mde > 2 * few.min_size
    # over 3 draws the verdict reads their 2 degrees of freedom, whatever the Welch df of the 95% interval
    welch = _masking(0.05, 3, -0.17, -0.09, df=19)
    assert welch.verdict == "underpowered" and welch.df == 19 and welch.lo_adj < few.lo_adj
    text = verdict_masking(*_comparison(0.05, 20, -0.15, -0.11), k=7, rows=[row])
    assert text.startswith(render([row]) + "\n")
    assert "a cut of 75%" in text and "random other heads of the same layers masked" in text


def test_the_masking_claim_can_be_opposite_or_short_of_its_size():
    assert _masking(0.3, 20, 0.1, 0.14).verdict == "opposite"  # more sensitive than with random heads
    assert _masking(0.175, 20, -0.008, -0.002).verdict == "does not hold"  # less, but by under 2 points
    assert "**underpowered** ·" in verdict_masking(*_comparison(0.17, 20, -0.06, 0.04), k=7)
    # measured precisely enough to show twice 2 points, an interval reaching both sides is undecided
    assert "**cannot tell** ·" in verdict_masking(*_comparison(0.172, 20, -0.016, 0.0), k=7)
    assert _masking(0.172, 20, -0.016, 0.0).mde <= 2 * 0.02


def test_sensitivity_reduction_counts_the_draws_as_insensitive_by_hand():
    out = sensitivity_reduction(0.2, np.array([0.5, 0.4, 0.1, 0.3, 0.05]))
    assert out["n_as_insensitive"] == 2 and out["random_mean"] == pytest.approx(0.27)


def test_the_page_makes_the_studys_claims_only():
    """No row asks whether the study's one pair is typical: the study does not claim it (and pairs graded below 4
    cannot follow it, so it was 0% by construction)."""
    rows = (
        order_heads_claims(_order_table())
        + shuffle_claims(_by_grade(-0.3, -0.4, -0.2), STUDY_SCALE)
        + masking_claims(*_comparison(0.05, 30, -0.15, -0.1))
    )
    page = {c.claim_id for c in STUDY_CLAIMS.values() if c.page == "04_word_order"}
    assert [c.claim_id for c in rows] == [
        "word_order.clean_diagonal",
        "word_order.shuffle_lowers_grade",
        "word_order.order_heads_carry_order",
    ]
    assert page == {c.claim_id for c in rows}
    assert claims_file(rows) == "claims_04_word_order"
    assert not hasattr(order_report, "case_claims") and "word_order.case_is_typical" not in page


def test_case_grades_and_verdict():
    cases = pd.DataFrame(
        {
            "example": [0, 1],
            "grade": [5, 4],
            "relevant": [True, True],
            "drops": [True, False],
            "order_restores": [True, False],
            "study_like": [False, False],
            **{f"predicted_{s}": [4, 4] for s in ("original", "shuffled", "order", "random")},
            **{f"expected_{s}": [4.0, 4.0] for s in ("original", "shuffled", "order", "random")},
        }
    )
    cases.loc[0, ["predicted_shuffled", "predicted_order"]] = [2, 3]
    grades = case_grades(cases, 0)
    assert grades["condition"].tolist() == list(CONDITIONS)
    assert grades["study_grade"].tolist() == [4, 2, 3, 2] and grades["predicted_grade"].tolist() == [4, 2, 3, 4]
    text = verdict_case(case_shares(cases), grades, "order_restores", STUDY_SCALE)
    assert text.startswith("- Of 2 pairs") and "4 -> 2 -> 3 -> 4 here, 4 -> 2 -> 3 -> 2 in the study" in text
    assert 'masking the order heads raises it again" (no pair goes further)' in text
    assert "Ours:" not in text and "**" not in text  # the case is counted and shown, not judged
    assert "Not comparable" not in text
    other = verdict_case(case_shares(cases), grades, "order_restores", GradeScale(0, 3))
    assert other.startswith("- Not comparable: the study's case is told in its grades 1-5") and "grades 0-2" in other


def test_the_shuffle_claim_asks_a_direction_so_it_is_judged_on_any_scale():
    [row] = shuffle_claims(_by_grade(-1.5, -1.7, -1.3), GradeScale(0, 3))
    assert row.verdict == "holds" and "(grades run 0 to 2)" in row.reason


def test_the_case_s_thresholds_follow_the_scale_unless_given():
    assert case_thresholds(STUDY_SCALE, None, None) == (4, 2)  # the study's grade 4 and its fall of 2
    assert case_thresholds(GradeScale(0, 3), None, None) == (1, 2)
    assert case_thresholds(GradeScale(0, 2), None, None) == (0, 1)  # binary: relevant pairs falling to 0
    assert case_thresholds(GradeScale(1, 10), 7, 3) == (7, 3)


def _cases(depths_falls):
    """A case table: per example, how deep into the study's case it goes (how many PATTERNS hold) and its fall."""
    from headlab.measures.order import PATTERNS

    rows = []
    for example, (depth, fall) in enumerate(depths_falls):
        rows.append(
            {
                "example": example,
                **{name: i < depth for i, name in enumerate(PATTERNS)},
                "expected_original": 4.0,
                "expected_shuffled": 4.0 - fall,
            }
        )
    return pd.DataFrame(rows)


def test_the_shown_case_is_the_deepest_short_pair_unless_the_page_names_one():
    from types import SimpleNamespace

    from headlab.pages.word_order import shown_case

    cases = _cases([(3, 1.0), (3, 2.0), (2, 3.0), (1, 0.5)])  # example 1 is the deepest with the largest fall
    lengths = SimpleNamespace(input_ids=[[0] * 5, [0] * 50, [0] * 5, [0] * 5])  # ... but too long to read
    original = SimpleNamespace(input_ids=[[0] * 5] * 4)
    example, pattern, ranked = shown_case(cases, [0, 1, 2, 3], (original, lengths), max_tokens=10)
    assert (example, pattern) == (0, "order_restores") and 1 not in ranked["example"].tolist()
    assert ranked["example"].tolist() == [0, 2, 3]
    everything = shown_case(cases, [1], (original, lengths), max_tokens=10)  # none short: every changed pair
    assert everything[:2] == (1, "order_restores")
    named = shown_case(cases, [0, 1, 2, 3], (original, lengths), max_tokens=10, case=3)
    assert named[:2] == (3, "relevant")  # the CASE parameter wins, its own pattern read off every case


def test_pair_maps_reads_one_pair_under_each_encoding_with_its_tokens():
    from types import SimpleNamespace

    from headlab.pages.word_order import pair_maps

    encodings = {
        "original": SimpleNamespace(input_ids=[[1, 2], [3, 4, 5]], maps=np.zeros((1, 1, 3, 3))),
        "shuffled": SimpleNamespace(input_ids=[[1, 2], [5, 4, 3]], maps=np.ones((1, 1, 3, 3))),
    }
    lab = SimpleNamespace(
        attention=lambda examples, encoded: iter([(examples[0], encoded.maps)]),
        tokenizer=SimpleNamespace(convert_ids_to_tokens=lambda ids: [f"t{i}" for i in ids]),
    )
    shown = pair_maps(lab, 1, encodings)
    assert shown["original"][1] == ["t3", "t4", "t5"] and shown["shuffled"][1] == ["t5", "t4", "t3"]
    assert shown["original"][0].sum() == 0 and shown["shuffled"][0].sum() == 9


def test_shuffle_titles_sweeps_the_page_s_masks_on_both_titles(tmp_path):
    from test_order import _order_table
    from tiny_setup import tiny_setup

    from headlab.pages.word_order import shuffle_titles

    lab = tiny_setup(tmp_path, n_right=3)
    shuffle = shuffle_titles(lab, _order_table([(2, 1), (0, 3), (1, 1)]), k=2, draws=2, seed=0)
    assert shuffle.frame["query"].tolist() == lab.frame["query"].tolist() and len(shuffle.encoded) == len(lab.encoded)
    moved = shuffle.frame["title"] != lab.frame["title"]
    assert shuffle.changed.tolist() == np.flatnonzero(shuffle.frame["changed"]).tolist()
    assert set(np.flatnonzero(moved)) <= set(shuffle.changed)  # a changed order may spell the same title
    assert set(shuffle.effects["kind"]) == {"none", "order", "random"} and shuffle.n_masks == 4
    assert len(shuffle.effects) == shuffle.n_masks * len(lab.encoded)
    assert shuffle.note(2).startswith(f"{len(shuffle.changed)} of 5 titles changed order; 4 masks")
