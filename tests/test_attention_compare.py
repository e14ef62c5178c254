import numpy as np
import pandas as pd
import pytest
from tiny_setup import tiny_setup

from headlab.findings.attention_compare import DIFFERENCE, compare_maps, token_labels
from headlab.findings.cls_head import cls_rows
from headlab.findings.roles import ENGLISH_STOPWORDS
from headlab.report import charts
from headlab.report.compare_explorer import live_explorer


def test_token_labels_sort_in_sentence_order():
    labels = token_labels([f"t{i}" for i in range(12)])
    assert labels[:2] == ["00 t0", "01 t1"] and sorted(labels) == labels


@pytest.fixture
def setup(tmp_path):
    return tiny_setup(tmp_path)


def masked_first_layer(setup):
    mask = np.ones((4, 4), dtype=np.float32)
    mask[0] = 0
    return mask


def test_compare_maps_gives_runs_and_their_difference(setup):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    cells = compare_maps(runs, setup.encoded, setup.tokenizer, [0, 1], [(0, 0), (2, 3)], min_weight=0.0)
    n0, n1 = len(setup.encoded.input_ids[0]), len(setup.encoded.input_ids[1])
    assert len(cells) == 2 * (n0 * n0 + n1 * n1)
    assert np.allclose(cells[DIFFERENCE], cells["masked"] - cells["all"], atol=1e-4)
    layer0 = cells[cells["layer"] == 0]  # masking a layer's heads does not change that layer's own maps
    assert np.allclose(layer0[DIFFERENCE], 0) and not np.allclose(cells[cells["layer"] == 2][DIFFERENCE], 0)
    rows = cells[(cells["example"] == 0) & (cells["head_label"] == "0.0")].groupby("query")["all"].sum()
    assert np.allclose(rows, 1, atol=1e-3)
    first = cells[(cells["example"] == 0) & (cells["head_label"] == "0.0")]
    # [CLS] red cat , red [SEP] the cat , red ! [SEP]: red (1, 4) and cat (2) match red (9) and cat (7)
    identical = set(zip(first.loc[first["identical"], "query"], first.loc[first["identical"], "key"]))
    assert identical == {(1, 9), (4, 9), (2, 7), (9, 1), (9, 4), (7, 2)}
    assert set(first.loc[first["key_shared"], "key"]) == {1, 2, 4, 7, 9}


def test_compare_maps_drops_faint_cells_but_keeps_diagonal_and_matches(setup):
    runs = {"all": (setup.model, None)}
    cells = compare_maps(runs, setup.encoded, setup.tokenizer, [0], [(1, 1)], min_weight=0.5,
                         stopwords=ENGLISH_STOPWORDS)
    assert DIFFERENCE not in cells.columns
    faint = (cells["all"] < 0.5) & (cells["query"] != cells["key"]) & ~cells["identical"]
    assert not faint.any() and (cells["query"] == cells["key"]).sum() == len(setup.encoded.input_ids[0])


def test_the_charts_of_notebooks_05_to_07_build(setup):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    cells = compare_maps(runs, setup.encoded, setup.tokenizer, [0, 3], [(2, 1), (3, 0)])
    spec = charts.map_panels(cells, ["all", "masked", DIFFERENCE]).to_dict()
    assert [p["name"] for p in spec["params"]] == ["example", "head"]
    assert spec["params"][0]["value"] == 0 and spec["params"][1]["bind"]["options"] == ["2.1", "3.0"]
    charts.map_panels(cells[(cells["example"] == 3) & (cells["head_label"] == "3.0")], ["all"], select=False).to_dict()
    rows = cls_rows(runs, setup.encoded, setup.tokenizer, [0, 3], 3, 0)
    charts.cls_bars(rows, ["all", "masked"]).to_dict()
    table = pd.DataFrame({"label": ["no mask", "5 random heads"], "rel_change": [0.0, -0.1], "lo": [0.0, -0.2],
                          "hi": [0.0, 0.0], "study": [0.0, np.nan], "n_draws": [1, 2], "n_examples": [5, 5]})
    draws = pd.DataFrame({"label": ["5 random heads"] * 2, "mask_id": ["a", "b"], "rel_change": [-0.2, 0.0]})
    charts.condition_effects(table, draws).to_dict()
    claims = pd.DataFrame({"claim": ["rises", "falls"], "scope": ["all heads"] * 2, "before": [0.1, 0.2],
                           "after": [0.2, 0.1], "delta": [0.1, -0.1], "lo": [0.05, -0.2], "hi": [0.2, -0.05],
                           "holds": ["holds"] * 2})
    charts.claim_intervals(claims).to_dict()
    charts.draws_against(pd.DataFrame({"draw": [0, 1], "entropy_delta": [0.1, 0.0]}), "entropy_delta", 0.3,
                         "matching heads masked", "entropy change").to_dict()


def test_map_panels_take_more_cells_than_altairs_row_limit(setup):
    runs = {"all": (setup.model, None)}
    heads = [(l, h) for l in range(4) for h in range(4)]
    cells = compare_maps(runs, setup.encoded, setup.tokenizer, range(5), heads, min_weight=0.0)
    assert len(cells) > 5000
    spec = charts.map_panels(cells, ["all"]).to_dict()
    assert sum(len(v) for v in spec["datasets"].values()) == len(cells)  # once, not once per layer


def test_live_explorer_builds_and_is_a_note_in_the_book(setup, monkeypatch):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    widget = live_explorer(runs, setup.encoded, setup.tokenizer, setup.frame, example=1, head=(2, 3))
    assert [box.value for box in widget.children[0].children] == [1, 2, 3]
    before = widget.children[2].spec
    widget.children[0].children[2].value = 1  # another head: the same chart widget gets that head's maps
    assert widget.children[2].spec != before
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    note = live_explorer(runs, setup.encoded, setup.tokenizer, setup.frame)
    assert "JupyterLab" in note.data
