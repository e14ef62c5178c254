"""headlab.core.timing: ABBA rounds put a drifting clock on both models alike, and the speed-up is a median over
rounds with a bootstrap interval; a fake clock makes every number exact."""

import numpy as np
import pandas as pd
import pytest

from headlab.core.timing import abba_rounds, latency_percentiles, ratio_interval


class Drifting:
    """A clock where the baseline costs 2 s, the candidate 1 s, and every call costs 0.1 s more than the one before:
    a drift that timing the baseline first every round would charge to it."""

    def __init__(self):
        self.now, self.calls = 0.0, 0

    def __call__(self):
        return self.now

    def run(self, cost):
        def call():
            self.now += cost + 0.1 * self.calls
            self.calls += 1

        return call


def test_abba_rounds_cancel_a_linear_drift_and_alternate_the_order():
    clock = Drifting()
    rounds = abba_rounds(clock.run(2.0), clock.run(1.0), rounds=4, clock=clock)
    assert list(rounds["round"]) == [0, 1, 2, 3]
    # within a round the drift adds the same mean to both (calls k, k+1, k+2, k+3: a gets k and k+3, b k+1 and k+2)
    np.testing.assert_allclose(rounds["baseline_s"] - rounds["candidate_s"], 1.0)
    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        abba_rounds(clock.run(1.0), clock.run(1.0), rounds=0, clock=clock)


def test_the_ratio_is_a_median_over_rounds_with_an_interval_that_covers_the_rounds_spread():
    rounds = pd.DataFrame({"baseline_s": [2.0, 2.2, 1.8, 2.0, 2.1], "candidate_s": [1.0, 1.0, 1.0, 1.25, 1.0]})
    result = ratio_interval(rounds, n_boot=500)
    assert result["ratio"] == 2.0 and result["n_rounds"] == 5
    assert result["min"] == 1.6 and result["max"] == 2.2
    assert 1.6 <= result["lo"] <= result["ratio"] <= result["hi"] <= 2.2
    same = ratio_interval(pd.DataFrame({"baseline_s": [1.0] * 4, "candidate_s": [1.0] * 4}))
    assert same["lo"] == same["hi"] == 1.0
    with pytest.raises(ValueError, match="at least 2 rounds"):
        ratio_interval(rounds.head(1))


def test_latency_percentiles_in_milliseconds():
    assert latency_percentiles([0.001] * 19 + [0.1]) == pytest.approx({"p50": 1.0, "p95": 5.95})
