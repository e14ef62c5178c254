"""Do the term-matching heads match terms? Activation patching (:mod:`headlab.core.patching`) read against the two
other views of the same heads: the attention-chosen term-matching heads (notebook 05) and single-head masking
(notebook 02).

- :func:`restored_shares`: per patch, the share of the grade difference between the original pairs and their
  contrast (:mod:`headlab.findings.contrast`) that the patch restores: mean(patched - target) / mean(source -
  target), a ratio of means over the pairs (a per-pair ratio explodes where a pair barely moves), with a paired
  bootstrap interval over the pairs.
- :func:`top_overlap`: how many of the top-k heads by one score are among k chosen heads, against the number two
  random sets of k heads share (hypergeometric), with its one-sided p.
- :func:`rank_agreement`: Spearman's rank correlation of two per-head scores, with a bootstrap interval over heads.
- :func:`masking_specificity`: a mask's cost on pairs that share a term minus its cost on pairs that share none, in
  points of accuracy, with a bootstrap interval resampling pairs within each group.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.stats import bootstrap_weights, draw_counts


def restored_shares(table: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per patch of a :func:`headlab.core.patching.run_patching` table: ``restored`` (the share of the
    source-target difference in expected grade it restores; 1: all of it, 0: nothing), ``lo``, ``hi`` (95%
    paired bootstrap over the pairs), ``gap`` (the mean source-target difference it is a share of), ``n_examples``;
    and ``layer``, ``head`` for a single head named ``"<layer>.<head>"``."""
    wide = table.pivot(index="example", columns="patch", values="expected")
    source, target = wide.pop("source").to_numpy(), wide.pop("target").to_numpy()
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    boot_gap = weights @ gap
    if abs(gap.mean()) < 1e-9:
        raise ValueError("the contrast does not change the expected grade on average: no difference to restore")
    rows = []
    for patch in wide.columns:
        moved = wide[patch].to_numpy() - target
        boot = (weights @ moved) / boot_gap
        lo, hi = np.quantile(boot, [0.025, 0.975])
        layer, _, head = str(patch).partition(".")
        single = layer.isdigit() and head.isdigit()
        rows.append({"patch": patch, "layer": int(layer) if single else -1, "head": int(head) if single else -1,
                     "restored": float(moved.mean() / gap.mean()), "lo": float(lo), "hi": float(hi),
                     "gap": float(gap.mean()), "n_examples": len(gap)})
    return pd.DataFrame(rows)


def top_heads(shares: pd.DataFrame, k: int = 5, by: str = "restored") -> list[tuple[int, int]]:
    """The k single heads with the largest ``by``, as (layer, head)."""
    singles = shares[shares["layer"] >= 0].sort_values([by, "layer", "head"], ascending=[False, True, True])
    return [(int(r.layer), int(r.head)) for r in singles.head(k).itertuples()]


def top_overlap(top, chosen, n_heads: int) -> dict:
    """How many heads ``top`` and ``chosen`` share, the number two random sets of their sizes share on average among
    ``n_heads`` heads, and the one-sided hypergeometric p of sharing at least as many by chance."""
    top, chosen = {tuple(h) for h in top}, {tuple(h) for h in chosen}
    shared = len(top & chosen)
    chance = len(top) * len(chosen) / n_heads
    p = float(sps.hypergeom.sf(shared - 1, n_heads, len(chosen), len(top)))
    return {"shared": shared, "k": len(top), "chance": chance, "p": p, "heads": sorted(top & chosen)}


def rank_agreement(a, b, n_boot: int = 2000, seed: int = 0) -> dict:
    """Spearman's rank correlation of two per-head scores (the same heads in the same order), with a 95% bootstrap
    interval resampling the heads."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) != len(b) or len(a) < 3:
        raise ValueError(f"two scores of the same heads (at least 3) expected, got {len(a)} and {len(b)}")
    rho = float(sps.spearmanr(a, b).statistic)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(a), len(a))
        if np.ptp(a[i]) > 0 and np.ptp(b[i]) > 0:
            boots.append(sps.spearmanr(a[i], b[i]).statistic)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"rho": rho, "lo": float(lo), "hi": float(hi), "n_heads": len(a)}


def masking_specificity(masked_correct, base_correct, shares, n_boot: int = 2000, seed: int = 0) -> dict:
    """A mask's cost (masked minus unmasked accuracy, points) on the pairs that share a term, minus its cost on the
    pairs that share none: negative when the mask costs more where there are terms to match. ``masked_correct`` is
    one mask (pairs) or several draws of one kind of mask (draws x pairs, averaged). 95% interval: the pairs
    resampled within each group, the draws kept."""
    masked = np.atleast_2d(np.asarray(masked_correct, dtype=np.float64)).mean(axis=0)
    base = np.asarray(base_correct, dtype=np.float64)
    shares = np.asarray(shares, dtype=bool)
    if not (len(masked) == len(base) == len(shares)):
        raise ValueError(f"per-pair arrays differ in length: {len(masked)}, {len(base)}, {len(shares)}")
    cost, boots = {}, {}
    for group, where, group_seed in (("sharing", shares, seed), ("none", ~shares, seed + 1)):
        moved = masked[where] - base[where]
        if not len(moved):
            return {"difference": np.nan, "lo": np.nan, "hi": np.nan, "n_sharing": int(shares.sum()),
                    "n_none": int((~shares).sum())}
        cost[group] = float(moved.mean())
        boots[group] = bootstrap_weights(len(moved), n_boot, group_seed) @ moved / len(moved)
    lo, hi = np.quantile(boots["sharing"] - boots["none"], [0.025, 0.975])
    return {"cost_sharing": cost["sharing"], "cost_none": cost["none"], "difference": cost["sharing"] - cost["none"],
            "lo": float(lo), "hi": float(hi), "n_sharing": int(shares.sum()), "n_none": int((~shares).sum())}


def restored_against_draws(table: pd.DataFrame, tested: str, draws: list[str], n_boot: int = 2000,
                           seed: int = 0) -> dict:
    """The share of the difference that patch ``tested`` restores minus the mean share the patches ``draws``
    (random head sets of its size) restore, with a 95% two-stage bootstrap interval: each replicate resamples the
    draws and the pairs (the same pairs for both sides, so the comparison stays paired)."""
    wide = table.pivot(index="example", columns="patch", values="expected")
    target = wide["target"].to_numpy()
    gap = wide["source"].to_numpy() - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    boot_gap = weights @ gap
    moved_tested = wide[tested].to_numpy() - target
    moved_draws = wide[list(draws)].to_numpy().T - target  # draws x pairs
    per_draw = (weights @ moved_draws.T) / boot_gap[:, None]  # n_boot x draws
    counts = draw_counts(len(draws), n_boot, [seed, len(draws)])
    boot = (weights @ moved_tested) / boot_gap - (counts * per_draw).sum(axis=1) / len(draws)
    restored_draws = moved_draws.mean(axis=1) / gap.mean()
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {"tested": float(moved_tested.mean() / gap.mean()), "draws_mean": float(restored_draws.mean()),
            "draws_lo": float(np.quantile(restored_draws, 0.025)), "draws_hi": float(np.quantile(restored_draws, 0.975)),
            "difference": float(moved_tested.mean() / gap.mean() - restored_draws.mean()), "lo": float(lo),
            "hi": float(hi), "n_draws": len(draws), "n_examples": len(gap)}
