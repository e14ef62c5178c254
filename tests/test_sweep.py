"""Sweeps: every effect is measured against the sweep's own unmasked row, in the same precision; a mask is run once;
bad parameters are named; the same sweep gives the same bytes, sharded or not; an interrupted sweep resumes."""

import re
import signal

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import random_encoded, tiny_bert
from interrupt import freeze_after, run_killed

from headlab.core import sweep as sweep_module
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import Encoded, predict
from headlab.core.grades import STUDY_SCALE
from headlab.core.stats import at_floor, kappa_lost
from headlab.core.sweep import (
    BASELINE,
    MaskSpec,
    PrecisionError,
    SweepError,
    baseline_spec,
    draw_seed,
    load_sweep,
    per_example_table,
    plan_table,
    predicted_matrix,
    random_share_specs,
    run_sweep,
    share_curve,
    single_head_specs,
    summarize,
)


def test_under_bf16_autocast_the_unmasked_change_is_exactly_zero(tmp_path):
    """Baseline and masked runs share the engine's precision: no precision difference counts as an effect."""
    model, encoded = tiny_bert(), random_encoded()
    fp32 = predict(model, encoded, batch_size=8)
    specs = single_head_specs(3, 4)[:3]  # no "none" in the list: the sweep adds it
    per_example = run_sweep(model, encoded, specs, tmp_path, batch_size=8, progress=False, autocast=True)
    bf16 = per_example[per_example["mask_id"] == BASELINE].sort_values("example")[["p1", "p2", "p3", "p4", "p5"]]
    assert np.abs(bf16.to_numpy() - fp32).max() > 1e-4  # the sweep really ran in reduced precision
    summary = summarize(per_example, pd.read_csv(tmp_path / "plan.csv", keep_default_na=False), n_boot=100)
    none = summary.set_index("mask_id").loc[BASELINE]
    assert (none["rel_change"], none["lo"], none["hi"], none["p_mcnemar"]) == (0.0, 0.0, 0.0, 1.0)
    check = pd.read_csv(tmp_path / "precision.csv").iloc[0]
    agree = np.mean(bf16.to_numpy().argmax(1) == fp32.argmax(1))
    assert check["grade_agreement"] == pytest.approx(agree) and check["n_examples"] == len(encoded)


def test_a_precision_check_above_the_tolerance_stops_the_sweep(tmp_path):
    model, encoded = tiny_bert(), random_encoded()
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "precision.csv").write_text("grade_agreement,max_prob_diff,n_examples\n0.95,0.2,40\n")
    with pytest.raises(PrecisionError, match=r"precision.csv: bf16 autocast changes 5.00% of the 40 unmasked"):
        run_sweep(model, encoded, single_head_specs(3, 4)[:2], tmp_path, progress=False, autocast=True)
    assert not list((tmp_path / "masks").glob("*.csv"))  # nothing evaluated in a precision that was refused
    run_sweep(model, encoded, single_head_specs(3, 4)[:2], tmp_path / "fp32", progress=False, autocast=False)
    assert not (tmp_path / "fp32" / "precision.csv").exists()


def test_masks_removing_the_same_heads_are_evaluated_once(tmp_path, monkeypatch):
    model, encoded = tiny_bert(), random_encoded(n=12)
    evaluated = []
    real = MaskEngine.probabilities
    monkeypatch.setattr(MaskEngine, "probabilities", lambda self, masks: evaluated.extend(masks) or real(self, masks))
    specs = [
        MaskSpec("a", ((0, 1), (2, 3)), "x"),
        MaskSpec("b", ((2, 3), (0, 1)), "x"),
        MaskSpec("c", (), "x"),
        MaskSpec("d", ((1, 1),), "x"),
    ]
    per_example = run_sweep(model, encoded, specs, tmp_path, batch_size=4, progress=False)
    assert len(evaluated) == 3  # {a, b} once, {c, none} once, d once
    by_mask = per_example.pivot(index="mask_id", columns="example", values="p1")
    np.testing.assert_array_equal(by_mask.loc["a"], by_mask.loc["b"])
    np.testing.assert_array_equal(by_mask.loc["c"], by_mask.loc[BASELINE])


def test_a_share_with_one_possible_mask_gets_one_draw():
    specs = random_share_specs(3, 4, [0.0, 0.5, 1.0], draws=4, seed=0)
    shares = pd.Series([s.meta["share"] for s in specs]).value_counts()
    assert shares.to_dict() == {0.5: 4, 0.0: 1, 1.0: 1}


