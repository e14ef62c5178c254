"""Page 09 end to end on a tiny random model: the contrast, the patches that restore the grade, the three views, the
control, the specificity, the receivers of the matching heads and the circuit found, and its claims."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from tiny_setup import tiny_setup

from headlab.judging.verdicts import claims_file
from headlab.measures.grids import single_head_correct
from headlab.measures.held_out import measured_examples
from headlab.measures.matching import matching_heads
from headlab.pages import patching
from headlab.pages.claims import STUDY_CLAIMS
from headlab.pages.patching import (
    CIRCUIT_TABLES,
    GREEDY_STEPS,
    ablation_specificity,
    agreement,
    attribution_agreement,
    both_directions,
    carry_takeaway,
    circuit_halves,
    circuit_measures,
    circuit_takeaway,
    circuit_views,
    claims,
    contrast_controls,
    contrast_examples,
    faithfulness_both_ways,
    head_map_pairs,
    head_views,
    held_out_contrast,
    identity_difference,
    identity_note,
    identity_tables,
    patch_plan,
    path_not_measured,
    random_patches,
    receivers_view,
    replacement_tables,
    restored_against_draws,
    restored_by_set,
    restored_shares,
    restoring_patches,
    restoring_takeaway,
    routes_view,
    sender_note,
    sender_view,
    specificity,
    specificity_note,
)

NO_PAIRS = {"n_examples": 0}  # a matched contrast no pair qualified for
NO_CIRCUIT = {name: pd.DataFrame() for name in CIRCUIT_TABLES}
SPECIFIC = {  # a specificity as ablation_specificity gives it
    "difference": -0.5,
    "lo": -0.6,
    "hi": -0.4,
    "named": -0.6,
    "named_lo": -0.9,
    "named_hi": -0.3,
    "random": -0.1,
    "random_lo": -0.2,
    "random_hi": 0.0,
    "move_sharing": -1.2,
    "move_none": -0.4,
    "n_sharing": 300,
    "n_none": 200,
    "n_strata": 4,
    "n_left_out": 20,
    "n_draws": 6,
}
NOTHING = {"n_examples": 1}  # a contrast of one pair: nothing measured on it
UNMEASURED = {"difference": np.nan, "n_strata": 0}  # no gold grade to compare within


def page_rows(
    against=NOTHING,
    controls=None,
    identity=NO_PAIRS,
    specific=UNMEASURED,
    ranking=None,
    senders=None,
    circuit=NO_CIRCUIT,
    matching=((0, 0),),
    receiver=(3, 1),
):
    """Page 09's claims from results given by hand, every one not given measured on nothing."""
    return claims(
        against,
        {"injected": NOTHING} if controls is None else controls,
        identity,
        specific,
        pd.DataFrame() if ranking is None else ranking,
        pd.DataFrame() if senders is None else senders,
        circuit,
        list(matching),
        receiver,
    )


WORDS = "cat dog bird man woman guitar flute car road river tree house".split()


