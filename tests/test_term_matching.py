import numpy as np
import pandas as pd
import pytest
from tiny_setup import tiny_setup

from headlab.core.sweep import plan_table, run_sweep
from headlab.findings import term_matching
from headlab.findings.claims import render
from headlab.findings.importance import half_pool
from headlab.findings.roles import ENGLISH_STOPWORDS
from headlab.findings.term_matching import (
    claims,
    condition_table,
    draw_table,
    head_roles,
    random_comparison,
    term_matching_specs,
    verdict,
)

MATCHING = [(2, 9), (1, 1), (2, 4), (0, 8), (1, 0)]


def test_specs_hold_every_condition_and_pair_kept_with_removed_random_sets():
    specs = term_matching_specs(6, 12, MATCHING, draws=4, keep_draws=3, seed=0)
    kinds = pd.Series([s.kind for s in specs]).value_counts().to_dict()
    assert kinds == {"none": 1, "random": 4, "random_lower": 4, "matching": 1, "lower": 1, "lower_but_matching": 1,
                     "lower_but_random": 3}
    lower = set(half_pool(6, 12, "lower"))
    by_id = {s.mask_id: s for s in specs}
    assert set(by_id["matching"].dropped) == set(MATCHING) and set(by_id["lower"].dropped) == lower
    assert set(by_id["lower_but_matching"].dropped) == lower - set(MATCHING)
    removed = [set(s.dropped) for s in specs if s.kind == "random_lower"]
    kept = [lower - set(s.dropped) for s in specs if s.kind == "lower_but_random"]
    assert kept == removed[:3] and all(len(r) == 5 and r <= lower for r in removed)
    randoms = [set(s.dropped) for s in specs if s.kind == "random"]
    assert all(len(r) == 5 for r in randoms) and randoms != removed
    assert len({s.mask_id for s in specs}) == len(specs)
    assert term_matching_specs(6, 12, MATCHING, draws=4, keep_draws=3, seed=0) == specs  # a rerun resumes
    assert [set(s) for s in term_matching.random_lower_sets(6, 12, 5, 4, seed=0)] == removed


def test_specs_need_heads_and_draws():
    with pytest.raises(ValueError, match="at least one head"):
        term_matching_specs(6, 12, [], 2, 2, 0)
    with pytest.raises(ValueError, match="positive"):
        term_matching_specs(6, 12, MATCHING, 0, 2, 0)


def toy_sweep(matching, randoms, lower, keep_matching, keeps):
    """A per-example table and plan from lists of correct flags per mask (baseline: 4 of 6 right)."""
    masks = {"none": ("none", [1, 1, 1, 1, 0, 0]), "matching": ("matching", matching), "lower": ("lower", lower),
             "lower_but_matching": ("lower_but_matching", keep_matching)}
    masks |= {f"random-d{i}": ("random", c) for i, c in enumerate(randoms)}
    masks |= {f"random_lower-d{i}": ("random_lower", c) for i, c in enumerate(randoms)}
    masks |= {f"lower_but_random-d{i}": ("lower_but_random", c) for i, c in enumerate(keeps)}
    per_example = pd.DataFrame([{"mask_id": m, "example": i, "correct": c}
                                for m, (_, cs) in masks.items() for i, c in enumerate(cs)])
    plan = pd.DataFrame({"mask_id": list(masks), "kind": [k for k, _ in masks.values()],
                         "n_dropped": [0 if k == "none" else 5 for k, _ in masks.values()]})
    return per_example, plan, np.array(masks["none"][1])


def _verdicts(table, comparison, **settings) -> dict[str, str]:
    return {c.claim_id.removeprefix("term_matching."): c.verdict for c in claims(table, comparison, **settings)}


