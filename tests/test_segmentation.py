import numpy as np
import pytest

from headlab.model import load_tokenizer
from headlab.segmentation import (baselines, boundary_features, gold_word_ends_from_segmentation,
                                  greedy_oracle_heads, group_split, head_boundary_scores, held_out_split,
                                  oracle_union, probe, read_pku, rule_predictions, segment_word_ends,
                                  wordpiece_word_ends)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


def test_wordpiece_word_ends_on_real_tokens(tokenizer):
    ids = tokenizer("unbelievable xylophonist", "tokenization, playing")["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == ["[CLS]", "unbelievable", "x", "##yl", "##op", "##hon", "##ist", "[SEP]",
                      "token", "##ization", ",", "playing", "[SEP]"]
    ends, scored = wordpiece_word_ends(tokens)
    assert scored.tolist() == [t not in ("[CLS]", "[SEP]") for t in tokens]
    assert np.flatnonzero(ends).tolist() == [1, 6, 9, 10, 11]


def test_gold_alignment_characters_unknowns_and_pieces(tokenizer):
    words = ["中国", "人民", "㈠", "Ａbc"]  # ㈠ and Ａbc are unknown to the MiniLM vocabulary
    tokens = tokenizer.tokenize("".join(words[:2]) + " " + " ".join(words[2:]))
    assert tokens == ["中", "国", "人", "民", "[UNK]", "[UNK]"]
    assert gold_word_ends_from_segmentation(words, tokens).tolist() == [False, True, False, True, True, True]
    # an unknown token in the middle reaches up to the next known token
    assert gold_word_ends_from_segmentation(["ab", "qqq", "cd"], ["ab", "[UNK]", "cd"]).tolist() == [True, True, True]
    assert gold_word_ends_from_segmentation(["ab", "qq", "qcd"], ["ab", "[UNK]", "cd"]).tolist() == [True, False, True]
    # multi-character pieces, ## continuations, and a piece crossing a gold boundary (judged by its last character)
    assert gold_word_ends_from_segmentation(["playing", "ok"], ["play", "##ing", "ok"]).tolist() == [False, True, True]
    assert gold_word_ends_from_segmentation(["中国", "人"], ["中", "国人"]).tolist() == [False, True]


def test_gold_alignment_mismatch_is_named():
    with pytest.raises(ValueError, match="'美'"):
        gold_word_ends_from_segmentation(["中国", "人"], ["中", "美", "人"])
    with pytest.raises(ValueError, match="not covered"):
        gold_word_ends_from_segmentation(["中国", "人"], ["中", "国"])


def test_segment_word_ends_per_segment():
    tokens = ["[CLS]", "中", "国", "[SEP]", "人", "民", "好", "[SEP]"]
    ends, scored = segment_word_ends(tokens, [["中国"], ["人民", "好"]])
    assert scored.tolist() == [False, True, True, False, True, True, True, False]
    assert ends.tolist() == [False, False, True, False, False, True, True, False]


def test_read_pku_real_format(tmp_path):
    path = tmp_path / "199801.txt"
    path.write_text(
        "19980101-01-001-001/m  迈向/v  充满/v  希望/v  的/u  新/a  世纪/n  ——/w  一九九八年/t\n"
        "\n"
        "19980101-01-001-002/m  我/r  通过/p  [中央/n  人民/n  广播/vn  电台/n]nt  ，/w  说/v  “/w  好/a  。/w  ”/w  "
        "１/２/m  年/q  ！/w\n",
        encoding="utf-8")
    sentences = read_pku(path)
    assert sentences == [["迈向", "充满", "希望", "的", "新", "世纪", "——", "一九九八年"],
                         ["我", "通过", "中央", "人民", "广播", "电台", "，", "说", "“", "好", "。", "”"],
                         ["１/２", "年", "！"]]
    assert read_pku(path, limit_sentences=2) == sentences[:2]
    assert len(read_pku(path, split_sentences=False)) == 2


def test_held_out_split_is_deterministic_and_disjoint():
    sentences = [[f"词{i}", "的", f"{i % 7}"] for i in range(400)] + [["重复"]] * 5
    train, held = held_out_split(sentences, 0.2, seed=3)
    assert sorted(map(tuple, held)) == sorted(map(tuple, held_out_split(sentences[::-1], 0.2, seed=3)[1]))
    train2, held2 = held_out_split(sentences, 0.2, seed=3)
    assert train == train2 and held == held2
    assert len(train) + len(held) == len(sentences)
    assert not {"".join(s) for s in train} & {"".join(s) for s in held}
    assert 40 < len(held) < 120
    assert held_out_split(sentences, 0.2, seed=4)[1] != held


