"""Words of Chinese text (jieba), and what the word-order and segmentation studies do with them."""
import numpy as np
import pandas as pd
import pytest

from headlab.findings.order import shuffled_frame
from headlab.findings.segmentation import encode_segmented_examples, segment_word_ends, special_tokens
from headlab.inputs.words import chinese_words, has_cjk, word_segmenter
from headlab.models.pretrain import build_vocab, char_tokenizer


def test_chinese_text_is_cut_into_dictionary_words_that_rebuild_the_text():
    text = "一架飞机正在起飞。 中国人民广播电台"
    words = chinese_words(text)
    assert words[:4] == ["一架", "飞机", "正在", "起飞"]
    assert "".join(words) == text.replace(" ", "") and all(w.strip() for w in words)
    assert chinese_words(text) == words  # deterministic


def test_spaced_languages_keep_whitespace_words():
    assert word_segmenter(["a man plays a guitar", "two dogs"]) is None
    assert word_segmenter(["a man", "一个人在弹吉他"]) is chinese_words
    assert has_cjk("中") and not has_cjk("abc １２")


def test_a_chinese_title_is_shuffled_by_words_not_characters():
    frame = pd.DataFrame({"query": ["一个人在弹吉他"], "title": ["一个男人正在弹吉他"], "label": [3]})
    segment = word_segmenter(frame["title"])
    shuffled = shuffled_frame(frame, seed=0, segment=segment)
    before, after = chinese_words(frame["title"][0]), shuffled["title"][0]
    assert after != frame["title"][0] and bool(shuffled["changed"][0])
    assert sorted(after) == sorted(frame["title"][0])  # the same characters
    assert after.startswith(tuple(before)) and all(w in after for w in before)  # words stay whole
    assert shuffled_frame(frame, seed=0, segment=segment)["title"][0] == after  # same seed, same shuffle


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
