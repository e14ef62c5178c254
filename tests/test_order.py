import re
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_bert
from scipy import stats as sps

from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded, encode
from headlab.core.grades import STUDY_SCALE
from headlab.core.stats import boot_means, bootstrap_weights
from headlab.core.sweep import per_example_table, plan_table
from headlab.inputs.pieces import piece_convention, word_spans
from headlab.inputs.words import chinese_words, word_segmenter
from headlab.measures.order import (
    CONDITIONS,
    CONTROL,
    case_distributions,
    case_k_table,
    case_shares,
    case_table,
    depth_matched_k,
    draw_table,
    grade_shares,
    masking_comparison,
    order_heads,
    order_mask_specs,
    pick_case,
    random_head_sets,
    rank_cases,
    sensitivity_reduction,
    shift_by_grade,
    shifted_diagonal_scores,
    shuffle_effects,
    shuffle_words,
    shuffle_words_list,
    shuffled_frame,
)


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
    special = [True, False, False, False, True]  # [CLS] a b c [SEP]
    maps = np.zeros((1, 2, T, T))
    maps[0, 0, np.arange(1, T), np.arange(T - 1)] = 1.0  # previous-token head
    maps[0, 1, np.arange(T - 1), np.arange(1, T)] = 0.5  # next-token head
    scores = shifted_diagonal_scores(maps, special)
    np.testing.assert_allclose(scores[0], [[1.0, 0.0], [0.0, 0.5]])


def test_shifted_diagonal_scores_give_special_neighbours_no_credit():
    maps = np.zeros((1, 1, 3, 3))  # [CLS] a [SEP]: a's only neighbours are special
    maps[0, 0, 1, 0] = maps[0, 0, 0, 1] = 1.0  # a -> [CLS], [CLS] -> a
    assert np.isnan(shifted_diagonal_scores(maps, [True, False, True])).all()  # no credit, and no evidence either
    maps = np.zeros((1, 1, 5, 5))  # [CLS] a b [SEP] c: only b -> a is a previous-token pair, only a -> b a next one
    maps[0, 0, 1, 0], maps[0, 0, 2, 1], maps[0, 0, 4, 3] = 1.0, 0.2, 1.0
    maps[0, 0, 1, 2], maps[0, 0, 2, 3] = 0.4, 1.0
    np.testing.assert_allclose(shifted_diagonal_scores(maps, [True, False, False, True, False])[0, 0], [0.2, 0.4])


class Tok:
    all_special_ids = [1, 2]  # not BERT's ids: the tokenizer says which tokens are special
    pad_token_id = 0


def test_order_heads_ranks_every_head():
    encoded = Encoded([[1, 5, 6, 2, 7, 8, 9, 2], [1, 5, 2, 7, 2]], [[0] * 8, [0] * 5], np.array([3, 4]), 0, STUDY_SCALE)
    table = order_heads(attention_maps(tiny_bert(), encoded), encoded, Tok(), k=3)
    assert len(table) == 12 and table["selected"].sum() == 3
    assert table["score"].is_monotonic_decreasing and (table["score"] == table[["prev", "next"]].max(axis=1)).all()


def test_order_heads_leave_special_tokens_out():
    encoded = Encoded([[1, 5, 6, 2, 7, 8, 9, 2], [1, 5, 2, 7, 2]], [[0] * 8, [0] * 5], np.array([3, 4]), 0, STUDY_SCALE)
    model = tiny_bert()
    prev = []  # example 1, [CLS] a [SEP] b [SEP], has no previous-token pair: it does not count
    for example, maps in attention_maps(model, encoded):
        ids = encoded.input_ids[example]
        pairs = [(t, t - 1) for t in range(1, len(ids)) if ids[t] not in (1, 2) and ids[t - 1] not in (1, 2)]
        prev += [np.mean([maps[:, :, t, s] for t, s in pairs], axis=0)] if pairs else []
    prev = np.mean(prev, axis=0)
    table = order_heads(attention_maps(model, encoded), encoded, Tok(), k=3).set_index(["layer", "head"]).sort_index()
    np.testing.assert_allclose(table["prev"].to_numpy(), prev.reshape(-1), rtol=1e-6)


