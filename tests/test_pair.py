"""headlab.inputs.pair: one encoded pair read once (roles, terms, shared terms), whatever the model's pieces."""

import pytest
from conftest import minilm_tokenizer

from headlab.core.evaluate import encode
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.pair import read_pair
from headlab.measures.roles import ENGLISH_STOPWORDS
from headlab.models.loading import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def pair(tokenizer, query, title, stopwords=None):
    return read_pair(tokenizer, tokenizer(query, title)["input_ids"], stopwords)


@pytest.fixture
def toy(tokenizer):
    # 0 [CLS] 1 red 2 cat 3 , 4 red 5 [SEP] 6 the 7 cat 8 , 9 red 10 ! 11 [SEP]
    return pair(tokenizer, "red cat, red", "the cat, red!")


def test_roles_of_a_pair_with_two_separators_in_the_middle(mpnet_folder, mpnet_pairs):
    """MPNet joins a pair as `<s> a </s></s> b </s>`."""
    tokenizer = load_tokenizer(str(mpnet_folder))
    roles = read_pair(tokenizer, encode(tokenizer, mpnet_pairs, STUDY_SCALE).input_ids[0])
    assert roles.tokens == ["<s>", "a", "cat", "sat", "on", "the", "mat", "</s>", "</s>", "the", "dog", "ran", "</s>"]
    assert (roles.cls, roles.seps) == (0, [7, 8, 12])
    assert [roles.tokens[i] for i in roles.query] == ["a", "cat", "sat", "on", "the", "mat"]
    assert [roles.tokens[i] for i in roles.title] == ["the", "dog", "ran"]


def test_a_pair_reads_its_words_content_and_shared_positions_once(tokenizer, toy):
    assert [w.text for w in toy.query_words] == ["red", "cat", "red"]
    assert [(w.text, w.positions) for w in toy.title_words] == [("the", [6]), ("cat", [7]), ("red", [9])]
    assert toy.content == [1, 2, 3, 4, 6, 7, 8, 9, 10]  # punctuation is content, [CLS] and [SEP]s are not
    assert toy.shared_positions == {1, 2, 4, 7, 9}
    stopped = pair(tokenizer, "red cat, red", "the cat, red!", ENGLISH_STOPWORDS)
    assert [w.text for w in stopped.title_words] == ["cat", "red"]


def test_a_pair_without_two_separators_is_refused_with_its_tokens(tokenizer):
    with pytest.raises(ValueError, match=r"expected \[CLS\] query \[SEP\] title \[SEP\].*red"):
        read_pair(tokenizer, tokenizer("red cat")["input_ids"])


def test_shared_terms_skip_punctuation_specials_and_stopwords(tokenizer, toy):
    assert toy.shared == [(1, 9), (2, 7), (4, 9)]
    assert pair(tokenizer, "red cat, red", "the cat, red!", {"red"}).shared == [(2, 7)]


def test_shared_terms_compare_whole_pieces_and_never_unknown_tokens(tokenizer):
    tokens = pair(tokenizer, "unaffable 我在大", "unaffable 我在大")
    by_text = {(tokens.tokens[q], tokens.tokens[t]) for q, t in tokens.shared}
    assert "[UNK]" in tokens.tokens  # 在 is not in the MiniLM vocabulary
    assert by_text == {("una", "una"), ("##ffa", "##ffa"), ("##ble", "##ble"), ("我", "我"), ("大", "大")}


def test_shared_terms_are_whole_words_not_pieces_of_other_words(tokenizer):
    tokens = pair(tokenizer, "xylophonist", "harpist cellist")
    assert tokens.tokens == [
        "[CLS]",
        "x",
        "##yl",
        "##op",
        "##hon",
        "##ist",
        "[SEP]",
        "harp",
        "##ist",
        "cell",
        "##ist",
        "[SEP]",
    ]
    assert tokens.shared == []  # the same ##ist piece, in other words


@pytest.mark.slow
def test_e5_shared_terms_join_pieces_into_words_whatever_their_marks(e5_tokenizer):
    tokens = pair(e5_tokenizer, "The plane is taking off.", "An air-plane: the plane is off.")
    assert tokens.tokens == [
        "<s>",
        "▁The",
        "▁plane",
        "▁is",
        "▁taking",
        "▁off",
        ".",
        "</s>",
        "</s>",
        "▁An",
        "▁air",
        "-",
        "plan",
        "e",
        ":",
        "▁the",
        "▁plane",
        "▁is",
        "▁off",
        ".",
        "</s>",
    ]
    by_text = {(tokens.tokens[q], tokens.tokens[t]) for q, t in tokens.shared}
    # ▁plane is the same word as "plan e" after the hyphen; "The" and "the" are one word, e5 keeps case
    assert by_text == {
        ("▁The", "▁the"),
        ("▁plane", "▁plane"),
        ("▁plane", "plan"),
        ("▁plane", "e"),
        ("▁is", "▁is"),
        ("▁off", "▁off"),
    }
    assert not {"▁The", "▁is", "▁off"} & {
        tokens.tokens[q] for q, _ in read_pair(e5_tokenizer, tokens.ids, ENGLISH_STOPWORDS).shared
    }


@pytest.mark.slow
def test_e5_shared_terms_in_chinese_are_identical_pieces_and_never_the_bare_mark(e5_tokenizer):
    tokens = pair(e5_tokenizer, "一个人在弹吉他。", "一个男人在弹吉他。")
    assert tokens.tokens[:3] == ["<s>", "▁", "一个人"] and tokens.tokens[10:13] == ["▁", "一个", "男人"]
    assert {(tokens.tokens[q], tokens.tokens[t]) for q, t in tokens.shared} == {
        ("在", "在"),
        ("弹", "弹"),
        ("吉", "吉"),
        ("他", "他"),
    }
