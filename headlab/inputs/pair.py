"""One encoded pair, read once: where ``[CLS]``, the separators, the query and the title sit, the words each side
can share, and the terms they do share.

Roles, order, patching, the [CLS] page and the two-tower page all read a pair's words; they read them here
(:func:`read_pair`), so a "shared term" means one thing on every page.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

from headlab.core.ablation import token_classes
from headlab.inputs.pieces import piece_convention, word_spans


class Word(NamedTuple):
    """A word that can be a term: its casefolded text, its pieces' texts and their positions."""

    text: str
    pieces: list[str]
    positions: list[int]


@dataclass(frozen=True)
class Pair:
    """``[CLS] query [SEP] title [SEP]`` (or ``<s> query </s></s> title </s>``) as one value.

    ``special`` flags the positions of special tokens ([CLS], [SEP], [UNK], ...); ``query_words`` and
    ``title_words`` are each side's terms (:func:`read_pair` says which words are terms); ``shared`` is every
    (query position, title position) pair of pieces of the same term, sorted.
    """

    ids: list[int]
    tokens: list[str]
    cls: int
    seps: list[int]
    query: range
    title: range
    special: list[bool]
    query_words: list[Word]
    title_words: list[Word]
    shared: list[tuple[int, int]]

    @property
    def content(self) -> list[int]:
        """Query and title positions that hold no special token."""
        return [i for i in [*self.query, *self.title] if not self.special[i]]

    @property
    def shared_positions(self) -> set[int]:
        """Every position, in either text, that holds a piece of a shared term."""
        return {i for pair in self.shared for i in pair}


def is_punctuation(text: str) -> bool:
    """A text made only of punctuation characters."""
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def read_pair(tokenizer, input_ids: list[int], stopwords=None) -> Pair:
    """Read one encoded pair: its roles, its terms and its shared terms.

    Words are joined from the tokenizer's pieces (:func:`headlab.inputs.pieces.word_spans`: ``una ##ffa ##ble``
    and ``▁un believ able`` both make ``unaffable``; a Chinese character or SentencePiece's Chinese piece is a
    word of its own) and their text is casefolded, as an uncased tokenizer already does. Words with an unknown
    token (two unknown characters need not be the same), words made only of punctuation, and words in
    ``stopwords`` are no terms.

    The same term cut the same way pairs piece by piece, as a token matches itself; cut differently (``▁plane``
    at a word start, ``plane`` after a hyphen), every piece of one pairs with every piece of the other. A piece
    matches no piece of another word (``play ##ing`` and ``runn ##ing`` share no term).
    """
    ids = list(input_ids)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    seps = [i for i, t in enumerate(ids) if t == tokenizer.sep_token_id]
    if ids[0] != tokenizer.cls_token_id or len(seps) < 2:
        raise ValueError(f"expected [CLS] query [SEP] title [SEP], got {tokens}")
    # RoBERTa/MPNet style pairs put two separators between the sentences: <s> a </s></s> b </s>
    title_start = seps[0] + 1 + (1 if len(seps) > 2 and seps[1] == seps[0] + 1 else 0)
    query, title = range(1, seps[0]), range(title_start, seps[-1])
    specials = set(tokenizer.all_special_ids)
    unknown = getattr(tokenizer, "unk_token_id", None)
    pieces, stop = piece_convention(tokenizer), set(stopwords or ())

    def terms(span: range) -> list[Word]:
        outside = [i not in span or (t in specials and t != unknown) for i, t in enumerate(ids)]
        words = []
        for positions in word_spans(tokens, pieces, outside):
            texts = [pieces.text(tokens[i]).casefold() for i in positions]
            text = "".join(texts)
            if text and unknown not in [ids[i] for i in positions] and not is_punctuation(text) and text not in stop:
                words.append(Word(text, texts, positions))
        return words

    query_words, title_words = terms(query), terms(title)
    by_text: dict[str, list[Word]] = {}
    for word in title_words:
        by_text.setdefault(word.text, []).append(word)
    shared: set[tuple[int, int]] = set()
    for word in query_words:
        for other in by_text.get(word.text, []):
            if other.pieces == word.pieces:
                shared.update(zip(word.positions, other.positions))
            else:
                shared.update((q, t) for q in word.positions for t in other.positions)
    special = [t in specials for t in ids]
    return Pair(ids, tokens, 0, seps, query, title, special, query_words, title_words, sorted(shared))


def pair_classes(tokenizer, encoded) -> list:
    """Per encoded pair, the token class of each position (:func:`headlab.core.ablation.token_classes` of its
    :func:`read_pair`): what :func:`headlab.core.ablation.class_outputs` averages by."""
    return [token_classes(read_pair(tokenizer, ids)) for ids in encoded.input_ids]
