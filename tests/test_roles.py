import numpy as np
import pandas as pd
import pytest
import torch
from conftest import minilm_tokenizer
from transformers import BertConfig, BertForSequenceClassification

from headlab.core.attention import attention_maps
from headlab.core.evaluate import encode
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.pair import read_pair
from headlab.measures.roles import (
    ENGLISH_STOPWORDS,
    MOJIBAKE,
    ROLE_COLUMNS,
    cls_attention_on_shared,
    cls_profile,
    example_role_scores,
    first_showcase,
    longest_shared_phrase,
    paired_delta,
    rank_heads,
    role_scores,
    showcase_examples,
    summarize_roles,
)


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def pair(tokenizer, query, title, stopwords=None):
    return read_pair(tokenizer, tokenizer(query, title)["input_ids"], stopwords)


@pytest.fixture
def toy(tokenizer):
    # 0 [CLS] 1 red 2 cat 3 , 4 red 5 [SEP] 6 the 7 cat 8 , 9 red 10 ! 11 [SEP]
    tokens = pair(tokenizer, "red cat, red", "the cat, red!")
    assert tokens.tokens == ["[CLS]", "red", "cat", ",", "red", "[SEP]", "the", "cat", ",", "red", "!", "[SEP]"]
    return tokens


def uniform_maps(layers=2, heads=2, n=12):
    return np.full((layers, heads, n, n), 1.0 / n)


def test_match_of_a_head_that_looks_only_at_identical_terms(tokenizer, toy):
    maps = uniform_maps()
    for source, targets in {1: [9], 2: [7], 4: [9], 7: [2], 9: [1, 4]}.items():
        maps[0, 1, source] = 0
        maps[0, 1, source, targets] = 1 / len(targets)
    scores = example_role_scores(maps, toy)
    assert scores["match"][0, 1] == pytest.approx(1.0)
    # uniform share of the other sentence x identical targets: query rows 1/5 (5 title tokens),
    # title row 7 1/4, title row 9 2/4 (4 query tokens, two of them "red")
    baseline = (0.2 + 0.2 + 0.2 + 0.25 + 0.5) / 5
    assert scores["match_baseline"][0, 1] == pytest.approx(baseline)
    assert scores["match_ratio"][0, 1] == pytest.approx(1 / baseline)
    assert scores["match_excess"][0, 1] == pytest.approx(1 - baseline)
    # a uniform head puts identity-blind mass on the matches: exactly its baseline
    assert scores["match"][0, 0] == pytest.approx(0.1)
    assert scores["match_excess"][0, 0] == pytest.approx(0.0)
    assert scores["match_ratio"][0, 0] == pytest.approx(1.0)


def test_match_is_nan_without_shared_terms(tokenizer):
    tokens = pair(tokenizer, "red cat", "a dog")
    scores = example_role_scores(uniform_maps(n=len(tokens.ids)), tokens)
    assert np.isnan(scores["match"]).all() and np.isnan(scores["match_excess"]).all()
    assert not np.isnan(scores["self"]).any()


def test_diagonal_sep_and_shifted_heads(tokenizer, toy):
    n = 12
    maps = uniform_maps(layers=1, heads=4, n=n)
    maps[0, 0] = np.eye(n)
    maps[0, 1] = 0
    maps[0, 1][:, toy.seps] = 0.5
    maps[0, 2] = np.eye(n, k=-1)
    maps[0, 2, 0, 0] = 1
    maps[0, 3] = np.eye(n, k=1)
    maps[0, 3, n - 1, n - 1] = 1
    s = example_role_scores(maps, toy)
    assert s["self"][0, 0] == 1 and s["sep"][0, 1] == 1 and s["prev"][0, 2] == 1 and s["next"][0, 3] == 1
    assert s["self"][0, 1] == 0 and s["cls"][0, 0] == 0 and s["match"][0, 0] == 0
    assert s["cls"][0, 2] == pytest.approx(1 / 9)  # only the first query token's previous token is [CLS]


def test_cls_row_on_one_shared_term(tokenizer, toy):
    maps = uniform_maps()
    maps[1, 0, toy.cls] = 0
    maps[1, 0, toy.cls, 2] = 1.0
    got = cls_attention_on_shared(maps, toy)
    assert got["shared_share"][1, 0] == 1 and got["entropy"][1, 0] == 0 and got["n_effective"][1, 0] == 1
    assert got["n_shared_tokens"] == 5 and got["n_tokens"] == 9 and got["chance"] == pytest.approx(5 / 9)
    # the other heads' rows are uniform
    assert got["shared_share"][0, 0] == pytest.approx(5 / 9) and got["entropy"][0, 0] == pytest.approx(np.log(9))
    assert got["n_effective"][0, 0] == pytest.approx(9) and got["content_mass"][0, 0] == pytest.approx(9 / 12)
    assert got["shared_mass"][0, 0] == pytest.approx(5 / 12) and got["shared_mass"][1, 0] == pytest.approx(1.0)


