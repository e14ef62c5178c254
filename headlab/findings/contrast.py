"""Contrast pairs for activation patching, made from the evaluated pairs themselves (no new data).

Three contrasts, each keeping every position of the pair, so a head's output in one lines up with its output in
the other (:class:`headlab.core.patching.PatchEngine`), and never touching the query:

- ``corrupted``: every title word that is also a query word (a shared term, as notebook 05 counts them:
  :attr:`headlab.inputs.pair.Pair.title_words`) is replaced by a word of the split that is in neither the query nor
  the title and has as many pieces (and, for SentencePiece, the same word-start mark). The pair keeps its
  length and loses every shared term: the information the term-matching heads are said to carry.
- ``injected`` (Chen et al., SIGIR 2024, the TFC1 axiom: a document that gains a query term should score higher): one
  title word that is not a query word is replaced by a query word the title lacks, with as many pieces.
- ``unshared`` (the control, after the LNC axioms: a document that changes a word the query lacks should score about
  the same): one title word that is not a query word is replaced as ``corrupted`` replaces shared ones. The pair
  keeps every shared term, so what patching restores here is a word's identity, not term matching.

A pair qualifies only when every replacement has a candidate and the result checks out (no shared term is left in
a corrupted pair; an injected pair shares the new term; an unshared pair shares exactly what it shared).
Replacements are drawn with a generator seeded by the run's seed and the pair's position, so a pair's contrast does
not depend on which other pairs are evaluated (another seed draws other replacements).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from headlab.core.evaluate import Encoded
from headlab.inputs.pair import Pair, Word, read_pair
from headlab.inputs.pieces import piece_convention

KINDS = ("corrupted", "injected", "unshared")


@dataclass(frozen=True)
class Contrast:
    """Qualifying pairs as they are (``original``) and changed (``changed``), their positions in the split
    (``examples``), and one row per replaced word (``changes``: example, position of its first piece, n_pieces,
    was, now)."""

    kind: str
    original: Encoded
    changed: Encoded
    examples: np.ndarray
    changes: pd.DataFrame
    n_pairs: int  # pairs looked at, qualifying or not

    def changed_positions(self) -> list[list[int]]:
        """Per qualifying pair (in order), the token positions the contrast changed."""
        by_example: dict[int, list[int]] = {e: [] for e in self.examples}
        for r in self.changes.itertuples():
            by_example[r.example].extend(range(r.position, r.position + r.n_pieces))
        return [by_example[e] for e in self.examples]

    @property
    def share(self) -> float:
        """The share of the pairs looked at that qualify."""
        return len(self.examples) / self.n_pairs if self.n_pairs else 0.0


def _shape(pieces, tokens: list[str]) -> tuple[int, bool]:
    """What a replacement must match: the number of pieces, and whether the first carries a word-start mark."""
    return len(tokens), bool(pieces.word_start) and tokens[0].startswith(pieces.word_start)


def _word(pair: Pair, pieces, word: Word) -> tuple[tuple[int, bool], tuple[str, tuple[int, ...]]]:
    """A word's shape (:func:`_shape`) and its ``(text, piece ids)``."""
    return _shape(pieces, [pair.tokens[i] for i in word.positions]), (
        word.text,
        tuple(pair.ids[i] for i in word.positions),
    )


def word_pool(encoded: Encoded, tokenizer, stopwords=None) -> dict[tuple[int, bool], list[tuple[str, tuple[int, ...]]]]:
    """Every distinct word of the split's queries and titles that can be a term, by shape (:func:`_shape`), as
    ``(text, piece ids)``, sorted so the pool is the same on every run."""
    pieces = piece_convention(tokenizer)
    pool: dict[tuple[int, bool], set] = {}
    for ids in encoded.input_ids:
        pair = read_pair(tokenizer, ids, stopwords)
        for word in [*pair.query_words, *pair.title_words]:
            shape, entry = _word(pair, pieces, word)
            pool.setdefault(shape, set()).add(entry)
    return {shape: sorted(words) for shape, words in pool.items()}


def _pick(candidates, avoid: set[str], rng: np.random.Generator):
    allowed = [c for c in candidates if c[0] not in avoid]
    return allowed[int(rng.integers(len(allowed)))] if allowed else None


