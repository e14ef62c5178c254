"""Honest speed-ups: the same work timed for two models in alternating order, round after round, and the ratio read
per round with an interval over rounds.

A speed-up measured once, or with the baseline always first, mixes the models with whatever drifts (clock boost, a
warming cache, another process): the same CPU figure moved from 0.83x to 1.05x across runs. :func:`abba_rounds`
times a candidate and its baseline in ABBA order within every round (A B B A, then B A A B), so a drift that is linear
within a round falls on both alike, and keeps one time per model per round (the mean of its two); :func:`ratio_interval`
takes each round's ratio (baseline time over candidate time: above 1 is faster) and a percentile bootstrap interval
over the rounds. Several invocations (separate processes) pool their rounds, each round tagged by its invocation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from headlab.core.stats import N_BOOT


def abba_rounds(
    baseline: Callable[[], object], candidate: Callable[[], object], rounds: int, clock=time.perf_counter
) -> pd.DataFrame:
    """``rounds`` rounds of the two calls in ABBA order (even rounds A B B A, odd ones B A A B; A the baseline), after
    one untimed call of each: per round the mean seconds of each (``baseline_s``, ``candidate_s``)."""
    if rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds}")
    baseline(), candidate()
    rows = []
    for r in range(rounds):
        order = ("a", "b", "b", "a") if r % 2 == 0 else ("b", "a", "a", "b")
        spent: dict[str, list[float]] = {"a": [], "b": []}
        for which in order:
            started = clock()
            (baseline if which == "a" else candidate)()
            spent[which].append(clock() - started)
        rows.append({"round": r, "baseline_s": float(np.mean(spent["a"])), "candidate_s": float(np.mean(spent["b"]))})
    return pd.DataFrame(rows)


def ratio_interval(rounds: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """The speed-up of the candidate over its baseline from :func:`abba_rounds` (rows pooled over invocations):
    ``ratio``, the median over rounds of baseline seconds / candidate seconds, with a 95% percentile bootstrap
    interval over rounds (``lo``, ``hi``), the rounds counted (``n_rounds``) and the spread of single rounds
    (``min``, ``max``)."""
    ratios = (rounds["baseline_s"] / rounds["candidate_s"]).to_numpy(dtype=float)
    if len(ratios) < 2:
        raise ValueError(f"an interval over rounds needs at least 2 rounds, got {len(ratios)}")
    rng = np.random.default_rng(seed)
    boot = np.median(ratios[rng.integers(0, len(ratios), (n_boot, len(ratios)))], axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {
        "ratio": float(np.median(ratios)),
        "lo": float(lo),
        "hi": float(hi),
        "n_rounds": len(ratios),
        "min": float(ratios.min()),
        "max": float(ratios.max()),
    }


def latency_percentiles(seconds, quantiles=(0.5, 0.95)) -> dict:
    """Per-call latency percentiles in milliseconds (``p50``, ``p95``) of single calls' ``seconds``."""
    values = np.asarray(seconds, dtype=float) * 1000
    return {f"p{round(q * 100)}": float(np.quantile(values, q)) for q in quantiles}