def _maps_with_rule(gold: np.ndarray, inverse: bool = False) -> tuple[np.ndarray, list[int], np.ndarray]:
    """One head (1 layer, 2 heads) that follows the study's rule, and one that does the opposite."""
    n = len(gold)
    T = n + 2  # [CLS] tokens... [SEP]
    maps = np.zeros((1, 2, T, T))
    sep = T - 1
    for i, end in enumerate(gold):
        t = i + 1
        for h, follows in enumerate((True, False)):
            to_sep = end if follows else not end
            maps[0, h, t, sep if to_sep else t + 1] = 0.9
            maps[0, h, t, 0] = 0.1
    return maps, [sep], np.arange(1, n + 1)


def test_rule_predictions_and_features():
    gold = np.array([False, True, True, False, False, True])
    maps, seps, scored = _maps_with_rule(gold)
    pred = rule_predictions(maps, seps, scored)
    assert pred.shape == (1, 2, 6)
    # the inverse head is wrong everywhere but on the token before [SEP], which has no next character
    assert head_boundary_scores(pred, gold)["accuracy"].tolist() == [1.0, pytest.approx(1 / 6)]
    inner = rule_predictions(maps, seps, scored[:-1])
    assert head_boundary_scores(inner, gold[:-1])["accuracy"].tolist() == [1.0, 0.0]
    feats = boundary_features(maps, seps, scored)
    assert feats.shape == (6, 2)
    np.testing.assert_allclose(feats[:, 0], np.where(gold, 0.9, -0.9))
    assert feats[-1, 1] == pytest.approx(0.9) and pred[0, 1, -1]


def test_head_boundary_scores_by_hand():
    gold = np.array([True, True, False, False, True])
    pred = np.array([True, False, True, False, True])[None, None, :]
    row = head_boundary_scores(pred, gold, groups=[0, 0, 1, 1, 2], n_boot=50).iloc[0]
    assert row["accuracy"] == pytest.approx(3 / 5)
    assert row["precision"] == pytest.approx(2 / 3)
    assert row["recall"] == pytest.approx(2 / 3)
    assert row["f1"] == pytest.approx(2 / 3)
    assert row["n_tokens"] == 5
    assert row["accuracy_lo"] <= row["accuracy"] <= row["accuracy_hi"]
    base = baselines(gold).set_index("baseline")
    assert base.loc["always word end", "accuracy"] == pytest.approx(0.6)
    assert base.loc["always word end", "recall"] == 1.0
    assert base.loc["always word end", "f1"] == pytest.approx(2 * 3 / (2 * 3 + 2))
    assert base.loc["majority class", "accuracy"] == pytest.approx(0.6)


def test_oracle_union_and_greedy_curve():
    rng = np.random.default_rng(0)
    gold = rng.random(200) < 0.4
    pred = rng.random((2, 3, 200)) < 0.5
    pred[0, 1] = gold ^ (rng.random(200) < 0.2)  # the best single head
    pred[1, 2] = ~pred[0, 1]  # its complement
    best = head_boundary_scores(pred, gold)["accuracy"].max()
    assert oracle_union(pred, gold, [(0, 0), (0, 2)]) >= max(head_boundary_scores(pred, gold)["accuracy"].iloc[[0, 2]])
    assert oracle_union(pred, gold, [(0, 1), (1, 2)]) == 1.0
    curve = greedy_oracle_heads(pred, gold, 3)
    assert curve["k"].tolist() == [1, 2, 3]
    assert curve["union_accuracy"].iloc[0] == pytest.approx(best)
    assert curve["union_accuracy"].is_monotonic_increasing
    assert curve["union_accuracy"].iloc[1] == 1.0


def test_probe_learns_separable_toy_and_keeps_groups_apart():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(60), 10)
    x = rng.normal(size=(600, 4))
    gold = x[:, 2] - 0.5 * x[:, 0] > 0
    test = group_split(groups, 0.25, seed=1)
    assert not set(groups[test]) & set(groups[~test])
    assert set(groups[test]) | set(groups[~test]) == set(range(60))
    result = probe(x, gold, groups, seed=1, test_share=0.25)
    assert result["n_test_groups"] == 15 and result["n_train"] + result["n_test"] == 600
    assert result["test_accuracy"] > 0.95 and result["train_accuracy"] > 0.95
    assert abs(result["weights"][2]) > abs(result["weights"][1]) and result["weights"].shape == (4,)
