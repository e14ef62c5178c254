"""Head grids: a table per head of its masking effect (one head masked at a time, each Holm-corrected against
the others), layer effects, and how well a cheap ranking (gradient importance) agrees with the costly one."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.masking import head_grid
from headlab.core.stats import holm
from headlab.core.sweep import (
    KAPPA_SHOWN,
    baseline_correct,
    baseline_grades,
    baseline_spec,
    correct_matrix,
    masks_of_kind,
    predicted_matrix,
    single_head_specs,
)
from headlab.lab.lab import Lab
from headlab.measures.halves import half_split


def head_grid_table(summary: pd.DataFrame, layers: int, heads: int, alpha: float = 0.05) -> pd.DataFrame:
    """The single-head ablation grid: one row per head, Holm-corrected over all heads tested.

    ``direction`` says what *masking* the head does when the effect survives the correction: "hurts"
    (accuracy falls), "helps" (accuracy rises), else "none". Heads of the ``layers x heads`` grid missing
    from the summary stay in the grid with empty numbers and direction "untested", so a partial sweep never
    looks like a sweep of heads that changed nothing.

    Columns: layer, head, accuracy, rel_change, lo, hi, lo90, hi90, p_mcnemar, the summary's kappa columns
    (:data:`headlab.core.sweep.KAPPA_SHOWN`, where it has them), p_holm, significant (p_holm below ``alpha``),
    direction.
    """
    rows = masks_of_kind(summary, "head", ["layer", "head"])
    outside = rows[(rows["layer"] >= layers) | (rows["head"] >= heads) | (rows["layer"] < 0) | (rows["head"] < 0)]
    if not outside.empty:
        raise ValueError(f"head masks outside a {layers}x{heads} grid: {list(outside['mask_id'])}")
    if rows.duplicated(["layer", "head"]).any():
        raise ValueError("the summary holds more than one single-head mask for the same head")
    kappa = [c for c in KAPPA_SHOWN if c in rows]  # the kappa scale, where the summary has it
    rows = rows[["layer", "head", "accuracy", "rel_change", "lo", "hi", "lo90", "hi90", "p_mcnemar", *kappa]]
    rows["p_holm"] = holm(rows["p_mcnemar"].to_numpy())
    grid = pd.DataFrame([(l, h) for l in range(layers) for h in range(heads)], columns=["layer", "head"])
    grid = grid.merge(rows, on=["layer", "head"], how="left")
    tested = grid["p_holm"].notna()
    grid["significant"] = tested & (grid["p_holm"] < alpha)
    grid["direction"] = np.where(
        ~tested, "untested", np.where(~grid["significant"], "none", np.where(grid["rel_change"] < 0, "hurts", "helps"))
    )
    return grid


def rank_agreement(grid: pd.DataFrame, importance: pd.DataFrame, column: str = "importance") -> dict:
    """Do ablation and gradient importance rank the heads alike?

    The ablation effect is the accuracy lost when a head is masked (``-rel_change``). Reported: Spearman's
    rho with its p-value over the heads both tables have, and the overlap of the two top-k sets (k = 10% of
    heads, at least 1) next to the overlap two random top-k sets would have on average (k^2 / n).
    Ties are broken by grid order (layer, then head).
    """
    both = grid[["layer", "head", "rel_change"]].merge(importance[["layer", "head", column]], on=["layer", "head"])
    both = both.dropna().sort_values(["layer", "head"]).reset_index(drop=True)
    n = len(both)
    if n < 3:
        raise ValueError(f"rank agreement needs at least 3 heads present in both tables, got {n}")
    effect = -both["rel_change"].to_numpy()
    score = both[column].to_numpy()
    rho, p_value = sps.spearmanr(effect, score)
    k = max(1, int(round(0.1 * n)))
    heads = list(zip(both["layer"].astype(int), both["head"].astype(int)))
    top_ablation = [heads[i] for i in np.argsort(-effect, kind="stable")[:k]]
    top_gradient = [heads[i] for i in np.argsort(-score, kind="stable")[:k]]
    overlap = len(set(top_ablation) & set(top_gradient))
    return {
        "spearman_rho": float(rho),
        "p_value": float(p_value),
        "n_heads": n,
        "k": k,
        "top_overlap": overlap,
        "top_overlap_expected": k * k / n,
        "top_ablation": top_ablation,
        "top_gradient": top_gradient,
    }


def layer_effects(summary: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Masking one whole layer at a time; ``distinguishable`` when the change survives Holm over all layers.

    Every layer is a test, so with 12 layers one would pass at 5% by chance about half the time; the
    McNemar p-values are Holm-corrected across layers (``p_holm``) before a layer's gain or loss is called.

    Columns: layer, accuracy, rel_change, lo, hi, p_mcnemar, the summary's kappa columns
    (:data:`headlab.core.sweep.KAPPA_SHOWN`, where it has them), p_holm, distinguishable (p_holm below ``alpha``).
    """
    rows = masks_of_kind(summary, "layer", ["layer"]).sort_values("layer")
    kappa = [c for c in KAPPA_SHOWN if c in rows]  # the kappa scale, where the summary has it
    table = rows[["layer", "accuracy", "rel_change", "lo", "hi", "p_mcnemar", *kappa]].reset_index(drop=True)
    table["p_holm"] = holm(table["p_mcnemar"].to_numpy())
    table["distinguishable"] = table["p_holm"] < alpha
    return table