def test_sensitivity_reduction_counts_the_draws_by_hand():
    random_shifts = np.array([-0.5, -0.4, -0.1, -0.3, -0.05])
    out = sensitivity_reduction(-0.2, random_shifts, unmasked_value=-0.45)
    assert out["n_as_insensitive"] == 2  # -0.1 and -0.05 are at least as insensitive
    assert out["random_mean"] == pytest.approx(-0.27)
    assert out["random_lo"] < out["random_hi"] and out["n_draws"] == 5 and out["unmasked"] == -0.45
    assert sensitivity_reduction(0.0, random_shifts)["n_as_insensitive"] == 0


def test_random_head_sets_match_the_layers():
    like = [(0, 0), (0, 1), (2, 3)]
    sets = random_head_sets(3, 4, like, draws=6, seed=0)
    assert sets == random_head_sets(3, 4, like, draws=6, seed=0)
    assert sets[:3] == random_head_sets(3, 4, like, draws=3, seed=0)  # draw d does not depend on the number of draws
    for s in sets:
        assert len(set(s)) == 3 and not set(s) & set(like)
        assert Counter(l for l, _ in s) == Counter({0: 2, 2: 1})
    assert len({tuple(s) for s in sets}) > 1
    with pytest.raises(ValueError, match="layer 1 holds 4 of the heads to match but only 0 others"):
        random_head_sets(3, 4, [(1, h) for h in range(4)], draws=1, seed=0)
    with pytest.raises(ValueError, match="layer 3 is outside"):
        random_head_sets(3, 4, [(3, 0)], draws=1, seed=0)


def _order_table(ranked):
    return pd.DataFrame(
        {"layer": [l for l, _ in ranked], "head": [h for _, h in ranked], "rank": np.arange(1, len(ranked) + 1)}
    )


def test_order_mask_specs():
    specs = order_mask_specs(_order_table([(2, 1), (0, 3), (1, 1), (0, 0)]), k=2, draws=3, seed=0, layers=3, heads=4)
    assert [s.kind for s in specs] == ["none", "order", "random", "random", "random"]
    assert specs[1].dropped == ((0, 3), (2, 1))
    assert all(len(s.dropped) == 2 and not set(s.dropped) & {(0, 3), (2, 1)} for s in specs[2:])
    assert all(sorted(l for l, _ in s.dropped) == [0, 2] for s in specs[2:])  # depth-matched: the order heads' layers


def _effects():
    """Three examples; masks: none, order, two random draws. Original grades 5, 4, 1 (as one-hot distributions)."""
    eye = np.eye(5)
    grades = np.array([5, 4, 1])
    specs = order_mask_specs(_order_table([(0, 0), (0, 1)]), k=1, draws=2, seed=0, layers=1, heads=3)
    original = {
        "none": eye[[4, 3, 0]],
        "order": eye[[4, 3, 0]],
        "random-k1-d0": eye[[4, 3, 0]],
        "random-k1-d1": eye[[4, 3, 0]],
    }
    shuffled = {
        "none": eye[[1, 3, 0]],  # example 0 drops 5 -> 2, example 1 stays 4
        "order": eye[[3, 3, 0]],  # the order heads masked: example 0 only drops to 4
        "random-k1-d0": eye[[1, 3, 0]],
        "random-k1-d1": 0.5 * (eye[[1, 3, 0]] + eye[[2, 3, 0]]),
    }
    ids = {s.kind if s.kind != "random" else s.mask_id: s.mask_id for s in specs}
    orig = pd.concat(
        [per_example_table(ids[k], v, grades, STUDY_SCALE) for k, v in original.items()], ignore_index=True
    )
    shuf = pd.concat(
        [per_example_table(ids[k], v, grades, STUDY_SCALE) for k, v in shuffled.items()], ignore_index=True
    )
    return shuffle_effects(orig, shuf, plan_table(specs))


