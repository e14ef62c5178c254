import numpy as np
import pandas as pd
import pytest
from tiny_setup import tiny_setup

from headlab.core.sweep import plan_table, run_sweep
from headlab.judging.sizes import NO_CHANGE_MARGIN
from headlab.judging.units import KEEP_VERSUS_RANDOM_KAPPA, VERSUS_RANDOM
from headlab.judging.verdicts import claims_file, render
from headlab.measures import held_out, matching
from headlab.measures.halves import half_pool
from headlab.measures.matching import head_roles, term_matching_specs
from headlab.measures.roles import ENGLISH_STOPWORDS
from headlab.pages import term_matching
from headlab.pages.term_matching import claims, condition_table, draw_table, random_comparison

MATCHING = [(2, 9), (1, 1), (2, 4), (0, 8), (1, 0)]


def test_specs_hold_every_condition_and_pair_kept_with_removed_random_sets():
    specs = term_matching_specs(6, 12, MATCHING, draws=4, keep_draws=3, seed=0)
    kinds = pd.Series([s.kind for s in specs]).value_counts().to_dict()
    assert kinds == {
        "none": 1,
        "random": 4,
        "random_lower": 4,
        "matching": 1,
        "lower": 1,
        "lower_but_matching": 1,
        "lower_but_random": 3,
    }
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
    assert [set(s) for s in matching.random_lower_sets(6, 12, MATCHING, 4, seed=0)] == removed


def test_random_sets_never_hold_a_named_head():
    """A control set that holds a matching head would blur the comparison: no draw of either control, over many
    seeds, ever does (and with a pool this small, the draws without the exclusion would)."""
    named = {(0, 0), (0, 1), (1, 2)}  # 3 of the 8 lower heads of a 4 x 4 model
    for seed in range(30):
        specs = term_matching_specs(4, 4, sorted(named), draws=5, keep_draws=5, seed=seed)
        for spec in specs:
            if spec.kind in ("random", "random_lower"):
                assert not set(spec.dropped) & named, (seed, spec)
            if spec.kind == "lower_but_random":  # the kept random heads are as many lower heads, none matching
                assert named <= set(spec.dropped)
        for drawn in matching.random_lower_sets(4, 4, sorted(named), 5, seed):
            assert len(drawn) == 3 and not set(drawn) & named
    # five named heads of a lower half of eight: the other three cannot make a set, so the other heads of any layer do
    five = {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)}
    for drawn in matching.random_lower_sets(4, 4, sorted(five), 4, 0):
        assert len(drawn) == 5 and not set(drawn) & five


def test_specs_need_heads_and_draws():
    with pytest.raises(ValueError, match="at least one head"):
        term_matching_specs(6, 12, [], 2, 2, 0)
    with pytest.raises(ValueError, match="positive"):
        term_matching_specs(6, 12, MATCHING, 0, 2, 0)


def toy_sweep(matching, randoms, lower, keep_matching, keeps):
    """A per-example table and plan from lists of correct flags per mask (baseline: 4 of 6 right); a wrong pair is
    given a neighbouring grade, so the kappa scale has grades to read."""
    masks = {
        "none": ("none", [1, 1, 1, 1, 0, 0]),
        "matching": ("matching", matching),
        "lower": ("lower", lower),
        "lower_but_matching": ("lower_but_matching", keep_matching),
    }
    masks |= {f"random-d{i}": ("random", c) for i, c in enumerate(randoms)}
    masks |= {f"random_lower-d{i}": ("random_lower", c) for i, c in enumerate(randoms)}
    masks |= {f"lower_but_random-d{i}": ("lower_but_random", c) for i, c in enumerate(keeps)}
    gold, grade_off = [1, 2, 3, 4, 5, 3], {1: 2, 2: 3, 3: 4, 4: 5, 5: 4}
    per_example = pd.DataFrame(
        [
            {
                "mask_id": m,
                "example": i,
                "correct": c,
                "grade": gold[i],
                "predicted": gold[i] if c else grade_off[gold[i]],
            }
            for m, (_, cs) in masks.items()
            for i, c in enumerate(cs)
        ]
    )
    plan = pd.DataFrame(
        {
            "mask_id": list(masks),
            "kind": [k for k, _ in masks.values()],
            "n_dropped": [0 if k == "none" else 5 for k, _ in masks.values()],
        }
    )
    return per_example, plan, np.array(masks["none"][1])


