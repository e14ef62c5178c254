"""headlab.report.charts: the charts of every notebook build valid Vega-Lite from their tables."""

import altair as alt
import numpy as np
import pandas as pd
import pytest
from conftest import grid_and_layers
from tiny_setup import masked_first_layer, tiny_setup

from headlab.measures.attention_compare import DIFFERENCE, compare_maps
from headlab.measures.order import CONDITIONS
from headlab.measures.segmentation import BoundaryData
from headlab.pages.cls_head import cls_rows
from headlab.pages.layer_dependence import layer_reference
from headlab.pages.word_segmentation import score_segmentation
from headlab.report import charts
from headlab.report.layout import COLUMN_PX, drawn_width


def test_notebook_02_charts_build_valid_specs():
    grid, layer_table = grid_and_layers()
    importance = grid[["layer", "head"]].assign(importance=np.linspace(0, 1, len(grid)))
    for chart in (
        charts.layer_bars(layer_table, layer_reference(3)),
        charts.head_heatmap(grid),
        charts.head_heatmap(importance, "importance", "importance", fmt=".2f", diverging=False, mark=None),
        charts.head_intervals(grid),
        charts.importance_scatter(grid, importance),
        charts.attention_heatmap(np.eye(3), ["a", "b", "a"]),
    ):
        assert chart.to_dict()  # validates against the Vega-Lite schema
    heatmap = charts.attention_heatmap(np.eye(3), ["a", "b", "a"])
    calculate = {t["as"]: t["calculate"] for t in heatmap.to_dict()["transform"]}
    assert len(heatmap.data) == 9 and calculate["query_token"] == '["0 a", "1 b", "2 a"][datum.query]'


def test_segmentation_charts():
    rng = np.random.default_rng(0)
    n = 400
    multi = rng.random(n) < 0.3
    gold = np.where(multi, rng.random(n) < 0.4, True)
    data = BoundaryData(rng.random((2, 3, n)) < 0.8, rng.normal(size=(n, 6)), gold, np.repeat(np.arange(40), 10), multi)
    results = score_segmentation(data, max_heads=3, control_draws=2, n_boot=50)
    charts.boundary_heads(results.heads).to_dict()
    charts.union_curve(results.union).to_dict()
    rule = pd.DataFrame(
        {
            "example": np.repeat([3, 5], 8),
            "layer": np.tile(np.repeat([0, 1], 4), 2),
            "head": 0,
            "position": np.tile([1, 2, 3, 4], 4),
            "token": list("abcd") * 4,
            "to_sep": rng.random(16),
            "to_next": rng.random(16),
            "predicted_end": True,
            "gold_end": [False, True] * 8,
            "multi": False,
        }
    )
    spec = charts.boundary_rule(rule).to_dict()
    assert {p["name"] for p in spec["params"]} == {"seg_example", "seg_layer", "seg_head"}
    many = pd.concat([rule.assign(example=e) for e in range(400)], ignore_index=True)  # 6400 rows: past Altair's cap
    charts.boundary_rule(many).to_dict()
    assert (
        "params"
        not in charts.boundary_rule(rule[(rule["example"] == 3) & (rule["layer"] == 0)], select=False).to_dict()
    )


def test_order_charts():
    one = pd.DataFrame([{"condition": c, "grade": g, "probability": 0.2} for c in CONDITIONS for g in range(1, 6)])
    charts.grade_distributions(one).to_dict()
    many = pd.concat([one.assign(example=e, k=k) for e in (4, 9) for k in range(130)])  # 10400 rows
    texts = pd.DataFrame({"example": [4, 4, 9, 9], "line": ["query: a", "title: b", "query: c", "title: d"]})
    spec = charts.grade_distributions(many, select=True, texts=texts).to_dict()
    assert {p["name"] for p in spec["params"]} == {"case_example", "case_k"}
    shares = pd.DataFrame(
        {"condition": ["original", "shuffled"] * 5, "grade": np.repeat(range(1, 6), 2), "count": 1, "share": 0.1}
    )
    charts.grade_shares(shares).to_dict()
    by_grade = pd.DataFrame(
        {
            "grade": ["1", "all"],
            "n_examples": [3, 9],
            "expected": [1.5, 3.0],
            "expected_shuffled": [1.4, 2.9],
            "shift": [-0.1, -0.1],
            "lo": [-0.2, -0.15],
            "hi": [0.0, -0.05],
        }
    )
    charts.grade_shift(by_grade).to_dict()
    conditions = pd.DataFrame(
        {
            "measure": "tv",
            "condition": ["no mask", "order heads", "random heads"],
            "value": [0.2, 0.1, 0.18],
            "lo": [0.18, 0.09, 0.17],
            "hi": [0.22, 0.11, 0.19],
            "n_examples": 9,
        }
    )
    draws = pd.DataFrame(
        {
            "mask_id": ["none", "order-k7", "random-k7-d0"],
            "kind": ["none", "order", "random"],
            "tv": [0.2, 0.1, 0.17],
            "shift": [-0.1, 0.0, -0.1],
        }
    )
    charts.shuffle_sensitivity(conditions, draws).to_dict()


