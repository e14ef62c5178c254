"""headlab.core.ablation and headlab.measures.faithfulness: heads mean-ablated per token class, undone on exit, and
IOI's faithfulness, completeness and minimality, checked against runs by hand and on a model whose circuit is known."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import minilm_tokenizer
from tiny_setup import tiny_classifier
from transformers import MPNetTokenizer

from headlab.core.ablation import (
    PADDING,
    Donors,
    TokenClass,
    class_outputs,
    mean_ablated,
    mean_ablated_logits,
    padded_classes,
    resample_ablated,
    token_classes,
)
from headlab.core.evaluate import Encoded, encode, length_batches, model_inputs
from headlab.core.grades import STUDY_SCALE
from headlab.core.patching import grade_logit, recording_head_outputs
from headlab.core.stats import bootstrap_weights
from headlab.inputs.pair import pair_classes, read_pair
from headlab.measures.faithfulness import (
    AblationEngine,
    completeness,
    faithfulness,
    greedy_subsets,
    minimality,
    random_circuits,
)

WORDS = "cat dog red blue car road sky sea sun moon tree bird".split()
CIRCUIT = [(0, 1), (1, 2)]  # the known circuit's heads; every other head outputs one constant
IDLE = (2, 3)  # a head outside it: it adds nothing
PARALLEL = 2  # a seed whose circuit heads each carry their own part of the gap (in seed 9, 1.2 reads 0.1: one path)


def _pairs(n: int, seed: int) -> pd.DataFrame:
    """Queries of 2-3 words and titles that share the query's first word among 2-3 others."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        query = list(rng.choice(WORDS[:6], rng.integers(2, 4), replace=False))
        title = [query[0], *rng.choice(WORDS[6:], rng.integers(2, 4))]
        rng.shuffle(title)
        rows.append((" ".join(query), " ".join(title), int(rng.integers(1, 6))))
    return pd.DataFrame(rows, columns=["query", "title", "label"])


def _contrast(encoded: Encoded, tokenizer) -> Encoded:
    """The same pairs with the title's pieces of the query's words replaced by one other word: every length kept."""
    other = tokenizer.convert_tokens_to_ids("house")
    ids = []
    for x in encoded.input_ids:
        pair = read_pair(tokenizer, x)
        query = {x[i] for i in pair.query}
        ids.append([other if i in pair.title and t in query else t for i, t in enumerate(x)])
    return Encoded(ids, [list(t) for t in encoded.token_type_ids], encoded.grades, 0, STUDY_SCALE)


def _known(seed: int):
    """A random 3-layer BERT whose grade depends on the input only through :data:`CIRCUIT`: every other head's
    values are its bias alone, one constant at every position (its mean, so mean-ablating it changes nothing)."""
    model = tiny_classifier(len(minilm_tokenizer()), layers=3, seed=seed)
    with torch.no_grad():
        for l, layer in enumerate(model.bert.encoder.layer):
            for h in range(4):
                if (l, h) not in CIRCUIT:
                    layer.attention.self.value.weight[h * 4 : (h + 1) * 4] = 0
    return model


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


@pytest.fixture(scope="module")
def data(tokenizer):
    """Reference pairs, and original pairs with their contrasts."""
    original = encode(tokenizer, _pairs(40, 0), STUDY_SCALE)
    return encode(tokenizer, _pairs(60, 100), STUDY_SCALE), original, _contrast(original, tokenizer)


def _engine(model, data, tokenizer, **kwargs):
    reference, original, contrast = data
    means, _ = class_outputs(model, reference, pair_classes(tokenizer, reference), batch_size=16)
    return AblationEngine(model, original, contrast, means, tokenizer, batch_size=16, autocast=False, **kwargs)


def _batch(model, encoded):
    ((idx, batch),) = length_batches(encoded, len(encoded))
    return idx, model_inputs(model, batch, "cpu")


def test_token_classes_mark_cls_separators_query_and_title(tokenizer, mpnet_folder):
    (ids,) = encode(
        tokenizer, pd.DataFrame({"query": ["red cat"], "title": ["the cat, red!"], "label": [1]}), STUDY_SCALE
    ).input_ids
    C, Q, T, S = (c.value for c in TokenClass)
    assert token_classes(read_pair(tokenizer, ids)).tolist() == [C, Q, Q, S, T, T, T, T, T, S]
    inside = tokenizer("red cat", "the [SEP] cat")["input_ids"]  # a separator inside the title's range
    assert token_classes(read_pair(tokenizer, inside)).tolist() == [C, Q, Q, S, T, S, T, S]
    mpnet = MPNetTokenizer.from_pretrained(mpnet_folder)  # <s> a cat </s></s> the dog </s>
    ids = mpnet("a cat", "the dog")["input_ids"]
    assert token_classes(read_pair(mpnet, ids)).tolist() == [C, Q, Q, S, S, T, T, S]


