"""How a tokenizer's pieces make words: WordPiece marks a word's later pieces (``##``), SentencePiece its first (``▁``),
and byte-level BPE (RoBERTa's, GPT-2's) its first with the space it read (``Ġ``).

The findings read words off token strings (word ends, shared terms), so they need to know which mark the
tokenizer writes. A WordPiece tokenizer (BERT, MiniLM, the character models headlab pretrains) has already cut
the text at spaces, punctuation and each Chinese character before it cuts pieces, so a piece without ``##``
starts a word. A SentencePiece unigram tokenizer (XLM-R, multilingual e5) cuts only at spaces, and its pieces
may hold several Chinese characters (``▁一个人``) or stand alone as a bare ``▁`` before a piece that has no
``▁`` form. Its words are made the same as BERT's here: a piece also starts a word where punctuation or a
Chinese character begins it or ends the piece before it, so word ends and shared terms mean the same for both.
Byte-level BPE reads the same way as SentencePiece with ``Ġ`` for ``▁`` (its first word has no space before it, and
follows a special token): a non-ASCII character is written as the bytes' stand-in letters, the same for the query's
word and the title's, so shared terms match, though they print oddly.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

from headlab.inputs.words import has_cjk


@dataclass(frozen=True)
class Pieces:
    """A tokenizer's piece convention: the prefix that marks a continuing piece, or the one that marks a word start."""

    continuation: str = ""  # WordPiece: "##"
    word_start: str = ""  # SentencePiece: "▁"

    def text(self, piece: str) -> str:
        """The characters a piece stands for, without its marks ("" for a bare word-start mark)."""
        if self.continuation and piece.startswith(self.continuation):
            return piece[len(self.continuation) :]
        return piece.replace(self.word_start, "") if self.word_start else piece

    def starts_word(self, piece: str, previous: str | None) -> bool:
        """Whether ``piece`` begins a new word, given the piece before it (None: a special token or nothing)."""
        if previous is None:
            return True
        if self.continuation:
            return not piece.startswith(self.continuation)
        if piece.startswith(self.word_start):
            return True
        before, text = self.text(previous), self.text(piece)  # after a bare "▁", ``before`` is empty: its word goes on
        return (bool(before) and _stands_alone(before[-1])) or (bool(text) and _stands_alone(text[0]))


WORDPIECE = Pieces(continuation="##")
SENTENCEPIECE = Pieces(word_start="▁")
BYTE_LEVEL = Pieces(word_start="Ġ")  # the space byte's stand-in in byte-level BPE (GPT-2, RoBERTa)


def _stands_alone(char: str) -> bool:
    """Punctuation and Chinese characters are words of their own to BERT's pre-tokenizer."""
    return unicodedata.category(char).startswith("P") or has_cjk(char)


def _byte_level(pre_tokenizer: dict | None) -> bool:
    """Whether a fast tokenizer's pre-tokenizer (its JSON) is byte-level, alone or inside a sequence of them."""
    if not pre_tokenizer:
        return False
    if pre_tokenizer.get("type") == "Sequence":
        return any(_byte_level(inner) for inner in pre_tokenizer.get("pretokenizers", []))
    return pre_tokenizer.get("type") == "ByteLevel"


def piece_convention(tokenizer) -> Pieces:
    """The convention of a tokenizer: read off its fast backend (a Unigram model: ``▁`` word starts; a byte-level
    pre-tokenizer: ``Ġ`` word starts), else WordPiece."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model = getattr(backend, "model", None)
    if type(model).__name__ == "Unigram":
        return SENTENCEPIECE
    pre_tokenizer = getattr(backend, "pre_tokenizer", None)
    if pre_tokenizer is not None and _byte_level(json.loads(pre_tokenizer.__getstate__())):
        return BYTE_LEVEL
    return Pieces(continuation=getattr(model, "continuing_subword_prefix", None) or WORDPIECE.continuation)


def word_spans(tokens: list[str], pieces: Pieces, special) -> list[list[int]]:
    """The positions of each word of a token sequence, in order: pieces joined by :meth:`Pieces.starts_word`.

    Positions flagged ``special`` belong to no word and close the word before them. A bare ``▁`` opens a word
    that the next piece joins unless that piece stands alone (``▁ 一个人``): then the ``▁``'s word has no text.
    """
    words: list[list[int]] = []
    previous = None
    for i, token in enumerate(tokens):
        if special[i]:
            previous = None
            continue
        if pieces.starts_word(token, previous) or not words:
            words.append([])
        words[-1].append(i)
        previous = token
    return words