@pytest.fixture
def setup(tmp_path):
    return tiny_setup(tmp_path)


def test_the_charts_of_notebooks_05_to_07_build(setup):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    cells = compare_maps(setup, runs, [0, 3], [(2, 1), (3, 0)])
    spec = charts.map_panels(cells, ["all", "masked", DIFFERENCE]).to_dict()
    assert [p["name"] for p in spec["params"]] == ["example", "head"]
    assert spec["params"][0]["value"] == 0 and spec["params"][1]["bind"]["options"] == ["2.1", "3.0"]
    charts.map_panels(cells[(cells["example"] == 3) & (cells["head_label"] == "3.0")], ["all"], select=False).to_dict()
    rows = cls_rows(setup, runs, [0, 3], 3, 0)
    charts.cls_bars(rows, ["all", "masked"]).to_dict()
    table = pd.DataFrame(
        {
            "label": ["no mask", "5 random heads"],
            "rel_change": [0.0, -0.1],
            "lo": [0.0, -0.2],
            "hi": [0.0, 0.0],
            "study": [0.0, np.nan],
            "n_draws": [1, 2],
            "n_examples": [5, 5],
        }
    )
    draws = pd.DataFrame({"label": ["5 random heads"] * 2, "mask_id": ["a", "b"], "rel_change": [-0.2, 0.0]})
    charts.condition_effects(table, draws).to_dict()
    claims = pd.DataFrame(
        {
            "claim": ["rises", "falls"],
            "scope": ["all heads"] * 2,
            "before": [0.1, 0.2],
            "after": [0.2, 0.1],
            "delta": [0.1, -0.1],
            "lo": [0.05, -0.2],
            "hi": [0.2, -0.05],
        }
    )
    charts.claim_intervals(claims).to_dict()
    charts.draws_against(
        pd.DataFrame({"draw": [0, 1], "entropy_delta": [0.1, 0.0]}),
        "entropy_delta",
        0.3,
        "matching heads masked",
        "entropy change",
    ).to_dict()


def test_map_panels_take_more_cells_than_altairs_row_limit(setup):
    runs = {"all": (setup.model, None)}
    heads = [(l, h) for l in range(4) for h in range(4)]
    cells = compare_maps(setup, runs, range(5), heads, min_weight=0.0)
    assert len(cells) > 5000
    spec = charts.map_panels(cells, ["all"]).to_dict()
    assert sum(len(v) for v in spec["datasets"].values()) == len(cells)  # once, not once per layer


def test_the_circuit_graph_draws_one_edge_per_sender_and_receiver_signed():
    ranking = pd.DataFrame(
        {
            "layer": [3, 3, 4, 5],
            "head": [9, 5, 1, 0],
            "restored": [0.2, 0.04, 0.03, 0.01],
            "lo": [0.18, 0.03, 0.02, 0.0],
            "hi": [0.22, 0.05, 0.04, 0.02],
        }
    )
    senders, receivers = [(1, 1), (2, 9)], [(3, 9), (3, 5), (4, 1)]
    shares = [0.1, -0.02, 0.03, 0.05, 0.01, 0.0]
    edges = pd.DataFrame(
        [{"sender_layer": s[0], "sender_head": s[1], "layer": r[0], "head": r[1]} for s in senders for r in receivers]
    ).assign(restored=shares, lo=lambda t: t["restored"] - 0.01, hi=lambda t: t["restored"] + 0.01)
    spec = charts.circuit_graph(edges, ranking, senders).to_dict()
    drawn, nodes = (next(v for v in spec["datasets"].values() if len(v) == n) for n in (6, 5))
    assert {e["edge"] for e in drawn} == {f"{s[0]}.{s[1]} → {r[0]}.{r[1]}" for s in senders for r in receivers}
    assert {(e["edge"], e["size"], e["direction"]) for e in drawn if e["restored"] < 0} == {
        ("1.1 → 3.5", 0.02, "pushes the other way")
    }
    assert sorted(n["name"] for n in nodes) == ["1.1", "2.9", "3.5", "3.9", "4.1"]
    assert {n["name"]: n.get("restored") for n in nodes}["3.9"] == 0.2  # a receiver shows what it reads of all
    minimality = pd.DataFrame(
        {"layer": [1, 3], "head": [1, 9], "value": [0.01, 0.2], "lo": [0.0, 0.1], "hi": [0.02, 0.3]}
    )
    faithful = pd.DataFrame(
        {"what": ["faithfulness", "random circuits"], "value": [0.61, 0.05], "lo": [0.5, 0.0], "hi": [0.7, 0.1]}
    ).assign(n_draws=[1, 8])
    spec = charts.circuit_graph(edges, ranking, senders, "t", minimality, faithful).to_dict()
    nodes = next(v for v in spec["datasets"].values() if len(v) == 5)
    adds = {n["name"]: n.get("adds") for n in nodes}
    assert adds["3.9"] == 0.2 and adds["1.1"] == 0.01 and adds["2.9"] is None  # 2.9: no minimality row
    subtitle = " ".join(spec["title"]["subtitle"])
    assert subtitle.startswith("the circuit keeps 61.0% [50.0%, 70.0%]") and "8 random" in subtitle
    long = (
        "the circuit: the matching heads and the heads that read most of their change (edge: that receiver reading "
        "that sender alone, on the pairs that did not choose it)"
    )
    chart = charts.circuit_graph(edges, ranking, senders, long, minimality, faithful)
    assert drawn_width(chart) <= COLUMN_PX  # the title wraps to the column instead of widening the chart