@torch.inference_mode()
def test_class_means_average_each_class_of_recorded_head_outputs(tokenizer, data):
    model, reference = tiny_classifier(len(tokenizer), layers=3), data[0]
    classes = pair_classes(tokenizer, reference)
    means, _ = class_outputs(model, reference, classes, batch_size=7)  # ragged batches
    assert means.shape == (3, len(TokenClass), 16)
    idx, batch = _batch(model, reference)
    with recording_head_outputs(model) as passes:
        model(**batch)
    title = padded_classes(classes, idx) == TokenClass.TITLE.value
    torch.testing.assert_close(means[1, TokenClass.TITLE.value], passes[0][1][title].mean(dim=0))
    assert not torch.allclose(means[1, TokenClass.TITLE.value], means[1, TokenClass.QUERY.value])


@torch.inference_mode()
def test_mean_ablated_heads_output_their_class_means_and_the_hooks_go(tokenizer, data):
    model, original = tiny_classifier(len(tokenizer), layers=3), data[1]
    classes = pair_classes(tokenizer, original)
    means, _ = class_outputs(model, original, classes)
    idx, batch = _batch(model, original)
    where = padded_classes(classes, idx)
    before = model(**batch).logits
    with mean_ablated(model, [(1, 2), (2, 0)], means, where), recording_head_outputs(model) as passes:
        ablated = model(**batch).logits
    real = batch["attention_mask"].bool()
    for layer, columns in [(1, slice(8, 12)), (2, slice(0, 4))]:
        expected = means[layer][where.clamp(min=0)][..., columns]
        torch.testing.assert_close(passes[0][layer][..., columns][real], expected[real])
    assert not torch.allclose(ablated, before)
    torch.testing.assert_close(model(**batch).logits, before)  # undone on exit
    assert all(not layer.attention.output.dense._forward_pre_hooks for layer in model.bert.encoder.layer)


def test_a_donor_position_is_the_one_of_the_same_class_and_rank_wrapping_round():
    C, Q, T, S = (c.value for c in TokenClass)
    donors = Donors(torch.zeros(1, 1, 6, 4), [np.array([C, Q, S, T, T, S])], np.array([0]))
    mine = np.array([C, Q, Q, S, T, T, T, S, PADDING])
    assert donors.positions(mine, 0).tolist() == [0, 1, 1, 2, 3, 4, 3, 5, 0]


@torch.inference_mode()
def test_resample_ablated_heads_output_what_they_output_on_their_donor_pair(tokenizer, data):
    model, reference = tiny_classifier(len(tokenizer), layers=3), data[0]
    classes = pair_classes(tokenizer, reference)
    means, donors = class_outputs(model, reference, classes, donors=8, seed=3, batch_size=7)  # ragged batches
    torch.testing.assert_close(means, class_outputs(model, reference, classes, batch_size=16)[0])
    assert donors.outputs.shape[:2] == (3, 8) and len(set(donors.pairs)) == 8
    np.testing.assert_array_equal(donors.pairs, class_outputs(model, reference, classes, 8, 3, batch_size=16)[1].pairs)
    for d, i in enumerate(donors.pairs):  # each donor's outputs are its own pair's, run alone
        _, alone = _batch(model, reference.subset([int(i)]))
        with recording_head_outputs(model) as passes:
            model(**alone)
        length = len(classes[i])
        torch.testing.assert_close(donors.outputs[1, d, :length], passes[0][1][0], atol=1e-5, rtol=1e-5)
        assert (donors.outputs[1, d, length:] == 0).all()
    idx, batch = _batch(model, data[1])
    where = padded_classes(pair_classes(tokenizer, data[1]), idx)
    chosen = torch.arange(len(idx)) % 8
    positions = torch.stack([torch.as_tensor(donors.positions(row.numpy(), int(d))) for row, d in zip(where, chosen)])
    before = model(**batch).logits
    with resample_ablated(model, [(1, 2)], donors, chosen, positions), recording_head_outputs(model) as ablated:
        model(**batch)
    real = batch["attention_mask"].bool()
    expected = donors.outputs[1][chosen[:, None], positions][..., 8:12]
    torch.testing.assert_close(ablated[0][1][..., 8:12][real], expected[real])
    torch.testing.assert_close(model(**batch).logits, before)  # undone on exit
    assert all(not layer.attention.output.dense._forward_pre_hooks for layer in model.bert.encoder.layer)


