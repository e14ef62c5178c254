from types import SimpleNamespace

import numpy as np
import pytest
from conftest import minilm_tokenizer, tiny_bert

from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.pieces import SENTENCEPIECE
from headlab.measures.segmentation import (
    baselines,
    boundary_data,
    boundary_example,
    boundary_examples,
    boundary_features,
    encode_segmented,
    encode_segmented_examples,
    gold_word_ends_from_segmentation,
    greedy_oracle_heads,
    group_split,
    head_boundary_scores,
    held_out_best_head,
    multi_token_words,
    oracle_union,
    piece_word_ends,
    probe,
    readable_examples,
    rule_positions,
    rule_predictions,
    segment_word_ends,
    shuffled_union_control,
    special_tokens,
)
from headlab.models.pretrain import build_vocab, char_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def test_piece_word_ends_on_real_tokens(tokenizer):
    ids = tokenizer("unbelievable xylophonist", "tokenization, playing")["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == [
        "[CLS]",
        "unbelievable",
        "x",
        "##yl",
        "##op",
        "##hon",
        "##ist",
        "[SEP]",
        "token",
        "##ization",
        ",",
        "playing",
        "[SEP]",
    ]
    ends, scored = piece_word_ends(tokens)
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
    # the token before [SEP] has no next token: the inverse head would be right there for free
    for read in (rule_predictions, boundary_features):
        with pytest.raises(ValueError, match=r"right before \[SEP\]"):
            read(maps, seps, scored)
    inner = scored[:-1]
    pred = rule_predictions(maps, seps, inner)
    assert pred.shape == (1, 2, 5)
    assert head_boundary_scores(pred, gold[:-1])["accuracy"].tolist() == [1.0, 0.0]
    feats = boundary_features(maps, seps, inner)
    assert feats.shape == (5, 2)
    np.testing.assert_allclose(feats[:, 0], np.where(gold[:-1], 0.9, -0.9))
    # a text whose only token ends its segment has nothing scored (a one-piece People's Daily line for e5)
    none = np.array([], dtype=int)
    assert boundary_features(maps, seps, none).shape == (0, 2) and rule_predictions(maps, seps, none).shape == (1, 2, 0)


def test_rule_positions_leave_out_the_last_token_of_each_segment():
    _, content = piece_word_ends(["[CLS]", "play", "##ing", "cat", "[SEP]", "token", "##s", "[SEP]"])
    scored, before_sep = rule_positions(content)
    assert scored.tolist() == [1, 2, 5] and before_sep.tolist() == [3, 6]
    _, content = segment_word_ends(["[CLS]", "中", "国", "[SEP]", "人", "[SEP]"], [["中国"], ["人"]])
    assert [p.tolist() for p in rule_positions(content)] == [[1], [2, 4]]  # a one-token segment has nothing scored


def _next_token_maps(ids: list[int]) -> np.ndarray:
    """(1 layer, 2 heads, T, T): head 0 attends to the next token from every token, head 1 to the last [SEP]."""
    n = len(ids)
    maps = np.zeros((1, 2, n, n))
    maps[0, 0, np.arange(n), np.minimum(np.arange(n) + 1, n - 1)] = 1.0
    maps[0, 1, :, n - 1] = 1.0
    return maps


def next_token_heads(encoded):
    """Hand-made attention instead of a model's (boundary data are a function of maps): :func:`_next_token_maps`."""
    for example in range(len(encoded)):
        yield example, _next_token_maps(encoded.input_ids[example])


def test_no_free_hit_before_sep_for_the_heads_or_the_probe(tokenizer):
    """Before [SEP], a head that always attends to the next token attends to that [SEP]: the old rule called a word
    end there, always right. Those tokens are left out of the calls and of the probe's rows, and counted."""
    ids = tokenizer("playing cat", "tokenization")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "playing", "cat", "[SEP]", "token", "##ization", "[SEP]"]
    one = Encoded([ids], [[0] * len(ids)], np.zeros(1), 0, STUDY_SCALE)
    wordpiece = boundary_data(next_token_heads(one), one, tokenizer)
    assert wordpiece.gold.tolist() == [True, False]  # playing, token; cat and ##ization left out
    assert wordpiece.excluded_multi.tolist() == [False, True]  # ##ization belongs to a word of two tokens
    chinese = encode_segmented_examples(ToyTokenizer(), [[["ab", "c"], ["中", "国人"]], [["abcd"]]])
    characters = boundary_data(
        next_token_heads(chinese.encoded), chinese.encoded, ToyTokenizer(), segments=chinese.segments
    )
    assert characters.gold.tolist() == [False, True, True, False, False, False, False]  # a b 中 国 | a b c
    assert characters.groups.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert characters.excluded_multi.tolist() == [False, True, True]  # c, 人, d
    for data in (wordpiece, characters):
        assert not data.pred[0, 0].any()  # the next-token head says "inside a word" on every scored token
        assert data.pred[0, 1].all()
        assert data.features.shape == (len(data.gold), 2)  # one probe row per scored token, none for the left out
        np.testing.assert_allclose(data.features[:, 0], -1.0)
        np.testing.assert_allclose(data.features[:, 1], 1.0)


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
    assert result["test_accuracy_lo"] <= result["test_accuracy"] <= result["test_accuracy_hi"]
    assert result["gain"] == pytest.approx(result["test_accuracy"] - result["test_majority_accuracy"])
    assert abs(result["weights"][2]) > abs(result["weights"][1]) and result["weights"].shape == (4,)