def _corrupt(pair: Pair, pool, pieces, rng):
    query = {word.text for word in pair.query_words}
    avoid = query | {word.text for word in pair.title_words}
    ids, changes = list(pair.ids), []
    for word in pair.title_words:
        if word.text not in query:
            continue
        new = _pick(pool.get(_word(pair, pieces, word)[0], ()), avoid, rng)
        if new is None:
            return None
        for i, piece in zip(word.positions, new[1]):
            ids[i] = piece
        changes.append((word.positions[0], len(word.positions), word.text, new[0]))
    return (ids, changes) if changes else None


def _inject(pair: Pair, pieces, rng):
    title_texts = {word.text for word in pair.title_words}
    query_texts = {word.text for word in pair.query_words}
    missing: dict[tuple[int, bool], list] = {}
    for word in pair.query_words:
        if word.text not in title_texts:
            shape, entry = _word(pair, pieces, word)
            missing.setdefault(shape, []).append(entry)
    slots = [w for w in pair.title_words if w.text not in query_texts and _word(pair, pieces, w)[0] in missing]
    if not slots:
        return None
    word = slots[int(rng.integers(len(slots)))]
    options = sorted(set(missing[_word(pair, pieces, word)[0]]))
    new = options[int(rng.integers(len(options)))]
    ids = list(pair.ids)
    for i, piece in zip(word.positions, new[1]):
        ids[i] = piece
    return ids, [(word.positions[0], len(word.positions), word.text, new[0])]


def _unshared(pair: Pair, pool, pieces, rng):
    query = {word.text for word in pair.query_words}
    avoid = query | {word.text for word in pair.title_words}
    slots = [word for word in pair.title_words if word.text not in query]
    if not slots:
        return None
    word = slots[int(rng.integers(len(slots)))]
    new = _pick(pool.get(_word(pair, pieces, word)[0], ()), avoid, rng)
    if new is None:
        return None
    ids = list(pair.ids)
    for i, piece in zip(word.positions, new[1]):
        ids[i] = piece
    return ids, [(word.positions[0], len(word.positions), word.text, new[0])]


def contrast_pairs(
    encoded: Encoded, tokenizer, kind: str = "corrupted", stopwords=None, seed: int = 0, pool=None, draw: int = 0
) -> Contrast:
    """The ``kind`` contrast (see the module's docstring) of every pair that qualifies for it; ``draw`` > 0 draws
    other replacement words for the same pairs (draw 0 is the seed's own)."""
    if kind not in KINDS:
        raise ValueError(f"contrast kind must be one of {KINDS}, got {kind!r}")
    pieces = piece_convention(tokenizer)
    if kind != "injected" and pool is None:
        pool = word_pool(encoded, tokenizer, stopwords)
    kept, changed_ids, rows = [], [], []
    for example, ids in enumerate(encoded.input_ids):
        pair = read_pair(tokenizer, ids, stopwords)
        rng = np.random.default_rng([seed, example] if draw == 0 else [seed, example, draw])
        made = (
            _corrupt(pair, pool, pieces, rng)
            if kind == "corrupted"
            else _inject(pair, pieces, rng)
            if kind == "injected"
            else _unshared(pair, pool, pieces, rng)
        )
        if made is None:
            continue
        new_ids, changes = made
        before, after = pair.shared, read_pair(tokenizer, new_ids, stopwords).shared
        if (
            (kind == "corrupted" and after)
            or (kind == "injected" and len(after) <= len(before))
            or (kind == "unshared" and after != before)
        ):
            continue  # the pieces joined into another word than planned: no clean contrast for this pair
        kept.append(example)
        changed_ids.append(new_ids)
        rows += [
            {"example": example, "position": p, "n_pieces": n, "was": was, "now": now} for p, n, was, now in changes
        ]
    original = encoded.subset(kept)
    changed = Encoded(changed_ids, [list(t) for t in original.token_type_ids], original.grades, 0)
    table = pd.DataFrame(rows, columns=["example", "position", "n_pieces", "was", "now"])
    return Contrast(kind, original, changed, np.asarray(kept, dtype=int), table, len(encoded))