def test_resample_ablation_reads_one_donor_a_pair_on_both_sides_whatever_the_batches(tokenizer, data):
    """The same seed gives the same gaps in batches of any size and with the last layer computed everywhere; with
    every head ablated both sides read the same donor: no gap is left; with none, the model itself."""
    model, (reference, original, contrast) = tiny_classifier(len(tokenizer), layers=3), data
    means, donors = class_outputs(model, reference, pair_classes(tokenizer, reference), 16, 1, batch_size=16)

    def engine(ablate_to, seed=4, **kwargs):
        settings = {"batch_size": 16, "autocast": False, "seed": seed, **kwargs}
        return AblationEngine(model, original, contrast, ablate_to, tokenizer, **settings)

    sets = [[], [(0, 1), (2, 3)], engine(means).heads]
    resampled, mean_gaps = engine(donors).gaps(sets), engine(means).gaps(sets)
    np.testing.assert_allclose(engine(donors, batch_size=7).gaps(sets), resampled, atol=1e-5)
    np.testing.assert_allclose(engine(donors, last_at_cls=False).gaps(sets), resampled, atol=1e-5)
    assert not np.allclose(engine(donors, seed=5).gaps(sets)[1], resampled[1], atol=1e-3)  # other donors
    assert np.abs(resampled[0]).max() < 1e-5 and not np.allclose(resampled[1], mean_gaps[1], atol=1e-3)
    np.testing.assert_allclose(resampled[2], mean_gaps[2], atol=1e-5)  # nothing ablated: the model itself


def test_logits_with_each_set_mean_ablated_match_runs_by_hand(tokenizer, data):
    """Page 09's specificity: several sets on one pass over the batches, each as if run alone; the empty set is the
    plain model."""
    model, original = tiny_classifier(len(tokenizer), layers=3), data[1]
    classes = pair_classes(tokenizer, original)
    means, _ = class_outputs(model, original, classes)
    sets = [[], [(1, 2), (2, 0)], [(0, 1)]]
    logits = mean_ablated_logits(model, original, classes, means, sets, batch_size=16, chosen_precision="fp32")
    assert logits.shape == (3, len(original), 5)
    for idx, batch in length_batches(original, 16, 0):
        inputs, where = model_inputs(model, batch, "cpu"), padded_classes(classes, idx)
        with torch.no_grad():
            np.testing.assert_allclose(logits[0, idx], model(**inputs).logits.numpy(), atol=1e-5)
            with mean_ablated(model, sets[2], means, where):
                np.testing.assert_allclose(logits[2, idx], model(**inputs).logits.numpy(), atol=1e-5)
    assert not np.allclose(logits[1], logits[0])


def test_the_engine_matches_runs_by_hand_with_heads_mean_ablated(tokenizer, data):
    """Any set, the empty one (every head ablated) included, against the plain model run by hand: the engine
    computes the last layer at [CLS] alone. With every head ablated, [CLS] reads means only: no gap is left."""
    model = tiny_classifier(len(tokenizer), layers=3)
    engine = _engine(model, data, tokenizer)
    _, original, contrast = data
    every = engine.heads
    sets = [[], [(0, 1), (2, 3)], every]
    by_hand = []
    with torch.inference_mode():
        for kept in sets:
            sides = []
            for encoded in (original, contrast):
                idx, batch = _batch(model, encoded)
                where = padded_classes(pair_classes(tokenizer, encoded), idx)
                with mean_ablated(model, [h for h in every if h not in kept], engine.reference, where):
                    logits = np.zeros((len(encoded), 5))
                    logits[idx] = model(**batch).logits.numpy()
                sides.append(grade_logit(logits))
            by_hand.append(sides[0] - sides[1])
    gaps = engine.gaps(sets)
    np.testing.assert_allclose(gaps, np.stack(by_hand), atol=1e-5)
    assert np.abs(gaps[0]).max() < 1e-5 and np.abs(gaps[1]).mean() > 1e-3
    table = faithfulness(engine, every, n_random=0, n_boot=200).set_index("what")
    assert table.loc["faithfulness", "value"] == pytest.approx(1.0, abs=1e-6)


