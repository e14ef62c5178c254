"""headlab.findings.contrast: contrast pairs keep every position, never touch the query, and remove (corrupted) or
add (injected) shared terms."""

import numpy as np
import pandas as pd
import pytest
from conftest import minilm_tokenizer

from headlab.core.evaluate import encode
from headlab.findings.contrast import contrast_pairs
from headlab.findings.roles import ENGLISH_STOPWORDS
from headlab.inputs.pair import read_pair

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
    return encode(minilm_tokenizer(), PAIRS.assign(grade=PAIRS["label"] + 1))


@pytest.mark.parametrize("kind", ["corrupted", "injected", "unshared"])
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


def test_an_unshared_pair_keeps_every_shared_term_and_changes_a_word_the_query_lacks(encoded):
    tokenizer = minilm_tokenizer()
    unshared = contrast_pairs(encoded, tokenizer, "unshared", ENGLISH_STOPWORDS, seed=0)
    assert 3 in unshared.examples  # shares no term, but has title words to change
    for original, ids in zip(unshared.original.input_ids, unshared.changed.input_ids):
        before, after = (read_pair(tokenizer, x, ENGLISH_STOPWORDS) for x in (original, ids))
        assert after.shared == before.shared
        assert {w.text for w in after.title_words} != {w.text for w in before.title_words}
    query = {e: {w.text for w in read_pair(tokenizer, encoded.input_ids[e]).query_words} for e in unshared.examples}
    assert all(r.was not in query[r.example] and r.now not in query[r.example] for r in unshared.changes.itertuples())


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
