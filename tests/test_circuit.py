"""headlab.measures.circuit: a contrast pair's positions in four groups, the matching heads patched back group by
group on the grade logit, and attribution patching per head and group."""

import numpy as np
import pytest
from test_patching_page import _pairs
from tiny_setup import tiny_setup

from headlab.core.patching import PatchEngine, Route, grade_logit
from headlab.inputs.pair import read_pair
from headlab.measures.circuit import (
    GROUPS,
    attribution_scores,
    found_circuit,
    position_groups,
    random_senders,
    receiver_moves,
    receiver_ranking,
    restored_by_position,
    route_shares,
    sender_control,
)
from headlab.pages.patching import held_out_contrast


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("circuit"), _pairs(), batch_size=8)


@pytest.fixture(scope="module")
def contrast(setup):
    return held_out_contrast(setup, None, None)


@pytest.fixture(scope="module")
def engine(setup, contrast):
    return PatchEngine(setup.model, contrast.original, contrast.changed, 8, autocast=False)


def test_the_groups_split_every_position_of_every_pair_once(setup, contrast):
    groups = position_groups(contrast, setup.tokenizer)
    assert list(groups) == list(GROUPS)
    for i, ids in enumerate(contrast.original.input_ids):
        taken = [p for g in GROUPS for p in groups[g][i]]
        assert sorted(taken) == list(range(len(ids)))
        pair = read_pair(setup.tokenizer, ids)
        assert groups["[CLS]"][i] == [0] and set(groups["query terms"][i]) <= set(pair.query)
        assert groups["title terms"][i] == sorted(contrast.changed_positions()[i])
        assert groups["query terms"][i] and set(groups["title terms"][i]) <= set(pair.title)


def test_the_heads_patched_back_by_position_and_everywhere(setup, contrast, engine):
    groups = position_groups(contrast, setup.tokenizer)
    heads = [(1, 0), (1, 2)]
    table = restored_by_position(engine, heads, groups, n_boot=100).set_index("positions")
    assert list(table.index) == [*GROUPS, "all", "sum of groups"]
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    whole = grade_logit(engine.logits([heads])[0])
    assert table.loc["all", "restored"] == pytest.approx((whole - target).mean() / (source - target).mean())
    assert (table["lo"] <= table["hi"]).all()
    parts = table.loc[list(GROUPS), "restored"].sum()
    assert table.loc["sum of groups", "restored"] == pytest.approx(parts)
    assert table.loc["[CLS]", "n_positions"] == 1


def test_attribution_per_head_adds_up_over_the_groups(setup, contrast, engine):
    groups = position_groups(contrast, setup.tokenizer)
    scores = attribution_scores(engine, groups, n_boot=100)
    assert len(scores) == 16 and scores["estimate"].abs().max() > 0
    np.testing.assert_allclose(scores[list(GROUPS)].sum(axis=1), scores["estimate"], rtol=1e-4)  # float32 sums
    top = scores[scores["layer"] == 3]  # the top layer reaches the grade through [CLS] alone
    np.testing.assert_allclose(top[["query terms", "title terms", "other"]].to_numpy(), 0.0, atol=1e-12)


def test_receivers_are_ranked_by_what_comes_back_through_each_alone(engine):
    senders, receivers = [(0, 1), (1, 2)], [(2, 0), (2, 3), (3, 1)]
    moves = receiver_moves(engine, senders, receivers)
    assert len(moves) == len(receivers) * engine.n
    table = receiver_ranking(moves, n_boot=100)
    assert list(table["rank"]) == [1, 2, 3] and table["restored"].is_monotonic_decreasing
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    through = grade_logit(engine.path_logits(senders, [(3, 1)])[0])
    row = table.set_index(["layer", "head"]).loc[(3, 1)]
    assert row["restored"] == pytest.approx((through - target).mean() / (source - target).mean())
    assert (table["restored"] != table["cls_restored"]).any()
    others = table["restored"].sum() - row["restored"]
    assert row["over_others"] == pytest.approx(row["restored"] - others / 2)  # against the mean of the other two
    assert (table["over_lo"] < table["over_hi"]).all()
    assert ((table["rank_lo"] <= table["rank"]) & (table["rank"] <= table["rank_hi"])).all()
    assert table["rank_lo"].min() == 1 and table["rank_hi"].max() <= 3
    one = receiver_ranking(moves[(moves["layer"] == 3) & (moves["head"] == 1)], n_boot=100)
    assert one["over_others"].isna().all()  # no other receiver: no baseline