def _verdicts(table, comparison, **settings) -> dict[str, str]:
    return {c.claim_id.removeprefix("term_matching."): c.verdict for c in claims(table, comparison, **settings)}


def _row(condition, change, accuracy, n_draws=1, p_mcnemar=1e-9, half=0.05, n=1000, at_floor=False):
    """One row of a condition table: a change with a 95% interval of +-``half``, and its kappa columns (a share of
    kappa lost of -2 x the change; ``at_floor`` as decided from the predictions)."""
    label, study = term_matching.CONDITIONS[condition]
    return {
        "condition": condition,
        "label": label.format(k=5),
        "n_heads": 5,
        "accuracy": accuracy,
        "rel_change": change,
        "lo": change - half,
        "hi": change + half,
        "lo90": change - 0.8 * half,
        "hi90": change + 0.8 * half,
        "n_examples": n,
        "n_draws": n_draws,
        "draw_lo": change,
        "draw_hi": change,
        "p_mcnemar": p_mcnemar,
        "kept": 1 + change,
        "study": study,
        "kappa_lost": -2 * change,
        "kappa_lost_lo": -2 * (change + half),
        "kappa_lost_hi": -2 * (change - half),
        "at_floor": at_floor,
        "floor_reason": "99% of pairs get one grade"
        if at_floor
        else "κ interval above 0; 40% of pairs get the commonest grade",
    }


def _control(tested, reference, n_draws, extreme, reverse=None, mean=-0.05, difference=-0.45, half=0.05, df=None):
    """One comparison with random draws: the tested mask's change minus the draws' mean (``difference``) with a 95%
    interval of half-width ``half`` and ``df`` degrees of freedom (default: draws - 1); by default no draw ties the
    tested mask, so the rest are as extreme the other way."""
    reverse = n_draws - extreme if reverse is None else reverse
    label = term_matching.labels(5)[reference]
    return {
        "tested": tested,
        "reference": reference,
        "reference_label": label,
        "reference_mean": mean,
        "reference_min": mean - 0.05,
        "reference_max": mean + 0.05,
        "n_draws": n_draws,
        "n_as_extreme": extreme,
        "n_reverse": reverse,
        "difference": difference,
        "difference_lo": difference - half,
        "difference_hi": difference + half,
        "df": float(n_draws - 1) if df is None else df,
        "n_examples": 1000,
    }


def test_tables_of_a_strong_matching_effect():
    randoms = [[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 1], [1, 1, 0, 1, 1, 0]]  # all at 4/6: no change
    per_example, plan, _ = toy_sweep(
        matching=[1, 0, 0, 0, 0, 0],
        randoms=randoms,
        lower=[0] * 6,
        keep_matching=[1, 1, 1, 0, 0, 0],
        keeps=[[1, 0, 0, 0, 0, 0]] * 2,
    )
    table = condition_table(per_example, plan, k=5, n_boot=300).set_index("condition")
    assert table.loc["matching", "rel_change"] == pytest.approx(1 / 4 - 1)
    assert table.loc["random", "rel_change"] == pytest.approx(0) and table.loc["random", "n_draws"] == 3
    assert np.isnan(table.loc["random", "p_mcnemar"]) and table.loc["matching", "p_mcnemar"] == pytest.approx(0.25)
    assert table.loc["lower_but_matching", "kept"] == pytest.approx(0.75)
    assert table.loc["matching", "study"] == -0.524 and table.loc["matching", "label"] == "the 5 term-matching heads"
    draws = draw_table(per_example, plan, k=5)
    assert len(draws) == len(plan) and draws.set_index("mask_id").loc["lower", "rel_change"] == -1
    comparison = random_comparison(per_example, plan, k=5, n_boot=300).set_index(["tested", "reference"])
    strict = comparison.loc[("matching", "random_lower")]
    assert strict["n_as_extreme"] == 0 and strict["n_reverse"] == 3  # every draw costs less
    lower_mean = np.mean(randoms) / (4 / 6) - 1  # the toy's random lower sets are the random sets
    assert strict["difference"] == pytest.approx(-0.75 - lower_mean)
    assert strict["difference_lo"] < strict["difference"] < strict["difference_hi"] and strict["df"] >= 2
    keep = comparison.loc[("lower_but_matching", "lower_but_random")]
    assert keep["n_as_extreme"] == 0 and keep["n_reverse"] == 2 and keep["n_draws"] == 2
    assert keep["difference"] == pytest.approx(0.75 - 0.25)  # keeps 3 of 4 against 1 of 4
    table = condition_table(per_example, plan, k=5, n_boot=300)
    comparison = random_comparison(per_example, plan, k=5, n_boot=300)
    rows = claims(table, comparison)
    assert [c.claim_id for c in rows] == [
        "term_matching.random_no_change",
        "term_matching.matching_costs",
        "term_matching.lower_half_costs",
        "term_matching.matching_keep_lower_half",
        "term_matching.matching_keep_lower_half/accuracy",
    ]
    # the toy keeps no predicted grades, so no kappa: the claims the sizes policy reads on kappa are not measured
    unmeasured = ("term_matching.lower_half_costs", "term_matching.matching_keep_lower_half")
    assert all(np.isnan(c.ours) and c.verdict == "cannot tell" for c in rows if c.claim_id in unmeasured)
    measured = [c for c in rows if c.claim_id not in unmeasured]
    assert [(c.finding, c.n_examples, c.page) for c in measured] == [("05 term matching", 6, "05_term_matching")] * 3
    assert [c.study for c in rows] == [0.0, -0.524, -0.865, None, None]
    assert [c.method for c in rows] == [
        "two-stage bootstrap over draws and test pairs",
        term_matching.VERSUS_METHOD,
        "",
        "",
        term_matching.VERSUS_METHOD,
    ]
    costs = rows[1]  # the matching heads minus the mean of the 3 draws of random lower heads
    assert (costs.ours, costs.n_draws, costs.kind) == (pytest.approx(strict["difference"]), 3, "compare")
    assert costs.df == pytest.approx(strict["df"]) and costs.unit == VERSUS_RANDOM.label
    assert "Cannot be decided" not in render(rows) and claims_file(rows) == "claims_05_term_matching"
    assert "they keep 75%" in render(rows)


