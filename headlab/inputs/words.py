"""Words of a text: whitespace where the language uses it, a named dictionary segmenter for Chinese.

Word order (shuffling a title's words) and word segmentation (gold word ends on relevance pairs) need words;
Chinese text has no spaces, so it is cut by jieba's dictionary in precise mode, a segmentation the book names
(:data:`SEGMENTER`) rather than a gold one.
"""

from __future__ import annotations

import functools
import re

# a CJK ideograph, as a regular expression both Python's re and the tokenizers library read (the characters themselves,
# no escapes): Extension A, the Unified Ideographs, the Compatibility Ideographs
CJK_CHARACTER = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
_CJK = re.compile(CJK_CHARACTER)


SEGMENTER = "jieba 0.42.1 (default dictionary, precise mode, HMM for unknown words)"  # pinned in pyproject.toml


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK ideograph (a Chinese character: one that no space separates from the next)."""
    return bool(_CJK.search(text))


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # it announces loading its dictionary on every first use
    return jieba


def chinese_words(text: str) -> list[str]:
    """jieba's words of ``text`` (whitespace dropped)."""
    return [w for w in _jieba().lcut(text) if w.strip()]


def join_words(words: list[str]) -> str:
    """Words written as Chinese text is: without spaces, except one between two words that would otherwise run
    together into another word (Latin letters or digits on both sides: ``Lone Fox``, not ``LoneFox``).

    A shuffle that put ``Fox`` right before ``Lone`` would else make the new word ``FoxLone``, which any
    tokenizer (a SentencePiece one most of all) reads differently from the two words it shuffled.
    """
    text = ""
    for word in words:
        if text and _runs_together(text[-1], word[0]):
            text += " "
        text += word
    return text


def _runs_together(left: str, right: str) -> bool:
    return left.isalnum() and right.isalnum() and not has_cjk(left) and not has_cjk(right)


def word_segmenter(texts):
    """``None`` (split on whitespace) for texts with no Chinese characters, else :func:`chinese_words`."""
    return chinese_words if any(has_cjk(str(t)) for t in texts) else None
