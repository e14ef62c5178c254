"""Which examples choose and which measure: a seeded half of the split chooses heads (roles, a focus head), the
other half measures them, so no example both picks a head and judges it."""

from __future__ import annotations

import numpy as np
import pandas as pd


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(select, estimate)``: the book's one seeded split of the ``n`` evaluation pairs into two halves (sorted).

    The head is chosen on ``select`` and everything quoted about it is measured on ``estimate``: the worst
    of many heads on some pairs looks worse there by chance too (winner's curse), so its size is measured on
    pairs the choice never saw. It is the split notebook 05 chooses its term-matching heads on
    (:func:`headlab.measures.held_out.measured_examples` is ``estimate``), so notebook 09 measures the path
    between the two pages' heads on pairs neither choice saw.
    """
    select = role_indices(n, choice_limit(n, None), seed)
    if select is None:
        raise ValueError(f"split_halves needs at least 2 evaluation pairs to split in two halves, got {n}")
    return select, np.setdiff1d(np.arange(n), select)


def role_indices(n_examples: int, limit: int | None, seed: int) -> np.ndarray | None:
    """The examples role scores are computed on: all (None), or a seeded random ``limit`` of them in order."""
    if limit is None or limit >= n_examples:
        return None
    return np.sort(np.random.default_rng(seed).choice(n_examples, int(limit), replace=False))


def choice_limit(n_examples: int, limit: int | None) -> int:
    """How many pairs the term-matching heads are chosen on: ``limit``, or a half of the pairs when None."""
    return max(1, n_examples // 2) if limit is None else int(limit)


def measured_examples(n_examples: int, limit: int | None, seed: int) -> np.ndarray:
    """The pairs notebook 05 measures its masks on: those the heads were not chosen on (:func:`choice_limit`, drawn
    by :func:`role_indices`); all pairs when the heads were chosen on all of them."""
    chosen = role_indices(n_examples, choice_limit(n_examples, limit), seed)
    return np.arange(n_examples) if chosen is None else np.setdiff1d(np.arange(n_examples), chosen)


def selection_note(n_examples: int, limit: int | None, seed: int, split: str = "test") -> str:
    """Which pairs chose the heads and which measure the masks, in one sentence."""
    measured = len(measured_examples(n_examples, limit, seed))
    if measured == n_examples:
        return (
            f"The heads were chosen on the same {n_examples} {split} pairs the masks are measured on (by "
            "attention alone: no grade or prediction was used to choose them)."
        )
    return (
        f"The heads were chosen by attention on {n_examples - measured} of the {n_examples} {split} pairs (no "
        f"grade or prediction used) and every mask is measured on the other {measured}."
    )


def on_examples(per_example: pd.DataFrame, examples) -> pd.DataFrame:
    """The rows of a sweep's per-example table for the pairs ``examples`` only."""
    return per_example[per_example["example"].isin(np.asarray(examples))]