def test_tables_of_a_strong_matching_effect():
    randoms = [[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 1], [1, 1, 0, 1, 1, 0]]  # all at 4/6: no change
    per_example, plan, _ = toy_sweep(matching=[1, 0, 0, 0, 0, 0], randoms=randoms, lower=[0] * 6,
                                        keep_matching=[1, 1, 1, 0, 0, 0], keeps=[[1, 0, 0, 0, 0, 0]] * 2)
    table = condition_table(per_example, plan, k=5, n_boot=300).set_index("condition")
    assert table.loc["matching", "rel_change"] == pytest.approx(1 / 4 - 1)
    assert table.loc["random", "rel_change"] == pytest.approx(0) and table.loc["random", "n_draws"] == 3
    assert np.isnan(table.loc["random", "p_mcnemar"]) and table.loc["matching", "p_mcnemar"] == pytest.approx(0.25)
    assert table.loc["lower_but_matching", "kept"] == pytest.approx(0.75)
    assert table.loc["matching", "study"] == -0.524 and table.loc["matching", "label"] == "the 5 term-matching heads"
    draws = draw_table(per_example, plan, k=5)
    assert len(draws) == len(plan) and draws.set_index("mask_id").loc["lower", "rel_change"] == -1
    comparison = random_comparison(per_example, plan, k=5).set_index(["tested", "reference"])
    assert comparison.loc[("matching", "random_lower"), "n_as_extreme"] == 0
    assert comparison.loc[("matching", "random_lower"), "p_empirical"] == pytest.approx(1 / 4)
    keep = comparison.loc[("lower_but_matching", "lower_but_random")]
    assert keep["n_as_extreme"] == 0 and keep["p_empirical"] == pytest.approx(1 / 3)
    table, comparison = condition_table(per_example, plan, k=5, n_boot=300), random_comparison(per_example, plan, k=5)
    rows = claims(table, comparison)
    assert [c.claim_id for c in rows] == ["term_matching.random_no_change", "term_matching.matching_costs",
                                          "term_matching.lower_half_costs", "term_matching.matching_far_more_than_random",
                                          "term_matching.matching_keep_lower_half"]
    assert all(c.finding == "05 term matching" and c.n_examples == 6 for c in rows)
    assert [c.study for c in rows] == [0.0, -0.524, -0.865, None, -0.181]
    far = rows[3]  # 6 examples: McNemar p = 0.25, so no loss is shown
    assert far.verdict == "does not hold" and "Masking them costs no accuracy distinguishable from zero" in far.reason
    assert (far.ours, far.p, far.n_draws) == (pytest.approx(-0.75), pytest.approx(1 / 4), 3)
    text = verdict(table, comparison)
    assert text == render(rows) and "they keep 75%" in text
    # 2 keep draws: p can never go below 1/3, so that comparison says it cannot be decided
    assert rows[4].verdict == "cannot tell"
    assert "**cannot be decided with 2 draws** (the smallest possible p is 0.33), raise KEEP_DRAWS" in text


def test_verdict_says_far_more_only_with_enough_draws_and_a_clear_loss():
    table = pd.DataFrame([{"condition": "matching", "label": "the 5 term-matching heads", "n_heads": 5,
                           "rel_change": -0.5, "lo": -0.6, "hi": -0.4, "lo90": -0.58, "hi90": -0.42, "n_examples": 1000,
                           "n_draws": 1, "draw_lo": -0.5, "draw_hi": -0.5, "p_mcnemar": 1e-6, "study": -0.524,
                           "kept": 0.5}])
    comparison = pd.DataFrame([{"tested": "matching", "reference": "random_lower",
                                "reference_label": "5 random heads of the lower half", "reference_mean": -0.05,
                                "reference_min": -0.1, "reference_max": 0.0, "n_draws": 40, "n_as_extreme": 0,
                                "p_empirical": 1 / 41}])
    far = {c.claim_id: c for c in claims(table, comparison)}["term_matching.matching_far_more_than_random"]
    assert far.verdict == "holds" and (far.ours, far.lo, far.hi, far.p, far.n_draws, far.n_examples) == (
        -0.5, -0.6, -0.4, 1 / 41, 40, 1000)
    assert "matter far more than random heads here" in verdict(table, comparison)
    assert "contains the study's number" in verdict(table, comparison)
    assert _verdicts(table, comparison)["matching_costs"] == "holds"
    few = comparison.assign(n_draws=3, p_empirical=0.25)
    assert _verdicts(table, few)["matching_far_more_than_random"] == "cannot tell"
    assert "**cannot be decided with 3 draws** (the smallest possible p is 0.25) (raise DRAWS)" in verdict(table, few)
    often = comparison.assign(n_as_extreme=10, p_empirical=11 / 41)  # enough draws, and a quarter cost as much
    assert _verdicts(table, often)["matching_far_more_than_random"] == "does not hold"
    assert "Random heads cost as much often enough" in verdict(table, often)
    one = comparison.assign(n_as_extreme=1, p_empirical=2 / 41)  # p < 0.05, yet one draw costs as much
    assert _verdicts(table, one)["matching_far_more_than_random"] == "does not hold"
    assert "but not far more" in verdict(table, one)
    close = comparison.assign(reference_mean=-0.3)  # costlier than every draw, but not twice their mean
    assert _verdicts(table, close)["matching_far_more_than_random"] == "does not hold"
    null = table.assign(rel_change=-0.01, lo=-0.05, hi=0.03, lo90=-0.04, hi90=0.02, p_mcnemar=0.6)
    nothing = comparison.assign(n_as_extreme=30, p_empirical=31 / 41)
    assert _verdicts(null, nothing)["matching_costs"] == "cannot tell"
    assert _verdicts(null, nothing)["matching_far_more_than_random"] == "does not hold"
    assert "Masking them costs no accuracy distinguishable from zero" in verdict(null, nothing)
    gain = table.assign(rel_change=0.05, lo=0.01, hi=0.09, lo90=0.02, hi90=0.08)
    none = table.assign(rel_change=0.0, lo=-0.012, hi=0.011, lo90=-0.01, hi90=0.009)
    assert _verdicts(gain, comparison)["matching_costs"] == "opposite"
    assert _verdicts(none, comparison)["matching_costs"] == "does not hold"  # no change shown: no loss


