"""Heads ordered by importance: the least important go first, within the layers asked for, at shares of all heads."""

import warnings

import pandas as pd
import pytest

from headlab.measures.importance import importance_order, importance_specs, least_important


def _importance():
    # 4 layers x 2 heads; the normalized score and the raw one disagree on purpose
    rows = [
        (0, 0, 0.9, 5.0),
        (0, 1, 0.1, 0.1),
        (1, 0, 0.5, 0.2),
        (1, 1, 0.3, 3.0),
        (2, 0, 0.2, 0.3),
        (2, 1, 0.8, 0.4),
        (3, 0, 0.1, 9.0),
        (3, 1, 0.7, 0.5),
    ]
    return pd.DataFrame(rows, columns=["layer", "head", "importance", "importance_raw"])


def test_the_least_important_heads_go_first_ties_by_layer():
    assert importance_order(_importance())[:4] == [(0, 1), (3, 0), (2, 0), (1, 1)]
    assert importance_order(_importance(), "importance_raw")[:2] == [(0, 1), (1, 0)]
    assert least_important(_importance(), 0.25) == [(0, 1), (3, 0)]
    assert least_important(_importance(), 0.0) == []
    with pytest.raises(ValueError, match="share must lie in"):
        least_important(_importance(), 1.5)


def test_importance_masks_stay_in_their_half_at_shares_of_all_heads():
    imp = _importance()
    every = importance_specs(imp, 4, 2, [0.25, 0.5])
    assert [s.dropped for s in every] == [((0, 1), (3, 0)), ((0, 1), (1, 1), (2, 0), (3, 0))]
    lower = importance_specs(imp, 4, 2, [0.25], "lower")
    upper = importance_specs(imp, 4, 2, [0.25], "upper")
    assert lower[0].dropped == ((0, 1), (1, 1)) and upper[0].dropped == ((2, 0), (3, 0))
    assert lower[0].kind == "importance-lower" and lower[0].meta == {"share": 0.25, "draw": 0, "where": "lower"}
    with pytest.raises(ValueError, match=r"share 0.75 means 6 heads, but 'lower' allows 4 of 8"):
        importance_specs(imp, 4, 2, [0.75], "lower")


# --- the curve's safe share and the distillation claim, on sweeps whose answers are known ------------------------

import numpy as np  # noqa: E402

from headlab.core.stats import quadratic_kappa  # noqa: E402
from headlab.core.sweep import MaskSpec, baseline_spec, plan_table  # noqa: E402
from headlab.pages.pruning import distillation_claim, safe_share, speed_rows  # noqa: E402

N = 400


def _sweep(accuracies: dict, grades=None):
    """A sweep's per-example table and plan: ``accuracies`` maps (kind, share, draw) to the share of pairs right (the
    first ones); the baseline gets every pair right."""
    grades = np.zeros(N, dtype=int) if grades is None else grades
    specs, frames = [baseline_spec()], [_rows(baseline_spec().mask_id, np.ones(N), grades)]
    for i, ((kind, share, draw), accuracy) in enumerate(accuracies.items()):
        spec = MaskSpec(
            f"{kind}-s{share:.3f}-d{draw}",
            tuple((i, h) for h in range(max(1, round(share * 40)))),
            kind,
            {"share": share, "draw": draw},
        )
        specs.append(spec)
        frames.append(_rows(spec.mask_id, (np.arange(N) < accuracy * N).astype(int), grades))
    return pd.concat(frames, ignore_index=True), plan_table(specs)


def _rows(mask_id, correct, grades):
    return pd.DataFrame(
        {
            "mask_id": mask_id,
            "example": np.arange(N),
            "correct": correct.astype(int),
            "grade": grades + 1,
            "predicted": np.where(correct > 0, grades + 1, np.where(grades < 4, grades + 2, 4)),  # wrong: a neighbour
        }
    )