def test_shuffle_effects_and_grade_tables():
    effects = _effects()
    np.testing.assert_allclose(STUDY_SCALE.expected(0.5 * np.eye(5)[[1]] + 0.5 * np.eye(5)[[4]]), [3.5])
    none = effects[effects["kind"] == "none"].set_index("example")
    assert none["shift"].tolist() == [-3.0, 0.0, 0.0] and none["tv"].tolist() == [1.0, 0.0, 0.0]
    assert none["predicted_shuffled"].tolist() == [2, 4, 1]
    shares = grade_shares(effects).set_index(["condition", "grade"])
    assert shares.loc[("shuffled", 2), "count"] == 1 and shares.loc[("original", 5), "share"] == pytest.approx(1 / 3)
    by_grade = shift_by_grade(effects, n_boot=100).set_index("grade")
    assert by_grade.loc["5", "shift"] == -3.0 and by_grade.loc["all", "shift"] == pytest.approx(-1.0)
    assert by_grade.loc["all", "n_examples"] == 3
    assert len(shift_by_grade(effects, examples=[0, 1], n_boot=100)) == 3  # grades 4, 5 and all
    one, two = np.eye(5)[[0]], np.eye(5)[[0, 1]]
    with pytest.raises(ValueError, match="different"):
        shuffle_effects(
            per_example_table("none", one, np.array([1]), STUDY_SCALE),
            per_example_table("none", two, np.array([1, 2]), STUDY_SCALE),
            plan_table(order_mask_specs(_order_table([(0, 0)]), 1, 1, 0, 1, 2)),
        )


def test_masking_comparison_by_hand():
    conditions, tests = masking_comparison(_effects(), n_boot=200)
    tv = conditions[conditions["measure"] == "tv"].set_index("condition")
    assert tv.loc["no mask", "value"] == pytest.approx(1 / 3)
    assert tv.loc["order heads", "value"] == pytest.approx(1 / 3)  # example 0: 5 -> 4 is still a full move
    assert tv.loc["random heads", "value"] == pytest.approx((1 + 1) / 2 / 3)
    shift = tests.set_index("measure").loc["shift"]
    assert shift["order_heads"] == pytest.approx(-1 / 3) and shift["unmasked"] == pytest.approx(-1.0)
    assert shift["random_mean"] == pytest.approx(np.mean([-1.0, -2.5 / 3]))
    assert shift["n_as_insensitive"] == 0  # no draw as insensitive as the order heads
    assert shift["difference"] == pytest.approx(-1 / 3 - shift["random_mean"])
    assert shift["difference_lo"] <= shift["difference"] <= shift["difference_hi"]
    assert tv["interval"].tolist() == ["pairs", "pairs", "draws and pairs"] and shift["control"] == CONTROL
    draws = draw_table(_effects())
    assert draws["kind"].tolist() == ["none", "order", "random", "random"]


def _constant_draws(draw_values, n_examples=30, seed=0):
    """Effects whose examples vary a little and whose random draws vary as given (each the same on every example)."""
    rng = np.random.default_rng(seed)
    rows = {"none": rng.normal(0.5, 0.01, n_examples), "order": rng.normal(0.1, 0.01, n_examples)}
    rows.update({f"random-d{d}": np.full(n_examples, v) for d, v in enumerate(draw_values)})
    return pd.DataFrame(
        [
            {"mask_id": m, "kind": m.split("-")[0], "example": e, "tv": v, "shift": -v}
            for m, values in rows.items()
            for e, v in enumerate(values)
        ]
    )


def test_masking_comparison_resamples_the_draws():
    effects = _constant_draws(np.linspace(0.0, 1.0, 10))
    conditions, tests = masking_comparison(effects, n_boot=500, seed=3)
    rand = conditions.set_index(["measure", "condition"]).loc[("tv", "random heads")]
    wide = effects.pivot(index="mask_id", columns="example", values="tv")
    random, order = wide.filter(like="random", axis=0).to_numpy(), wide.loc["order"].to_numpy()
    w = bootstrap_weights(30, 500, 3)
    pairs_only = np.quantile(w @ random.mean(axis=0) / 30, [0.025, 0.975])  # the draws' spread is invisible here
    assert rand["hi"] - rand["lo"] > 0.2 > pairs_only[1] - pairs_only[0]
    assert rand["value"] == pytest.approx(0.5)
    diffs = boot_means(order, w, 3) - boot_means(random, w, 3)  # the same two-stage replicates
    test = tests.set_index("measure").loc["tv"]
    # a t interval on their SD (the draws' part scaled by D / (D - 1)), with the draws' few degrees of freedom
    fixed = w @ order / 30 - (w @ random.T / 30).mean(axis=1)
    var_pairs = np.var(fixed, ddof=1)
    se = np.sqrt(var_pairs + (np.var(diffs, ddof=1) - var_pairs) * 10 / 9)
    half = sps.t.ppf(0.975, test["df"]) * se
    assert (test["difference_lo"], test["difference_hi"]) == pytest.approx(
        (test["difference"] - half, test["difference"] + half)
    )
    assert 9 <= test["df"] < 15
    one = _constant_draws([0.4]).replace({"mask_id": {"order": "random-d0", "random-d0": "order"}})
    one["kind"] = one["mask_id"].str.split("-").str[0]  # the one random draw now varies over examples
    single = masking_comparison(one, n_boot=500, seed=3)[0].set_index(["measure", "condition"])
    single = single.loc[("tv", "random heads")]
    by_pairs = np.quantile(w @ one[one["kind"] == "random"]["tv"].to_numpy() / 30, [0.025, 0.975])
    assert (single["lo"], single["hi"]) == pytest.approx(tuple(by_pairs)) and single["interval"] == "pairs"