class SingleHeads(NamedTuple):
    """Each head masked alone, per evaluation pair: ``correct`` (1/0) and ``predicted`` (grade) with one row per head
    (index layer, head) and one column per pair, the unmasked row of each (``base_correct``, ``base_predicted``), the
    gold grades, and where they came from (``source``)."""

    correct: pd.DataFrame
    base_correct: np.ndarray
    source: str
    predicted: pd.DataFrame
    base_predicted: np.ndarray
    gold: np.ndarray

    @property
    def grades(self) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """``(predicted, base_predicted, gold)``: what the kappa scale reads (``grades=``, :func:`held_out_effect`)."""
        return self.predicted, self.base_predicted, self.gold


def single_head_correct(lab: Lab, progress: bool = True) -> SingleHeads:
    """Per-example results of each head masked alone, and unmasked (:class:`SingleHeads`).

    The baseline comes from the same sweep, so both sides ran at the same precision. Read from notebook 02's sweep
    when a finished one in the lab's results (the shared sweep ``layer_dependence``) holds the unmasked and every
    single-head mask (its plan holds other masks too, so it is found by name rather than resumed); else the same masks
    run here with the same sweep code (resumable, folder ``single_head``), one pass over the evaluation set per mask.
    """
    layers, heads = head_grid(lab.model)
    specs = [baseline_spec(), *single_head_specs(layers, heads)]
    for folder, per_example in lab.finished_sweeps("layer_dependence", {s.mask_id for s in specs}):
        return single_heads(per_example, specs, f"notebook 02's sweep ({folder.name})")
    per_example = lab.sweep(specs, "single_head", progress=progress)
    return single_heads(per_example, specs, f"computed ({len(specs) - 1} single-head masks and the unmasked model)")


def single_heads(per_example: pd.DataFrame, specs, source: str) -> SingleHeads:
    """The single-head rows of a sweep as (layer, head) x example tables, and the unmasked row."""
    heads = [s for s in specs if s.kind == "head"]
    index = pd.MultiIndex.from_tuples([s.dropped[0] for s in heads], names=["layer", "head"])
    correct = correct_matrix(per_example).loc[[s.mask_id for s in heads]].set_axis(index)
    predicted = predicted_matrix(per_example).loc[[s.mask_id for s in heads]].set_axis(index)
    return SingleHeads(correct, baseline_correct(per_example), source, predicted, *baseline_grades(per_example))


def selection_grid(correct: pd.DataFrame, base_correct: np.ndarray, select) -> pd.DataFrame:
    """Per head, accuracy and relative change when masked alone, on the pairs ``select`` only (what the choice sees)."""
    base = np.asarray(base_correct, dtype=np.float64)[select]
    accuracy = correct.iloc[:, select].to_numpy(dtype=np.float64).mean(axis=1)
    return pd.DataFrame(
        {
            "layer": correct.index.get_level_values("layer"),
            "head": correct.index.get_level_values("head"),
            "accuracy": accuracy,
            "rel_change": accuracy / base.mean() - 1.0,
            "n_examples": len(base),
        }
    )


def focus_head(grid: pd.DataFrame, layers: int) -> pd.Series:
    """The grid row of the upper-half head whose masking costs most accuracy (lowest ``rel_change``)."""
    upper = grid[grid["layer"].isin(half_split(layers)[1]) & grid["rel_change"].notna()]
    if upper.empty:
        raise ValueError("no upper-half head has a single-head result in the grid")
    return upper.loc[upper["rel_change"].idxmin()]
