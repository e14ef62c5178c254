"""Contrast pairs for activation patching, made from the evaluated pairs themselves (no new data).

Every contrast keeps every position of the pair, so a head's output in one lines up with its output in the other
(:class:`headlab.core.patching.PatchEngine`), and never touches the query:

- ``corrupted``: every title word that is also a query word (a shared term, as notebook 05 counts them:
  :attr:`headlab.inputs.pair.Pair.title_words`) is replaced by a word of the split that is in neither the query nor
  the title and has as many pieces (and, for SentencePiece, the same word-start mark). The pair keeps its
  length and loses every shared term: the information the term-matching heads are said to carry.
- ``injected`` (Chen et al., SIGIR 2024, the TFC1 axiom: a document that gains a query term should score higher): one
  title word that is not a query word is replaced by a query word the title lacks, with as many pieces.
Two more, built together on the same pairs (:func:`matched_contrasts`), tell term matching from a word's identity
(what restores when a word the query lacks is replaced is the word's identity, not term matching), matched in size
as ``corrupted``, which changes every shared term, cannot be:

- ``one_shared``: exactly one shared term is replaced (a title word whose text occurs once in the title, so the term
  goes); every other shared term stays.
- ``one_unshared``: exactly one title word the query lacks is replaced, on the same pairs.

The two replaced words have the same shape (pieces and word-start mark) and frequency band (:func:`frequency_band`),
and the same new word, of that shape and band too, goes in for both. The two contrasts then differ only in whether
the word that went was a shared term, so a difference in what the heads restore is term matching, not a word's
identity, its length or how common it is.

A pair qualifies only when every replacement has a candidate and the result checks out (no shared term is left in
a corrupted pair; an injected pair shares the new term; a one_shared
pair loses the replaced term's shares and keeps all others, while its one_unshared twin shares exactly what it
shared; a pair that fails either is dropped from both).
Replacements are drawn with a generator seeded by the run's seed and the pair's position, so a pair's contrast does
not depend on which other pairs are evaluated (another seed draws other replacements).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from headlab.core.evaluate import Encoded
from headlab.inputs.pair import Pair, Word, read_pair
from headlab.inputs.pieces import piece_convention

MATCHED_KINDS = ("one_shared", "one_unshared")
KINDS = ("corrupted", "injected", *MATCHED_KINDS)
MAX_BAND = 6  # words seen 2**6 = 64 times or more share the top frequency band (:func:`frequency_band`)


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

    def subset(self, index) -> Contrast:
        """The contrast on its pairs at ``index`` (positions in ``examples``), in that order; a subset looks at its own
        pairs alone (``n_pairs``), every one of which qualifies."""
        index = np.asarray(index, dtype=int)
        kept = self.examples[index]
        return replace(
            self,
            original=self.original.subset(index),
            changed=self.changed.subset(index),
            examples=kept,
            changes=self.changes[self.changes["example"].isin(kept)].reset_index(drop=True),
            n_pairs=len(kept),
        )

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


def word_counts(encoded: Encoded, tokenizer, stopwords=None) -> Counter[str]:
    """How many times each term's text occurs over the split's queries and titles: the frequency the matched
    contrasts match (:func:`frequency_band`)."""
    counts: Counter[str] = Counter()
    for ids in encoded.input_ids:
        pair = read_pair(tokenizer, ids, stopwords)
        counts.update(word.text for word in [*pair.query_words, *pair.title_words])
    return counts


def frequency_band(elsewhere: int) -> int:
    """``min(floor(log2(elsewhere + 1)), MAX_BAND)`` of a word's occurrences outside the pair it is in (or would go
    into): none is band 0, 1-2 band 1, 3-6 band 2, ... Counted outside the pair, since a shared term occurs in the
    query as well, and counting that would put every shared term a band above the unshared words it is matched with.
    Bands double because how familiar a word is goes with its log frequency; above :data:`MAX_BAND` the few common
    words share one band, so they still find a partner of their own shape to match. A word seen in no other pair
    (band 0) is never replaced: every replacement is a word seen elsewhere in the split."""
    return min((elsewhere + 1).bit_length() - 1, MAX_BAND)


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
        changes.append(_put(ids, word, new))
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
    return ids, [_put(ids, word, new)]


def _matched(pair: Pair, candidates: dict, counts: Counter[str], pieces, rng):
    """A (shared, unshared) couple of title words of the same shape and band (of their occurrences outside the
    pair), and a new word of that shape and band in neither text (``candidates``: the pool's words by shape and
    band); None where the pair has no such couple."""
    query = {word.text for word in pair.query_words}
    in_title = Counter(word.text for word in pair.title_words)
    own = in_title + Counter(word.text for word in pair.query_words)
    avoid = query | set(in_title)

    def match(word: Word) -> tuple[tuple[int, bool], int]:
        return _word(pair, pieces, word)[0], frequency_band(counts[word.text] - own[word.text])

    allowed = {key: [c for c in candidates.get(key, ()) if c[0] not in avoid] for key in map(match, pair.title_words)}
    shared = [w for w in pair.title_words if w.text in query and in_title[w.text] == 1]  # replaced, the term goes
    unshared = [w for w in pair.title_words if w.text not in query]
    couples = [(s, u) for s in shared for u in unshared if match(s) == match(u) and allowed[match(s)]]
    if not couples:
        return None
    couple = couples[int(rng.integers(len(couples)))]
    replacements = allowed[match(couple[0])]
    return couple, replacements[int(rng.integers(len(replacements)))]


def _put(ids: list[int], word: Word, new) -> dict:
    """Writes ``new`` (``(text, piece ids)``) over ``word``'s pieces in ``ids`` and returns the change's row: every
    contrast replaces words this way."""
    for i, piece in zip(word.positions, new[1]):
        ids[i] = piece
    return {"position": word.positions[0], "n_pieces": len(word.positions), "was": word.text, "now": new[0]}


def _pair_rng(seed: int, example: int, draw: int) -> np.random.Generator:
    """The generator a pair's replacements are drawn with: its own, so no other pair changes them."""
    return np.random.default_rng([seed, example] if draw == 0 else [seed, example, draw])