def test_multi_token_words():
    tokens = ["[CLS]", "unbelievable", "x", "##yl", "##ist", "[SEP]", "token", "##ization", ",", "[SEP]"]
    ends, scored = piece_word_ends(tokens)
    assert np.flatnonzero(multi_token_words(ends, scored)).tolist() == [2, 3, 4, 6, 7]
    ends, scored = segment_word_ends(["[CLS]", "中", "国", "人", "[SEP]"], [["中国", "人"]])
    assert multi_token_words(ends, scored).tolist() == [False, True, True, False, False]


class ToyTokenizer:
    """Just enough of a tokenizer for tiny_bert: one token per character, 'x' unknown, '?' dropped."""

    vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "a", "b", "c", "d", "中", "国", "人"]
    all_special_tokens = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    sep_token_id, pad_token_id, unk_token = 2, 0, "[UNK]"

    def __call__(self, *texts, **kwargs):
        ids = [1]
        for text in texts:
            ids += [self.vocab.index(c) if c in self.vocab else 3 for c in text if c != "?"] + [2]
        return {"input_ids": ids, "token_type_ids": [0] * len(ids)}

    def convert_ids_to_tokens(self, ids):
        return [self.vocab[i] for i in ids]


def test_encode_segmented_keeps_what_fits_and_aligns(tokenizer):
    sentences = [["中国", "人"], ["ab", "c"], ["abcd"] * 10]
    out = encode_segmented(ToyTokenizer(), sentences, max_length=12)
    assert len(out) == 2 and out.n_too_long == 1 and out.n_unaligned == 0
    assert out.segments == [[["中国", "人"]], [["ab", "c"]]]
    assert out.encoded.input_ids[0] == [1, 8, 9, 10, 2]
    assert encode_segmented(ToyTokenizer(), [["a?", "b"]]).n_unaligned == 1  # the tokenizer dropped '?'
    unknown = encode_segmented(ToyTokenizer(), [["ax", "b"]])  # [UNK] stands for 'x' and is scored
    assert len(unknown) == 1 and unknown.encoded.input_ids[0] == [1, 4, 3, 5, 2]
    real = encode_segmented(tokenizer, [["中国", "人民", "㈠", "好"]])  # MiniLM knows no ㈠
    assert len(real) == 1 and "[UNK]" in tokenizer.convert_ids_to_tokens(real.encoded.input_ids[0])


def test_boundary_data_and_example_agree_on_a_tiny_model():
    tok = ToyTokenizer()
    sentences = [["中国", "人"], ["ab", "c", "d"], ["abcd"]]
    data_set = encode_segmented(tok, sentences)
    data = boundary_data(
        attention_maps(tiny_bert(), data_set.encoded, batch_size=2), data_set.encoded, tok, segments=data_set.segments
    )
    # the last token of each sentence (人, d, d) is left out
    assert data.pred.shape == (3, 4, 2 + 3 + 3) and data.features.shape == (8, 12)
    assert data.gold.tolist() == [False, True, False, True, True, False, False, False]
    assert data.multi.tolist() == [True, True, True, True, False, True, True, True]
    assert data.groups.tolist() == [0] * 2 + [1] * 3 + [2] * 3
    assert data.excluded_multi.tolist() == [False, False, True]
    sub = data.subset(data.multi, data.excluded_multi)
    assert sub.pred.shape[-1] == sub.gold.size == sub.groups.size == 7 and sub.multi.all()
    assert sub.excluded_multi.tolist() == [True]
    lab = SimpleNamespace(model=tiny_bert(), tokenizer=tok, device="cpu", batch_size=32, pad_id=0)
    example = boundary_example(lab, data_set.encoded, 1, segments=data_set.segments)
    assert example.maps.shape == (3, 4, 6, 6) and example.tokens == ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    head = example.table[(example.table["layer"] == 2) & (example.table["head"] == 1)]
    assert head["token"].tolist() == ["a", "b", "c"]
    assert head["predicted_end"].tolist() == data.pred[2, 1, data.groups == 1].tolist()
    assert head["gold_end"].tolist() == [False, True, True]
    assert (head["predicted_end"] == (head["to_sep"] > head["to_next"])).all()
    several = boundary_examples(lab, data_set.encoded, [2, 0], data_set.segments, first_head=(1, 3))
    assert several["example"].tolist() == [2] * 36 + [0] * 24
    assert several.iloc[0][["layer", "head", "position"]].tolist() == [1, 3, 1]
    assert several.iloc[36][["layer", "head"]].tolist() == [1, 3]
    assert readable_examples(data) == [2] and readable_examples(data, n=3) == [2, 0, 1]
    assert readable_examples(data, n=2, max_tokens=2) == [0]
    assert readable_examples(data, n=2, max_tokens=1) == [0, 1]  # none is that short: the shortest
    unknown = encode_segmented(tok, [["ax", "b"]])
    data = boundary_data(attention_maps(tiny_bert(), unknown.encoded), unknown.encoded, tok, segments=unknown.segments)
    assert data.gold.tolist() == [False, True] and data.multi.tolist() == [True, True]