def test_a_diverging_heatmap_is_as_saturated_either_side_of_zero_at_the_same_distance():
    grid = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "rel_change": [-0.137, 0.013, 0.0, np.nan]})
    scale = charts.head_heatmap(grid, mark=None).to_dict()["layer"][0]["encoding"]["color"]["scale"]
    assert scale["domain"] == [-0.137, 0.137] and scale["scheme"] == "redblue"  # +1.3% stays pale
    assert charts.symmetric_scale([0.0, 0.0]).domain == [-1e-3, 1e-3]  # all zero: still a scale


def test_the_speed_table_is_a_chart_of_throughput_with_the_speed_up_beside_it():
    speed = pd.DataFrame(
        {
            "machine": ["AMD EPYC (family 25), 2 cores"] * 4,
            "device": "cpu",
            "precision": "bf16",
            "variant": ["unpruned", "pruned"] * 2,
            "share_removed": [0.2, 0.2, 0.5, 0.5],
            "batch_size": 64,
            "pairs_per_s": [300.0, 360.0, 301.0, 420.0],
            "pairs_per_s_min": [290.0, 350.0, 291.0, 410.0],
            "pairs_per_s_max": [310.0, 370.0, 311.0, 430.0],
            "speedup": [1.0, 1.2, 1.0, 1.4],
        }
    )
    spec = charts.speed_bars(speed).to_dict()
    values = spec["datasets"][next(iter(spec["datasets"]))]
    assert [v["speedup_text"] for v in values] == ["1.00x", "1.20x", "1.00x", "1.40x"]
    settings = [v["setting"] for v in values]  # two runs of the benchmark: two rows, never one bar drawn over another
    assert settings[0] == "20% of heads removed, batch 64, cpu bf16, AMD EPYC (family 25)" and len(set(settings)) == 2
    assert spec["spec"]["layer"][0]["encoding"]["x"]["field"] == "pairs_per_s"
    long = speed.assign(machine="AMD EPYC (family 25, model 17, AVX-512, AVX512-BF16), 2 cores, 2 torch threads")
    assert drawn_width(charts.speed_bars(long)) <= COLUMN_PX  # a row's label above it, never beside it


def test_the_interval_forest_draws_each_rows_interval_and_estimate_with_shared_encodings():
    from headlab.report.charts.forest import interval_rows, zero_line

    table = pd.DataFrame({"name": ["a", "b"], "lo": [-0.1, 0.0], "hi": [0.1, 0.2], "est": [0.0, 0.1], "g": ["x", "y"]})
    rule, point = interval_rows(alt.Chart(table), alt.Y("name:N"), alt.X("lo:Q", title="t"), "hi", "est", color="g:N")
    rule, point = rule.to_dict()["encoding"], point.to_dict()["encoding"]
    assert (rule["x"]["field"], rule["x2"]["field"], rule["x"]["title"]) == ("lo", "hi", "t")
    assert point["x"]["field"] == "est" and rule["color"] == point["color"] == {"field": "g", "type": "nominal"}
    assert zero_line().to_dict()["mark"] == {"type": "rule", "color": "gray"}