def test_the_studys_zero_for_random_heads_is_tested_as_equivalence():
    row = {"condition": "random", "label": "5 random heads", "n_heads": 5, "rel_change": 0.0, "n_examples": 1000,
           "n_draws": 20, "draw_lo": -0.01, "draw_hi": 0.01, "p_mcnemar": np.nan, "study": 0.0, "kept": 1.0}
    empty = pd.DataFrame(columns=["tested", "reference"])
    narrow = pd.DataFrame([{**row, "lo": -0.012, "hi": 0.011, "lo90": -0.01, "hi90": 0.009}])
    first = claims(narrow, empty)[0]
    assert (first.claim_id, first.verdict, first.claim) == ("term_matching.random_no_change", "holds",
                                                             "Masking 5 random heads changes no accuracy")
    assert (first.ours, first.lo, first.hi, first.n_draws, first.p) == (0.0, -0.012, 0.011, 20, None)
    assert "**no change**: the 90% interval lies within ±2% (equivalence)" in verdict(narrow, empty)
    wide = pd.DataFrame([{**row, "lo": -0.06, "hi": 0.05, "lo90": -0.05, "hi90": 0.04}])
    assert _verdicts(wide, empty)["random_no_change"] == "cannot tell"
    text = verdict(wide, empty)  # contains zero, yet a 5% loss is not excluded: no claim of "no change"
    assert "but not shown to be none either (the 90% interval [-5.0%, +4.0%] reaches past ±2%)" in text
    loss = pd.DataFrame([{**row, "rel_change": -0.03, "lo": -0.05, "hi": -0.01, "lo90": -0.045, "hi90": -0.015}])
    assert _verdicts(loss, empty)["random_no_change"] == "does not hold"
    # the conditions this table lacks are rows all the same, not measured
    absent = {c.claim_id: c for c in claims(narrow, empty)}["term_matching.lower_half_costs"]
    assert absent.verdict == "cannot tell" and np.isnan(absent.ours) and "Not measured" in absent.reason
    assert "*Masking all heads of the lower half costs accuracy* **cannot be told** here: not measured" in text


def test_keeping_only_the_matching_heads_is_judged_against_keeping_random_heads_of_their_half():
    table = pd.DataFrame([{"condition": c, "label": label, "n_heads": n, "rel_change": change, "lo": change - 0.05,
                           "hi": change + 0.05, "lo90": change - 0.04, "hi90": change + 0.04, "n_examples": 1000,
                           "n_draws": 1, "draw_lo": change, "draw_hi": change, "p_mcnemar": 1e-9, "kept": 1 + change,
                           "study": study}
                          for c, label, n, change, study in [
                              ("lower", "all heads of the lower half", 72, -0.8, -0.865),
                              ("lower_but_matching", "the lower half but the 5 term-matching heads", 67, -0.2,
                               -0.181)]])
    comparison = pd.DataFrame([{"tested": "lower_but_matching", "reference": "lower_but_random",
                                "reference_label": "the lower half but 5 random heads of it", "reference_mean": -0.6,
                                "reference_min": -0.7, "reference_max": -0.5, "n_draws": 30, "n_as_extreme": 0,
                                "p_empirical": 1 / 31}])
    keep = claims(table, comparison)[4]
    assert (keep.claim_id, keep.verdict) == ("term_matching.matching_keep_lower_half", "holds")
    row = table.iloc[1]
    assert (keep.ours, keep.lo, keep.hi, keep.study, keep.p, keep.n_draws) == (row.rel_change, row.lo, row.hi, -0.181,
                                                                             1 / 31, 30)
    assert "they keep 80% [75%, 85%] of the accuracy, against 20% with the whole lower half masked" in keep.reason
    assert "instead keeps 40% on average (30% to 50%), 0 of them at least as much" in keep.reason
    assert "our interval contains the study's number" in keep.reason
    often = comparison.assign(n_as_extreme=5, p_empirical=6 / 31)
    assert claims(table, often)[4].verdict == "does not hold"
    few = comparison.assign(n_draws=10, p_empirical=1 / 11)
    undecided = claims(table, few)[4]
    assert undecided.verdict == "cannot tell" and "cannot be decided with 10 draws" in undecided.reason
    assert claims(table, comparison.iloc[:0])[4].verdict == "cannot tell"  # no random sets kept
    assert _verdicts(table, comparison)["lower_half_costs"] == "holds"


