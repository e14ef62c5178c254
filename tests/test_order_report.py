"""Finding 4's claims (one per part of the page) and the verdicts rendered from them, with the numbers behind them."""
import math

import numpy as np
import pandas as pd

from headlab.findings.claims import render
from headlab.findings.order import CONDITIONS, case_shares
from headlab.findings.order_report import (
    case_claims,
    case_grades,
    masking_claims,
    order_heads_claims,
    shuffle_claims,
    verdict_case,
    verdict_masking,
    verdict_order_heads,
    verdict_shuffle,
)


def test_verdict_order_heads():
    table = pd.DataFrame({"layer": [0, 1, 2], "head": [2, 0, 1], "score": [0.9, 0.6, 0.1],
                          "direction": ["prev", "next", "prev"], "rank": [1, 2, 3], "n_examples": 50})
    [row] = order_heads_claims(table)
    assert (row.claim_id, row.verdict, row.ours, row.n_examples) == ("word_order.clean_diagonal", "holds", 0.9, 50)
    assert math.isnan(row.lo) and math.isnan(row.hi) and "2 of 3 heads" in row.reason and "L0H2" in row.reason
    text = verdict_order_heads(table, k=2, mean_tokens=20)
    assert text.startswith(render([row]) + "\n")
    assert "**holds** here: 90.0% (share of a token's attention on one neighbour, clearest head)" in text
    assert "L0H2, puts 90%" in text and "previous token" in text and "about 5%" in text
    assert "between 60% and 90%" in text
    weak = order_heads_claims(table.assign(score=[0.5, 0.2, 0.1]))[0]  # exactly half is not "more than half"
    assert weak.verdict == "does not hold" and "0 of 3 heads" in weak.reason
    assert "does **not** hold here" in verdict_order_heads(table.assign(score=[0.3, 0.2, 0.1]), k=2)


def _by_grade(shift, lo, hi):
    return pd.DataFrame({"grade": ["4", "5", "all"], "n_examples": [10, 10, 30], "expected": [4.0, 4.5, 3.0],
                         "expected_shuffled": [3.5, 4.0, 2.7], "shift": [-0.5, -0.5, shift], "lo": [-0.7, -0.6, lo],
                         "hi": [-0.3, -0.4, hi], "tv": [0.2, 0.2, 0.1]})


def test_verdict_shuffle():
    by_grade = _by_grade(-0.3, -0.4, -0.2)
    shares = pd.DataFrame({"condition": ["original"] * 2 + ["shuffled"] * 2, "grade": [4, 5, 4, 5],
                           "share": [0.5, 0.5, 0.7, 0.3]})
    [row] = shuffle_claims(by_grade)
    assert (row.claim_id, row.verdict) == ("word_order.shuffle_lowers_grade", "holds")
    assert (row.ours, row.lo, row.hi, row.n_examples, row.study) == (-0.3, -0.4, -0.2, 30, -2.0)
    assert "by a clear amount" in row.reason
    text = verdict_shuffle(by_grade, shares)
    assert text.startswith(render([row]) + "\n")
    assert "-0.3 [-0.4, -0.2]" in text and "gold grade 5 (10)" in text and "20.0% of the pairs" in text
    assert "by a small amount" in shuffle_claims(_by_grade(-0.2, -0.3, -0.1))[0].reason
    flat = shuffle_claims(_by_grade(-0.05, -0.1, 0.1))[0]
    assert flat.verdict == "cannot tell" and "the interval contains 0" in flat.reason
    assert shuffle_claims(_by_grade(0.2, 0.1, 0.3))[0].verdict == "opposite"
    assert "**cannot be told** here" in verdict_shuffle(_by_grade(-0.05, -0.1, 0.1), shares)


def _comparison(order_tv: float, draws: int, p: float, diff_hi: float):
    conditions = pd.DataFrame({"measure": "tv", "condition": ["no mask", "order heads", "random heads"],
                               "value": [0.2, order_tv, 0.18], "lo": [0.18, order_tv - 0.01, 0.17],
                               "hi": [0.22, order_tv + 0.01, 0.19], "n_examples": 100,
                               "draw_lo": [np.nan, np.nan, 0.16], "draw_hi": [np.nan, np.nan, 0.2],
                               "n_draws": [np.nan, np.nan, draws]})
    tests = pd.DataFrame([{"measure": "tv", "order_heads": order_tv, "random_mean": 0.18, "p_value": p,
                           "difference": order_tv - 0.18, "difference_lo": order_tv - 0.2, "difference_hi": diff_hi}])
    return conditions, tests


def _masking_verdict(*args) -> str:
    return masking_claims(*_comparison(*args))[0].verdict