def test_stopwords_shrink_the_shared_terms_and_the_chance(tokenizer, toy):
    got = cls_attention_on_shared(uniform_maps(), read_pair(tokenizer, toy.ids, {"red"}))
    assert got["n_shared_tokens"] == 2 and got["chance"] == pytest.approx(2 / 9)
    assert {"the", "a", "is", "of"} <= ENGLISH_STOPWORDS and "cat" not in ENGLISH_STOPWORDS


def test_longest_shared_phrase(tokenizer):
    tokens = pair(tokenizer, "i grew up in iran", "the film i grew up in iran is good")
    start, title_start, length = longest_shared_phrase(tokens)
    assert tokens.tokens[start : start + length] == ["i", "grew", "up", "in", "iran"]
    assert tokens.tokens[title_start : title_start + length] == tokens.tokens[start : start + length]
    assert longest_shared_phrase(pair(tokenizer, "red cat", "a dog"))[2] == 0


def test_showcase_examples_prefer_long_shared_phrases(tokenizer):
    frame = pd.DataFrame(
        {
            "query": ["a dog runs", "red cat, red", "a dog runs fast", "the sun"],
            "title": ["a dog walks", "the red cat!", "a dog runs fast today", "cold moon"],
            "label": [3, 5, 4, 1],
        }
    )
    # the order alone (near-duplicates allowed here: the overlap rule has its own test)
    table = showcase_examples(
        encode(tokenizer, frame, STUDY_SCALE), tokenizer, stopwords=ENGLISH_STOPWORDS, max_overlap=1.0
    )
    assert table["example"].tolist() == [2, 1, 0]  # no shared term in the last pair
    assert table.loc[0, "phrase"] == "a dog runs fast" and table.loc[0, "phrase_terms"] == 3
    assert table.loc[1, "phrase"] == "red cat" and table.loc[2, "phrase_terms"] == 1
    short = showcase_examples(
        encode(tokenizer, frame, STUDY_SCALE), tokenizer, max_tokens=11, stopwords=ENGLISH_STOPWORDS, max_overlap=1.0
    )
    assert short["example"].tolist() == [1, 0]


def test_a_showcase_pair_is_clean_and_shares_part_of_its_title_not_all_of_it(tokenizer):
    frame = pd.DataFrame(
        {
            "query": ["a man is playing a guitar .", "red cat sleeps", "ariel sharon ŔÄ speaks", "blue car"],
            "title": [
                "a man is playing a guitar .",
                "red cat sleeps on the warm green sofa today",
                "ariel sharon spoke today",
                "blue car",
            ],
            "label": [5, 4, 3, 5],
        }
    )
    texts = (frame["query"] + " " + frame["title"]).tolist()
    table = showcase_examples(
        encode(tokenizer, frame, STUDY_SCALE), tokenizer, stopwords=ENGLISH_STOPWORDS, texts=texts
    )
    # 0 repeats a whole sentence (its stopwords and the full stop must not dilute the overlap); 3 repeats its
    # query; 2 carries mojibake
    assert table["example"].tolist() == [1]
    assert table.loc[0, "overlap"] == pytest.approx(3 / 7)  # red, cat, sleeps of 7 terms (on, the: stopwords)
    loose = showcase_examples(
        encode(tokenizer, frame, STUDY_SCALE), tokenizer, stopwords=ENGLISH_STOPWORDS, max_overlap=1.0
    )
    assert set(loose["example"]) == {0, 1, 2, 3}  # the rule, not the data, left them out
    assert MOJIBAKE.search("Sharon ŔÄ") and not MOJIBAKE.search("Herr Müller")
    assert first_showcase(table) == 1 and first_showcase(table, example=3) == 3
    with pytest.raises(ValueError, match="raise MAX_TOKENS or name one with EXAMPLE"):
        first_showcase(table.iloc[0:0])


