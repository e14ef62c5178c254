import numpy as np
import pandas as pd
import pytest
from tiny_setup import masked_first_layer, tiny_setup

from headlab.measures.attention_compare import (
    DIFFERENCE,
    compare_maps,
    identical_share,
    identical_takeaway,
    token_labels,
)
from headlab.measures.roles import ENGLISH_STOPWORDS


def test_token_labels_sort_in_sentence_order():
    labels = token_labels([f"t{i}" for i in range(12)])
    assert labels[:2] == ["00 t0", "01 t1"] and sorted(labels) == labels


@pytest.fixture
def setup(tmp_path):
    return tiny_setup(tmp_path)


def test_compare_maps_gives_runs_and_their_difference(setup):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    cells = compare_maps(setup, runs, [0, 1], [(0, 0), (2, 3)], min_weight=0.0)
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
    cells = compare_maps(setup, runs, [0], [(1, 1)], min_weight=0.5, stopwords=ENGLISH_STOPWORDS)
    assert DIFFERENCE not in cells.columns
    faint = (cells["all"] < 0.5) & (cells["query"] != cells["key"]) & ~cells["identical"]
    assert not faint.any() and (cells["query"] == cells["key"]).sum() == len(setup.encoded.input_ids[0])


def test_the_maps_caption_measures_attention_on_identical_terms_per_run():
    # one head, pair 3: token 1 has an identical term at 5 (0.6 of its row, 0.2 when masked); token 2 has none
    cells = pd.DataFrame(
        {
            "example": 3,
            "layer": 0,
            "head": 0,
            "query": [1, 1, 2, 2],
            "key": [5, 0, 0, 2],
            "identical": [True, False, False, False],
            "all heads": [0.6, 0.4, 0.5, 0.5],
            "masked": [0.2, 0.8, 0.5, 0.5],
        }
    )
    assert identical_share(cells, "all heads", 3) == 0.6 and identical_share(cells, "masked", 3) == 0.2
    assert identical_takeaway(cells, ["all heads", "masked"], 3).endswith("all heads: 60%; masked: 20%.")
    assert identical_share(cells, "masked", 4) != identical_share(cells, "masked", 4)  # no such pair: NaN
