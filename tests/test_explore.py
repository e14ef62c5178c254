"""headlab.report.explore: the head explorer (live widget and static chart), on a tiny model."""

import json
from types import SimpleNamespace

import numpy as np
from conftest import grid_and_layers, tiny_bert

from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE
from headlab.report.explore import attention_table, example_view, head_explorer, head_explorer_chart, head_report


class StubTokenizer:
    pad_token_id = 0

    def convert_ids_to_tokens(self, ids):
        return [f"t{i}" for i in ids]


def tiny_encoded(n: int = 4) -> Encoded:
    rng = np.random.default_rng(0)
    ids = [[1, *rng.integers(5, 50, size=6).tolist(), 2, *rng.integers(5, 50, size=3).tolist(), 2] for _ in range(n)]
    return Encoded(ids, [[0] * len(i) for i in ids], rng.integers(1, 6, size=n), 0, STUDY_SCALE)


def test_attention_table_keeps_the_weights_above_the_floor():
    maps = np.zeros((2, 3, 4, 4))
    maps[1, 2, 3, 0], maps[0, 0, 1, 1], maps[0, 1, 2, 2] = 0.9, 0.02, 0.019
    table = attention_table(maps, min_weight=0.02)
    assert table[["layer", "head", "query", "key"]].values.tolist() == [[0, 0, 1, 1], [1, 2, 3, 0]]
    np.testing.assert_allclose(table["weight"], [0.02, 0.9])


def test_head_report_names_the_head_its_layer_and_untested_heads():
    grid, layer_table = grid_and_layers()
    text = head_report(grid, layer_table, 1, 1)
    assert text.startswith(
        "Head 1.1 masked alone: -40.0% [-43.0%, -37.0%], McNemar p = 1e-05, Holm p = 0.0001 (hurts)."
    )
    assert text.endswith("Whole layer 1 masked: +3.0% [+1.0%, +5.0%].")
    grid.loc[0, "rel_change"] = np.nan
    assert head_report(grid, layer_table, 0, 0).startswith("Head 0.0 masked alone: not tested.")


def test_static_explorer_starts_on_the_costliest_head_and_filters_attention_by_the_click():
    grid, layer_table = grid_and_layers()
    maps = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 4, 5))
    spec = head_explorer_chart(grid, layer_table, attention_table(maps), [f"w{i}" for i in range(5)]).to_dict()
    text = json.dumps(spec)
    assert '"value": [{"layer": 1, "head": 1}]' in text
    assert '"type": "csv"' in text and "layer,head,query,key,weight" in text  # compact, past the 5000-row guard
    assert text.count('"filter": {"param"') == 2  # the attention map and the report line follow the click
    assert "Head 1.1 masked alone" in text


def test_example_view_and_the_live_explorer_on_a_tiny_model(monkeypatch):
    model, tokenizer, encoded = tiny_bert(), StubTokenizer(), tiny_encoded()
    grid, layer_table = grid_and_layers()
    text, chart = example_view(model, tokenizer, encoded, 2, 3, example=1)
    assert text.startswith(f"Example 1: gold grade {encoded.grades[1]}; predicted ")
    assert "with head 2.3 masked" in text
    assert len(chart.data) == len(encoded.input_ids[1]) ** 2 and "t1" in json.dumps(chart.to_dict())
    monkeypatch.delenv("HEADLAB_BOOK", raising=False)
    lab = SimpleNamespace(model=model, tokenizer=tokenizer, encoded=encoded, device="cpu", pad_id=0)
    box = head_explorer(lab, grid, layer_table)
    layer_box, head_box, example_box = box.children[0].children
    out, view = box.children[1:]
    assert "Head 0.0 masked alone" in out.outputs[0]["data"]["text/markdown"]
    assert view.spec["title"] == "head 0.0, example 0"
    head_box.value = 2  # the callback redraws the text and the chart for head 0.2
    example_box.value = 3
    assert len(out.outputs) == 1 and view.spec["title"] == "head 0.2, example 3"
    assert "Head 0.2 masked alone" in out.outputs[0]["data"]["text/markdown"]
    assert "Example 3:" in out.outputs[0]["data"]["text/markdown"] and example_box.max == len(encoded) - 1
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    assert "JupyterLab" in head_explorer(lab, grid, layer_table).data
