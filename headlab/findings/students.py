"""The study's distillation advice as advice: students of the same size that keep the low heads, the high heads or the
most important heads, each distilled from the teacher for the same budget (:mod:`headlab.models.distill`).

- :func:`student_drops`: the heads each student lacks, at half of all heads: every head of the upper half (it keeps
  the low heads), every head of the lower half (it keeps the high ones), or the less important half by gradient
  importance on the dev pairs (:func:`headlab.findings.pruning.importance_order`); the same count for all three.
- :func:`choose_temperature`: the distillation temperature, chosen on the dev split (the best dev accuracy after the
  last epoch, ties to the lower temperature), never on the test pairs the students are compared on.
"""

from __future__ import annotations

import pandas as pd

from headlab.findings.importance import half_pool
from headlab.findings.pruning import importance_order

KINDS = ("low heads kept", "high heads kept", "important heads kept")


def student_drops(importance: pd.DataFrame, layers: int, heads: int) -> dict[str, list[tuple[int, int]]]:
    """Per student kind of :data:`KINDS`, the heads it lacks (half of all heads for each, sorted)."""
    upper, lower = half_pool(layers, heads, "upper"), half_pool(layers, heads, "lower")
    order = importance_order(importance)
    if len(order) != layers * heads:
        raise ValueError(f"the importance table has {len(order)} heads, the model {layers * heads}")
    return {
        KINDS[0]: sorted(upper),
        KINDS[1]: sorted(lower),
        KINDS[2]: sorted(order[: len(upper)]),
    }


def choose_temperature(dev_accuracy: dict[float, float]) -> float:
    """The temperature whose student graded the dev pairs best (``{temperature: dev accuracy}``); a tie goes to the
    lower temperature, the smaller change from plain training."""
    if not dev_accuracy:
        raise ValueError("no temperature was tried")
    return min(dev_accuracy, key=lambda t: (-dev_accuracy[t], t))
