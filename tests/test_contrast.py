"""headlab.measures.contrast: contrast pairs keep every position, never touch the query, and remove (corrupted) or
add (injected) shared terms; the matched contrasts (one_shared, one_unshared) each replace one word, matched in shape
and frequency band, on the same pairs."""

import dataclasses
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import minilm_tokenizer

import headlab.measures.contrast as contrast_module
from headlab.core.evaluate import encode
from headlab.core.grades import GradeScale
from headlab.inputs.pair import read_pair
from headlab.measures.contrast import (
    MATCHED_KINDS,
    MAX_BAND,
    contrast_pairs,
    frequency_band,
    matched_contrasts,
    word_counts,
)
from headlab.measures.roles import ENGLISH_STOPWORDS

PAIRS = pd.DataFrame(
    {
        "query": [
            "a man is playing a guitar",
            "the cat sat on the mat",
            "a woman slices an onion",
            "dogs run fast",
            "a plane is taking off",
            "children play football outside",
        ],
        "title": [
            "a man plays the guitar loudly",
            "a dog sat on a rug",
            "someone cuts a tomato",
            "cats sleep all day",
            "an airplane takes off from the runway",
            "kids are playing soccer in a park",
        ],
        "label": [4, 2, 1, 0, 4, 3],
    }
)


@pytest.fixture(scope="module")
def encoded():
    return encode(minilm_tokenizer(), PAIRS, GradeScale.of_labels(PAIRS["label"]))


# PAIRS and pairs whose words recur, so a shared and an unshared title word can fall in one frequency band (counted
# outside their pair): 0, 6 and 11 qualify. 1's band-0 couple ("sat", "rug": seen in no other pair) has no replacement
# of its band; 7 and 8 have both kinds of word but in other bands; 9 has no unshared title word; 10's shared "skate
# ##board" has two pieces, its unshared "grass" one; 11's "dog" is twice in the title, so only "ball" can go.
MATCHED_PAIRS = pd.concat(
    [
        PAIRS,
        pd.DataFrame(
            {
                "query": [
                    "a dog runs in the park",
                    "a child throws a red ball",
                    "a red car on the grass",
                    "a man playing a guitar",
                    "a boy rides a skateboard",
                    "a dog and a ball",
                ],
                "title": [
                    "a dog chases a red ball",
                    "the child plays with a ball on the grass",
                    "a car parked near a park",
                    "a man playing guitar",
                    "a skateboard on the grass",
                    "a dog plays with a dog and a red ball",
                ],
                "label": [3, 4, 2, 4, 3, 2],
            }
        ),
    ],
    ignore_index=True,
)
QUALIFYING = [0, 6, 11]


@pytest.fixture(scope="module")
def matched_encoded():
    return encode(minilm_tokenizer(), MATCHED_PAIRS, GradeScale.of_labels(MATCHED_PAIRS["label"]))


@pytest.fixture(scope="module")
def matched(matched_encoded):
    return matched_contrasts(matched_encoded, minilm_tokenizer(), ENGLISH_STOPWORDS, seed=0)


def _shared_terms(tokenizer, ids) -> set[str]:
    pair = read_pair(tokenizer, ids, ENGLISH_STOPWORDS)
    query = {w.text for w in pair.query_words}
    return {w.text for w in pair.title_words if w.text in query}


def _word_at(tokenizer, ids, position):
    return next(w for w in read_pair(tokenizer, ids, ENGLISH_STOPWORDS).title_words if w.positions[0] == position)


@pytest.mark.parametrize("kind", ["corrupted", "injected"])
def test_a_contrast_keeps_lengths_and_the_query(encoded, kind):
    tokenizer = minilm_tokenizer()
    contrast = contrast_pairs(encoded, tokenizer, kind, ENGLISH_STOPWORDS, seed=0)
    assert len(contrast.examples) > 0 and contrast.n_pairs == len(PAIRS)
    for original, changed in zip(contrast.original.input_ids, contrast.changed.input_ids):
        assert len(original) == len(changed) and original != changed
        roles = read_pair(tokenizer, original)
        assert changed[: roles.title.start] == original[: roles.title.start]  # [CLS], the query and its [SEP]
        assert changed[roles.title.stop :] == original[roles.title.stop :]
    assert set(contrast.changes["example"]) == set(contrast.examples)