def test_the_safe_share_is_chosen_on_dev_on_the_kappa_scale_and_only_measured_on_test():
    grades = np.arange(N) % 5
    dev = _sweep(
        {("importance-all", 0.25, 0): 0.995, ("importance-all", 0.5, 0): 0.99, ("importance-all", 0.75, 0): 0.8}, grades
    )
    test = _sweep(
        {("importance-all", 0.25, 0): 0.99, ("importance-all", 0.5, 0): 0.85, ("importance-all", 0.75, 0): 0.99}, grades
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # page 10 printed numpy's warnings above this result
        safe = safe_share(dev, test, "importance-all", 0.02, n_boot=200)
    test_grades = test[0].pivot(index="mask_id", columns="example", values="predicted")
    lost = 1 - quadratic_kappa(test_grades.loc["importance-all-s0.500-d0"], grades + 1)  # the unmasked kappa is 1
    assert safe["share"] == 0.5 and safe["n_heads"] == 20 and safe["dev_kappa_lost"] <= 0.02  # dev chose it
    assert safe["kappa_lost"] == pytest.approx(lost) and safe["kappa_lost_lo"] < lost < safe["kappa_lost_hi"]
    assert safe["rel_change"] == pytest.approx(-0.15) and not safe["within"]  # test disagrees: said, not re-chosen
    assert safe["n_dev"] == N and safe["n_examples"] == N
    broken = _sweep({("importance-all", 0.25, 0): 0.9, ("importance-all", 0.5, 0): 0.999}, grades)
    nothing = safe_share(broken, test, "importance-all", 0.02, n_boot=200)
    assert (nothing["share"], nothing["n_heads"], nothing["kappa_lost"], nothing["within"]) == (0.0, 0, 0.0, True)


def test_pruning_without_retraining_is_the_sub_row_its_sign_the_cheaper_half():
    shares = (0.1, 0.2)
    grades = np.arange(N) % 5  # majority grade 20%: the floor is far below
    cheap_high = {
        **{("importance-lower", s, 0): 0.6 for s in shares},
        **{("importance-upper", s, 0): 0.97 for s in shares},
    }
    per_example, plan = _sweep(cheap_high, grades)
    claim = distillation_claim(per_example, plan, shares, n_boot=300)
    grades_of = per_example.pivot(index="mask_id", columns="example", values="predicted")
    lost = {m: 1 - quadratic_kappa(grades_of.loc[m], grades + 1) for m in grades_of.index}  # the unmasked kappa is 1
    low, high = (np.mean([lost[f"importance-{h}-s{s:.3f}-d0"] for s in shares]) for h in ("lower", "upper"))
    assert claim.ours == pytest.approx(low - high) and claim.lo > 0.05 and claim.lo < claim.ours < claim.hi
    assert claim.claim_id == "pruning.keep_low_heads/pruning" and not claim.at_floor
    assert claim.verdict == "not judged" and claim.claim.startswith("At a budget of zero")  # the students' sub-row
    assert claim.unit.startswith("share of the unmasked quadratic κ lost, low-half pruning minus high-half")
    assert claim.quote == "For distillation: keep more low-level heads."
    cheap_low = {
        **{("importance-lower", s, 0): 0.97 for s in shares},
        **{("importance-upper", s, 0): 0.6 for s in shares},
    }
    per_example, plan = _sweep(cheap_low, grades)
    assert distillation_claim(per_example, plan, shares, n_boot=300).hi < -0.05


def test_two_halves_both_at_the_floor_are_marked_saturated_and_missing_shares_are_named():
    shares = (0.1, 0.2)
    grades = np.where(np.arange(N) < 0.5 * N, 0, np.arange(N) % 4 + 1)  # majority grade: half the pairs
    # the high half's pruning costs more, but both sit at or below always answering the majority grade
    floor_level = {
        **{("importance-lower", s, 0): 0.5 for s in shares},
        **{("importance-upper", s, 0): 0.3 for s in shares},
    }
    per_example, plan = _sweep(floor_level, grades)
    per_example.loc[per_example["mask_id"] != "none", "predicted"] = 1  # every pruned model answers one grade
    claim = distillation_claim(per_example, plan, shares, n_boot=300)
    assert claim.at_floor and claim.verdict == "not judged"
    assert "high half at 20%: κ interval reaches 0; 100% of pairs get one grade" in claim.floor_reason
    with pytest.raises(ValueError, match=r"needs both halves' masks at shares \[0.1, 0.2, 0.3\]"):
        distillation_claim(per_example, plan, (0.1, 0.2, 0.3), n_boot=300)


def test_speed_rows_give_each_pruned_run_its_speedup_over_the_unpruned_one(tmp_path):
    assert speed_rows("minilm", "stsb-en", tmp_path / "none.csv").empty
    row = dict(
        model="minilm",
        data="stsb-en",
        share_removed=0.5,
        repeats=5,
        machine="m",
        device="cpu",
        precision="bf16",
        pairs_per_s_min=1.0,
        pairs_per_s_max=1.0,
        parameters=1,
        file_mb=1.0,
    )
    rows = [
        dict(row, variant="unpruned", heads_removed=0, batch_size=64, pairs_per_s=100.0),
        dict(row, variant="pruned", heads_removed=36, batch_size=64, pairs_per_s=130.0),
        dict(row, variant="unpruned", heads_removed=0, batch_size=1, pairs_per_s=10.0),
        dict(row, variant="pruned", heads_removed=36, batch_size=1, pairs_per_s=11.0),
        dict(row, model="e5-small", variant="pruned", heads_removed=36, batch_size=1, pairs_per_s=99.0),
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "speed.csv", index=False)
    table = speed_rows("minilm", "stsb-en", tmp_path / "speed.csv")
    assert len(table) == 4
    assert table.set_index(["variant", "batch_size"])["speedup"].to_dict() == pytest.approx(
        {("unpruned", 64): 1.0, ("pruned", 64): 1.3, ("unpruned", 1): 1.0, ("pruned", 1): 1.1}
    )


def test_a_lab_on_another_split_shares_the_model_and_keeps_its_tables_apart(tmp_path):
    from tiny_setup import PAIRS, tiny_setup

    from headlab.lab.lab import Lab
    from headlab.lab.params import Params

    lab = tiny_setup(tmp_path / "runs")
    data = tmp_path / "pairs.csv"
    pd.concat([PAIRS.assign(split="test"), PAIRS.iloc[:3].assign(split="dev")]).to_csv(data, index=False)
    params = Params(data=str(data), device="cpu", run_dir=str(tmp_path / "runs"), batch_size=4)
    test = Lab(params, lab.model, lab.tokenizer, params.eval_frame(), lab.encoded)
    dev = test.on_split("dev")
    assert dev.model is test.model and len(dev.encoded) == 3 and len(test.encoded) == 5
    assert dev.params.eval_split == "dev" and dev.params.results_folder != test.params.results_folder
    assert test.on_split("dev", limit=2).encoded.grades.shape == (2,)


def test_the_pruned_models_summary_compares_it_with_the_sweeps_mask(tmp_path):
    from tiny_setup import tiny_setup

    import headlab
    from headlab.pages.pruning import pruned_summary

    lab = tiny_setup(tmp_path / "runs", n_right=3)
    drop = [(0, 0), (1, 1), (1, 2)]
    specs = [baseline_spec(), MaskSpec("three", tuple(drop), "importance-all", {"share": 0.2, "draw": 0})]
    per_example = lab.sweep(specs, "pruning", progress=False)
    lab.prune(drop, tmp_path / "pruned")
    data = tmp_path / "pairs.csv"
    lab.frame[["query", "title", "label"]].assign(split="test").to_csv(data, index=False)
    reloaded = headlab.load(model=str(tmp_path / "pruned"), data=str(data), device="cpu", run_dir=str(tmp_path / "r"))
    row = pruned_summary(lab, reloaded, drop, tmp_path / "pruned", per_example, plan_table(specs)).iloc[0]
    assert row["heads_removed"] == 3 and row["heads_kept"] == 13 and row["parameters"] < row["parameters_unpruned"]
    assert row["grades_as_masking"] == 1.0 and row["accuracy"] == row["accuracy_masked"] and row["n_examples"] == 5
    assert 0 < row["file_mb"] < row["file_mb_unpruned"]
    with pytest.raises(ValueError, match="no mask of the sweep removes exactly the 1 heads"):
        pruned_summary(lab, reloaded, [(2, 2)], tmp_path / "pruned", per_example, plan_table(specs))


def test_a_model_that_cannot_be_pruned_gets_a_note_not_a_failure(tmp_path):
    from tiny_setup import tiny_setup

    from headlab.pages.pruning import pruned_model

    lab = tiny_setup(tmp_path / "runs")
    lab.model.config.model_type = "mpnet"  # pruning rebuilds BERT layers only
    table = pruned_model(lab, [(0, 0)], pd.DataFrame(), pd.DataFrame())
    assert list(table.columns) == ["note"] and "MPNet's are not" in table["note"].iloc[0]


def test_serving_rows_are_summarised_per_machine_and_the_goal_is_reached_only_with_both_intervals(tmp_path):
    from headlab.pages.pruning import serve_summary, serve_text

    assert serve_summary("minilm", "stsb-en", tmp_path / "none.csv").empty
    assert "No serving speed measured" in serve_text(pd.DataFrame())
    row = dict(model="minilm", data="stsb-en", budget=0.7, flop_ceiling=1.4, machine="m", test_pairs=100)
    row.update(speedup_1=1.2, p50_ms=9.0, p95_ms=11.0, base_p50_ms=12.0, base_p95_ms=14.0)
    fast_but_costly = dict(row, variant="both", change=-0.05, change_lo=-0.08, change_hi=-0.02)
    cheap = dict(row, variant="int8", change=-0.002, change_lo=-0.009, change_hi=0.005)
    rows = [
        dict(fast_but_costly, speedup_64=1.9, speedup_64_lo=1.8, speedup_64_hi=2.0),
        dict(cheap, speedup_64=1.6, speedup_64_lo=1.55, speedup_64_hi=1.7),
        dict(fast_but_costly, speedup_64=1.8, speedup_64_lo=1.7, speedup_64_hi=1.9),
        dict(cheap, speedup_64=1.52, speedup_64_lo=1.45, speedup_64_hi=1.6),  # one invocation's interval below 1.5
        dict(cheap, model="e5-small", speedup_64=3.0, speedup_64_lo=3.0, speedup_64_hi=3.0),
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "serve.csv", index=False)
    summary = serve_summary("minilm", "stsb-en", tmp_path / "serve.csv").set_index("variant")
    assert summary["invocations"].to_dict() == {"both": 2, "int8": 2}
    assert summary.at["both", "speedup_64_min"] == 1.8 and summary.at["both", "speedup_64_hi"] == 2.0
    assert not summary["reached"].any()  # both: 5 points lost; int8: an interval reaches below 1.5
    assert "**not reached**" in serve_text(summary.reset_index())
    pd.DataFrame(rows[:2]).to_csv(tmp_path / "serve.csv", index=False)
    summary = serve_summary("minilm", "stsb-en", tmp_path / "serve.csv")
    assert list(summary[summary["reached"]]["variant"]) == ["int8"] and "reached by int8" in serve_text(summary)


def test_the_page_sweep_holds_page_01s_random_masks_every_curve_and_each_student():
    """Page 10's one sweep: its random masks are page 01's (same shares, draws and seed: read, not run again), then
    the least important heads anywhere and within each half, then the students' heads; each mask id once."""
    from headlab.core.sweep import random_share_specs
    from headlab.pages.pruning import CURVE_KINDS, STUDENT_KIND, pruning_specs

    importance = pd.DataFrame(
        [(layer, head, float(2 * layer + head)) for layer in range(4) for head in range(2)],
        columns=["layer", "head", "importance"],
    )
    drops = {"low heads kept": [(2, 0), (3, 0)], "high heads kept": [(0, 0), (1, 0)]}
    specs = pruning_specs(importance, 4, 2, [0.0, 0.25, 0.5], [0.25], 3, 7, drops)
    assert specs[0] == baseline_spec() and len({s.mask_id for s in specs}) == len(specs)
    random = [s for s in specs if s.kind == "random"]
    assert random == [s for s in random_share_specs(4, 2, [0.0, 0.25, 0.5], 3, 7) if s.kind == "random"]
    assert {s.kind for s in specs} >= {*CURVE_KINDS, STUDENT_KIND}
    lowest = next(s for s in specs if s.kind == CURVE_KINDS[1] and s.meta["share"] == 0.25)
    assert set(lowest.dropped) == {(0, 0), (0, 1)}  # the two least important heads
    assert [s.meta["student"] for s in specs if s.kind == STUDENT_KIND] == list(drops)


def test_the_page_curves_stack_every_kind_and_keep_the_random_draws_for_the_dots():
    from headlab.pages.pruning import CURVE_KINDS, pruning_curves

    accuracies = {("random", 0.2, d): a for d, a in enumerate((0.9, 0.8))}
    accuracies |= {(kind, 0.2, 0): 0.95 for kind in CURVE_KINDS[1:]}
    per_example, plan = _sweep(accuracies)
    curves, draws = pruning_curves(per_example, plan, n_boot=50, seed=0)
    assert set(curves["kind"]) == set(CURVE_KINDS) and set(draws["kind"]) == {"random"} and len(draws) == 2
    random = curves[(curves["kind"] == "random") & (curves["share"] == 0.2)]
    assert random["rel_change"].iloc[0] == pytest.approx(-0.15)  # the mean of the two draws' -10% and -20%
