from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_bert

from headlab.evaluate import Encoded
from headlab.order import (case_candidates, expected_grade, order_heads, random_head_sets, sensitivity_reduction,
                           shifted_diagonal_scores, shuffle_sensitivity, shuffle_words, shuffle_words_list,
                           shuffled_frame)


def test_shuffle_words_is_seeded_and_keeps_the_words():
    title = "what has the courier been up to lately"
    once = shuffle_words(title, seed=0)
    assert once == shuffle_words(title, seed=0)
    assert once != title
    assert Counter(once.split()) == Counter(title.split())
    others = {shuffle_words(title, seed=s) for s in range(1, 6)}
    assert len(others - {once}) >= 4
    assert shuffle_words("courier", seed=0) == "courier"
    assert shuffle_words("ha ha", seed=0) == "ha ha"  # one distinct word: no other order exists
    for seed in range(20):  # two distinct words: the order always changes
        assert shuffle_words("a b", seed) == "b a"
        assert shuffle_words_list(["京东", "小哥", "京东"], seed) != ["京东", "小哥", "京东"]


def test_shuffled_frame_marks_changes():
    frame = pd.DataFrame({"query": ["q1", "q2"], "title": ["one", "one two three"], "label": [4, 5]})
    out = shuffled_frame(frame, seed=1)
    assert out["changed"].tolist() == [False, True]
    assert frame["title"].tolist() == ["one", "one two three"]
    chinese = pd.DataFrame({"title": ["京东小哥最近在干什么"]})
    words = {"京东小哥最近在干什么": ["京东", "小哥", "最近", "在", "干", "什么"]}
    out = shuffled_frame(chinese, seed=0, segment=words.get)
    assert out["changed"].iloc[0] and sorted(out["title"].iloc[0]) == sorted("京东小哥最近在干什么")


def test_shifted_diagonal_scores():
    T = 5
    maps = np.zeros((1, 2, T, T))
    maps[0, 0, np.arange(1, T), np.arange(T - 1)] = 1.0  # previous-token head
    maps[0, 1, np.arange(T - 1), np.arange(1, T)] = 0.5  # next-token head
    scores = shifted_diagonal_scores(maps, [1, 2, 3])
    np.testing.assert_allclose(scores[0], [[1.0, 0.0], [0.0, 0.5]])


def test_order_heads_ranks_every_head():
    class Tok:
        all_special_ids = [1, 2]
        pad_token_id = 0

    encoded = Encoded([[1, 5, 6, 2, 7, 8, 9, 2], [1, 5, 2, 7, 2]], [[0] * 8, [0] * 5], np.array([3, 4]), 0)
    table = order_heads(tiny_bert(), encoded, Tok(), k=3)
    assert len(table) == 12 and table["selected"].sum() == 3
    assert table["score"].is_monotonic_decreasing and (table["score"] == table[["prev", "next"]].max(axis=1)).all()


def test_shuffle_sensitivity_by_hand():
    original = np.array([[0, 0, 0, 1, 0], [0, 0, 0, 0, 1]], dtype=float)  # grades 4 and 5
    shuffled = np.array([[0, 1, 0, 0, 0], [0, 0, 0, 0.5, 0.5]], dtype=float)  # grade 2; E = 4.5 (argmax 4)
    np.testing.assert_allclose(expected_grade(shuffled), [2.0, 4.5])
    result = shuffle_sensitivity(original, shuffled, n_boot=200)
    assert result["shift"] == pytest.approx((-2 - 0.5) / 2)
    assert result["drop_share"] == pytest.approx(1.0)
    assert result["tv"] == pytest.approx((1.0 + 0.5) / 2)
    assert result["shift_lo"] <= result["shift"] <= result["shift_hi"]
    assert result["n_examples"] == 2


def test_sensitivity_reduction_p_value_by_hand():
    random_shifts = np.array([-0.5, -0.4, -0.1, -0.3, -0.05])
    out = sensitivity_reduction(-0.2, random_shifts, unmasked_value=-0.45)
    assert out["p_value"] == pytest.approx((1 + 2) / (1 + 5))  # -0.1 and -0.05 are at least as insensitive
    assert out["random_mean"] == pytest.approx(-0.27)
    assert out["random_lo"] < out["random_hi"] and out["n_draws"] == 5 and out["unmasked"] == -0.45
    assert sensitivity_reduction(0.0, random_shifts)["p_value"] == pytest.approx(1 / 6)


def test_random_head_sets_and_case_candidates():
    sets = random_head_sets(3, 4, k=2, draws=5, seed=0, exclude=[(0, 0)])
    assert sets == random_head_sets(3, 4, k=2, draws=5, seed=0, exclude=[(0, 0)])
    assert all(len(set(s)) == 2 and (0, 0) not in s for s in sets)
    frame = pd.DataFrame({"query": list("abcd"), "title": list("ABCD"), "label": [5, 4, 2, 5]})
    eye = np.eye(5)
    original = eye[[4, 3, 1, 3]]  # predicted 5, 4, 2, 4
    shuffled = eye[[1, 2, 0, 1]]  # predicted 2, 3, 1, 2
    table, share = case_candidates(frame, original, shuffled, shuffled_titles=["x", "y", "z", "w"])
    assert table["example"].tolist() == [0, 3] and share == 0.5
    assert table["shuffled_title"].tolist() == ["x", "w"]