def test_matching_costs_is_one_row_judged_against_the_stricter_control():
    table = pd.DataFrame([_row("matching", -0.5, 0.27)])
    comparison = pd.DataFrame(
        [_control("matching", "random", 20, 0, difference=-0.5), _control("matching", "random_lower", 20, 0)]
    )
    rows = claims(table, comparison)
    costs = [c for c in rows if c.claim_id.startswith("term_matching.matching_costs")]
    assert len(costs) == 1
    costs = costs[0]
    assert costs.kind == "compare" and costs.verdict == "holds"  # -45 points [-50, -40]: beyond half the study's 52.4
    assert (costs.ours, costs.lo, costs.hi, costs.n_draws, costs.df, costs.n_examples, costs.study) == (
        -0.45,
        pytest.approx(-0.50),
        pytest.approx(-0.40),
        20,
        19,
        1000,
        -0.524,
    )
    assert "The control judged is *5 random heads of the lower half*, the stricter one" in costs.reason
    assert "0 of 20 draws of *5 random heads* cost as much or more" in costs.reason
    assert "McNemar p = 1e-09" in costs.reason and "-45.0 points [-50.0, -40.0]" in costs.reason
    # the verdict follows the stricter control even where the looser one would pass
    looser = pd.DataFrame(
        [
            _control("matching", "random", 20, 0, difference=-0.5),
            _control("matching", "random_lower", 20, 5, difference=-0.1),
        ]
    )
    assert _verdicts(table, looser)["matching_costs"] == "does not hold"  # short of 26.2 points
    reverse = pd.DataFrame([_control("matching", "random_lower", 20, 19, reverse=0, difference=0.2)])
    assert _verdicts(table, reverse)["matching_costs"] == "opposite"
    wide = pd.DataFrame([_control("matching", "random_lower", 3, 0, difference=-0.45, half=0.2, df=2)])
    assert _verdicts(table, wide)["matching_costs"] == "underpowered"  # few draws, t with 2 degrees of freedom
    # as few draws, measured to ±4 points: astride 26.2 points, at a design that could show twice it
    few = pd.DataFrame([_control("matching", "random_lower", 3, 0, difference=-0.45, half=0.04, df=2)])
    [open_] = [c for c in claims(table, few) if c.claim_id == "term_matching.matching_costs"]
    assert open_.verdict == "cannot tell" and open_.mde <= 2 * open_.min_size
    only_random = pd.DataFrame([_control("matching", "random", 20, 0)])
    assert {c.claim_id: c for c in claims(table, only_random)}["term_matching.matching_costs"].verdict == "holds"
    none = {c.claim_id: c for c in claims(table, comparison.iloc[:0])}["term_matching.matching_costs"]
    assert none.verdict == "cannot tell" and "no random draws" in none.reason