def test_shuffled_union_control_reaches_the_oracle_by_chance():
    rng = np.random.default_rng(0)
    gold = rng.random(2000) < 0.95  # English WordPiece: nearly every token ends a word
    pred = rng.random((2, 4, 2000)) < rng.random((2, 4, 1))  # heads that ignore the text
    control = shuffled_union_control(pred, gold, max_heads=3, draws=4, seed=1)
    assert control["draw"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3] and control["k"].max() == 3
    assert control.equals(shuffled_union_control(pred, gold, max_heads=3, draws=4, seed=1))
    at_three = control[control["k"] == 3]["union_accuracy"]
    assert (at_three > 0.95).all()
    real = greedy_oracle_heads(pred, gold, 3)["union_accuracy"].iloc[-1]
    assert abs(real - at_three.mean()) < 0.02


def test_held_out_best_head_picks_on_train_and_scores_on_test():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(100), 8)
    gold = rng.random(800) < 0.6
    pred = rng.random((2, 3, 800)) < 0.5
    pred[1, 2] = gold ^ (rng.random(800) < 0.1)  # a head right 90% of the time
    result = held_out_best_head(pred, gold, groups, test_share=0.3, seed=0, n_boot=200)
    assert (result["layer"], result["head"]) == (1, 2)
    assert result["n_test_groups"] == 30 and result["n_train"] + result["n_test"] == 800
    test = group_split(groups, 0.3, seed=0)
    assert result["test_accuracy"] == pytest.approx(np.mean(pred[1, 2, test] == gold[test]))
    assert result["test_majority_accuracy"] == pytest.approx(np.mean(gold[test]))
    assert result["gain"] == pytest.approx(result["test_accuracy"] - result["test_majority_accuracy"])
    assert result["gain_lo"] < result["gain"] < result["gain_hi"] and result["gain_lo"] > 0
    assert result["test_accuracy_lo"] < result["test_accuracy"] < result["test_accuracy_hi"]


def test_query_title_pairs_align_to_their_words_segment_by_segment():
    tokenizer = char_tokenizer(build_vocab(["我们喜欢北京１９９８年"], min_count=1))
    examples = [[["我们", "喜欢"], ["北京", "１９９８年"]], [["我们"], ["喜欢", "上海"]]]  # 上海 is unknown: [UNK]s
    data = encode_segmented_examples(tokenizer, examples)
    assert len(data) == 2 and data.n_unaligned == 0 and data.segments == [[list(s) for s in e] for e in examples]
    tokens = tokenizer.convert_ids_to_tokens(data.encoded.input_ids[0])
    assert tokens == ["[CLS]", "我", "们", "喜", "欢", "[SEP]", "北", "京", "１", "##９", "##９", "##８", "年", "[SEP]"]
    ends, scored = segment_word_ends(tokens, data.segments[0], special_tokens(tokenizer))
    assert np.flatnonzero(ends).tolist() == [2, 4, 7, 12]
    assert data.encoded.token_type_ids[0][6] == 1  # the title is the second segment
    with pytest.raises(ValueError, match="one or two segments"):
        encode_segmented_examples(tokenizer, [[["我"], ["们"], ["喜"]]])


# --- SentencePiece (XLM-R, multilingual e5): "▁" starts a word, a bare "▁" holds no text --------------------

E5_SPECIALS = {"<s>", "</s>", "<pad>", "<mask>"}