def test_share_curves_measure_against_the_sweep_baseline_and_need_it(tmp_path):
    model, encoded = tiny_bert(), random_encoded(n=20)
    specs = random_share_specs(3, 4, [0.25, 0.5], draws=3, seed=0)
    per_example = run_sweep(model, encoded, specs, tmp_path, batch_size=4, progress=False)
    plan = plan_table(specs)
    curve, _ = share_curve(per_example, plan, "random", n_boot=50)
    assert curve["interval"].tolist() == ["draws and pairs"] * 2
    with pytest.raises(SweepError, match="no unmasked row"):
        summarize(per_example[per_example["mask_id"] != BASELINE], plan)
    assert sweep_module.PRECISION_TOLERANCE == 0.01


def test_out_of_range_parameters_name_the_parameter():
    with pytest.raises(ValueError, match=r"shares must lie in \[0, 1\]"):
        random_share_specs(2, 4, [1.5], 2, 0)
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        random_share_specs(2, 4, [0.5], -1, 0)
    with pytest.raises(ValueError, match=r"head \(5, 0\) does not exist in a 2x4 model"):
        MaskSpec("x", ((5, 0),), "head").keep(2, 4)


def test_sweeps_twice_and_sharded_give_byte_identical_tables(tmp_path):
    model, encoded = tiny_bert(), random_encoded(longest=15)
    specs = single_head_specs(3, 4) + random_share_specs(3, 4, [0.25, 0.5], 2, seed=1)
    run_sweep(model, encoded, specs, tmp_path / "a", progress=False)
    run_sweep(model, encoded, specs, tmp_path / "b", progress=False)
    for shard in range(3):
        run_sweep(model, encoded, specs, tmp_path / "sharded", shard=shard, n_shards=3, progress=False)
    files = sorted(p.name for p in (tmp_path / "a" / "masks").glob("*.csv"))
    assert len(files) == len(specs) + 1  # the sweep adds the unmasked model
    for name in files:
        a = (tmp_path / "a" / "masks" / name).read_bytes()
        assert (
            a == (tmp_path / "b" / "masks" / name).read_bytes() == (tmp_path / "sharded" / "masks" / name).read_bytes()
        )
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "a"), load_sweep(tmp_path / "sharded"))


def test_a_sweep_folder_of_another_plan_is_refused(tmp_path):
    model, encoded = tiny_bert(), random_encoded(10, longest=15)
    run_sweep(model, encoded, single_head_specs(3, 4)[:2], tmp_path, progress=False)
    with pytest.raises(SweepError, match="different sweep"):
        run_sweep(model, encoded, single_head_specs(3, 4)[:3], tmp_path, progress=False)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_sweep_resumes_to_the_same_table(tmp_path, sig):
    killed, clean, marker = tmp_path / "killed", tmp_path / "clean", tmp_path / "frozen"
    masks = killed / "masks"
    rng = np.random.default_rng(0)
    ids = [[2] + rng.integers(5, 50, size=rng.integers(5, 20)).tolist() + [3] for _ in range(24)]
    enc = Encoded(ids, [[0] * len(x) for x in ids], rng.integers(1, 6, size=24), 0, STUDY_SCALE)

    def run(out):
        run_sweep(
            tiny_bert(), enc, random_share_specs(3, 4, [0.25, 0.5, 0.75], 4, seed=0), out, batch_size=8, progress=False
        )

    def frozen_run():  # frozen right after the third mask's file is in place
        freeze_after(sweep_module, "write_atomically", 3, marker, counts=lambda path, text: path.parent.name == "masks")
        run(killed)

    run_killed(frozen_run, marker, sig)
    done = {p.name: p.stat().st_ino for p in masks.glob("*.csv")}
    assert len(done) == 3
    run(killed)
    assert {name: (masks / name).stat().st_ino for name in done} == done  # resumed: the 3 done masks not redone
    run(clean)
    pd.testing.assert_frame_equal(load_sweep(killed), load_sweep(clean))
    assert not list(masks.glob(".*tmp"))  # no half-written file left behind


def test_one_precision_check_per_model_and_split_however_many_sweeps(tmp_path, monkeypatch):
    model, encoded = tiny_bert(), random_encoded(n=12)
    checks = []
    real = MaskEngine.precision_check
    monkeypatch.setattr(MaskEngine, "precision_check", lambda self: checks.append(self) or real(self))
    specs = single_head_specs(3, 4)[:2]
    run_sweep(model, encoded, specs, tmp_path / "one", batch_size=4, progress=False, autocast=True)
    run_sweep(model, encoded, specs[:1], tmp_path / "two", batch_size=4, progress=False, autocast=True)
    assert len(checks) == 1
    first = pd.read_csv(tmp_path / "one" / "precision.csv")
    pd.testing.assert_frame_equal(first, pd.read_csv(tmp_path / "two" / "precision.csv"))
    run_sweep(
        model,
        random_encoded(n=12, seed=5),
        specs,
        tmp_path / "other split",
        batch_size=4,
        progress=False,
        autocast=True,
    )
    assert len(checks) == 2  # other inputs: a check of their own
    with torch.no_grad():
        model.classifier.bias.add_(1.0)
    run_sweep(model, encoded, specs, tmp_path / "other weights", batch_size=4, progress=False, autocast=True)
    assert len(checks) == 3  # other weights too