def test_a_mask_that_leaves_the_model_at_its_majority_grade_is_shown_at_the_floor():
    # the default model: the 5 heads masked leave 24.1% right, below its majority grade's 24.3%
    table = pd.DataFrame(
        [
            _row("matching", -0.559, 0.241, half=0.043, at_floor=True),
            _row("random", 0.0, 0.546, n_draws=20, p_mcnemar=np.nan, half=0.01),
        ]
    )
    comparison = pd.DataFrame([_control("matching", "random_lower", 20, 0, difference=-0.559)])
    rows = {c.claim_id: c for c in claims(table, comparison)}
    costs = rows["term_matching.matching_costs"]
    assert not costs.at_floor  # random heads do not sit at the floor: the difference is not saturated
    assert costs.verdict == "holds"  # a collapse to the floor, far more than random heads
    assert (
        "loses 112% [103%, 120%] of its quadratic κ and sits at the floor (99% of pairs get one grade): a collapse"
        in costs.reason
        and "not an effect size to set beside the study's -52.4%" in costs.reason
    )
    random = rows["term_matching.random_no_change"]
    assert not random.at_floor and random.kappa_lost == pytest.approx(0) and "floor" not in random.reason
    assert "(0% [-2%, 2%] of the unmasked quadratic κ lost)" in render([random])  # beside its accuracy
    above = {c.claim_id: c for c in claims(table.assign(at_floor=False), comparison)}
    assert (
        not above["term_matching.matching_costs"].at_floor
        and "floor" not in above["term_matching.matching_costs"].reason
    )


def test_the_studys_zero_for_random_heads_is_tested_as_equivalence():
    empty = pd.DataFrame(columns=["tested", "reference"])
    narrow = pd.DataFrame([_row("random", 0.0, 0.5, n_draws=20, p_mcnemar=np.nan, half=0.005)])
    first = claims(narrow, empty)[0]
    assert (first.claim_id, first.verdict, first.kind, first.claim) == (
        "term_matching.random_no_change",
        "holds",
        "no_effect",
        "Masking 5 random heads changes no accuracy",
    )
    assert (first.ours, first.n_draws, first.p, first.margin) == (0.0, 20, None, NO_CHANGE_MARGIN)
    assert first.lo_adj < first.lo and "averaged over 20 draws" in first.reason
    wide = pd.DataFrame([_row("random", 0.0, 0.5, n_draws=20, p_mcnemar=np.nan, half=0.05)])
    # contains zero, yet a 5% loss is not excluded, on an interval too wide to show a true null within ±1.15%
    assert _verdicts(wide, empty)["random_no_change"] == "underpowered"
    # a loss of 0.6% [0.2%, 1.0%]: neither within ±1.15% nor beyond it, at a design that could show a null within
    undecided = claims(pd.DataFrame([_row("random", -0.006, 0.5, n_draws=20, p_mcnemar=np.nan, half=0.004)]), empty)
    assert undecided[0].verdict == "cannot tell" and undecided[0].mde <= undecided[0].margin
    loss = pd.DataFrame([_row("random", -0.06, 0.5, n_draws=20, p_mcnemar=np.nan, half=0.01)])
    assert _verdicts(loss, empty)["random_no_change"] == "does not hold"
    # the conditions this table lacks are rows all the same, not measured
    absent = {c.claim_id: c for c in claims(narrow, empty)}["term_matching.lower_half_costs"]
    assert absent.verdict == "cannot tell" and np.isnan(absent.ours) and "Not measured" in absent.reason
    assert f"**cannot tell** · *{term_matching.LOWER_HALF_COSTS.claim}.* Ours: not measured" in render(
        claims(narrow, empty)
    )


