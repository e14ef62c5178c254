from types import SimpleNamespace

import numpy as np
import pandas as pd
from conftest import tiny_bert
from IPython.display import Markdown

from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE
from headlab.report.explore_words import case_texts, order_explorer, segmentation_explorer


class Tok:
    vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "a", "b", "##c", "d", "e", "f"]
    all_special_tokens = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    sep_token_id, pad_token_id, unk_token = 2, 0, "[UNK]"

    def convert_ids_to_tokens(self, ids):
        return [self.vocab[i] for i in ids]


def _encoded(order=(7, 8, 9)):
    ids = [[1, 4, 5, 6, 2, *order, 2], [1, 4, 2, 8, 7, 2]]
    return Encoded(ids, [[0] * len(i) for i in ids], np.array([4, 2]), 0, STUDY_SCALE)


def _lab():
    """What the explorers read of a lab: the tiny model, the tokenizer, the original pairs and the run settings."""
    return SimpleNamespace(
        model=tiny_bert(),
        tokenizer=Tok(),
        encoded=_encoded(),
        scale=STUDY_SCALE,
        device="cpu",
        batch_size=64,
        pad_id=0,
    )


def _titles(box):
    return [view.spec["title"] for view in box.children[2:]]


def test_segmentation_explorer_builds_and_updates():
    heads = pd.DataFrame(
        {"subset": "all tokens", "layer": [1], "head": [2], "accuracy": [0.9], "majority": [0.8], "f1": [0.7]}
    )
    box = segmentation_explorer(_lab(), _encoded(), heads=heads, layer=1, head=2)
    example, layer, head = box.children[0].children
    assert (layer.max, head.max) == (2, 3)
    assert "L1H2 on all tokens" in box.children[1].outputs[0]["data"]["text/markdown"]
    assert _titles(box) == ["example 0, L1H2", "L1H2: attention map"]
    example.value = 1
    head.value = 0
    assert box.children[1].outputs[0]["data"]["text/markdown"] == "L1H0"
    assert _titles(box) == ["example 1, L1H0", "L1H0: attention map"]


def test_order_explorer_builds_and_updates():
    frame = pd.DataFrame({"query": ["a b", "a"], "title": ["d e f", "e d"]})
    shuffled = frame.assign(title=["f d e", "d e"])
    texts = case_texts(frame, shuffled, [0, 1])
    assert texts[texts["example"] == 0]["line"].tolist() == ["query: a b", "title: d e f", "shuffled: f d e"]
    ranked = pd.DataFrame(
        {"layer": [0, 2, 1], "head": [1, 3, 0], "rank": [1, 2, 3], "direction": "prev", "score": [0.9, 0.5, 0.2]}
    )
    box = order_explorer(_lab(), _encoded((9, 7, 8)), ranked, texts, k=2, draws=2)
    example, k, rank = box.children[0].children
    assert k.max == 3 and rank.max == 3  # k goes as far as random heads can match the top k, layer by layer
    k.value = 0
    rank.value = 3
    example.value = 1
    assert box.children[1].outputs[0]["data"]["text/markdown"] == "query: a  \ntitle: e d  \nshuffled: d e"
    bars, head_map = _titles(box)
    assert bars.startswith("example 1: top-0 order heads") and head_map.startswith("order head #3: L1H0")


def test_explorers_are_a_note_in_the_book(monkeypatch):
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    assert isinstance(segmentation_explorer(_lab(), _encoded()), Markdown)
    assert isinstance(order_explorer(_lab(), _encoded(), pd.DataFrame(), pd.DataFrame()), Markdown)
