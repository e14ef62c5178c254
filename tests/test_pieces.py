"""headlab.inputs.pieces: which mark a tokenizer writes on its pieces, and the words its pieces make."""

from conftest import minilm_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from headlab.inputs.pieces import SENTENCEPIECE, WORDPIECE, piece_convention, word_spans


def unigram_tokenizer():
    """A tiny fast SentencePiece (unigram) tokenizer, like XLM-R's."""
    vocab = [("<unk>", 0.0), ("▁", -2.0), ("▁a", -1.0), ("b", -1.0)]
    backend = Tokenizer(models.Unigram(vocab, unk_id=0))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


def texts_of(tokens, pieces, special=None):
    special = special or [False] * len(tokens)
    return ["".join(pieces.text(tokens[i]) for i in span) for span in word_spans(tokens, pieces, special)]


def test_the_convention_is_read_off_the_tokenizer():
    assert piece_convention(minilm_tokenizer()) == WORDPIECE
    assert piece_convention(unigram_tokenizer()) == SENTENCEPIECE
    assert piece_convention(object()) == WORDPIECE  # no fast backend: the WordPiece the book was written for


def test_piece_text_drops_the_marks():
    assert [WORDPIECE.text(t) for t in ["play", "##ing", "▁x"]] == ["play", "ing", "▁x"]
    assert [SENTENCEPIECE.text(t) for t in ["▁plane", "plane", "▁", "##"]] == ["plane", "plane", "", "##"]


def test_sentencepiece_words_split_like_berts_at_spaces_punctuation_and_chinese_characters():
    # real e5 pieces of "hello, world's plane" and "一个人在弹吉他。"
    assert texts_of(["▁hell", "o", ",", "▁world", "'", "s", "▁plane"], SENTENCEPIECE) == [
        "hello",
        ",",
        "world",
        "'",
        "s",
        "plane",
    ]
    assert texts_of(["▁", "一个人", "在", "弹", "吉", "他", "。"], SENTENCEPIECE) == [
        "",
        "一个人",
        "在",
        "弹",
        "吉",
        "他",
        "。",
    ]
    assert texts_of(["▁", "ab", "c"], SENTENCEPIECE) == ["abc"]  # a bare ▁ opens the word that follows it


def test_wordpiece_words_join_continuations_and_specials_close_words():
    tokens = ["[CLS]", "una", "##ffa", "##ble", "[SEP]", "##x", "cat"]
    special = [t.startswith("[") for t in tokens]
    assert texts_of(tokens, WORDPIECE, special) == ["unaffable", "x", "cat"]
