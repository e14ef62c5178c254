"""headlab.measures.lexical: terms, overlap features and BM25 on hand-made pairs; the grader learns overlap."""

import numpy as np
import pandas as pd
import pytest

from headlab.core.grades import STUDY_SCALE
from headlab.measures.lexical import FEATURES, bm25, document_frequencies, fit_lexical, pair_features, terms


def test_terms_are_words_and_chinese_characters_without_punctuation():
    assert terms("The cat, the HAT!") == ["the", "cat", "the", "hat"]
    assert terms("京东小哥, JD 2024") == ["京", "东", "小", "哥", "jd", "2024"]


def test_overlap_features_of_hand_made_pairs():
    frame = pd.DataFrame({"query": ["a cat sat", "red car"], "title": ["the cat sat down", "blue sea"]})
    features = pair_features(frame, document_frequencies(list(frame["query"]) + list(frame["title"])))
    assert list(features.columns) == FEATURES
    first, second = features.iloc[0], features.iloc[1]
    assert (first.query_terms, first.title_terms, first.shared) == (3, 4, 2)
    assert first.shared_of_query == pytest.approx(2 / 3) and first.shared_of_title == pytest.approx(2 / 4)
    assert first.jaccard == pytest.approx(2 / 5) and first.length_ratio == pytest.approx(3 / 4)
    assert second.shared == 0 and second.bm25 == 0 and first.bm25 > 0


def test_bm25_rewards_rare_terms_more_than_common_ones():
    frequencies = document_frequencies(["the cat", "the dog", "the sea", "the car"])
    assert bm25(["cat"], ["the", "cat"], frequencies) > bm25(["the"], ["the", "cat"], frequencies) > 0


def test_the_grader_learns_a_grade_that_follows_overlap():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    rows = []
    for _ in range(200):
        query = list(rng.choice(words, 4, replace=False))
        grade = int(rng.integers(1, 6))
        shared = query[: grade - 1]  # grade g shares g - 1 of the 4 query words
        others = [w for w in words if w not in query]
        rows.append(
            {
                "query": " ".join(query),
                "title": " ".join(shared + list(rng.choice(others, 5 - len(shared), replace=False))),
                "label": grade,
            }
        )
    frame = pd.DataFrame(rows)
    grader = fit_lexical(frame, STUDY_SCALE)
    predicted = grader.probabilities(frame).argmax(axis=1) + 1
    assert np.mean(predicted == frame["label"]) > 0.95
    shuffled = frame.assign(label=rng.permutation(frame["label"].to_numpy()))
    chance = fit_lexical(shuffled, STUDY_SCALE).grades(shuffled)
    assert np.mean(chance == shuffled["label"]) < 0.5  # nothing to learn once overlap and grade are unrelated