def test_sentencepiece_word_ends_follow_the_word_start_mark():
    tokens = ["<s>", "▁hell", "o", ",", "▁world", "'", "s", "▁plane", "</s>"]  # e5's pieces of "hello, world's plane"
    ends, content = piece_word_ends(tokens, E5_SPECIALS, SENTENCEPIECE)
    assert content.tolist() == [False] + [True] * 7 + [False]
    assert np.flatnonzero(ends).tolist() == [2, 3, 4, 5, 6, 7]  # hello , world ' s plane: punctuation stands alone
    ends, content = piece_word_ends(["<s>", "▁", "一个人", "在", "。", "</s>"], E5_SPECIALS, SENTENCEPIECE)
    assert content.tolist() == [False, False, True, True, True, False]  # the bare ▁ is no text
    assert ends.tolist() == [False, False, True, True, True, False]  # Chinese pieces are words, as to BERT


def test_sentencepiece_pieces_align_to_gold_words_by_their_text():
    tokens = ["▁", "迈", "向", "充满", "希望", "的新", "世纪"]  # e5's pieces of 迈向充满希望的新世纪
    words = ["迈向", "充满", "希望", "的", "新", "世纪"]
    assert gold_word_ends_from_segmentation(words, tokens, SENTENCEPIECE).tolist() == [
        False,
        False,
        True,
        True,
        True,
        True,
        True,
    ]
    assert gold_word_ends_from_segmentation(["１９９８年"], ["▁1998", "年"], SENTENCEPIECE).tolist() == [False, True]


def test_sentencepiece_pairs_keep_separators_and_bare_marks_out_of_the_score():
    tokens = ["<s>", "▁", "一个", "人", "</s>", "</s>", "▁", "弹", "吉他", "</s>"]
    ends, content = segment_word_ends(tokens, [["一个人"], ["弹", "吉他"]], E5_SPECIALS, SENTENCEPIECE)
    assert np.flatnonzero(content).tolist() == [2, 3, 7, 8]
    assert np.flatnonzero(ends).tolist() == [3, 7, 8]
    special = np.array([t in E5_SPECIALS for t in tokens])
    assert [p.tolist() for p in rule_positions(content, special)] == [[2, 7], [3, 8]]


def test_a_bare_mark_inside_a_segment_does_not_end_it():
    tokens = ["<s>", "▁中国", "▁", "充满", "</s>"]  # a space before a piece that has no ▁ form
    ends, content = piece_word_ends(tokens, E5_SPECIALS, SENTENCEPIECE)
    special = np.array([t in E5_SPECIALS for t in tokens])
    assert ends.tolist() == [False, True, False, True, False]
    assert [p.tolist() for p in rule_positions(content, special)] == [[1], [3]]


@pytest.mark.slow
def test_real_e5_pairs_align_and_score_neither_specials_nor_bare_marks(e5_tokenizer):
    examples = [
        [["一个", "人", "在", "弹", "吉他", "。"], ["一个", "男人", "在", "弹", "吉他", "。"]],
        [["迈向", "充满", "希望", "的", "新", "世纪"], ["１９９８年", "新年", "讲话"]],
    ]
    data = encode_segmented_examples(e5_tokenizer, examples)
    assert (len(data), data.n_unaligned) == (2, 0)
    tokens = e5_tokenizer.convert_ids_to_tokens(data.encoded.input_ids[1])
    assert tokens == [
        "<s>",
        "▁",
        "迈",
        "向",
        "充满",
        "希望",
        "的新",
        "世纪",
        "</s>",
        "</s>",
        "▁1998",
        "年",
        "新年",
        "讲话",
        "</s>",
    ]
    n = len(tokens)
    scored = boundary_data(iter([(1, np.full((1, 1, n, n), 1.0 / n))]), data.encoded, e5_tokenizer, data.segments)
    ends, content = segment_word_ends(tokens, examples[1], special_tokens(e5_tokenizer), SENTENCEPIECE)
    assert np.flatnonzero(ends).tolist() == [3, 4, 5, 6, 7, 11, 12, 13]
    positions, before_sep = rule_positions(content, np.isin(tokens, ["<s>", "</s>"]))
    assert positions.tolist() == [2, 3, 4, 5, 6, 10, 11, 12] and before_sep.tolist() == [7, 13]
    assert scored.gold.tolist() == ends[positions].tolist() and len(scored.excluded_multi) == 2


@pytest.mark.slow
def test_real_e5_english_word_ends_are_its_words_last_pieces(e5_tokenizer):
    ids = e5_tokenizer("An unbelievable xylophonist", "tokenization, playing")["input_ids"]
    tokens = e5_tokenizer.convert_ids_to_tokens(ids)
    ends, content = piece_word_ends(tokens, special_tokens(e5_tokenizer), SENTENCEPIECE)
    words, word = [], ""
    for token, end in zip(np.asarray(tokens)[content], ends[content]):
        word += SENTENCEPIECE.text(token)
        if end:
            words, word = words + [word], ""
    assert words == ["An", "unbelievable", "xylophonist", "tokenization", ",", "playing"]