def test_a_sweep_on_a_given_engine_reuses_it_and_gives_the_same_numbers(tmp_path):
    model, encoded = tiny_bert(), random_encoded(n=12)
    specs = single_head_specs(3, 4)[:3]
    fresh = run_sweep(model, encoded, specs, tmp_path / "fresh", batch_size=4, progress=False)
    engine = MaskEngine(model, encoded, batch_size=4)
    engine.probabilities([torch.ones(engine.shape)])
    recorded = engine._layer_outputs
    given = run_sweep(model, encoded, specs, tmp_path / "given", batch_size=4, progress=False, engine=engine)
    assert engine._layer_outputs is recorded
    pd.testing.assert_frame_equal(fresh, given)


def test_a_mask_another_sweep_of_the_model_evaluated_is_copied_not_evaluated_again(tmp_path, monkeypatch):
    model, encoded = tiny_bert(), random_encoded(n=12)
    heads = single_head_specs(3, 4)
    first = run_sweep(model, encoded, heads[:4], tmp_path / "first", batch_size=4, progress=False)
    evaluated = []
    real = MaskEngine.probabilities
    monkeypatch.setattr(MaskEngine, "probabilities", lambda self, masks: evaluated.extend(masks) or real(self, masks))
    # the same heads under other names, and two new masks
    specs = [MaskSpec("again-" + s.mask_id, s.dropped, "again") for s in heads[2:4]] + heads[4:6]
    second = run_sweep(model, encoded, specs, tmp_path / "second", batch_size=4, progress=False)
    assert len(evaluated) == 2  # heads[4:6] only: the unmasked row and heads[2:4] were copied
    fresh = run_sweep(model, encoded, specs, tmp_path / "elsewhere" / "fresh", batch_size=4, progress=False)
    pd.testing.assert_frame_equal(second, fresh)
    mine = second.set_index(["mask_id", "example"]).loc["again-" + heads[2].mask_id]
    theirs = first.set_index(["mask_id", "example"]).loc[heads[2].mask_id]
    pd.testing.assert_frame_equal(mine, theirs)
    # another engine (mean-ablation, or other weights) shares nothing
    evaluated.clear()
    means = torch.randn(3, model.config.hidden_size)
    run_sweep(model, encoded, heads[:2], tmp_path / "mean", batch_size=4, progress=False, means=means)
    assert len(evaluated) == 3
    with torch.no_grad():
        model.classifier.bias.add_(1.0)
    evaluated.clear()
    run_sweep(model, encoded, heads[:2], tmp_path / "other weights", batch_size=4, progress=False)
    assert len(evaluated) == 3


def test_a_finished_folder_without_its_key_gets_it_and_shares_its_masks(tmp_path, monkeypatch):
    model, encoded = tiny_bert(), random_encoded(n=12)
    heads = single_head_specs(3, 4)
    run_sweep(model, encoded, heads[:3], tmp_path / "old", batch_size=4, progress=False)
    (tmp_path / "old" / sweep_module.ENGINE_KEY).unlink()  # as a folder finished before the key was kept
    run_sweep(model, encoded, heads[:3], tmp_path / "old", batch_size=4, progress=False)  # nothing left to run
    assert (tmp_path / "old" / sweep_module.ENGINE_KEY).is_file()
    evaluated = []
    real = MaskEngine.probabilities
    monkeypatch.setattr(MaskEngine, "probabilities", lambda self, masks: evaluated.extend(masks) or real(self, masks))
    run_sweep(model, encoded, heads[1:3], tmp_path / "new", batch_size=4, progress=False)
    assert not evaluated


KAPPA_COLUMNS = (
    "kappa_base kappa_base_lo kappa_base_hi kappa_masked kappa_masked_lo kappa_masked_hi kappa_lost kappa_lost_lo "
    "kappa_lost_hi kappa_lost_se kappa_df kappa_reason modal_share at_floor floor_reason"
).split()


def documented(func, marker: str = "Columns:") -> list[str]:
    """The column names a docstring's ``marker`` line lists, its parenthesized remarks left out."""
    text = func.__doc__.split(marker, 1)[1].split("Columns", 1)[0]
    return [name.strip().rstrip(".").strip() for name in re.sub(r"\([^)]*\)", "", text).split(",")]


