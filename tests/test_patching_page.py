"""Page 09 end to end on a tiny random model: the contrast, the patches that restore the grade, the three views, the
control, the specificity, the receivers of the matching heads and the circuit found, and its claims."""

import numpy as np
import pandas as pd
from tiny_setup import tiny_setup

from headlab.findings.claims import STUDY_CLAIMS
from headlab.findings.cls_head import single_head_correct
from headlab.findings.patching import (
    agreement,
    circuit_view,
    circuit_views,
    claims,
    contrast_controls,
    contrast_examples,
    head_views,
    held_out_contrast,
    masking_specificity,
    patch_plan,
    path_not_measured,
    random_patches,
    receivers_view,
    replacement_tables,
    restored_against_draws,
    restoring_patches,
    specificity,
    specificity_note,
)
from headlab.findings.term_matching import matching_heads
from headlab.findings.verdicts import claims_file

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


def test_page_09_runs_on_a_tiny_model_and_gives_one_row_per_claim(tmp_path):
    setup = tiny_setup(tmp_path, _pairs(), batch_size=8)
    matching, _ = matching_heads(setup, 2, "match_excess", None, None, choose=True)
    contrast = held_out_contrast(setup, None, None)
    assert 0 < len(contrast.examples) < contrast.n_pairs  # a third of the pairs share nothing
    shown = contrast_examples(contrast, setup, 3)
    assert list(shown["changed title"]) != list(shown["title"]) and shown["replaced"].str.contains("→").all()
    plan = patch_plan(4, 4, matching, 3, 0)
    restoring = restoring_patches(setup, contrast, plan, progress=False)
    single_heads = single_head_correct(setup, progress=False)
    positions, attributed = circuit_views(setup, contrast, matching, None, n_boot=100)
    assert list(positions["positions"]) == ["[CLS]", "query terms", "title terms", "other", "all", "sum of groups"]
    assert len(attributed) == 16
    views = head_views(setup, restoring, single_heads, None, None, "match_excess", n_boot=100, attributed=attributed)
    columns = ["restored", "masking_cost", "role_score", "attribution"]
    assert len(views) == 16 and views[columns].notna().all().all()
    agreed = agreement(views, matching, 2, n_boot=100)
    assert len(agreed) == 6 and (agreed["chance"].iloc[:3] == 2 * 2 / 16).all()
    tables = replacement_tables(setup, contrast, restoring, plan, 2, None, None)
    assert len(tables) == 2 and tables[0]["example"].isin(contrast.examples).all()
    assert set(tables[0]["example"]) == set(tables[1]["example"])
    against = restored_against_draws(tables, "matching", random_patches(plan), n_boot=100)
    assert against["n_draws"] == 3 and against["n_replacements"] == 2
    controls = contrast_controls(setup, matching, plan, None, None, n_boot=100)
    assert set(controls) == {"injected", "unshared"}
    specific, specific_random = specificity(setup, matching, None, 2, 2, None, n_boot=100)
    ranking, receiver = receivers_view(setup, contrast, matching, single_heads, n_boot=100)
    assert len(ranking) == 4 * (3 - max(l for l, _ in matching)) and (ranking["layer"] > max(matching)[0]).all()
    edges, mediation = circuit_view(setup, contrast, matching, single_heads, ranking, 2, n_boot=100)
    assert len(edges) == 2 * len(matching) and set(zip(edges["layer"], edges["head"])) == set(
        zip(ranking["layer"].head(2), ranking["head"].head(2))
    )
    assert len(mediation) == 3
    rows = claims(against, controls, specific, specific_random, ranking, matching, receiver)
    assert claims_file(rows) == "claims_09_patching"
    assert [c.claim_id for c in rows][:3] == [
        "patching.matching_heads_carry_matching",
        "patching.matching_heads_carry_matching/injected",
        "patching.matching_heads_carry_matching/unshared",
    ]
    registered = {c.study_claim for c in rows}
    assert registered == {k for k, c in STUDY_CLAIMS.items() if c.page == "09_patching"}
    # a second run reads the patches it saved
    again = restoring_patches(setup, contrast, plan, progress=False)
    pd.testing.assert_frame_equal(again, restoring)


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
    specific = {
        "difference": -0.1,
        "lo": -0.2,
        "hi": 0.0,
        "cost_sharing": -0.1,
        "cost_none": 0.0,
        "n_sharing": 5,
        "n_none": 5,
        "n_strata": 2,
        "n_left_out": 0,
    }
    controls = {"injected": {**against, "gap": -0.4, "gap_lo": -0.6, "gap_hi": -0.2}, "unshared": {"n_examples": 1}}
    rows = claims(against, controls, specific, specific, pd.DataFrame(), [(0, 0)], (3, 1))
    [path_row] = [r for r in rows if r.claim_id == "patching.cls_head_hands_on"]
    assert "not chosen on" in path_row.reason and path_row.verdict == "cannot tell"
    below = claims(against, controls, specific, specific, pd.DataFrame(), [(3, 0)], (3, 1))
    assert "sits no higher" in below[-1].reason
    by_id = {r.claim_id: r for r in rows}
    assert by_id["patching.matching_heads_carry_matching"].verdict != "cannot tell"
    assert by_id["patching.matching_heads_carry_matching/injected"].verdict == "not judged"
    assert "only 1" in by_id["patching.matching_heads_carry_matching/unshared"].reason


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
    specific = {"difference": np.nan, "lo": np.nan, "hi": np.nan, "n_sharing": 0, "n_none": 0}
    rows = claims(
        against, {"injected": against, "unshared": against}, specific, specific, pd.DataFrame(), [(0, 0)], (3, 1)
    )
    main, injected, unshared = rows[:3]
    assert main.verdict == "cannot tell" and "-0.15 [-0.3, -0.01]" in main.reason
    assert injected.verdict == "not judged" and unshared.verdict == "not judged"  # the other sign is theirs to have
    assert "No gold grade has" in specificity_note(specific, specific)
    counted = masking_specificity(np.ones(4), np.ones(4), [True, False, True, False], strata=[1, 1, 2, 2])
    assert np.isnan(counted["cost_sharing"]) and counted["n_left_out"] == 4