def test_keeping_only_the_matching_heads_is_not_judged_on_accuracy_where_the_policy_reads_kappa():
    """67 of 144 heads masked is past the study's collapse point, so the sizes policy reads the claim on kappa; the
    page compares the kept sets on accuracy only, so the claim's row says it is not measured there (never a verdict
    from the wrong scale) and the accuracy comparison is shown under it, not judged."""
    table = pd.DataFrame([_row("lower", -0.8, 0.11), _row("lower_but_matching", -0.2, 0.44)])
    comparison = pd.DataFrame(
        [_control("lower_but_matching", "lower_but_random", 20, 0, reverse=20, mean=-0.6, difference=0.4)]
    )
    keep, on_accuracy = claims(table, comparison)[3:5]
    assert (keep.claim_id, keep.verdict, keep.kind) == (
        "term_matching.matching_keep_lower_half",
        "cannot tell",
        "compare",
    )
    assert np.isnan(keep.ours) and keep.unit == KEEP_VERSUS_RANDOM_KAPPA.label
    assert keep.reason.startswith("Not measured on κ") and "they keep 80% [75%, 85%] of the accuracy" in keep.reason
    assert (on_accuracy.claim_id, on_accuracy.verdict) == (
        "term_matching.matching_keep_lower_half/accuracy",
        "not judged",
    )
    assert (on_accuracy.ours, on_accuracy.n_draws, on_accuracy.unit) == (0.4, 20, VERSUS_RANDOM.label)
    assert "against 20% with the whole lower" in on_accuracy.reason
    assert "instead keeps 40% on average (35% to 45%), 0 of them at least as much" in on_accuracy.reason
    assert claims(table, comparison.iloc[:0])[3].verdict == "cannot tell"  # no random sets kept
    assert _verdicts(table, comparison)["lower_half_costs"] == "holds"


def test_heads_are_chosen_on_one_half_of_the_pairs_and_masks_measured_on_the_other():
    measured = held_out.measured_examples(100, None, 0)
    chosen = held_out.role_indices(100, held_out.choice_limit(100, None), 0)
    assert len(measured) == 50 and not set(measured) & set(chosen) and set(measured) | set(chosen) == set(range(100))
    assert list(held_out.measured_examples(100, 30, 0)) == sorted(
        set(range(100)) - set(held_out.role_indices(100, 30, 0))
    )
    assert len(held_out.measured_examples(100, 100, 0)) == 100  # chosen on all: measured on all
    assert "chosen by attention on 50 of the 100 test pairs" in held_out.selection_note(100, None, 0)
    assert "the other 50" in held_out.selection_note(100, None, 0)
    assert "same 100 test pairs" in held_out.selection_note(100, 100, 0)
    table = pd.DataFrame([_row("lower", -0.8, 0.11)])
    note = held_out.selection_note(100, None, 0)
    assert all(note in c.reason for c in claims(table, table.iloc[:0], selection=note) if not np.isnan(c.ours))


def test_the_condition_table_puts_each_condition_on_the_kappa_scale():
    per_example, plan, _ = toy_sweep(
        matching=[0] * 6, randoms=[[1, 1, 1, 1, 0, 0]] * 2, lower=[1, 1, 1, 1, 0, 0], keep_matching=[0] * 6, keeps=[]
    )
    per_example = pd.concat(per_example.assign(example=per_example["example"] + 6 * k) for k in range(20))  # 120 pairs
    table = condition_table(per_example, plan, 5, n_boot=200).set_index("condition")
    assert table.at["lower", "kappa_lost"] == 0 and not table.at["lower", "at_floor"]  # the same grades as unmasked
    assert table.at["random", "kappa_lost"] == 0  # two draws, both as unmasked
    # every pair wrong, one grade up: kappa falls but is not zero (grades still track the gold ones)
    assert 0 < table.at["matching", "kappa_lost"] < 1 and table.at["matching", "kappa_reason"] == ""


def test_head_roles_are_computed_once_then_loaded(tmp_path, monkeypatch):
    setup = tiny_setup(tmp_path)
    first = head_roles(setup, stopwords=ENGLISH_STOPWORDS)
    assert len(first) == 4 * 4 and (first["n_examples"] == 5).all()
    saved = list(setup.params.table_dir.glob("head_roles-*.csv"))
    assert len(saved) == 1

    def no_compute(*args, **kwargs):
        raise AssertionError("should have been loaded")

    monkeypatch.setattr(matching, "role_scores", no_compute)
    pd.testing.assert_frame_equal(head_roles(setup, stopwords=ENGLISH_STOPWORDS), first, check_dtype=False, atol=1e-5)
    with pytest.raises(AssertionError, match="loaded"):
        head_roles(setup, limit=3, stopwords=ENGLISH_STOPWORDS)  # other settings: another file


def test_head_roles_saved_under_another_shared_term_definition_are_computed_again(tmp_path, monkeypatch):
    setup = tiny_setup(tmp_path)
    head_roles(setup)
    monkeypatch.setattr(matching, "SHARED_TERMS", "token ids")
    head_roles(setup)
    assert len(list(setup.params.table_dir.glob("head_roles-*.csv"))) == 2