def test_case_table_patterns_and_pick():
    effects = _effects()
    cases = case_table(effects)
    row = cases.set_index("example").loc[0]
    assert (row["predicted_original"], row["predicted_shuffled"], row["predicted_order"], row["predicted_random"]) == (
        5,
        2,
        4,
        2,
    )
    assert row["study_like"]
    assert cases["relevant"].tolist() == [True, True, False] and cases["drops"].tolist() == [True, False, False]
    shares = case_shares(cases).set_index("pattern")
    assert shares.loc["study_like", "count"] == 1 and shares.loc["relevant", "share"] == pytest.approx(2 / 3)
    assert shares.loc["study_like", "lo"] < 1 / 3 < shares.loc["study_like", "hi"]
    assert pick_case(cases) == (0, "study_like")
    assert pick_case(cases, examples=[1, 2]) == (1, "relevant")
    ranked = rank_cases(cases)
    assert ranked["example"].tolist() == [0, 1, 2] and ranked["pattern"].tolist() == ["study_like", "relevant", "none"]
    assert ranked["fall"].tolist() == [3.0, 0.0, 0.0]
    dist = case_distributions(effects, 0).set_index(["condition", "grade"])["probability"]
    assert dist[("original", 5)] == 1.0 and dist[("shuffled, order heads masked", 4)] == 1.0
    assert dist[("shuffled, random heads masked", 2)] == pytest.approx(0.75)
    assert list(dict.fromkeys(case_distributions(effects, 0)["condition"])) == list(CONDITIONS)


def test_case_k_table_on_a_tiny_model():
    encoded = Encoded([[1, 5, 6, 2, 7, 8, 9, 2], [1, 5, 2, 7, 2]], [[0] * 8, [0] * 5], np.array([3, 4]), 0, STUDY_SCALE)
    shuffled = Encoded(
        [[1, 5, 6, 2, 9, 8, 7, 2], [1, 5, 2, 7, 2]], [[0] * 8, [0] * 5], np.array([3, 4]), 0, STUDY_SCALE
    )
    ranked = _order_table([(0, 1), (2, 3), (1, 0)])
    lab = SimpleNamespace(
        model=tiny_bert(), encoded=encoded, scale=encoded.scale, device="cpu", batch_size=64, pad_id=0
    )
    table = case_k_table(lab, shuffled, [0], ranked, k_values=[0, 2], draws=2, seed=0)
    assert set(table["k"]) == {0, 2} and set(table["example"]) == {0} and len(table) == 2 * 4 * 5
    sums = table.groupby(["k", "condition"])["probability"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, rtol=1e-5)
    at_zero = table[table["k"] == 0].pivot(index="grade", columns="condition", values="probability")
    np.testing.assert_allclose(at_zero["shuffled"], at_zero["shuffled, order heads masked"])
    at_two = table[table["k"] == 2].pivot(index="grade", columns="condition", values="probability")
    assert not np.allclose(at_two["shuffled"], at_two["shuffled, order heads masked"])