def test_verdict_masking_cases():
    text = verdict_masking(*_comparison(0.05, 30, 1 / 31, -0.1), k=7)
    [row] = masking_claims(*_comparison(0.05, 30, 1 / 31, -0.1))
    assert (row.claim_id, row.verdict) == ("word_order.order_heads_carry_order", "holds")
    assert (row.ours, row.lo, row.hi, row.p, row.n_draws, row.n_examples) == (0.05 - 0.18, 0.05 - 0.2, -0.1, 1 / 31,
                                                                            30, 100)
    assert text.startswith(render([row]) + "\n")
    assert "markedly less sensitive" in text and "a cut of 75%" in text and "0 of the 30 random draws" in text
    assert "p = 0.032" in text and "smallest p possible with 30 draws is 0.032" in text
    assert "random other heads of the same layers masked (depth-matched" in text
    assert "markedly" not in masking_claims(*_comparison(0.15, 30, 1 / 31, -0.01))[0].reason  # 0.15 > half of 0.18
    assert _masking_verdict(0.15, 30, 1 / 31, -0.01) == "holds"
    few = masking_claims(*_comparison(0.05, 5, 1 / 6, -0.1))[0]
    assert few.verdict == "cannot tell" and "cannot be decided with 5 draws" in few.reason
    assert "cannot be decided with 19 draws" in verdict_masking(*_comparison(0.05, 19, 1 / 20, -0.1), k=7)  # p = 0.05
    assert _masking_verdict(0.05, 19, 1 / 20, -0.1) == "cannot tell"
    assert _masking_verdict(0.05, 20, 1 / 21, -0.1) == "holds"
    assert _masking_verdict(0.19, 5, 0.8, 0.02) == "cannot tell"  # whatever the direction
    some = masking_claims(*_comparison(0.15, 30, 0.3, -0.01))[0]
    assert some.verdict == "does not hold" and "some random draws do as much" in some.reason
    assert _masking_verdict(0.19, 30, 0.8, 0.02) == "does not hold"  # the difference's interval contains 0
    assert _masking_verdict(0.3, 30, 1.0, 0.2) == "opposite"  # its interval lies above 0: more sensitive
    assert "does **not** hold here" in verdict_masking(*_comparison(0.19, 30, 0.8, 0.02), k=7)


def _cases(n: int, study_like: int) -> pd.DataFrame:
    cases = pd.DataFrame({"example": range(n), "grade": 5, "relevant": True, "drops": True, "order_restores": True,
                          "study_like": False})
    cases.loc[:study_like - 1, "study_like"] = True
    return cases


def test_case_claim_holds_only_when_the_studys_case_is_common():
    [none] = case_claims(case_shares(_cases(20, 0)))
    assert (none.claim_id, none.verdict, none.ours, none.n_examples) == ("word_order.case_is_typical", "does not hold",
                                                                         0.0, 20)
    assert "No pair behaves like the study's case" in none.reason
    rare = case_claims(case_shares(_cases(20, 1)))[0]  # 5%: found, but the exception
    assert rare.verdict == "does not hold" and "the exception, not the rule" in rare.reason
    assert rare.lo < 0.05 < rare.hi
    common = case_claims(case_shares(_cases(20, 2)))[0]  # 10%: common
    assert common.verdict == "holds" and common.ours == 0.1 and "it is common here" in common.reason


def test_case_grades_and_verdict():
    cases = pd.DataFrame({"example": [0, 1], "grade": [5, 4], "relevant": [True, True], "drops": [True, False],
                          "order_restores": [True, False], "study_like": [False, False],
                          **{f"predicted_{s}": [4, 4] for s in ("original", "shuffled", "order", "random")},
                          **{f"expected_{s}": [4.0, 4.0] for s in ("original", "shuffled", "order", "random")}})
    cases.loc[0, ["predicted_shuffled", "predicted_order"]] = [2, 3]
    grades = case_grades(cases, 0)
    assert grades["condition"].tolist() == list(CONDITIONS)
    assert grades["study_grade"].tolist() == [4, 2, 3, 2] and grades["predicted_grade"].tolist() == [4, 2, 3, 4]
    text = verdict_case(case_shares(cases), grades, "order_restores")
    assert text.startswith(render(case_claims(case_shares(cases))) + "\n")
    assert "Of 2 pairs" in text and "4 -> 2 -> 3 -> 4 here, 4 -> 2 -> 3 -> 2 in the study" in text
    assert "masking the order heads raises it again\" (no pair goes further)" in text
    assert "No pair behaves like the study's case" in text and "does **not** hold here" in text
    cases["study_like"] = [True, False]
    text = verdict_case(case_shares(cases), grades, "study_like")
    assert "**holds** here: 50.0%" in text and "1 of 2 pairs behave like the study's case: it is common" in text
