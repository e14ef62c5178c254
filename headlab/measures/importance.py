"""Heads ordered by gradient importance (Michel et al. 2019) and the masks that remove the least important share,
anywhere or within one half: the order page 10 prunes by and its students are cut by."""

from __future__ import annotations

import pandas as pd

from headlab.core.sweep import MaskSpec
from headlab.measures.halves import Half, half_pool

ALL_LAYERS = "all"  # importance_specs' pool when no half is named: every layer's heads


def importance_order(importance: pd.DataFrame, column: str = "importance") -> list[tuple[int, int]]:
    """Every head, least important first (``column`` of :func:`headlab.core.gradients.gradient_importance`: by
    default normalized per layer, as Michel et al. prune; ties by layer, then head)."""
    order = importance.sort_values([column, "layer", "head"], kind="stable")
    return [(int(l), int(h)) for l, h in zip(order["layer"], order["head"])]


def least_important(importance: pd.DataFrame, share: float, column: str = "importance") -> list[tuple[int, int]]:
    """The ``share`` of all heads (rounded) that :func:`importance_order` puts first."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must lie in [0, 1], got {share}")
    order = importance_order(importance, column)
    return order[: int(round(share * len(order)))]


def importance_specs(
    importance: pd.DataFrame,
    layers: int,
    heads: int,
    shares,
    where: Half | str = ALL_LAYERS,
    column: str = "importance",
) -> list[MaskSpec]:
    """One mask per share of *all* heads, removing the least important heads among those ``where`` allows
    (``"all"`` layers, or the ``"lower"`` or ``"upper"`` half: the study's distillation advice compares them at the
    same share). Kind ``importance-<where>``; a share larger than the allowed pool is refused."""
    allowed = None if where == ALL_LAYERS else set(half_pool(layers, heads, Half(where)))
    order = [h for h in importance_order(importance, column) if allowed is None or h in allowed]
    specs = []
    for share in shares:
        n = int(round(share * layers * heads))
        if not 0.0 <= share <= 1.0 or n > len(order):
            raise ValueError(f"share {share} means {n} heads, but {where!r} allows {len(order)} of {layers * heads}")
        specs.append(
            MaskSpec(
                f"importance-{where}-s{share:.3f}",
                tuple(sorted(order[:n])),
                f"importance-{where}",
                {"share": share, "draw": 0, "where": where},
            )
        )
    return specs