def _pairs(n=32, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        query = rng.choice(WORDS, 3, replace=False)
        title = [*query[: i % 3], *rng.choice([w for w in WORDS if w not in query], 3 - i % 3, replace=False)]
        rows.append(
            {"query": "a " + " ".join(query), "title": "the " + " ".join(title), "label": int(rng.integers(1, 6))}
        )
    return pd.DataFrame(rows)


@pytest.mark.slow  # its class means read the training pairs of the real data asset
def test_page_09_runs_on_a_tiny_model_and_gives_one_row_per_claim(tmp_path, monkeypatch):
    monkeypatch.setattr(patching, "HEAD_MAP_PAIRS", 5)  # the page's samples, below the tiny model's pair counts
    monkeypatch.setattr(patching, "SENDER_PAIRS", 4)
    setup = tiny_setup(tmp_path, _pairs(), batch_size=8)
    matching, _ = matching_heads(setup, 2, "match_excess", None, None, choose=True)
    contrast = held_out_contrast(setup, None, None)
    assert 0 < len(contrast.examples) < contrast.n_pairs  # a third of the pairs share nothing
    shown = contrast_examples(contrast, setup, 3)
    assert list(shown["changed title"]) != list(shown["title"]) and shown["replaced"].str.contains("→").all()
    plan = patch_plan(4, 4, matching, 3, 0)
    restoring, head_map = restoring_patches(setup, contrast, plan, progress=False)
    assert set(restoring["patch"]) == {"source", "target", "matching", *random_patches(plan)}
    assert head_map["example"].nunique() == 5 and restoring["example"].nunique() == len(contrast.examples)
    single_heads = single_head_correct(setup, progress=False)
    positions, attributed = circuit_views(setup, contrast, matching, None, n_boot=100)
    assert list(positions["positions"]) == ["[CLS]", "query terms", "title terms", "other", "all", "sum of groups"]
    assert len(attributed) == 16
    views = head_views(setup, head_map, single_heads, None, None, "match_excess", n_boot=100, attributed=attributed)
    columns = ["restored", "masking_cost", "role_score", "attribution"]
    assert len(views) == 16 and views[columns].notna().all().all()
    views["matching"] = [(l, h) in matching for l, h in zip(views["layer"], views["head"])]
    best = views.loc[views["restored"].idxmax()]
    assert f"head {int(best['layer'])}.{int(best['head'])} restores most, {best['restored']:+.1%}" in (
        restoring_takeaway(views)
    )
    agreed = agreement(views, matching, 2, n_boot=100)
    assert len(agreed) == 4 and (agreed["chance"].iloc[:2] == 2 * 2 / 16).all()
    audited = attribution_agreement(views, n_boot=100)
    assert list(audited["measure"][:3]) == [
        "rank correlation (Spearman)",
        "recall of the exact top 5",
        "recall of the exact top 10",
    ]
    assert len(audited) == 3 + 5 and audited["value"].iloc[1:3].between(0, 1).all() and (audited["n_heads"] == 16).all()
    tables = replacement_tables(setup, contrast, restoring, plan, 2, None, None)
    assert len(tables) == 2 and tables[0]["example"].isin(contrast.examples).all()
    assert set(tables[0]["example"]) == set(tables[1]["example"])
    against = restored_against_draws(tables, "matching", random_patches(plan), n_boot=100)
    assert against["n_draws"] == 3 and against["n_replacements"] == 2
    by_set = restored_by_set(tables, random_patches(plan))
    assert len(by_set) == 3 and by_set["restored"].mean() == pytest.approx(against["draws_mean"])  # what it averages
    assert f"restore {against['tested']:.1%} of a grade-logit drop" in carry_takeaway(against)
    controls = contrast_controls(setup, matching, plan, None, None, n_boot=100)
    assert set(controls) == {"injected"}
    specific = specificity(setup, matching, None, None, n_boot=100, draws=2)
    assert specific["n_draws"] == 2 and np.isnan(specific["difference"]) == (specific["n_strata"] == 0)
    held = measured_examples(len(setup.encoded), None, setup.params.seed)
    assert specific["n_sharing"] + specific["n_none"] + specific["n_left_out"] == len(held)  # every pair counted
    ranking, receiver = receivers_view(setup, contrast, matching, single_heads, n_boot=100)
    assert len(ranking) == 4 * (3 - max(l for l, _ in matching)) and (ranking["layer"] > max(matching)[0]).all()
    routes = routes_view(setup, contrast, matching, single_heads, n_boot=100)
    assert routes.empty == (receiver[0] <= max(l for l, _ in matching))  # a path only to a head above them
    circuit = circuit_measures(setup, contrast, matching, single_heads, 3, n_boot=100)
    top = set(zip(circuit["chosen"]["layer"].head(3), circuit["chosen"]["head"].head(3)))
    edges = circuit["edges"]
    assert len(edges) == len(matching) * len(top) and set(zip(edges["layer"], edges["head"])) == top
    assert list(circuit["faithfulness"]["what"])[:4] == ["full model", "circuit", "empty circuit", "faithfulness"]
    assert list(circuit["resampled"]["what"]) == list(circuit["faithfulness"]["what"])  # the same circuit, resampled
    both = faithfulness_both_ways(circuit)
    assert list(both["ablation"].unique()) == ["mean", "resample"]
    full = both[both["what"] == "full model"]["value"]
    assert full.nunique() == 1  # nothing ablated: one model either way
    kept = both[both["what"] == "faithfulness"]["value"]
    assert kept.nunique() == 2  # the same circuit, another ablation
    assert len(circuit["minimality"]) == len(matching) + len(top)
    assert circuit["completeness"]["subset"].str.startswith("greedy").sum() == GREEDY_STEPS
    directions = both_directions(setup, contrast, restoring, plan, ranking, n_boot=100, k=2)
    assert list(directions["patch"])[:2] == ["matching", "random lower-half sets (mean of 3)"] and len(directions) == 4
    assert (
        directions[["restored", "broken"]].notna().all().all()
        and (directions["n_examples"] == len(contrast.examples)).all()
    )
    drawn = directions.iloc[1]  # the random sets' mean, with an interval over pairs and draws
    each = restored_shares(restoring, 100).set_index("patch").loc[random_patches(plan)[:3], "restored"]
    assert drawn["restored"] == pytest.approx(each.mean()) and drawn["n_draws"] == 3
    assert directions["n_draws"].tolist() == [1, 3, 1, 1]
    assert all(
        np.isfinite(drawn[f"{way}_lo"]) and drawn[f"{way}_lo"] < drawn[f"{way}_hi"] for way in ("restored", "broken")
    )
    broken = setup.patch(contrast.changed, contrast.original, {"matching": plan["matching"]}, "hand", progress=False)
    wide = broken.pivot(index="example", columns="patch", values="grade_logit")
    by_hand = (wide["matching"] - wide["target"]).mean() / (wide["source"] - wide["target"]).mean()
    assert directions.set_index("patch").loc["matching", "broken"] == pytest.approx(by_hand)
    restored_here = restored_shares(restoring, 100).set_index("patch").loc["matching", "restored"]
    assert directions.set_index("patch").loc["matching", "restored"] == pytest.approx(restored_here)
    matched = identity_tables(setup, matching, None, None, 2)
    assert [len(t) for t in matched.values()] == [2, 2]
    assert len({frozenset(t["example"]) for tables in matched.values() for t in tables}) == 1  # the same pairs
    identity = identity_difference(matched, n_boot=100)
    assert f"On {identity['n_examples']} pairs and 2 draws" in identity_note(identity)
    senders = sender_view(setup, contrast, matching, single_heads, ranking, 3, n_boot=100)
    assert (senders["n_examples"] == 4).all()
    ranked = set(zip(ranking["layer"], ranking["head"]))
    expected = {tuple(ranking[["layer", "head"]].iloc[0])} | ({receiver} & ranked)
    assert set(zip(senders["layer"], senders["head"])) == expected and (senders["n_draws"] == 3).all()
    assert f"{int(senders['n_draws'].iloc[0])} random sets" in sender_note(
        senders, tuple(senders.iloc[-1][["layer", "head"]])
    )
    assert "no control ran" in sender_note(senders.iloc[0:0], receiver)
    rows = claims(against, controls, identity, specific, ranking, senders, circuit, matching, receiver)
    assert claims_file(rows) == "claims_09_patching"
    assert [c.claim_id for c in rows][:3] == [
        "patching.matching_heads_carry_replaced_words",
        "patching.matching_heads_carry_replaced_words/injected",
        "patching.matching_beyond_identity",
    ]
    registered = {c.study_claim for c in rows}
    assert registered == {k for k, c in STUDY_CLAIMS.items() if c.page == "09_patching"}
    # a second run reads the patches it saved
    again = restoring_patches(setup, contrast, plan, progress=False)
    pd.testing.assert_frame_equal(again[0], restoring)
    pd.testing.assert_frame_equal(again[1], head_map)


def test_an_unmeasured_path_says_why():
    """The [CLS] head below the matching heads, or no contrast pair on the half it was not chosen on: each says so,
    in the claim's reason too, and the row is not judged."""
    assert "sits no higher" in path_not_measured((2, 1), [(2, 0), (1, 3)])
    assert "not chosen on" in path_not_measured((3, 1), [(2, 0), (1, 3)])
    against = {
        "tested": 0.5,
        "draws_mean": 0.1,
        "draws_lo": 0.0,
        "draws_hi": 0.2,
        "difference": 0.4,
        "lo": 0.3,
        "hi": 0.5,
        "n_examples": 10,
        "n_draws": 3,
        "gap": 0.4,
        "gap_lo": 0.2,
        "gap_hi": 0.6,
    }
    specific = SPECIFIC
    controls = {"injected": {**against, "gap": -0.4, "gap_lo": -0.6, "gap_hi": -0.2}}
    rows = page_rows(against, controls, specific=specific)
    [path_row] = [r for r in rows if r.claim_id == "patching.cls_route_hands_on"]
    assert "not chosen on" in path_row.reason and path_row.verdict == "cannot tell"
    below = page_rows(against, controls, specific=specific, matching=[(3, 0)])
    below_ids = {r.claim_id: r for r in below}
    assert all(
        "sits no higher" in below_ids[c].reason
        for c in ("patching.cls_route_hands_on", "patching.cls_head_reads_matching")
    )
    by_id = {r.claim_id: r for r in rows}
    assert by_id["patching.matching_heads_carry_replaced_words"].verdict != "cannot tell"
    assert by_id["patching.matching_heads_carry_replaced_words/injected"].verdict == "not judged"
    too_few = page_rows(against, {"injected": {"n_examples": 1}}, specific=specific)
    assert "only 1" in next(r for r in too_few if r.claim_id.endswith("/injected")).reason
    assert "only 0" in by_id["patching.matching_beyond_identity"].reason


def test_a_contrast_that_raises_the_grade_is_not_measured_with_its_gap_said():
    """zh-char's contrast raised the expected grade and the row still reported a restored share: now it is refused."""
    against = {
        "tested": 0.15,
        "draws_mean": 0.1,
        "draws_lo": 0.0,
        "draws_hi": 0.2,
        "difference": 0.05,
        "lo": -0.3,
        "hi": 0.5,
        "n_examples": 40,
        "n_draws": 3,
        "gap": -0.15,
        "gap_lo": -0.3,
        "gap_hi": -0.01,
    }
    specific = UNMEASURED
    rows = page_rows(against, {"injected": against}, specific=specific)
    main, injected = rows[:2]
    assert main.verdict == "cannot tell" and "-0.15 [-0.3, -0.01]" in main.reason
    assert injected.verdict == "not judged"  # the other sign is the injected contrast's to have
    assert "No gold grade has" in specificity_note(specific)
    counted = ablation_specificity(np.ones((2, 4)), np.ones(4), [True, False, True, False], [1, 1, 2, 2])
    assert np.isnan(counted["difference"]) and counted["n_left_out"] == 4 and counted["n_strata"] == 0


def _ranking(restored, cls_restored) -> pd.DataFrame:
    columns = {}
    for prefix, shares in (("", restored), ("cls_", cls_restored)):
        columns.update(
            {
                f"{prefix}restored": shares,
                f"{prefix}lo": [r - 0.01 for r in shares],
                f"{prefix}hi": [r + 0.01 for r in shares],
            }
        )
    return pd.DataFrame(
        {
            "layer": [3, 3, 2],
            "head": [1, 0, 3],
            **columns,
            "n_examples": 40,
            "rank": [1, 2, 3],
            "rank_lo": [1, 1, 2],
            "rank_hi": [2, 3, 3],
            "gap": 0.4,
            "gap_lo": 0.3,
            "gap_hi": 0.5,
        }
    )


def _senders(restored, random_mean, half_width) -> pd.DataFrame:
    over = restored - random_mean
    return pd.DataFrame(
        [
            {
                "layer": 3,
                "head": 1,
                "restored": restored,
                "random_mean": random_mean,
                "over_random": over,
                "lo": over - half_width,
                "hi": over + half_width,
                "n_draws": 8,
                "n_examples": 40,
                "gap": 0.4,
                "gap_lo": 0.2,
                "gap_hi": 0.6,
            }
        ]
    )


def test_the_route_is_judged_on_its_own_share_and_the_reading_against_random_senders():
    """The study's "hands them to the classifier" is judged on what comes back through the head's output at [CLS]
    alone (default's 0.03% must not hold, whatever the head restores at every position); "reads the matching heads"
    against random senders of their layers, the rank's interval beside it."""

    def rows(ranking, senders):
        return page_rows(ranking=ranking, senders=senders)

    silent_route = rows(_ranking([0.21, 0.02, 0.01], [0.0003, 0.0, 0.0]), _senders(0.21, 0.01, 0.05))
    route, reads, rank = silent_route[-6:-3]
    assert route.claim_id == "patching.cls_route_hands_on" and route.verdict == "does not hold"
    assert "0.03%" in route.reason and "21.0%" in route.reason  # the whole-head share is said, not judged
    assert reads.claim_id == "patching.cls_head_reads_matching" and reads.verdict == "holds"
    assert "8 random sets" in reads.reason and "ranks 1 (1 to 2" in reads.reason
    assert rank.claim_id == "patching.cls_head_reads_matching/rank" and (rank.lo, rank.hi) == (1.0, 2.0)
    # a head that reads any heads of their layers as much reads nothing of theirs in particular
    alike = rows(_ranking([0.21, 0.02, 0.01], [0.2, 0.0, 0.0]), _senders(0.21, 0.2, 0.05))
    assert alike[-6].verdict == "holds" and alike[-5].verdict != "holds"
    flat = rows(_ranking([0.21, 0.02, 0.01], [0.2, 0.0, 0.0]).assign(gap_lo=-0.1), _senders(0.21, 0.01, 0.05))
    assert [r.verdict for r in flat[-5:-3]] == ["cannot tell", "cannot tell"] and "+0.4 [-0.1, +0.5]" in flat[-4].reason
    no_control = rows(_ranking([0.21, 0.02, 0.01], [0.2, 0.0, 0.0]), pd.DataFrame())
    assert no_control[-4].claim_id == "patching.cls_head_reads_matching" and no_control[-4].verdict == "cannot tell"


def test_term_matching_beyond_identity_is_measured_within_pairs_only_where_both_contrasts_move():
    """Shares of the same pairs under the two matched contrasts, their difference over pairs and draws; a contrast
    whose gap may be 0 is not measured (its share reads as anything)."""
    rng = np.random.default_rng(0)
    n = 60

    def table(gap, restored, draw):
        target = rng.normal(0, 0.1, n)
        noise = rng.normal(0, 0.05, n)
        source = target + gap + noise - noise.mean()  # the gap's mean exactly: 0 lies inside a flat one
        moved = target + restored * (source - target) + rng.normal(0, 0.1, n)
        return pd.DataFrame(
            {
                "patch": np.repeat(["source", "target", "matching"], n),
                "example": np.tile(np.arange(10, 10 + n), 3),
                "grade_logit": np.concatenate([source, target, moved]),
            }
        )

    tables = {
        "one_shared": [table(1.0, 0.9, d) for d in range(2)],
        "one_unshared": [table(0.8, 0.3, d) for d in range(2)],
    }
    result = identity_difference(tables, n_boot=200)
    assert result["n_examples"] == n and result["n_replacements"] == 2
    assert abs(result["one_shared"] - 0.9) < 0.05 and abs(result["one_unshared"] - 0.3) < 0.05
    assert result["lo"] < result["difference"] < result["hi"] and result["lo"] > 0.5

    def judged(identity):
        rows = page_rows(identity=identity)
        return next(r for r in rows if r.claim_id == "patching.matching_beyond_identity")

    assert judged(result).verdict == "holds" and f"{result['one_shared']:.1%}" in judged(result).reason
    flat = identity_difference({**tables, "one_unshared": [table(0.0, 0.3, d) for d in range(2)]}, n_boot=200)
    assert judged(flat).verdict == "cannot tell" and "Not measured" in judged(flat).reason
    shifted = {k: [t.assign(example=t["example"] + i) for i, t in enumerate(v)] for k, v in tables.items()}
    try:
        identity_difference(shifted, n_boot=10)
    except ValueError as error:
        assert "same pairs" in str(error)
    else:
        raise AssertionError("tables on different pairs were compared")


def test_the_specificity_is_judged_against_random_heads_with_the_matching_heads_alone_beside():
    """Mean-ablated, the matching heads take more from sharing pairs than random heads do: the judged row is their
    difference; the matching heads alone are a sub-row; the grade logit has no floor, so no row is censored."""
    rows = {r.claim_id: r for r in page_rows(specific=SPECIFIC)}
    main, alone = rows["patching.cost_specific_to_shared_terms"], rows["patching.cost_specific_to_shared_terms/alone"]
    assert (main.ours, main.lo, main.hi) == (-0.5, -0.6, -0.4) and main.verdict == "holds" and not main.at_floor
    assert (alone.ours, alone.lo, alone.hi) == (-0.6, -0.9, -0.3) and alone.verdict == "not judged"
    assert "6 random sets" in main.reason and "-0.1 on average" in main.reason
    like_random = {**SPECIFIC, "difference": 0.05, "lo": -0.2, "hi": 0.3}
    assert next(r for r in page_rows(specific=like_random) if r.claim_id == main.claim_id).verdict != "holds"
    no_draws = {**SPECIFIC, "difference": np.nan}
    [row] = [r for r in page_rows(specific=no_draws) if r.claim_id.startswith(main.claim_id)]
    assert "no random sets" in row.reason


def test_attribution_is_audited_by_recall_of_the_exact_top_heads_and_its_ratio_on_its_own_top():
    """Where attribution ranks the exact top heads right it recalls them all; a head it overrates shows as missed and
    ranked in, and its estimate over the exact share says by how much."""
    views = pd.DataFrame({"layer": np.repeat(range(4), 4), "head": np.tile(range(4), 4)})
    views["restored"] = np.linspace(1.0, 0.0, 16) ** 2
    views["attribution"] = views["restored"] * 0.5  # saturated: half of every exact share, the same order
    same = attribution_agreement(views, n_boot=50).set_index("measure")
    assert same.loc["rank correlation (Spearman)", "value"] == pytest.approx(1.0)
    assert (
        same.loc["recall of the exact top 5", "value"] == 1.0
        and "missed: none" in same.loc["recall of the exact top 5", "heads"]
    )
    assert same.loc["attribution over exact, head 0.0", "value"] == pytest.approx(0.5)
    views.loc[15, "attribution"] = 10.0  # the last head, exactly 0, ranked first
    wrong = attribution_agreement(views, n_boot=50).set_index("measure")
    assert wrong.loc["recall of the exact top 5", "value"] == pytest.approx(0.8)
    assert (
        "missed: 1.0" in wrong.loc["recall of the exact top 5", "heads"]
        and "3.3" in wrong.loc["recall of the exact top 5", "heads"]
    )
    assert np.isnan(wrong.loc["attribution over exact, head 3.3", "value"])  # an exact share of 0 has no ratio


def _circuit(
    full_lo=0.3, kept=0.9, random=0.1, greedy_value=0.01, least=0.05, random_value=-0.02, resampled_kept=None
) -> dict[str, pd.DataFrame]:
    def faithfulness(kept):
        return pd.DataFrame(
            [
                ("full model", 0.5, full_lo, 0.7, 40, 1, 16),
                ("circuit", 0.45, 0.3, 0.6, 40, 1, 6),
                ("empty circuit", 0.0, 0.0, 0.0, 40, 1, 0),
                ("faithfulness", kept, kept - 0.1, kept + 0.1, 40, 1, 6),
                ("random circuits", random, random - 0.05, random + 0.05, 40, 8, 6),
                ("circuit minus random", kept - random, kept - random - 0.1, kept - random + 0.1, 40, 8, 6),
            ],
            columns=["what", "value", "lo", "hi", "n_examples", "n_draws", "size"],
        )

    complete = pd.DataFrame(
        [
            ("greedy-1", "0.1", 0.005, -0.02, 0.03, 0.005),
            ("greedy-2", "0.1, 3.2", greedy_value, greedy_value - 0.02, greedy_value + 0.02, abs(greedy_value)),
            ("random-0", "3.2", random_value, random_value - 0.03, random_value + 0.03, abs(random_value)),
        ],
        columns=["subset", "heads", "value", "lo", "hi", "incompleteness"],
    )
    minimal = pd.DataFrame(
        {
            "layer": [0, 1, 3],
            "head": [1, 2, 2],
            "value": [0.3, least, 0.2],
            "lo": [0.25, least - 0.01, 0.15],
            "hi": [0.35, least + 0.01, 0.25],
        }
    )
    return {
        "chosen": pd.DataFrame(),
        "faithfulness": faithfulness(kept),
        "resampled": pd.DataFrame() if resampled_kept is None else faithfulness(resampled_kept),
        "completeness": complete,
        "minimality": minimal,
        "edges": pd.DataFrame(),
    }


def test_the_circuit_is_judged_by_faithfulness_against_random_circuits_completeness_and_its_weakest_head():

    def rows(circuit):
        judged = page_rows(circuit=circuit)
        return {r.claim_id: r for r in judged}

    good = rows(_circuit())
    faithful, complete, minimal = (good[f"patching.circuit_{m}"] for m in ("faithful", "complete", "minimal"))
    # the weaker reading: 90% kept is 40 points above half, 80 points above the random circuits
    assert faithful.verdict == "holds" and faithful.ours == pytest.approx(0.4) and "keeps 90.0%" in faithful.reason
    assert complete.verdict == "holds" and "of 3 subsets" in complete.reason
    assert minimal.verdict == "holds" and minimal.ours == pytest.approx(0.05)
    assert "head 1.2 adds the least" in minimal.reason
    assert faithful.weakest_of == 2 and "under mean ablation" in faithful.reason
    resampled = rows(_circuit(resampled_kept=0.62))["patching.circuit_faithful"]  # resampled, it keeps less
    assert resampled.ours == pytest.approx(0.12) and resampled.weakest_of == 4
    assert "Under resample ablation" in resampled.reason and "keeps 62.0%" in resampled.reason
    beaten = rows(_circuit(kept=0.9, random=0.85))["patching.circuit_faithful"]  # most kept, but so do random ones
    assert beaten.verdict != "holds" and beaten.ours == pytest.approx(0.05)
    off = rows(_circuit(random_value=-0.4))["patching.circuit_complete"]  # a random part the greedy search missed
    assert off.verdict == "does not hold" and "random-0 (3.2)" in off.reason
    bad = rows(_circuit(kept=0.15, greedy_value=0.4, least=-0.05))
    assert bad["patching.circuit_faithful"].verdict == "opposite"  # 15% kept lies well below half
    assert bad["patching.circuit_complete"].verdict == "does not hold"
    assert bad["patching.circuit_minimal"].verdict == "opposite"
    flat = rows(_circuit(full_lo=-0.1))
    assert all(flat[f"patching.circuit_{m}"].verdict == "cannot tell" for m in ("faithful", "complete", "minimal"))
    assert "does not exclude 0" in flat["patching.circuit_faithful"].reason
    empty = rows(NO_CIRCUIT)
    assert "Not measured" in empty["patching.circuit_minimal"].reason


def test_the_circuit_is_scored_on_a_capped_part_and_chosen_on_every_other_pair():
    keep = np.arange(100, 160)
    choose, score = circuit_halves(keep, seed=3, size=8)
    assert len(score) == 8 and len(choose) == 52 and not set(choose) & set(score)
    assert set(choose) | set(score) == set(keep) and (np.diff(choose) > 0).all()
    halves = circuit_halves(keep, seed=3, size=1000)
    assert len(halves[1]) == 30 and len(halves[0]) == 30  # at most half the pairs score
    sample = head_map_pairs(SimpleNamespace(examples=np.arange(12)), seed=0, size=5)  # reads examples alone
    assert len(sample) == 5 and len(set(sample)) == 5 and (np.diff(sample) > 0).all() and sample.max() < 12


def test_the_circuit_caption_gives_what_it_keeps_under_each_ablation():
    circuit = _circuit(resampled_kept=0.6)
    text = circuit_takeaway(circuit)
    assert text.startswith("The circuit of 6 heads, on the pairs that did not choose it: under mean ablation it keeps ")
    assert "90.0% [80.0%, 100.0%]" in text and "under resample ablation it keeps 60.0% [50.0%, 70.0%]" in text
    empty = {**circuit, "faithfulness": circuit["faithfulness"].iloc[0:0], "resampled": pd.DataFrame()}
    assert "not measured" in circuit_takeaway(empty)