def _ranking(restored, cls_restored, over, cls_over) -> pd.DataFrame:
    columns = {}
    for prefix, shares, overs in (("", restored, over), ("cls_", cls_restored, cls_over)):
        columns.update(
            {
                f"{prefix}restored": shares,
                f"{prefix}lo": [r - 0.01 for r in shares],
                f"{prefix}hi": [r + 0.01 for r in shares],
                f"{prefix}over_others": overs,
                f"{prefix}over_lo": [o - 0.02 for o in overs],
                f"{prefix}over_hi": [o + 0.02 for o in overs],
            }
        )
    return pd.DataFrame({"layer": [3, 3, 2], "head": [1, 0, 3], **columns, "n_examples": 40})


def test_the_cls_head_is_judged_against_the_other_receivers_not_against_nothing():
    """A head that restores 6.7% holds only if the other heads above restore less by the claim's size: here every
    receiver restores about as much, so the [CLS] head's own 0.2 is no evidence that it is the reader."""
    nothing = {"n_examples": 1}
    specific = {"difference": np.nan, "lo": np.nan, "hi": np.nan, "n_sharing": 0, "n_none": 0}
    controls = {"injected": nothing, "unshared": nothing}
    alike = _ranking([0.21, 0.2, 0.19], [0.05, 0.0, 0.0], [0.01, 0.0, -0.01], [0.05, -0.025, -0.025])
    rows = claims(nothing, controls, specific, specific, alike, [(0, 0)], (3, 1))
    whole, through_cls = rows[-2:]
    assert whole.claim_id == "patching.cls_head_hands_on" and through_cls.claim_id == "patching.cls_head_hands_on/cls"
    assert whole.verdict != "holds" and "ranks 1 of 3" in whole.reason and "20.0% on average" in whole.reason
    leads = _ranking([0.4, 0.05, 0.03], [0.1, 0.0, 0.0], [0.36, -0.125, -0.135], [0.1, -0.05, -0.05])
    assert claims(nothing, controls, specific, specific, leads, [(0, 0)], (3, 1))[-2].verdict == "holds"


def test_a_specificity_measured_on_a_model_at_its_floor_is_saturated():
    """e5-zh-char's matching heads masked give 99% of pairs one grade: within that gold grade every pair is then
    graded right, sharing terms or not, so the comparison reads which grade the collapse lands on (it showed +19.3
    points, "opposite"). At the floor it is cannot tell, with the floor said; the same numbers off the floor decide."""
    nothing = {"n_examples": 1}
    controls = {"injected": nothing, "unshared": nothing}
    specific = {
        "difference": 0.19,
        "lo": 0.14,
        "hi": 0.24,
        "cost_sharing": 0.19,
        "cost_none": 0.0,
        "n_sharing": 218,
        "n_none": 7,
        "n_strata": 1,
        "n_left_out": 456,
    }
    floored = {**specific, "at_floor": True, "floor_reason": "99% of pairs get one grade"}

    def row(result):
        rows = claims(nothing, controls, result, specific, pd.DataFrame(), [(0, 0)], (3, 1))
        return next(r for r in rows if r.claim_id == "patching.cost_specific_to_shared_terms")

    assert row(specific).verdict == "opposite" and not row(specific).at_floor
    saturated = row(floored)
    assert saturated.verdict == "cannot tell" and saturated.at_floor
    assert "99% of pairs get one grade" in saturated.reason and "Saturated" in saturated.reason