def test_the_intervals_are_ratios_of_resampled_means_over_pairs_and_draws(tokenizer, data):
    """A circuit of half the heads leaves one random circuit its size, the other half, drawn every time: the two-stage
    interval is then the paired one, and every number can be computed by hand."""
    engine = _engine(tiny_classifier(len(tokenizer), layers=3), data, tokenizer)
    circuit, others = engine.heads[:6], engine.heads[6:]
    table = faithfulness(engine, circuit, n_random=3, seed=5, n_boot=400).set_index("what")
    full, kept, rest = engine.gaps([engine.heads, circuit, others])
    weights = bootstrap_weights(engine.n, 400, 5)
    assert np.allclose(weights.sum(axis=1), engine.n)  # each row resamples the pairs: counts summing to n
    faithful, random = (weights @ kept) / (weights @ full), (weights @ rest) / (weights @ full)
    expected = {
        "faithfulness": (kept.mean() / full.mean(), faithful),
        "random circuits": (rest.mean() / full.mean(), random),
        "circuit minus random": ((kept.mean() - rest.mean()) / full.mean(), faithful - random),
        "full model": (full.mean(), weights @ full / engine.n),
    }
    for what, (value, boot) in expected.items():
        np.testing.assert_allclose(table.loc[what, ["value", "lo", "hi"]], [value, *np.quantile(boot, [0.025, 0.975])])
    assert table.loc["random circuits", "n_draws"] == 3 and table.loc["faithfulness", "n_draws"] == 1


def test_no_set_is_computed_twice(tokenizer, data):
    model = tiny_classifier(len(tokenizer), layers=3)
    engine = _engine(model, data, tokenizer)
    passes = []
    handle = model.register_forward_hook(lambda *_: passes.append(1))
    try:
        first = engine.gaps([[(0, 0)], [(1, 1), (0, 0)]])
        again = engine.gaps([[(0, 0), (1, 1)], [(2, 2)], [(0, 0)]])
    finally:
        handle.remove()
    assert len(passes) == 3 * 2 * len(engine.batches)  # three sets, two sides each
    np.testing.assert_array_equal(again[[0, 2]], first[[1, 0]])
    with pytest.raises(ValueError, match=r"heads \[\(3, 0\)\] are not in"):
        engine.gaps([[(3, 0)]])


@pytest.mark.parametrize("seed", [0, PARALLEL, 9])
def test_a_known_circuit_is_faithful_complete_and_random_circuits_are_not(tokenizer, data, seed):
    engine = _engine(_known(seed), data, tokenizer)
    table = faithfulness(engine, CIRCUIT, n_random=6, seed=seed, n_boot=300).set_index("what")
    assert list(table.index) == [
        "full model",
        "circuit",
        "empty circuit",
        "faithfulness",
        "random circuits",
        "circuit minus random",
    ]
    assert table.loc["full model", "hi"] < 0 or table.loc["full model", "lo"] > 0  # a gap to explain
    assert abs(table.loc["faithfulness", "value"] - 1) < 0.05
    assert abs(table.loc["random circuits", "value"]) < 0.1 and abs(table.loc["empty circuit", "value"]) < 1e-6
    assert table.loc["circuit minus random", "value"] == pytest.approx(
        table.loc["faithfulness", "value"] - table.loc["random circuits", "value"]
    )
    assert table.loc["random circuits", "n_draws"] == 6 and table.loc["full model", "size"] == 12
    assert (table["size"].loc[["circuit", "random circuits"]] == 2).all() and (table["n_examples"] == 40).all()
    incomplete = completeness(engine, CIRCUIT, n_random_subsets=4, max_greedy=2, seed=seed, n_boot=300)
    assert list(incomplete["subset"]) == ["greedy-1", "greedy-2", *(f"random-{i}" for i in range(4))]
    assert incomplete["heads"].iloc[1] == "0.1, 1.2" and (incomplete["incompleteness"] < 1e-6).all()


def test_a_known_circuit_is_faithful_under_resample_ablation_and_random_circuits_keep_nothing(tokenizer, data):
    """Outside the known circuit every head outputs one constant, so any donor's output is its mean: the circuit keeps
    the whole difference. A random circuit resamples the circuit's heads: it keeps nothing only if both sides of a pair
    read the same donor."""
    model, (reference, original, contrast) = _known(PARALLEL), data
    _, donors = class_outputs(model, reference, pair_classes(tokenizer, reference), 16, 2, batch_size=16)
    engine = AblationEngine(model, original, contrast, donors, tokenizer, batch_size=16, autocast=False, seed=2)
    table = faithfulness(engine, CIRCUIT, n_random=4, seed=2, n_boot=200).set_index("what")
    assert abs(table.loc["faithfulness", "value"] - 1) < 0.05 and abs(table.loc["random circuits", "value"]) < 0.1