def tiny_models(tokenizer):
    """A random classifier and its bare encoder (the same weights), over the real vocabulary."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=5,
        initializer_range=0.3,
    )
    config._attn_implementation = "sdpa"
    classifier = BertForSequenceClassification(config).eval()
    return classifier, classifier.bert


@pytest.fixture(scope="module")
def encoded(tokenizer):
    frame = pd.DataFrame(
        {
            "query": ["red cat, red", "a dog runs", "the sun is hot"],
            "title": ["the cat, red!", "a dog walks", "cold moon"],
            "label": [5, 3, 1],
        }
    )
    return encode(tokenizer, frame, STUDY_SCALE)


def test_role_scores_on_tiny_models(tokenizer, encoded):
    classifier, encoder = tiny_models(tokenizer)
    summary = role_scores(attention_maps(classifier, encoded), encoded, tokenizer)
    assert len(summary) == 2 * 4 and list(summary.columns[:2]) == ["layer", "head"]
    shares = summary[["match", "match_baseline", "self", "sep", "cls", "prev", "next"]].to_numpy()
    assert ((shares >= 0) & (shares <= 1)).all()
    assert (summary["n_examples"] == 3).all() and (summary["n_match_examples"] == 2).all()
    assert classifier.config._attn_implementation == "sdpa"  # switched back after taking the maps
    long = role_scores(attention_maps(classifier, encoded), encoded, tokenizer, per_example=True)
    assert len(long) == 3 * 2 * 4 and set(ROLE_COLUMNS) <= set(long.columns)
    pd.testing.assert_frame_equal(summarize_roles(long), summary)
    bare = role_scores(attention_maps(encoder, encoded), encoded, tokenizer, per_example=True)
    pd.testing.assert_frame_equal(bare, long)
    heads, rows = rank_heads(summary, by="self", among_layers=[1], k=2)
    assert len(heads) == 2 and all(layer == 1 for layer, _ in heads)
    assert rows["self"].is_monotonic_decreasing


def test_cls_profile_per_example_and_head(tokenizer, encoded):
    classifier, _ = tiny_models(tokenizer)
    mask = torch.ones(2, 4)
    mask[0] = 0
    full = cls_profile(attention_maps(classifier, encoded, mask=mask), encoded, tokenizer)
    assert len(full) == 3 * 2 * 4
    profile = cls_profile(attention_maps(classifier, encoded, mask=mask), encoded, tokenizer, heads=[(1, 2)])
    assert list(profile["example"]) == [0, 1, 2] and (profile["layer"] == 1).all() and (profile["head"] == 2).all()
    assert profile["n_shared_tokens"].tolist() == [5, 4, 0]  # "a dog" is shared by the second pair
    assert np.isnan(profile.loc[2, "shared_share"]) and profile["entropy"].gt(0).all()
    same = full[(full["layer"] == 1) & (full["head"] == 2)].reset_index(drop=True)
    pd.testing.assert_frame_equal(same, profile)
    unmasked = cls_profile(attention_maps(classifier, encoded), encoded, tokenizer, heads=[(1, 2)])
    assert not np.allclose(unmasked["entropy"], profile["entropy"])  # masking layer 0 changes layer 1's rows


def long_table(values):
    """A per-example role table with ``values`` (examples, heads) for a 1-layer model."""
    examples, heads = values.shape
    return pd.DataFrame(
        {
            "example": np.repeat(np.arange(examples), heads),
            "layer": 0,
            "head": np.tile(np.arange(heads), examples),
            "match": values.ravel(),
        }
    )


def test_paired_delta_zero_for_identical_tables():
    rng = np.random.default_rng(0)
    before = long_table(rng.random((20, 3)))
    out = paired_delta(before, before.copy(), "match", n_boot=200, heads=[(0, 1)])
    assert out["scope"].tolist() == ["head", "head", "head", "all", "subset"]
    assert (out[["delta", "lo", "hi"]] == 0).all().all()


def test_paired_delta_shift_and_missing_matches():
    rng = np.random.default_rng(0)
    values = rng.random((20, 2))
    values[:5, 1] = np.nan  # pairs with no shared term
    after = values.copy()
    after[:, 0] += 0.25
    out = paired_delta(long_table(values), long_table(after), "match", n_boot=200)
    first, second, overall = out.iloc[0], out.iloc[1], out.iloc[2]
    assert first["delta"] == pytest.approx(0.25) and first["lo"] == pytest.approx(0.25)
    assert second["delta"] == 0 and second["n_examples"] == 15
    assert overall["delta"] == pytest.approx(0.125) and overall["lo"] == pytest.approx(0.125)


def test_pair_role_scores_are_computed_once_per_model_and_read_back(tmp_path, monkeypatch):
    from tiny_setup import tiny_setup

    from headlab.measures import roles

    setup = tiny_setup(tmp_path, n_right=3)
    passes = []
    real = roles.role_scores
    monkeypatch.setattr(roles, "role_scores", lambda *a, **k: passes.append(1) or real(*a, **k))
    first = roles.pair_role_scores(setup, [0, 2], stopwords=roles.ENGLISH_STOPWORDS)
    again = roles.pair_role_scores(setup, [0, 2], stopwords=roles.ENGLISH_STOPWORDS)
    assert len(passes) == 1
    pd.testing.assert_frame_equal(first, again)
    direct = real(
        setup.attention([0, 2]), setup.encoded, setup.tokenizer, stopwords=roles.ENGLISH_STOPWORDS, per_example=True
    )
    pd.testing.assert_frame_equal(first, direct, check_dtype=False)
    other = BertForSequenceClassification(BertConfig(**{**setup.model.config.to_dict(), "num_labels": 5}))
    roles.pair_role_scores(setup, [0, 2], model=other, stopwords=roles.ENGLISH_STOPWORDS)
    assert len(passes) == 2  # another model's weights: computed
