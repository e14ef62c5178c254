"""benchmarks/: a speed-up compares two models timed alike, so neither gains from running second."""

import importlib.util
from pathlib import Path

from conftest import random_encoded


def _benchmark(name: str):
    """A script of benchmarks/ as a module (it is no package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prune_speed_times_the_two_models_in_turn_after_one_untimed_pass_of_each(monkeypatch):
    bench = _benchmark("prune_speed")
    calls = []
    monkeypatch.setattr(bench, "predict", lambda model, subset, **kw: calls.append((model, len(subset))))
    rates = bench.pairs_per_second(
        {"unpruned": "A", "pruned": "B"}, random_encoded(40), 1, "cpu", "fp32", repeats=3, limit=16
    )
    assert [model for model, _ in calls] == ["A", "B"] + ["A", "B"] * 3  # warm-up, then round by round
    assert {pairs for _, pairs in calls} == {16}
    assert {name: len(timed) for name, timed in rates.items()} == {"unpruned": 3, "pruned": 3}
    assert all(rate > 0 for timed in rates.values() for rate in timed)


def test_serve_speed_reads_a_paired_accuracy_change_and_chooses_the_smallest_budget_within_reach(tmp_path):
    import numpy as np
    from tiny_setup import tiny_setup

    from headlab.core.compress import fisher_importance

    bench = _benchmark("serve_speed")
    grades, base, other = np.array([1, 2, 3, 4]), np.array([1, 2, 3, 1]), np.array([1, 2, 1, 4])
    change = bench.accuracy_change(grades, base, other, n_boot=200)
    assert change["accuracy"] == 0.75 and change["change"] == 0.0 and change["change_lo"] < 0 < change["change_hi"]
    lab = tiny_setup(tmp_path, layers=2)
    fisher = fisher_importance(lab.model, lab.encoded, batch_size=2)
    (budget, heads, neurons, small), base_acc, tried = bench.choose_budget(
        lab.model, lab.encoded, fisher, [1.0, 0.3], within=1.0, tune_pairs=5, tokens=8.0, pad_id=0
    )
    assert budget == 0.3 and set(tried) == {0.3, 1.0}  # any accuracy is within 100 points: the smallest budget
    full = bench.encoder_flops(lab.model, np.ones_like(heads), np.ones_like(neurons), 8.0)
    assert bench.encoder_flops(lab.model, heads, neurons, 8.0) <= 0.3 * full
    (budget, *_), _, tried = bench.choose_budget(
        lab.model, lab.encoded, fisher, [0.3, 1.0], within=-1.0, tune_pairs=5, tokens=8.0, pad_id=0
    )
    assert budget == 1.0 and set(tried) == {0.3, 1.0}  # none within reach: the largest budget


def test_the_roofline_divides_the_engines_work_by_the_peak_of_the_products_it_computes(tmp_path, monkeypatch):
    import numpy as np
    import pandas as pd
    from conftest import tiny_bert

    from headlab.core.engine import MaskEngine

    bench = _benchmark("sweep_speed")
    assert bench.matmul_rate("cpu", shape=(8, 16, 32), seconds=0.01) > 0
    rates = {"fp32 peak": 4e9, "fp32 peak through oneDNN": 8e9, "bf16 peak": 16e9}
    monkeypatch.setattr(bench, "peaks", lambda device, shape: rates)
    timed = {"grid": (2, 2.0, 4e9)}  # 2 GFLOP/s
    for native, autocast, onednn, own in (
        ("fp32", False, True, 0.25),  # its products through oneDNN: oneDNN's peak
        ("fp32", False, False, 0.5),  # through MKL (an AVX2 processor): torch's own peak
        ("bf16", True, None, 0.125),
    ):
        monkeypatch.setattr(bench, "precision", lambda device, chosen=native: chosen)
        engine = MaskEngine(tiny_bert(), random_encoded(8), batch_size=4, autocast=autocast, onednn=onednn)
        out = tmp_path / f"{native}-{onednn}.csv"
        bench.record_roofline(engine, timed, "cpu", out)
        row = pd.read_csv(out).iloc[0]
        assert row["engine_gflops"] == 2 and row["share_of_own_peak"] == own
        assert np.isnan(row["share_of_bf16_peak"]) if native == "fp32" else row["share_of_bf16_peak"] == 0.125
