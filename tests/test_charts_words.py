"""The charts of notebooks 03 (word segmentation) and 04 (word order) build valid Vega-Lite from their tables."""
import numpy as np
import pandas as pd

from headlab.findings.order import CONDITIONS
from headlab.findings.segmentation import BoundaryData
from headlab.findings.segmentation_report import score_segmentation
from headlab.report import charts


def test_segmentation_charts():
    rng = np.random.default_rng(0)
    n = 400
    multi = rng.random(n) < 0.3
    gold = np.where(multi, rng.random(n) < 0.4, True)
    data = BoundaryData(rng.random((2, 3, n)) < 0.8, rng.normal(size=(n, 6)), gold, np.repeat(np.arange(40), 10), multi)
    results = score_segmentation(data, max_heads=3, control_draws=2, n_boot=50)
    charts.boundary_heads(results.heads).to_dict()
    charts.union_curve(results.union).to_dict()
    rule = pd.DataFrame({"example": np.repeat([3, 5], 8), "layer": np.tile(np.repeat([0, 1], 4), 2), "head": 0,
                         "position": np.tile([1, 2, 3, 4], 4), "token": list("abcd") * 4, "to_sep": rng.random(16),
                         "to_next": rng.random(16), "predicted_end": True, "gold_end": [False, True] * 8, "multi": False})
    spec = charts.boundary_rule(rule).to_dict()
    assert {p["name"] for p in spec["params"]} == {"seg_example", "seg_layer", "seg_head"}
    many = pd.concat([rule.assign(example=e) for e in range(400)], ignore_index=True)  # 6400 rows: past Altair's cap
    charts.boundary_rule(many).to_dict()
    assert "params" not in charts.boundary_rule(rule[(rule["example"] == 3) & (rule["layer"] == 0)], select=False).to_dict()


def test_order_charts():
    one = pd.DataFrame([{"condition": c, "grade": g, "probability": 0.2} for c in CONDITIONS for g in range(1, 6)])
    charts.grade_distributions(one).to_dict()
    many = pd.concat([one.assign(example=e, k=k) for e in (4, 9) for k in range(130)])  # 10400 rows
    texts = pd.DataFrame({"example": [4, 4, 9, 9], "line": ["query: a", "title: b", "query: c", "title: d"]})
    spec = charts.grade_distributions(many, select=True, texts=texts).to_dict()
    assert {p["name"] for p in spec["params"]} == {"case_example", "case_k"}
    shares = pd.DataFrame({"condition": ["original", "shuffled"] * 5, "grade": np.repeat(range(1, 6), 2), "count": 1,
                           "share": 0.1})
    charts.grade_shares(shares).to_dict()
    by_grade = pd.DataFrame({"grade": ["1", "all"], "n_examples": [3, 9], "expected": [1.5, 3.0],
                             "expected_shuffled": [1.4, 2.9], "shift": [-0.1, -0.1], "lo": [-0.2, -0.15], "hi": [0.0, -0.05]})
    charts.grade_shift(by_grade).to_dict()
    conditions = pd.DataFrame({"measure": "tv", "condition": ["no mask", "order heads", "random heads"],
                               "value": [0.2, 0.1, 0.18], "lo": [0.18, 0.09, 0.17], "hi": [0.22, 0.11, 0.19], "n_examples": 9})
    draws = pd.DataFrame({"mask_id": ["none", "order-k7", "random-k7-d0"], "kind": ["none", "order", "random"],
                          "tv": [0.2, 0.1, 0.17], "shift": [-0.1, 0.0, -0.1]})
    charts.shuffle_sensitivity(conditions, draws).to_dict()
