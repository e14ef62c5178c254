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