def test_an_incomplete_circuit_shows_it(tokenizer, data):
    """The known circuit without head 1.2: removing 0.1 leaves the model 1.2 and the circuit nothing."""
    engine = _engine(_known(PARALLEL), data, tokenizer)
    table = completeness(engine, [(0, 1)], n_random_subsets=1, max_greedy=1, n_boot=300)
    assert table["subset"].tolist() == ["greedy-1", "random-0"] and table["heads"].tolist() == ["0.1", "0.1"]
    full, empty, without = engine.gaps([engine.heads, [], [h for h in engine.heads if h != (0, 1)]])
    assert table["value"].iloc[0] == pytest.approx((empty - without).mean() / full.mean())
    assert table["incompleteness"].iloc[0] > 0.2 and table["lo"].iloc[0] <= table["value"].iloc[0]
    assert table["value"].iloc[0] <= table["hi"].iloc[0] < 0


def _incompleteness(engine, circuit, removed) -> float:
    """|F(C minus K) - F(M minus K)| by hand."""
    in_circuit, in_model = engine.gaps(
        [[h for h in circuit if h not in removed], [h for h in engine.heads if h not in removed]]
    )
    return abs((in_circuit - in_model).mean())


def test_the_greedy_adds_the_head_that_most_raises_the_incompleteness(tokenizer, data):
    engine = _engine(tiny_classifier(len(tokenizer), layers=3, seed=4), data, tokenizer)
    circuit = [(0, 1), (1, 2), (2, 0)]
    first, second = greedy_subsets(engine, circuit, 2)
    scores = {v: _incompleteness(engine, circuit, {v}) for v in circuit}
    assert first == [max(scores, key=scores.get)] and len(set(np.round(list(scores.values()), 3))) == 3
    rest = {v: _incompleteness(engine, circuit, {*first, v}) for v in circuit if v not in first}
    assert second == [*first, max(rest, key=rest.get)]


def test_the_greedy_is_chosen_on_one_half_of_the_pairs_and_scored_on_the_other(tokenizer, data):
    """On this model the two halves would choose differently: the table's K is the choosing half's, its value the
    scoring half's."""
    model, (reference, original, contrast) = tiny_classifier(len(tokenizer), layers=3, seed=2), data
    choose, score = (
        _engine(model, (reference, original.subset(list(h)), contrast.subset(list(h))), tokenizer)
        for h in (range(0, 20), range(20, 40))
    )
    circuit = [(0, 1), (1, 2)]
    assert greedy_subsets(choose, circuit, 1) == [[(0, 1)]] and greedy_subsets(score, circuit, 1) == [[(1, 2)]]
    table = completeness(score, circuit, n_random_subsets=0, max_greedy=1, n_boot=300, chosen_on=choose)
    assert table["heads"].tolist() == ["0.1"]
    full, in_circuit, in_model = score.gaps([score.heads, [(1, 2)], [h for h in score.heads if h != (0, 1)]])
    assert table["value"].iloc[0] == pytest.approx((in_circuit - in_model).mean() / full.mean())


def test_minimality_each_head_of_the_circuit_adds_and_an_idle_one_does_not(tokenizer, data):
    engine = _engine(_known(PARALLEL), data, tokenizer)
    table = minimality(engine, [*CIRCUIT, IDLE], n_boot=300).set_index(["layer", "head"])
    for head in CIRCUIT:
        assert table.loc[head, "value"] > 0.2 and table.loc[head, "lo"] > 0
    assert abs(table.loc[IDLE, "value"]) < 1e-6


def test_random_circuits_keep_the_circuits_layer_makeup_and_never_its_heads():
    heads = [(l, h) for l in range(3) for h in range(4)]
    circuit = [(0, 1), (0, 2), (2, 3)]
    draws = random_circuits(circuit, heads, 20, seed=1)
    assert len(draws) == 20 and len({tuple(d) for d in draws}) > 1
    for drawn in draws:
        assert sorted(l for l, _ in drawn) == [0, 0, 2] and not set(drawn) & set(circuit)
    crowded = random_circuits(heads[:4] + [(1, 0)], heads, 5)  # layer 0 has no other head: any other heads
    assert all(len(d) == 5 and not set(d) & set(heads[:4] + [(1, 0)]) for d in crowded)
    assert random_circuits(circuit, heads, 20, seed=1) == draws  # the same seed, the same circuits