def test_head_roles_are_computed_once_then_loaded(tmp_path, monkeypatch):
    setup = tiny_setup(tmp_path)
    first = head_roles(setup, stopwords=ENGLISH_STOPWORDS)
    assert len(first) == 4 * 4 and (first["n_examples"] == 5).all()
    saved = list(setup.study.table_dir.glob("head_roles-*.csv"))
    assert len(saved) == 1

    def no_compute(*args, **kwargs):
        raise AssertionError("should have been loaded")

    monkeypatch.setattr(term_matching, "role_scores", no_compute)
    pd.testing.assert_frame_equal(head_roles(setup, stopwords=ENGLISH_STOPWORDS), first, check_dtype=False,
                                  atol=1e-5)
    with pytest.raises(AssertionError, match="loaded"):
        head_roles(setup, limit=3, stopwords=ENGLISH_STOPWORDS)  # other settings: another file


def test_head_roles_saved_under_another_shared_term_definition_are_computed_again(tmp_path, monkeypatch):
    setup = tiny_setup(tmp_path)
    head_roles(setup)
    monkeypatch.setattr(term_matching, "SHARED_TERMS", "token ids")
    head_roles(setup)
    assert len(list(setup.study.table_dir.glob("head_roles-*.csv"))) == 2


def test_role_indices_are_a_seeded_sorted_subset():
    assert term_matching.role_indices(10, None, 0) is None and term_matching.role_indices(10, 20, 0) is None
    picked = term_matching.role_indices(100, 10, 3)
    assert len(set(picked)) == 10 and list(picked) == sorted(picked)
    assert list(picked) == list(term_matching.role_indices(100, 10, 3))


def test_term_matching_sweep_on_a_tiny_model(tmp_path):
    setup = tiny_setup(tmp_path, n_right=3)
    assert setup.base_correct.tolist() == [1, 1, 1, 0, 0]
    specs = term_matching_specs(4, 4, [(0, 1), (1, 2)], draws=2, keep_draws=2, seed=0)
    per_example = run_sweep(setup.model, setup.encoded, specs, setup.study.sweep_dir("tm", specs), progress=False)
    plan = plan_table(specs)
    table = condition_table(per_example, plan, k=2, n_boot=50)
    assert table["condition"].tolist() == list(term_matching.CONDITIONS)
    assert table.set_index("condition").loc["none", "rel_change"] == 0
    assert len(random_comparison(per_example, plan, k=2)) == 3


def test_placement_against_the_study_layers():
    roles = pd.DataFrame({"layer": np.repeat(np.arange(6), 2), "head": np.tile([0, 1], 6),
                          "match_excess": [0.0, 0.1, 0.5, 0.0, 0.0, 0.3, 0.0, 0.0, 0.9, 0.0, 0.0, 0.0]})
    text = term_matching.placement(roles, [(1, 0), (2, 1), (0, 1)], layers=6)
    assert "1.0 (0.50), 2.1 (0.30), 0.1 (0.10)" in text
    assert "our layers 1, 2: 2 of ours are there" in text
    assert "4.0 (0.90), 1.0 (0.50), 2.1 (0.30); 2 of them in the lower half" in text


def test_later_notebooks_read_the_heads_notebook_05_chose_and_refuse_other_settings(tmp_path):
    setup = tiny_setup(tmp_path)
    chosen, rows = term_matching.matching_heads(setup, k=2, stopwords=ENGLISH_STOPWORDS, choose=True)
    assert len(chosen) == 2 and all(layer < 2 for layer, _ in chosen)  # the lower half of 4 layers
    assert (setup.study.table_dir / "term_matching_heads.csv").exists()
    read, saved = term_matching.matching_heads(setup, k=2, stopwords=ENGLISH_STOPWORDS)
    assert read == chosen and saved["by"].iloc[0] == "match_excess"
    with pytest.raises(ValueError, match=r"other settings.*'k': \(2, 3\)"):
        term_matching.matching_heads(setup, k=3, stopwords=ENGLISH_STOPWORDS)
    with pytest.raises(ValueError, match="stopwords"):
        term_matching.matching_heads(setup, k=2)
    by_self, _ = term_matching.matching_heads(setup, k=2, by="self", choose=True)  # notebook 05 again: re-chosen
    assert term_matching.matching_heads(setup, k=2, by="self")[0] == by_self