def graded_sweep(specs, n=300, seed=0):
    """A sweep's per-example table without a model: the unmasked row mostly right, each mask noisier, the last
    mask of ``specs`` a constant grade 3."""
    rng = np.random.default_rng(seed)
    grades = rng.integers(1, 6, n)
    base = np.clip(grades + rng.integers(-1, 2, n), 1, 5)
    tables = [per_example_table(BASELINE, np.eye(5)[base - 1], grades, STUDY_SCALE)]
    for i, spec in enumerate(specs):
        noisy = np.where(rng.random(n) < 0.1 + 0.05 * i, rng.integers(1, 6, n), base)
        predicted = np.full(n, 3) if spec is specs[-1] else noisy
        tables.append(per_example_table(spec.mask_id, np.eye(5)[predicted - 1], grades, STUDY_SCALE))
    return pd.concat(tables, ignore_index=True), grades, base


def test_summaries_put_every_mask_on_the_kappa_scale_with_the_accuracy_intervals_pairs():
    specs = single_head_specs(2, 2)
    per_example, grades, base = graded_sweep(specs)
    summary = summarize(per_example, plan_table([baseline_spec(), *specs]), n_boot=200, seed=4).set_index("mask_id")
    assert documented(summarize)[-len(KAPPA_COLUMNS) :] == KAPPA_COLUMNS
    assert list(summary.columns[-len(KAPPA_COLUMNS) :]) == KAPPA_COLUMNS
    predicted = predicted_matrix(per_example)
    for mask_id, row in summary.iterrows():
        expected = kappa_lost(predicted.loc[mask_id].to_numpy(), base, grades, n_boot=200, seed=4)
        assert {k: row[k] for k in expected} == pytest.approx(expected, nan_ok=True)
        assert (row["at_floor"], row["floor_reason"]) == at_floor(predicted.loc[mask_id], row["kappa_masked_lo"])
    none, constant = summary.loc[BASELINE], summary.loc[specs[-1].mask_id]
    assert (none["kappa_lost"], none["kappa_lost_lo"], none["kappa_lost_hi"], none["at_floor"]) == (0, 0, 0, False)
    assert constant["kappa_masked"] == 0 and constant["kappa_lost"] == 1 and constant["modal_share"] == 1
    assert constant["floor_reason"] == "κ interval reaches 0; 100% of pairs get one grade"


def test_share_curves_put_the_draws_on_the_kappa_scale_with_the_accuracy_intervals_seeds():
    specs = random_share_specs(3, 4, [0.25, 0.5], draws=3, seed=0)
    per_example, grades, base = graded_sweep(specs)
    curve, _ = share_curve(per_example, plan_table([baseline_spec(), *specs]), "random", n_boot=200, seed=2)
    assert documented(share_curve, "Columns of curve:") == list(curve.columns)
    assert set(KAPPA_COLUMNS) <= set(curve.columns)
    predicted = predicted_matrix(per_example)
    for row in curve.itertuples():
        masks = [s.mask_id for s in specs if s.meta["share"] == row.share]
        seeds = draw_seed(2, "random", row.share)
        expected = kappa_lost(predicted.loc[masks].to_numpy(), base, grades, n_boot=200, seed=2, draw_seed=seeds)
        assert {k: getattr(row, k) for k in expected} == pytest.approx(expected, nan_ok=True)
        assert row.kappa_lost_lo < row.kappa_lost < row.kappa_lost_hi


def test_a_sweep_resumed_on_another_engine_is_marked_mixed_and_shares_nothing(tmp_path, monkeypatch):
    """Its masks were evaluated by two engines (a resume on another product library, say), so no sweep copies them as
    one engine's; a folder whose engine did not change keeps its key and shares as before."""
    model, encoded = tiny_bert(), random_encoded(n=12)
    heads = single_head_specs(3, 4)
    run_sweep(model, encoded, heads[:4], tmp_path / "resumed", batch_size=4, progress=False)
    for spec in heads[2:4]:  # as if killed before these two
        sweep_module._mask_file(tmp_path / "resumed", spec.mask_id).unlink()
    (tmp_path / "resumed" / sweep_module.ENGINE_KEY).write_text("an engine of another key")
    run_sweep(model, encoded, heads[:4], tmp_path / "resumed", batch_size=4, progress=False)
    assert (tmp_path / "resumed" / sweep_module.ENGINE_KEY).read_text() == sweep_module.MIXED
    evaluated = []
    real = MaskEngine.probabilities
    monkeypatch.setattr(MaskEngine, "probabilities", lambda self, masks: evaluated.extend(masks) or real(self, masks))
    run_sweep(model, encoded, heads[2:4], tmp_path / "new", batch_size=4, progress=False)
    assert len(evaluated) == 3  # the unmasked row and both heads, evaluated again
    key = (tmp_path / "new" / sweep_module.ENGINE_KEY).read_text()
    sweep_module._mask_file(tmp_path / "new", heads[3].mask_id).unlink()
    run_sweep(model, encoded, heads[2:4], tmp_path / "new", batch_size=4, progress=False)
    assert (tmp_path / "new" / sweep_module.ENGINE_KEY).read_text() == key