def test_a_corrupted_pair_shares_no_term_and_an_injected_one_shares_more(encoded):
    tokenizer = minilm_tokenizer()
    corrupted = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=0)
    assert {0, 1} <= set(corrupted.examples)  # "man", "guitar"; "sat", "mat" are shared
    assert 3 not in corrupted.examples  # shares no term: nothing to corrupt
    for ids in corrupted.changed.input_ids:
        assert read_pair(tokenizer, ids, ENGLISH_STOPWORDS).shared == []
    injected = contrast_pairs(encoded, tokenizer, "injected", ENGLISH_STOPWORDS, seed=0)
    for original, ids in zip(injected.original.input_ids, injected.changed.input_ids):
        before = read_pair(tokenizer, original, ENGLISH_STOPWORDS).shared
        after = read_pair(tokenizer, ids, ENGLISH_STOPWORDS).shared
        assert len(after) > len(before)


def test_the_same_seed_gives_the_same_contrast_and_a_bad_kind_is_named(encoded):
    tokenizer = minilm_tokenizer()
    a = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=3)
    b = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=3)
    assert a.changed.input_ids == b.changed.input_ids and np.array_equal(a.examples, b.examples)
    with pytest.raises(ValueError, match="contrast kind must be one of"):
        contrast_pairs(encoded, tokenizer, "swapped")


def test_another_draw_replaces_the_same_pairs_words_with_other_words(encoded):
    tokenizer = minilm_tokenizer()
    first = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=0)
    again = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=0, draw=0)
    other = contrast_pairs(encoded, tokenizer, "corrupted", ENGLISH_STOPWORDS, seed=0, draw=1)
    assert again.changed.input_ids == first.changed.input_ids
    assert list(other.changes["was"]) == list(first.changes["was"])  # the same shared words go
    assert list(other.changes["now"]) != list(first.changes["now"])  # for other words


def test_matched_contrasts_replace_one_title_word_each_on_the_same_pairs(matched):
    tokenizer = minilm_tokenizer()
    one_shared, one_unshared = matched
    assert (one_shared.kind, one_unshared.kind) == MATCHED_KINDS
    assert list(one_shared.examples) == list(one_unshared.examples) == QUALIFYING
    assert one_shared.original.input_ids == one_unshared.original.input_ids
    for contrast in matched:
        assert list(contrast.changes["example"]) == QUALIFYING  # one replaced word per pair
        for original, changed, positions in zip(
            contrast.original.input_ids, contrast.changed.input_ids, contrast.changed_positions()
        ):
            assert len(changed) == len(original)
            assert [i for i, (a, b) in enumerate(zip(original, changed)) if a != b] == positions  # nothing else moves
            assert set(positions) <= set(read_pair(tokenizer, original).title)  # the query is untouched


def test_the_replaced_words_and_their_replacement_match_in_shape_and_frequency_band(matched_encoded, matched):
    assert [frequency_band(n) for n in (0, 1, 2, 3, 6, 7)] == [0, 1, 1, 2, 2, 3]
    assert frequency_band(2**MAX_BAND) == frequency_band(2 ** (MAX_BAND + 3)) == MAX_BAND
    tokenizer = minilm_tokenizer()
    counts = word_counts(matched_encoded, tokenizer, ENGLISH_STOPWORDS)
    assert (counts["dog"], counts["ball"], counts["grass"], counts["loudly"]) == (6, 5, 3, 1)  # counted by hand
    one_shared, one_unshared = matched
    for i, (shared, unshared) in enumerate(zip(one_shared.changes.itertuples(), one_unshared.changes.itertuples())):
        assert shared.now == unshared.now  # the same new word goes in for both
        original = one_shared.original.input_ids[i]
        words = [
            _word_at(tokenizer, original, shared.position),
            _word_at(tokenizer, original, unshared.position),
            _word_at(tokenizer, one_shared.changed.input_ids[i], shared.position),
            _word_at(tokenizer, one_unshared.changed.input_ids[i], unshared.position),
        ]
        assert [w.text for w in words] == [shared.was, unshared.was, shared.now, unshared.now]
        own = Counter(w.text for w in read_pair(tokenizer, original, ENGLISH_STOPWORDS).query_words)
        own.update(w.text for w in read_pair(tokenizer, original, ENGLISH_STOPWORDS).title_words)
        elsewhere = [counts[w.text] - own[w.text] for w in words[:2]] + [counts[w.text] for w in words[2:]]
        assert len({(len(w.positions), frequency_band(n)) for w, n in zip(words, elsewhere)}) == 1


