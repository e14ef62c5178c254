import numpy as np
import pandas as pd

from headlab.findings.order import CONDITIONS, case_shares
from headlab.findings.order_report import (
    case_grades,
    verdict_case,
    verdict_masking,
    verdict_order_heads,
    verdict_shuffle,
)


def test_verdict_order_heads():
    table = pd.DataFrame({"layer": [0, 1, 2], "head": [2, 0, 1], "score": [0.9, 0.6, 0.1],
                          "direction": ["prev", "next", "prev"], "rank": [1, 2, 3], "n_examples": 50})
    text = verdict_order_heads(table, k=2, mean_tokens=20)
    assert "L0H2, puts 90%" in text and "previous token" in text and "about 5%" in text
    assert "2 of 3 heads" in text and "between 60% and 90%" in text and "holds here" in text
    assert "holds only weakly" in verdict_order_heads(table.assign(score=[0.3, 0.2, 0.1]), k=2)


def test_verdict_shuffle():
    by_grade = pd.DataFrame({"grade": ["4", "5", "all"], "n_examples": [10, 10, 30], "expected": [4.0, 4.5, 3.0],
                             "expected_shuffled": [3.5, 4.0, 2.7], "shift": [-0.5, -0.5, -0.3], "lo": [-0.7, -0.6, -0.4],
                             "hi": [-0.3, -0.4, -0.2], "tv": [0.2, 0.2, 0.1]})
    shares = pd.DataFrame({"condition": ["original"] * 2 + ["shuffled"] * 2, "grade": [4, 5, 4, 5],
                           "share": [0.5, 0.5, 0.7, 0.3]})
    text = verdict_shuffle(by_grade, shares)
    assert "-0.3 [-0.4, -0.2]" in text and "gold grade 5 (10)" in text and "20.0% of the pairs" in text
    assert "lowers the grade measurably, by a clear amount" in text
    flat = by_grade.assign(lo=-0.1, hi=0.1)
    assert "no average effect" in verdict_shuffle(flat, shares)


def _comparison(order_tv: float, draws: int, p: float, diff_hi: float):
    conditions = pd.DataFrame({"measure": "tv", "condition": ["no mask", "order heads", "random heads"],
                               "value": [0.2, order_tv, 0.18], "lo": [0.18, order_tv - 0.01, 0.17],
                               "hi": [0.22, order_tv + 0.01, 0.19], "n_examples": 100,
                               "draw_lo": [np.nan, np.nan, 0.16], "draw_hi": [np.nan, np.nan, 0.2],
                               "n_draws": [np.nan, np.nan, draws]})
    tests = pd.DataFrame([{"measure": "tv", "order_heads": order_tv, "random_mean": 0.18, "p_value": p,
                           "difference": order_tv - 0.18, "difference_lo": order_tv - 0.2, "difference_hi": diff_hi}])
    return conditions, tests


def test_verdict_masking_cases():
    text = verdict_masking(*_comparison(0.05, 30, 1 / 31, -0.1), k=7)
    assert "markedly less sensitive" in text and "a cut of 75%" in text and "0 of the 30 random draws" in text
    assert "p = 0.032" in text and "random other heads of the same layers masked (depth-matched" in text
    assert "cannot be decided with 5 draws" in verdict_masking(*_comparison(0.05, 5, 1 / 6, -0.1), k=7)
    assert "cannot be decided with 19 draws" in verdict_masking(*_comparison(0.05, 19, 1 / 20, -0.1), k=7)  # p = 0.05
    assert "markedly less sensitive" in verdict_masking(*_comparison(0.05, 20, 1 / 21, -0.1), k=7)
    assert "cannot be decided" in verdict_masking(*_comparison(0.19, 5, 0.8, 0.02), k=7)  # whatever the direction
    assert "some random draws do as much" in verdict_masking(*_comparison(0.15, 30, 0.3, -0.01), k=7)
    assert "does **not**" in verdict_masking(*_comparison(0.19, 30, 0.8, 0.02), k=7)


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
    assert "Of 2 pairs" in text and "4 -> 2 -> 3 -> 4 here, 4 -> 2 -> 3 -> 2 in the study" in text
    assert "masking the order heads raises it again\" (no pair goes further)" in text
    assert "no pair behaves like the study's case" in text
    cases["study_like"] = [True, False]
    assert "50.0% of pairs behave like the study's case: it is common" in verdict_case(case_shares(cases), grades, "study_like")
