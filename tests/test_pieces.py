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


def _byte_level_tokenizer():
    """A small byte-level BPE tokenizer (RoBERTa's kind), trained here: no download."""
    from tokenizers import ByteLevelBPETokenizer, processors

    trained = ByteLevelBPETokenizer()
    text = ["the cat sat on the mat", "a dog ran in the park, quickly!", "cats and dogs sat"] * 20
    trained.train_from_iterator(text, vocab_size=300, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    trained._tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(
        tokenizer_object=trained._tokenizer,
        bos_token="<s>",
        cls_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


def test_byte_level_pieces_start_words_at_their_space_mark_and_pairs_share_terms():
    """RoBERTa's byte-level BPE marks a word's first piece with the space it read (``Ġ``): words join the pieces
    after it, punctuation stands alone, and a query and title share the words they both hold."""
    from headlab.inputs.pair import read_pair
    from headlab.inputs.pieces import BYTE_LEVEL

    tokenizer = _byte_level_tokenizer()
    assert piece_convention(tokenizer) == BYTE_LEVEL
    tokens = ["<s>", "the", "Ġcat", "Ġsat", "Ġquick", "ly", ",", "Ġon", "Ġmat", "s", "</s>"]
    special = [t in ("<s>", "</s>") for t in tokens]
    words = ["".join(BYTE_LEVEL.text(tokens[i]) for i in span) for span in word_spans(tokens, BYTE_LEVEL, special)]
    assert words == ["the", "cat", "sat", "quickly", ",", "on", "mats"]
    ids = tokenizer("the cat sat on mats", "a dog sat, quickly")["input_ids"]
    pair = read_pair(tokenizer, ids)
    shared = {pair.tokens[q] for q, _ in pair.shared}
    assert shared == {"Ġsat"} and [w.text for w in pair.query_words] == ["the", "cat", "sat", "on", "mats"]


def test_a_byte_level_pre_tokenizer_inside_a_sequence_is_read_as_byte_level():
    from tokenizers import pre_tokenizers

    from headlab.inputs.pieces import BYTE_LEVEL

    tokenizer = _byte_level_tokenizer()
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(), pre_tokenizers.ByteLevel()]
    )
    assert piece_convention(tokenizer) == BYTE_LEVEL
    assert piece_convention(minilm_tokenizer()) == WORDPIECE