def _contrast(kind: str, encoded: Encoded, kept: list[int], changed_ids: list[list[int]], rows: list[dict]) -> Contrast:
    """The ``kept`` pairs as they are and as changed, with one row per replaced word."""
    original = encoded.subset(kept)
    changed = Encoded(changed_ids, [list(t) for t in original.token_type_ids], original.grades, 0, original.scale)
    table = pd.DataFrame(rows, columns=["example", "position", "n_pieces", "was", "now"])
    return Contrast(kind, original, changed, np.asarray(kept, dtype=int), table, len(encoded))


def matched_contrasts(
    encoded: Encoded, tokenizer, stopwords=None, seed: int = 0, pool=None, draw: int = 0
) -> tuple[Contrast, Contrast]:
    """The ``one_shared`` and ``one_unshared`` contrasts (see the module's docstring), on the same pairs in the same
    order: those with a shared and an unshared title word of the same shape and frequency band (counted over
    ``encoded``, :func:`word_counts`) whose replacements check out. The couple and its new word are drawn as
    :func:`contrast_pairs` draws, per pair."""
    pieces = piece_convention(tokenizer)
    pool = word_pool(encoded, tokenizer, stopwords) if pool is None else pool
    counts = word_counts(encoded, tokenizer, stopwords)
    candidates: dict[tuple[tuple[int, bool], int], list] = {}
    for shape, words in pool.items():
        for text, piece_ids in words:
            if text in counts:  # a word of another split's pool has no frequency here to match
                candidates.setdefault((shape, frequency_band(counts[text])), []).append((text, piece_ids))
    kept: list[int] = []
    made: dict[str, tuple[list[list[int]], list[dict]]] = {kind: ([], []) for kind in MATCHED_KINDS}
    for example, ids in enumerate(encoded.input_ids):
        pair = read_pair(tokenizer, ids, stopwords)
        rng = _pair_rng(seed, example, draw)
        drawn = _matched(pair, candidates, counts, pieces, rng)
        if drawn is None:
            continue
        (shared, unshared), new = drawn
        changes = {}
        for kind, word in zip(MATCHED_KINDS, (shared, unshared)):
            changed = list(pair.ids)
            changes[kind] = (changed, _put(changed, word, new))
        kept_shares = {s for s in pair.shared if s[1] not in shared.positions}
        after = {kind: read_pair(tokenizer, changes[kind][0], stopwords).shared for kind in MATCHED_KINDS}
        if set(after["one_shared"]) != kept_shares or after["one_unshared"] != pair.shared:
            continue  # the pieces joined into another word than planned: no clean contrast for this pair
        kept.append(example)
        for kind, (new_ids, row) in changes.items():
            made[kind][0].append(new_ids)
            made[kind][1].append({"example": example, **row})
    one_shared, one_unshared = (_contrast(kind, encoded, kept, *made[kind]) for kind in MATCHED_KINDS)
    return one_shared, one_unshared


def contrast_pairs(
    encoded: Encoded, tokenizer, kind: str = "corrupted", stopwords=None, seed: int = 0, pool=None, draw: int = 0
) -> Contrast:
    """The ``kind`` contrast (see the module's docstring) of every pair that qualifies for it; ``draw`` > 0 draws
    other replacement words for the same pairs (draw 0 is the seed's own). A matched kind comes from
    :func:`matched_contrasts`, so it has the pairs of its twin."""
    if kind not in KINDS:
        raise ValueError(f"contrast kind must be one of {KINDS}, got {kind!r}")
    if kind in MATCHED_KINDS:
        return matched_contrasts(encoded, tokenizer, stopwords, seed, pool, draw)[MATCHED_KINDS.index(kind)]
    pieces = piece_convention(tokenizer)
    if kind != "injected" and pool is None:
        pool = word_pool(encoded, tokenizer, stopwords)
    kept, changed_ids, rows = [], [], []
    for example, ids in enumerate(encoded.input_ids):
        pair = read_pair(tokenizer, ids, stopwords)
        rng = _pair_rng(seed, example, draw)
        made = _corrupt(pair, pool, pieces, rng) if kind == "corrupted" else _inject(pair, pieces, rng)
        if made is None:
            continue
        new_ids, changes = made
        before, after = pair.shared, read_pair(tokenizer, new_ids, stopwords).shared
        if (kind == "corrupted" and after) or (kind == "injected" and len(after) <= len(before)):
            continue  # the pieces joined into another word than planned: no clean contrast for this pair
        kept.append(example)
        changed_ids.append(new_ids)
        rows += [{"example": example, **change} for change in changes]
    return _contrast(kind, encoded, kept, changed_ids, rows)
