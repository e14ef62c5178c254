"""Sweeps: every effect is measured against the sweep's own unmasked row, in the same precision; a mask is run once."""
import numpy as np
import pandas as pd
import pytest
from conftest import random_encoded, tiny_bert

from headlab.core import sweep as sweep_module
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import predict
from headlab.core.sweep import (
    BASELINE,
    MaskSpec,
    PrecisionError,
    SweepError,
    plan_table,
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
    specs = [MaskSpec("a", ((0, 1), (2, 3)), "x"), MaskSpec("b", ((2, 3), (0, 1)), "x"), MaskSpec("c", (), "x"),
             MaskSpec("d", ((1, 1),), "x")]
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