def test_role_indices_are_a_seeded_sorted_subset():
    assert held_out.role_indices(10, None, 0) is None and held_out.role_indices(10, 20, 0) is None
    picked = held_out.role_indices(100, 10, 3)
    assert len(set(picked)) == 10 and list(picked) == sorted(picked)
    assert list(picked) == list(held_out.role_indices(100, 10, 3))


def test_term_matching_sweep_on_a_tiny_model(tmp_path):
    setup = tiny_setup(tmp_path, n_right=3)
    assert setup.base_correct.tolist() == [1, 1, 1, 0, 0]
    specs = term_matching_specs(4, 4, [(0, 1), (1, 2)], draws=2, keep_draws=2, seed=0)
    per_example = run_sweep(setup.model, setup.encoded, specs, setup.params.sweep_dir("tm", specs), progress=False)
    plan = plan_table(specs)
    table = condition_table(per_example, plan, k=2, n_boot=50)
    assert table["condition"].tolist() == list(term_matching.CONDITIONS)
    assert table.set_index("condition").loc["none", "rel_change"] == 0
    assert len(random_comparison(per_example, plan, k=2)) == 3


def test_placement_against_the_study_layers():
    roles = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(6), 2),
            "head": np.tile([0, 1], 6),
            "match_excess": [0.0, 0.1, 0.5, 0.0, 0.0, 0.3, 0.0, 0.0, 0.9, 0.0, 0.0, 0.0],
        }
    )
    text = term_matching.placement(roles, [(1, 0), (2, 1), (0, 1)], layers=6)
    assert "1.0 (0.50), 2.1 (0.30), 0.1 (0.10)" in text
    assert "our layers 1, 2: 2 of ours are there" in text
    assert "4.0 (0.90), 1.0 (0.50), 2.1 (0.30); 2 of them in the lower half" in text


def test_later_notebooks_read_the_heads_notebook_05_chose_and_refuse_other_settings(tmp_path):
    setup = tiny_setup(tmp_path)
    chosen, rows = matching.matching_heads(setup, k=2, stopwords=ENGLISH_STOPWORDS, choose=True)
    assert len(chosen) == 2 and all(layer < 2 for layer, _ in chosen)  # the lower half of 4 layers
    assert (setup.params.table_dir / "term_matching_heads.csv").exists()
    read, saved = matching.matching_heads(setup, k=2, stopwords=ENGLISH_STOPWORDS)
    assert read == chosen and saved["by"].iloc[0] == "match_excess"
    with pytest.raises(ValueError, match=r"other settings.*'k': \(2, 3\)"):
        matching.matching_heads(setup, k=3, stopwords=ENGLISH_STOPWORDS)
    with pytest.raises(ValueError, match="stopwords"):
        matching.matching_heads(setup, k=2)
    by_self, _ = matching.matching_heads(setup, k=2, by="self", choose=True)  # notebook 05 again: re-chosen
    assert matching.matching_heads(setup, k=2, by="self")[0] == by_self


def test_the_mean_ablation_check_takes_the_matching_heads_and_the_lower_half():
    from headlab.measures.matching import term_matching_specs
    from headlab.pages.term_matching import mean_ablation_specs

    specs = term_matching_specs(4, 4, [(0, 1), (1, 2)], draws=3, keep_draws=2, seed=0)
    kinds = [s.kind for s in mean_ablation_specs(specs)]
    assert sorted(kinds) == ["lower", "matching", "none"]  # the random controls stay zeroed


def test_the_figures_captions_give_the_chosen_heads_and_every_conditions_change():
    roles = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "match_excess": [0.1, 0.5, 0.3, 0.05]})
    text = term_matching.chosen_takeaway(roles, [(0, 1), (1, 0)], 12)
    assert "highest match_excess, framed: 0.1 (0.50), 1.0 (0.30); 0 of them at the study's depth" in text
    table = pd.DataFrame(
        {
            "condition": ["none", "random_lower", "matching"],
            "label": ["no mask", "2 random heads of the lower half", "the 2 term-matching heads"],
            "rel_change": [0.0, -0.05, -0.4],
            "lo": [0.0, -0.08, -0.45],
            "hi": [0.0, -0.02, -0.35],
        }
    )
    assert term_matching.conditions_takeaway(table) == (
        "Relative change of accuracy, masking 2 random heads of the lower half (mean of draws) -5.0% [-8.0%, -2.0%]; "
        "the 2 term-matching heads -40.0% [-45.0%, -35.0%]."
    )
