"""Which heads and layers matter: single-head and whole-layer ablations, gradient importance, low-vs-high halves.

Ablation (mask a head, measure accuracy) is the study's tool. Gradient importance (Michel, Levy & Neubig,
2019, "Are Sixteen Heads Really Better than One?") asks the same question to first order, in one backward
pass over the data; where the two rankings agree, the cheap proxy can stand in for the costly sweep.
Effects are relative accuracy changes with paired bootstrap intervals (see :mod:`headlab.core.stats`), and the
many single-head tests are Holm-corrected, since with 144 heads some would look significant by chance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from headlab.core.enums import Words
from headlab.core.stats import (
    N_BOOT,
    boot_means,
    bootstrap_weights,
    kappa_contrast,
    relative_change,
    t_interval,
    two_stage,
)
from headlab.core.sweep import (
    MaskSpec,
    baseline_correct,
    baseline_grades,
    correct_matrix,
    draw_seed,
    kappa_columns,
    masks_of_kind,
    predicted_matrix,
    random_share_specs,
)


class Half(Words):
    """The lower or the upper half of the layers (the study splits 12 at 6): a pool of heads and a kind of mask."""

    LOWER = "lower"
    UPPER = "upper"


HALVES = tuple(Half)


def half_split(layers: int) -> tuple[list[int], list[int]]:
    """Lower and upper half of the layers (0..L/2-1 and L/2..L-1), as the study splits 12 layers at 6."""
    if layers < 2 or layers % 2:
        raise ValueError(f"the layers split into two equal halves only for an even count, got {layers}")
    return list(range(layers // 2)), list(range(layers // 2, layers))


def half_pool(layers: int, heads: int, which: Half) -> list[tuple[int, int]]:
    """Every (layer, head) of the lower or upper half: the pool random masks of that half draw from."""
    if which not in HALVES:
        raise ValueError(f"which must be one of {HALVES}, got {which!r}")
    half = half_split(layers)[HALVES.index(Half(which))]
    return [(l, h) for l in half for h in range(heads)]


def half_shares(layers: int, heads: int, steps: int) -> list[float]:
    """Shares of *all* heads from 0 to 0.5 (a whole half) in ``steps`` equal steps, on whole heads.

    Each share is rounded to a whole number of heads and given back as that count over all heads, so the
    axis shows what was masked (for 6x12: 0.1 of 72 heads is 7.2, so the point is 7/72 = 0.097).
    """
    half = len(half_pool(layers, heads, Half.LOWER))
    if not 1 <= steps <= half:
        raise ValueError(f"steps must lie in [1, {half}] (one head per step at most), got {steps}")
    counts = np.round(np.linspace(0, half, steps + 1)).astype(int)
    return [float(c) / (layers * heads) for c in counts]


STUDY_COLLAPSE_SHARES = {0.4: "80%", 0.5: "100%"}  # share of all heads -> share of the low heads


def collapse_shares(shares) -> list[float]:
    """The shares of ``shares`` where the study made its collapse claims: the one nearest 40% and the one nearest 50%
    of all heads (80% and 100% of the low heads), each only if it lies within 5 points of its target, once each."""
    found = []
    for target in STUDY_COLLAPSE_SHARES:
        near = [s for s in shares if s > 0 and abs(s - target) <= 0.05]
        if near:
            found.append(min(near, key=lambda s: abs(s - target)))
    return list(dict.fromkeys(found))


def half_specs(layers: int, heads: int, steps: int, draws: int, seed: int, deciding_draws: int = 0) -> list[MaskSpec]:
    """Random masks drawn only from the lower half (kind "lower") or only from the upper half ("upper").

    Shares are :func:`half_shares`. Masking no head, or every head of the half, is the same mask on every
    draw, so those two points get one draw each and the shares between get ``draws``; the shares where the study's
    claims are decided (:func:`collapse_shares`) get ``deciding_draws`` (never fewer than ``draws``), so that the
    interval over draws there is narrow enough to decide them. A draw's heads depend only on its share and number,
    so more draws add masks and keep the first ones.
    """
    shares = half_shares(layers, heads, steps)
    deciding = set(collapse_shares(shares)) if deciding_draws else set()
    by_count = [(s, max(draws, deciding_draws) if s in deciding else draws) for s in shares]
    return [
        spec
        for which in HALVES
        for share, count in by_count
        for spec in random_share_specs(
            layers, heads, [share], count, seed, pool=half_pool(layers, heads, which), kind=which
        )
    ]


def half_gap(per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Per share: the relative change from masking the lower and the upper half, and their difference.

    Each half's effect is that of its accuracy averaged over draws, as in :func:`headlab.core.sweep.share_curve`
    (same two-stage bootstrap, so the same numbers). ``gap = upper_change - lower_change``: positive when
    masking lower heads costs more, in points of relative change; its 95% interval resamples test examples
    once for both halves and the baseline (paired), so what the halves share cancels, and each half's draws
    on their own (the two halves' heads are drawn independently).

    The same on the chance-corrected scale: each half's share of quadratic kappa lost
    (:func:`headlab.core.sweep.kappa_columns`, resampling the same pairs and draws) and whether it sits at the floor
    (decided from its predictions), and ``kappa_gap`` = lower half's share lost minus upper half's
    (:func:`headlab.core.stats.kappa_contrast`: positive when masking lower heads costs more).

    Columns: share, n_heads, base_accuracy, then per half (``lower_``, ``upper_``) accuracy, change, lo, hi, draws,
    df, kappa_lost, kappa_lo, kappa_hi, kappa_df, at_floor, floor_reason (e.g. lower_accuracy, lower_change,
    lower_kappa_lost, lower_at_floor), then gap, gap_lo, gap_hi, gap_df (a t interval with Welch–Satterthwaite degrees
    of freedom over the draws, as :func:`headlab.core.stats.two_stage`), kappa_gap, kappa_gap_lo, kappa_gap_hi,
    kappa_gap_df, kappa_reason, n_examples, n_boot.
    """
    base = baseline_correct(per_example).astype(np.float64)
    correct = correct_matrix(per_example)
    predicted, (base_predicted, gold) = predicted_matrix(per_example), baseline_grades(per_example)
    by_half = {}
    for which in HALVES:
        rows = masks_of_kind(plan, which, ["n_dropped"])
        rows["share"] = pd.to_numeric(rows["share"]).astype(float)
        by_half[which] = dict(list(rows.groupby("share", sort=True)))
    if sorted(by_half[Half.LOWER]) != sorted(by_half[Half.UPPER]):
        raise ValueError(
            f"the halves were masked at different shares: {sorted(by_half[Half.LOWER])} vs "
            f"{sorted(by_half[Half.UPPER])}"
        )
    weights = bootstrap_weights(len(base), n_boot, seed)
    base_boot = weights @ base
    out = []
    for share in sorted(by_half[Half.LOWER]):
        row = {
            "share": share,
            "n_heads": int(by_half[Half.LOWER][share]["n_dropped"].iloc[0]),
            "base_accuracy": float(base.mean()),
        }
        boots, fixed, grades, seeds_of = {}, {}, {}, {}
        for which in HALVES:
            masks = by_half[which][share]
            draws = correct.loc[masks["mask_id"]].to_numpy(dtype=np.float64)
            seeds = seeds_of[which] = draw_seed(seed, which, share)
            effect = relative_change(draws, base, n_boot=n_boot, seed=seed, draw_seed=seeds)
            grades[which] = predicted.loc[masks["mask_id"]].to_numpy()
            kappa = kappa_columns(grades[which], base_predicted, gold, n_boot, seed, seeds)
            row.update(
                {
                    f"{which}_accuracy": float(draws.mean()),
                    f"{which}_change": effect.rel_change,
                    f"{which}_lo": effect.lo,
                    f"{which}_hi": effect.hi,
                    f"{which}_draws": len(masks),
                    f"{which}_df": effect.df,
                    f"{which}_kappa_lost": kappa["kappa_lost"],
                    f"{which}_kappa_lo": kappa["kappa_lost_lo"],
                    f"{which}_kappa_hi": kappa["kappa_lost_hi"],
                    f"{which}_kappa_df": kappa["kappa_df"],
                    f"{which}_at_floor": kappa["at_floor"],
                    f"{which}_floor_reason": kappa["floor_reason"],
                }
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                boots[which] = boot_means(draws, weights, seeds) * len(base) / base_boot - 1.0
                fixed[which] = (weights @ draws.T).mean(axis=1) / base_boot - 1.0
        gap_boot = boots[Half.UPPER] - boots[Half.LOWER]
        gap_fixed = fixed[Half.UPPER] - fixed[Half.LOWER]
        keep = np.isfinite(gap_boot) & np.isfinite(gap_fixed)
        gap = row["upper_change"] - row["lower_change"]
        draws_each = min(row["lower_draws"], row["upper_draws"])
        if draws_each > 1:
            se, df = two_stage(gap_boot[keep], gap_fixed[keep], draws_each, len(base))
            gap_lo, gap_hi = t_interval(gap, se, df)
        else:
            df, (gap_lo, gap_hi) = math.inf, np.quantile(gap_boot[keep], [0.025, 0.975])
        kappa_gap = kappa_contrast(
            [grades[Half.LOWER], grades[Half.UPPER]],
            [1.0, -1.0],
            base_predicted,
            gold,
            n_boot,
            seed,
            [seeds_of[Half.LOWER], seeds_of[Half.UPPER]],
        )
        row.update(
            {
                "gap": gap,
                "gap_lo": float(gap_lo),
                "gap_hi": float(gap_hi),
                "gap_df": df,
                "kappa_gap": kappa_gap["contrast"],
                "kappa_gap_lo": kappa_gap["lo"],
                "kappa_gap_hi": kappa_gap["hi"],
                "kappa_gap_df": kappa_gap["df"],
                "kappa_reason": kappa_gap["reason"],
                "n_examples": len(base),
                "n_boot": n_boot,
            }
        )
        out.append(row)
    return pd.DataFrame(out)