def test_a_part_of_the_pairs_ranks_on_that_part_alone(engine):
    """The circuit's receivers are chosen on one half of the pairs: a ranking on a part reads that part's passes."""
    senders, receivers = [(0, 1), (1, 2)], [(2, 0), (2, 3), (3, 1)]
    moves = receiver_moves(engine, senders, receivers)
    part = np.arange(0, engine.n, 2)
    table = receiver_ranking(moves[moves["pair"].isin(part)], n_boot=100).set_index(["layer", "head"])
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    through = grade_logit(engine.path_logits(senders, [(2, 3)], cls_only=True)[0])
    cls = (through - target)[part].mean() / (source - target)[part].mean()
    assert table.loc[(2, 3), "cls_restored"] == pytest.approx(cls)
    assert (table["n_examples"] == len(part)).all()


def test_the_found_circuit_has_an_edge_per_sender_and_receiver(engine):
    senders, receivers = [(0, 1), (1, 2)], [(2, 0), (3, 1)]
    edges = found_circuit(engine, senders, receivers, n_boot=100)
    assert len(edges) == 4 and set(zip(edges["sender_layer"], edges["sender_head"])) == set(senders)
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = (source - target).mean()
    alone = grade_logit(engine.path_logits([(1, 2)], [(3, 1)])[0])
    edge = edges.set_index(["sender_layer", "sender_head", "layer", "head"]).loc[(1, 2, 3, 1)]
    assert edge["restored"] == pytest.approx((alone - target).mean() / gap)
    assert (edges["lo"] <= edges["hi"]).all()


def test_random_senders_never_hold_a_named_head_and_stay_in_the_senders_layers():
    senders, avoid = [(2, 0), (4, 3), (3, 5)], [(5, 1)]
    sets = random_senders(senders, 12, 50, seed=3, avoid=avoid)
    assert len(sets) == 50 and all(len(s) == 3 and len(set(s)) == 3 for s in sets)
    drawn = {h for s in sets for h in s}
    assert not drawn & {*senders, *avoid} and {l for l, _ in drawn} == {2, 3, 4}
    assert random_senders(senders, 12, 50, seed=3, avoid=avoid) == sets  # seeded
    assert random_senders(senders, 12, 50, seed=4, avoid=avoid) != sets
    toy = random_senders([(1, 0), (1, 1)], 3, 20, seed=0)  # one other head in their layer: the layer below too
    assert {h for s in toy for h in s} <= {(1, 2), (0, 0), (0, 1), (0, 2)} and {0, 1} == {l for s in toy for l, _ in s}
    with pytest.raises(ValueError, match="too few"):
        random_senders([(0, 0), (0, 1)], 3, 1, seed=0)


def test_a_receiver_reads_its_senders_no_more_than_themselves_drawn_at_random(engine):
    """The control is the same path from other senders: drawn as the senders themselves it leaves nothing over them;
    drawn elsewhere it is the mean of those paths, with an interval over pairs and draws."""
    senders, receivers = [(0, 1), (1, 2)], [(2, 0), (3, 1)]
    same = sender_control(engine, senders, receivers, [senders, senders], n_boot=100)
    assert same["over_random"].abs().max() < 1e-9 and same["lo"].abs().max() < 1e-9 and same["hi"].abs().max() < 1e-9
    others = [[(0, 0), (1, 3)], [(0, 2), (1, 0)], [(0, 3), (1, 1)]]
    table = sender_control(engine, senders, receivers, others, n_boot=100).set_index(["layer", "head"])
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = (source - target).mean()
    paths = [(grade_logit(engine.path_logits(s, [(3, 1)])[0]) - target).mean() / gap for s in others]
    assert table.loc[(3, 1), "random_mean"] == pytest.approx(np.mean(paths))
    assert table.loc[(3, 1), "restored"] == pytest.approx(same.set_index(["layer", "head"]).loc[(3, 1), "restored"])
    assert (table["lo"] < table["hi"]).all() and (table["n_draws"] == 3).all()


def test_a_receiver_reads_through_its_query_key_or_value_alone(engine):
    """07's head's routes: all three together is the receiver's own path share; each alone is a path of its own."""
    senders, receiver = [(0, 1), (1, 2)], (2, 3)
    table = route_shares(engine, senders, receiver, n_boot=100).set_index("route")
    assert list(table.index) == ["query", "key", "value", "all"]
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    whole = grade_logit(engine.path_logits(senders, [receiver])[0])
    assert table.loc["all", "restored"] == pytest.approx((whole - target).mean() / (source - target).mean())
    assert (table["lo"] < table["hi"]).all() and (table["n_examples"] == engine.n).all()
    assert table.loc[["query", "key", "value"], "restored"].nunique() == 3  # three different routes
    with pytest.raises(ValueError, match="one tuple of routes each"):
        engine.path_logits(senders, [receiver, receiver], routes=[(Route.KEY,)])