def test_one_shared_loses_exactly_the_replaced_term_and_one_unshared_none(matched):
    tokenizer = minilm_tokenizer()
    one_shared, one_unshared = matched
    for original, changed, row in zip(
        one_shared.original.input_ids, one_shared.changed.input_ids, one_shared.changes.itertuples()
    ):
        assert _shared_terms(tokenizer, original) - _shared_terms(tokenizer, changed) == {row.was}
        assert _shared_terms(tokenizer, changed) < _shared_terms(tokenizer, original)
        before, after = (read_pair(tokenizer, x, ENGLISH_STOPWORDS).shared for x in (original, changed))
        assert after == [s for s in before if s[1] != row.position]  # every other share stays
    for original, changed, row in zip(
        one_unshared.original.input_ids, one_unshared.changed.input_ids, one_unshared.changes.itertuples()
    ):
        assert row.was not in _shared_terms(tokenizer, original)
        before, after = (read_pair(tokenizer, x, ENGLISH_STOPWORDS).shared for x in (original, changed))
        assert after == before


def test_the_same_seed_gives_the_same_matched_contrasts_and_another_draw_other_words(matched_encoded, matched):
    tokenizer = minilm_tokenizer()
    again = matched_contrasts(matched_encoded, tokenizer, ENGLISH_STOPWORDS, seed=0, draw=0)
    other = matched_contrasts(matched_encoded, tokenizer, ENGLISH_STOPWORDS, seed=0, draw=1)
    for first, same, drawn in zip(matched, again, other):
        assert same.changed.input_ids == first.changed.input_ids and same.changes.equals(first.changes)
        assert list(drawn.examples) == list(first.examples)
        assert list(drawn.changes["now"]) != list(first.changes["now"])
    alone = contrast_pairs(matched_encoded, tokenizer, "one_unshared", ENGLISH_STOPWORDS, seed=0, draw=1)
    assert alone.kind == "one_unshared" and alone.changes.equals(other[1].changes)


def test_only_pairs_with_a_shared_and_an_unshared_title_word_that_match_qualify(encoded, matched_encoded, matched):
    tokenizer = minilm_tokenizer()
    has = {}
    for example, ids in enumerate(matched_encoded.input_ids):
        pair = read_pair(tokenizer, ids, ENGLISH_STOPWORDS)
        query = {w.text for w in pair.query_words}
        has[example] = {w.text in query for w in pair.title_words}
    assert has[9] == {True} and has[3] == {False}  # no unshared title word; no shared one
    assert {e for e, kinds in has.items() if kinds == {True, False}} == {0, 1, 6, 7, 8, 10, 11}
    assert list(matched[0].examples) == QUALIFYING  # 1 has no replacement in its band, 7 and 8 no band, 10 no shape
    plain = matched_contrasts(encoded, tokenizer, ENGLISH_STOPWORDS, seed=0)
    assert [c.share for c in plain] == [0.0, 0.0] and [c.n_pairs for c in plain] == [len(PAIRS)] * 2


def test_a_pair_that_fails_either_check_leaves_both_matched_contrasts(monkeypatch, matched_encoded, matched):
    one_shared, one_unshared = matched
    # as if a new word had joined a neighbour into a shared term: 6's one_unshared title, 11's one_shared title
    spoiled = [one_unshared.changed.input_ids[QUALIFYING.index(6)], one_shared.changed.input_ids[QUALIFYING.index(11)]]

    def read(tokenizer, ids, stopwords=None):
        pair = read_pair(tokenizer, ids, stopwords)
        return dataclasses.replace(pair, shared=[(1, 1)]) if list(ids) in spoiled else pair

    monkeypatch.setattr(contrast_module, "read_pair", read)
    remade = matched_contrasts(matched_encoded, minilm_tokenizer(), ENGLISH_STOPWORDS, seed=0)
    for contrast in remade:
        assert list(contrast.examples) == list(contrast.changes["example"]) == [0]
