"""headlab.inputs.words: words of Chinese text (jieba) and of spaced languages (test_order.py and
test_segmentation.py check what the word-order and segmentation studies do with them)."""

from headlab.inputs.words import chinese_words, has_cjk, join_words, word_segmenter


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


def test_words_join_without_spaces_but_between_latin_words():
    assert join_words(["最初", "是", "由", "Lone", "Fox", "发布"]) == "最初是由Lone Fox发布"
    assert join_words(["Fox", "Lone", "的", "1", "GB", "。"]) == "Fox Lone的1 GB。"
    assert join_words(["T恤", "衫", "(", "Leon", ")"]) == "T恤衫(Leon)"