def test_the_explorer_stops_at_the_last_k_random_heads_can_match_layer_by_layer():
    # 4 heads a layer: the top four order heads hold three of layer 1, which leaves it one other head for three
    ranked = _order_table([(1, 0), (2, 3), (1, 1), (1, 2), (0, 0)])
    assert depth_matched_k(ranked, heads=4) == 3
    with pytest.raises(ValueError, match="depth-matched"):
        random_head_sets(3, 4, [(1, 0), (1, 1), (1, 2)], draws=1, seed=0)
    encoded = Encoded([[1, 5, 6, 2, 7, 8, 9, 2]], [[0] * 8], np.array([3]), 0, STUDY_SCALE)
    lab = SimpleNamespace(
        model=tiny_bert(), encoded=encoded, scale=encoded.scale, device="cpu", batch_size=64, pad_id=0
    )
    table = case_k_table(lab, encoded, [0], ranked, k_values=range(5), draws=2, seed=0)
    assert sorted(set(table["k"])) == [0, 1, 2, 3]
    assert depth_matched_k(_order_table([(0, 0), (1, 0), (2, 0)]), heads=4) == 3  # every k of the table


def test_a_chinese_title_is_shuffled_by_words_not_characters():
    frame = pd.DataFrame({"query": ["一个人在弹吉他"], "title": ["一个男人正在弹吉他"], "label": [3]})
    segment = word_segmenter(frame["title"])
    shuffled = shuffled_frame(frame, seed=0, segment=segment)
    before, after = chinese_words(frame["title"][0]), shuffled["title"][0]
    assert after != frame["title"][0] and bool(shuffled["changed"][0])
    assert sorted(after) == sorted(frame["title"][0])  # the same characters
    assert after.startswith(tuple(before)) and all(w in after for w in before)  # words stay whole
    assert shuffled_frame(frame, seed=0, segment=segment)["title"][0] == after  # same seed, same shuffle


def test_latin_words_in_a_chinese_title_stay_apart_when_shuffled():
    frame = pd.DataFrame({"title": ["由Lone Fox Williams发布"]})
    words = {"由Lone Fox Williams发布": ["由", "Lone", "Fox", "Williams", "发布"]}
    after = shuffled_frame(frame, seed=0, segment=words.get)["title"][0]
    assert sorted(re.findall("[A-Za-z]+", after)) == ["Fox", "Lone", "Williams"]
    assert after.replace(" ", "") != "由LoneFoxWilliams发布"


E5_TITLES = [
    "最初是由Lone Fox发布的，也不是所有与伊朗有关的内容。",
    "死者里昂·威廉姆斯(Leon Williams)是在他三楼的公寓里被发现的。",
    "一个男人正在弹吉他。",
    "A man is playing a guitar.",
]


@pytest.mark.slow
def test_e5_order_scores_leave_out_its_special_tokens(e5_tokenizer):
    encoded = encode(
        e5_tokenizer, pd.DataFrame({"query": E5_TITLES, "title": E5_TITLES[::-1], "label": [1, 2, 3, 4]}), STUDY_SCALE
    )
    special_ids = set(e5_tokenizer.convert_tokens_to_ids(["<s>", "</s>"]))
    maps_of = {}
    for example, ids in enumerate(encoded.input_ids):  # one head: all attention on the previous token, if special
        n, special = len(ids), np.isin(ids, list(special_ids))
        maps = np.zeros((1, 2, n, n))
        maps[0, 0, np.arange(n), np.where(np.append(False, special[:-1]), np.arange(n) - 1, np.arange(n))] = 1.0
        maps[0, 1, np.arange(1, n), np.arange(n - 1)] = 1.0  # the other: always the previous token
        maps[0, 1, 0, 0] = 1.0
        maps_of[example] = maps
    table = order_heads(iter(maps_of.items()), encoded, e5_tokenizer, k=1).set_index("head")
    assert table.loc[0, "prev"] == 0.0 and table.loc[1, "prev"] == 1.0 and table.loc[1, "selected"]


@pytest.mark.slow
def test_shuffled_chinese_titles_keep_their_words_for_e5(e5_tokenizer):
    frame = pd.DataFrame({"title": E5_TITLES[:3]})
    shuffled = shuffled_frame(frame, seed=0, segment=chinese_words)
    pieces = piece_convention(e5_tokenizer)
    for before, after in zip(frame["title"], shuffled["title"]):
        words = []
        for text in (before, after):
            tokens = e5_tokenizer.tokenize(text)
            spans = word_spans(tokens, pieces, [False] * len(tokens))
            words.append(Counter("".join(pieces.text(tokens[i]) for i in span) for span in spans))
        latin = [Counter({w: c for w, c in count.items() if re.fullmatch("[A-Za-z]+", w)}) for count in words]
        assert latin[0] == latin[1] and sorted(after.replace(" ", "")) == sorted(before.replace(" ", ""))
