"""Do the term-matching heads match terms? Activation patching (:mod:`headlab.core.patching`) read against the two
other views of the same heads: the attention-chosen term-matching heads (notebook 05) and single-head masking
(notebook 02).

- :func:`restored_shares`: per patch, the share of the grade difference between the original pairs and their
  contrast (:mod:`headlab.measures.contrast`) that the patch restores: mean(patched - target) / mean(source -
  target), a ratio of means over the pairs (a per-pair ratio explodes where a pair barely moves), with a paired
  bootstrap interval over the pairs.
- :func:`top_overlap`: how many of the top-k heads by one score are among k chosen heads, against the number two
  random sets of k heads share (hypergeometric), with its one-sided p.
- :func:`rank_correlation`: Spearman's rank correlation of two per-head scores, with a bootstrap interval over heads.
- :func:`ablation_specificity`: how much more an ablation moves the grade logit on pairs that share a term than on
  pairs that share none, at the same gold grade and unablated grade logit, named heads against random ones.

Shares are of the grade logit (:data:`METRIC`), and a contrast that does not move it the way it should is not
measured (:func:`gap_moves`). Page 09 runs them through :func:`held_out_contrast` (notebook 05's held-out pairs),
:func:`restoring_patches`, :func:`circuit_views` (per group of positions, and attribution patching), :func:`head_views`
and :func:`agreement`, :func:`restored_against_draws`, :func:`contrast_controls` (TFC1),
:func:`specificity` (mean ablation per token class), :func:`receivers_view` (path patching to every head above the
matching heads, notebook 07's head among them), :func:`routes_view`, :func:`sender_view` and :func:`circuit_measures`
(the circuit found, scored with IOI's measures), and judges them with :func:`claims`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.ablation import DONORS, mean_ablated_logits
from headlab.core.evaluate import Encoded
from headlab.core.masking import head_grid
from headlab.core.patching import PatchEngine, grade_logit, single_head_patches
from headlab.core.stats import N_BOOT, bootstrap_weights, draw_counts, draws_ratio_of_means
from headlab.inputs.pair import pair_classes, read_pair
from headlab.judging.units import (
    CARRY,
    CIRCUIT_INCOMPLETE,
    CIRCUIT_KEPT,
    CLS_ROUTE,
    GRADE_SHIFT_SPECIFICITY,
    HEAD_ADDED,
    IDENTITY,
    READS_SENDERS,
    RECEIVER_RANK,
)
from headlab.judging.verdicts import Claim, Kind, StudyClaim, Tally
from headlab.lab.lab import MEAN_PAIRS, Lab
from headlab.measures.circuit import (
    attribution_scores,
    found_circuit,
    position_groups,
    random_senders,
    receiver_moves,
    receiver_ranking,
    restored_by_position,
    route_shares,
    sender_control,
    sender_pool,
)
from headlab.measures.contrast import MATCHED_KINDS, Contrast, contrast_pairs, matched_contrasts
from headlab.measures.faithfulness import AblationEngine, completeness, faithfulness, minimality
from headlab.measures.grids import focus_head, selection_grid
from headlab.measures.held_out import choice_limit, measured_examples, split_halves
from headlab.measures.matching import head_roles, random_lower_sets
from headlab.measures.roles import shares_terms

METRIC = "grade_logit"  # what a share is of: headlab.core.patching.grade_logit, linear in the logits


def restored_shares(table: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0, metric: str = METRIC) -> pd.DataFrame:
    """One row per patch of a :func:`headlab.core.patching.run_patching` table: ``restored`` (the share of the
    source-target difference in ``metric`` it restores; 1: all of it, 0: nothing, above 1: overshoot), ``lo``,
    ``hi`` (95% paired bootstrap over the pairs), ``gap`` (the mean source-target difference it is a share of),
    ``n_examples``; and ``layer``, ``head`` for a single head named ``"<layer>.<head>"``."""
    wide = table.pivot(index="example", columns="patch", values=metric)
    source, target = wide.pop("source").to_numpy(), wide.pop("target").to_numpy()
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    boot_gap = weights @ gap
    if abs(gap.mean()) < 1e-9:
        raise ValueError(f"the contrast does not change the {metric} on average: no difference to restore")
    rows = []
    for patch in wide.columns:
        moved = wide[patch].to_numpy() - target
        boot = (weights @ moved) / boot_gap
        lo, hi = np.quantile(boot, [0.025, 0.975])
        layer, _, head = str(patch).partition(".")
        single = layer.isdigit() and head.isdigit()
        rows.append(
            {
                "patch": patch,
                "layer": int(layer) if single else -1,
                "head": int(head) if single else -1,
                "restored": float(moved.mean() / gap.mean()),
                "lo": float(lo),
                "hi": float(hi),
                "gap": float(gap.mean()),
                "n_examples": len(gap),
            }
        )
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


def rank_correlation(a, b, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Spearman's rank correlation of two per-head scores (the same heads in the same order), with a 95% bootstrap
    interval resampling the heads."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) != len(b) or len(a) < 3:
        raise ValueError(f"two scores of the same heads (at least 3) expected, got {len(a)} and {len(b)}")
    if not (np.ptp(a) > 0 and np.ptp(b) > 0):  # a constant score ranks nothing
        return {"rho": np.nan, "lo": np.nan, "hi": np.nan, "n_heads": len(a)}
    rho = float(sps.spearmanr(a, b).statistic)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(a), len(a))
        if np.ptp(a[i]) > 0 and np.ptp(b[i]) > 0:
            boots.append(sps.spearmanr(a[i], b[i]).statistic)
    lo, hi = np.quantile(boots, [0.025, 0.975]) if boots else (np.nan, np.nan)
    return {"rho": rho, "lo": float(lo), "hi": float(hi), "n_heads": len(a)}


MIN_GROUP = 5  # pairs each group needs within a gold grade for that grade to count in the specificity


def ablation_specificity(
    moved, base, shares, strata, n_boot: int = N_BOOT, seed: int = 0, min_group: int = MIN_GROUP
) -> dict:
    """How much more an ablation moves the grade logit on pairs that share a term than on pairs that share none, for
    the named heads (``moved[0]``: ablated minus unablated grade logit, per pair) against random heads (``moved[1:]``,
    one row per draw); negative where the ablation takes more from pairs with terms to match.

    Within each gold grade (``strata``) with at least ``min_group`` pairs in both groups (the others left out and
    counted), the move is regressed on the grade, whether the pair shares a term and its unablated grade logit
    (``base``): an ablation pulls every pair toward the average, and pairs that share terms already sit higher within
    their grade, so only a difference at the same grade *and* the same starting logit speaks to terms. The
    coefficient of sharing, over the pooled within-cell standard deviation of the move (a cell: one grade and one
    group), is each set's standardised difference ``d``; the judged ``difference`` is the named heads' ``d`` minus
    the random draws' mean ``d``. 95% intervals: the pairs resampled within each cell (the same resamples for every
    set, the scale computed again in each) and the draws resampled (two stages, :func:`headlab.core.stats.draw_counts`).
    """
    moved = np.atleast_2d(np.asarray(moved, dtype=np.float64))
    base, shares, strata = np.asarray(base, dtype=np.float64), np.asarray(shares, dtype=bool), np.asarray(strata)
    if not (moved.shape[1] == len(base) == len(shares) == len(strata)):
        lengths = f"{moved.shape[1]}, {len(base)}, {len(shares)}, {len(strata)}"
        raise ValueError(f"per-pair arrays differ in length: {lengths}")
    sizes = {g: (((strata == g) & shares).sum(), ((strata == g) & ~shares).sum()) for g in np.unique(strata)}
    kept = [g for g, both in sizes.items() if min(both) >= max(min_group, 2)]
    in_kept = np.isin(strata, kept)
    counts = {
        "n_sharing": int((in_kept & shares).sum()),
        "n_none": int((in_kept & ~shares).sum()),
        "n_strata": len(kept),
        "n_left_out": int((~in_kept).sum()),
        "n_draws": moved.shape[0] - 1,
    }
    names = ["difference", "lo", "hi", "named", "named_lo", "named_hi", "random", "random_lo", "random_hi"]
    if not kept:
        return dict.fromkeys([*names, "move_sharing", "move_none"], np.nan) | counts
    y, sharing, start, grade = moved[:, in_kept], shares[in_kept], base[in_kept], strata[in_kept]
    design = np.column_stack([*(grade == g for g in kept), sharing, start]).astype(np.float64)
    cells = [(grade == g) & (sharing == side) for g in kept for side in (True, False)]
    weights = np.zeros((n_boot, len(grade)))
    for k, cell in enumerate(cells):
        weights[:, cell] = bootstrap_weights(int(cell.sum()), n_boot, seed + k)
    weights = np.vstack([np.ones(len(grade)), weights])  # row 0: the sample itself
    gram = np.einsum("bi,ij,ik->bjk", weights, design, design)
    moments = np.einsum("bi,ij,si->bsj", weights, design, y)
    slope = np.linalg.solve(gram[:, None], moments[..., None])[..., len(kept), 0]  # (1 + n_boot) x sets
    spread = np.zeros_like(slope)
    for cell in cells:
        w, values = weights[:, cell], y[:, cell]
        mean = np.einsum("bi,si->bs", w, values) / w.sum(axis=1, keepdims=True)
        spread += np.einsum("bi,bsi->bs", w, (values[None] - mean[..., None]) ** 2)
    d = slope / np.sqrt(spread / (weights.sum(axis=1, keepdims=True) - len(cells)))
    named, boot_named = d[0, 0], d[1:, 0]
    interval = lambda x: np.quantile(x, [0.025, 0.975])  # noqa: E731
    result = {"named": float(named), **dict(zip(("named_lo", "named_hi"), interval(boot_named)))}
    if counts["n_draws"]:
        draws = draw_counts(counts["n_draws"], n_boot, [seed, counts["n_draws"]])
        boot_random = (draws * d[1:, 1:]).sum(axis=1) / counts["n_draws"]
        random = float(d[0, 1:].mean())
        result |= {"random": random, **dict(zip(("random_lo", "random_hi"), interval(boot_random)))}
        result |= {"difference": float(named - random), **dict(zip(("lo", "hi"), interval(boot_named - boot_random)))}
    else:
        result |= dict.fromkeys(["random", "random_lo", "random_hi", "difference", "lo", "hi"], np.nan)
    result = {k: float(v) for k, v in result.items()}
    return result | {"move_sharing": float(y[0, sharing].mean()), "move_none": float(y[0, ~sharing].mean())} | counts


def _per_set(draws_moved: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Each random set's share of the difference restored, over the pairs and averaged over the replacement draws
    (``draws_moved``: replacements x sets x pairs; ``gaps``: replacements x pairs)."""
    return (draws_moved.sum(axis=2) / gaps.sum(axis=1)[:, None]).mean(axis=0)


def _moved(tables, patches: list[str], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(gaps, moved)``: per replacement draw and pair, the source-target difference of ``metric`` (replacements x
    pairs) and how far each of ``patches`` moved the target (replacements, patches, pairs). ``tables``: one patch
    table per draw of the contrast's replacement words, on the same pairs (:func:`replacement_tables`)."""
    tables = [tables] if isinstance(tables, pd.DataFrame) else list(tables)
    wides = [t.pivot(index="example", columns="patch", values=metric) for t in tables]
    if any(not w.index.equals(wides[0].index) for w in wides):
        raise ValueError("replacement draws must cover the same pairs: take their common pairs first")
    targets = [w["target"].to_numpy() for w in wides]
    gaps = np.stack([w["source"].to_numpy() - target for w, target in zip(wides, targets)])
    moved = np.stack([w[list(patches)].to_numpy().T - target for w, target in zip(wides, targets)])
    return gaps, moved


def restored_by_set(tables, draws: list[str], metric: str = METRIC) -> pd.DataFrame:
    """Each random set's share restored, as :func:`restored_against_draws` averages them (one row per set: draw,
    restored), for the figure that sets them beside the tested heads."""
    gaps, moved = _moved(tables, draws, metric)
    return pd.DataFrame({"draw": list(draws), "restored": _per_set(moved, gaps)})


def restoring_takeaway(views: pd.DataFrame) -> str:
    """The head map's caption: the head that restores most alone, and the framed heads' mean (``views`` from
    :func:`head_views`, with its ``matching`` column)."""
    measured = views.dropna(subset=["restored"])
    if measured.empty:
        return "No head was patched alone: no contrast pair to patch."
    best = measured.loc[measured["restored"].idxmax()]
    matching = measured.loc[measured["matching"], "restored"]
    above = int((views["lo"] > 0).sum())
    return (
        f"Patched alone, head {int(best['layer'])}.{int(best['head'])} restores most, {best['restored']:+.1%} "
        f"[{best['lo']:+.1%}, {best['hi']:+.1%}] of the grade-logit drop; the framed heads {matching.mean():+.1%} each "
        f"on average; {above} of {len(measured)} heads have an interval above 0."
    )


def carry_takeaway(against: dict) -> str:
    """The carry figure's caption: what the matching heads and random sets restore (:func:`restored_against_draws`)."""
    return (
        f"On {against['n_examples']} pairs and {against['n_replacements']} draws of the replacement words, the "
        f"matching heads restore {against['tested']:.1%} of a grade-logit drop of {against['gap']:+.3g} "
        f"[{against['gap_lo']:+.3g}, {against['gap_hi']:+.3g}]; random lower-half sets {against['draws_mean']:.1%} on "
        f"average (95% of the {against['n_draws']} sets between {against['draws_lo']:.1%} and "
        f"{against['draws_hi']:.1%}); the difference {100 * against['difference']:+.1f} points "
        f"[{100 * against['lo']:+.1f}, {100 * against['hi']:+.1f}] over pairs, sets and replacement draws."
    )


def restored_against_draws(
    tables, tested: str, draws: list[str], n_boot: int = N_BOOT, seed: int = 0, metric: str = METRIC
) -> dict:
    """The share of the difference in ``metric`` that patch ``tested`` restores minus the mean share the patches
    ``draws`` (random head sets of its size) restore, with a 95% bootstrap interval over every source of chance:
    each replicate resamples the pairs (the same pairs for both sides and every replacement, so the comparison stays
    paired), the random sets and, given several ``tables`` (one per draw of the contrast's replacement words, on the
    same pairs: :func:`replacement_tables`), those draws. ``gap``, ``gap_lo``, ``gap_hi``: the mean source-target
    difference and its 95% interval over the pairs (:func:`gap_moves` reads it)."""
    tables = [tables] if isinstance(tables, pd.DataFrame) else list(tables)
    gaps, moved = _moved(tables, [tested, *draws], metric)  # replacements x pairs; replacements x patches x pairs
    tested_moved, draws_moved = moved[:, 0], moved[:, 1:]
    gap = gaps.mean(axis=0)
    weights = bootstrap_weights(gaps.shape[1], n_boot, seed)
    gap_lo, gap_hi = np.quantile(weights @ gap / len(gap), [0.025, 0.975])
    counts = draw_counts(len(draws), n_boot, [seed, len(draws)])
    replaced = draw_counts(len(tables), n_boot, [seed, len(draws), len(tables)])
    boot = np.zeros(n_boot)
    for r in range(len(tables)):
        drawn = draws_ratio_of_means(draws_moved[r], gaps[r], weights, counts)[1]
        boot += replaced[:, r] * ((weights @ tested_moved[r]) / (weights @ gaps[r]) - drawn)
    boot /= len(tables)
    restored_tested = np.mean(tested_moved.sum(axis=1) / gaps.sum(axis=1))
    restored_draws = _per_set(draws_moved, gaps)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {
        "tested": float(restored_tested),
        "draws_mean": float(restored_draws.mean()),
        "draws_lo": float(np.quantile(restored_draws, 0.025)),
        "draws_hi": float(np.quantile(restored_draws, 0.975)),
        "difference": float(restored_tested - restored_draws.mean()),
        "lo": float(lo),
        "hi": float(hi),
        "n_draws": len(draws),
        "n_replacements": len(tables),
        "n_examples": len(gap),
        "gap": float(gap.mean()),
        "gap_lo": float(gap_lo),
        "gap_hi": float(gap_hi),
    }


def identity_difference(
    tables: dict[str, list[pd.DataFrame]], n_boot: int = N_BOOT, seed: int = 0, metric=METRIC
) -> dict:
    """The share of the difference in ``metric`` the ``matching`` patch restores on the ``one_shared`` contrast minus
    its share on the ``one_unshared`` one (:func:`identity_tables`: per kind, one table per draw of the replaced
    words, every table on the same pairs), with a 95% interval that resamples the pairs (the same for both kinds, so
    the comparison is within pairs) and the draws. Per kind: ``<kind>`` (the share), ``<kind>_gap`` with
    ``_gap_lo``, ``_gap_hi`` (the mean original-contrast difference and its interval: :func:`gap_moves` reads them).
    Fewer than two pairs give only ``n_examples``."""
    wides = {
        kind: [t.pivot(index="example", columns="patch", values=metric) for t in per_draw]
        for kind, per_draw in tables.items()
    }
    first = wides[MATCHED_KINDS[0]][0].index
    if any(not w.index.equals(first) for per_draw in wides.values() for w in per_draw):
        raise ValueError("both contrasts and every draw must cover the same pairs: take their common pairs first")
    if len(first) < 2:
        return {"n_examples": len(first)}
    n_draws = len(wides[MATCHED_KINDS[0]])
    weights = bootstrap_weights(len(first), n_boot, seed)
    replaced = draw_counts(n_draws, n_boot, [seed, n_draws])
    result: dict = {"n_examples": len(first), "n_replacements": n_draws}
    boots = {}
    for kind, per_draw in wides.items():
        gaps = np.stack([w["source"].to_numpy() - w["target"].to_numpy() for w in per_draw])  # draws x pairs
        moved = np.stack([w["matching"].to_numpy() - w["target"].to_numpy() for w in per_draw])
        boots[kind] = (replaced * ((weights @ moved.T) / (weights @ gaps.T))).sum(axis=1) / n_draws
        gap = gaps.mean(axis=0)
        gap_lo, gap_hi = np.quantile(weights @ gap / len(gap), [0.025, 0.975])
        result |= {
            kind: float(np.mean(moved.sum(axis=1) / gaps.sum(axis=1))),
            f"{kind}_gap": float(gap.mean()),
            f"{kind}_gap_lo": float(gap_lo),
            f"{kind}_gap_hi": float(gap_hi),
        }
    shared, unshared = MATCHED_KINDS
    lo, hi = np.quantile(boots[shared] - boots[unshared], [0.025, 0.975])
    return result | {"difference": result[shared] - result[unshared], "lo": float(lo), "hi": float(hi)}


def gap_moves(result: dict, direction: int, gap: str = "gap") -> bool:
    """Whether a contrast moves the metric the way it should (``direction`` +1: the original pairs above their
    contrast): the gap's 95% interval lies wholly on that side of 0. A contrast that does not has nothing to restore,
    so a share of it is not measured (a share of a gap that may be 0 or of the other sign reads as anything).
    ``direction`` 0: either side. ``gap``: the name of the gap's keys (:func:`identity_difference` keeps one per
    contrast)."""
    if direction == 0:
        return gap_moves(result, 1, gap) or gap_moves(result, -1, gap)
    return bool(result[f"{gap}_lo"] > 0) if direction > 0 else bool(result[f"{gap}_hi"] < 0)


def patch_plan(layers: int, heads: int, matching, draws: int, seed: int) -> dict[str, list[tuple[int, int]]]:
    """What page 09 patches: every head alone (``"<layer>.<head>"``), the term-matching heads together
    (``"matching"``) and ``draws`` random sets of as many lower-half heads (``"random-d<i>"``, the control sets of
    notebooks 05 and 07)."""
    plan = single_head_patches(layers, heads)
    plan["matching"] = sorted(tuple(h) for h in matching)
    for d, heads_drawn in enumerate(random_lower_sets(layers, heads, matching, draws, seed)):
        plan[f"random-d{d}"] = sorted(heads_drawn)
    return plan


def random_patches(plan: dict) -> list[str]:
    """The names of :func:`patch_plan`'s random head sets (the control draws), in plan order."""
    return [name for name in plan if name.startswith("random-d")]


CARRY_METHOD = "two-stage bootstrap over draws and contrast pairs"
IDENTITY_METHOD = "two-stage bootstrap over draws of the replaced words and contrast pairs, both contrasts on each pair"
SPECIFIC_METHOD = (
    "two-stage bootstrap over random sets and held-out pairs, resampled within each grade and group, the scale "
    "computed again in each"
)
RECEIVER_METHOD = "paired bootstrap over contrast pairs, the same resamples for every receiver"
SENDER_METHOD = "two-stage bootstrap over random sender sets and contrast pairs"
CIRCUIT_METHOD = "paired bootstrap over the scoring half's contrast pairs"
CARRIES_REPLACED = StudyClaim(
    "patching.matching_heads_carry_replaced_words",
    "09_patching",
    "The term-matching heads carry what the replaced words changed: patched back into pairs whose shared terms were "
    "replaced, they restore more of the grade than as many random lower-half heads",
    "Some heads put high attention between identical terms in the two sentences, most clearly 5 heads in layers 2-4",
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
BEYOND_IDENTITY = StudyClaim(
    "patching.matching_beyond_identity",
    "09_patching",
    "The term-matching heads carry term matching, not only a word's identity: on the same pairs, they restore a "
    "larger share of the grade when one shared title word was replaced than when one title word the query lacks, of "
    "the same shape and frequency, was",
    "Whether query and title share terms is a key feature",
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
COST_SPECIFIC = StudyClaim(
    "patching.cost_specific_to_shared_terms",
    "09_patching",
    "Removing the term-matching heads (mean-ablated) takes more of the grade logit from pairs that share a term than "
    "from pairs that share none, more than removing random heads does",
    "Whether query and title share terms is a key feature",
    Kind.COMPARE,
    direction=-1,
    tally=Tally.OURS,
)
HANDS_ON = StudyClaim(
    "patching.cls_route_hands_on",
    "09_patching",
    "The high [CLS] head hands the matching heads' signal to the classifier: a share of the grade-logit difference "
    "comes back through its output at [CLS] alone (path patching from the matching heads), the route by which the "
    "classifier reads it",
    "hands them to the classifier",
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
READS = StudyClaim(
    "patching.cls_head_reads_matching",
    "09_patching",
    "The high [CLS] head reads the matching heads more than other heads of theirs: more of the grade-logit difference "
    "comes back through it alone from the matching heads than from random sets of as many heads in their layers",
    "the high head reads the low heads' matching features",
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
CIRCUIT_QUOTE = "the high head reads the low heads' matching features and hands them to the classifier"
FAITHFUL = StudyClaim(
    "patching.circuit_faithful",
    "09_patching",
    "The circuit found (the matching heads and the heads above that read them most, chosen on other pairs) carries "
    "the matching signal on its own: with every other head mean-ablated it keeps most of the full model's "
    "grade-logit difference, and more than random circuits of its size (IOI's faithfulness)",
    CIRCUIT_QUOTE,
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
COMPLETE = StudyClaim(
    "patching.circuit_complete",
    "09_patching",
    "The circuit found is complete: for every part K of it removed (greedy parts chosen on other pairs, random "
    "parts), the circuit without K keeps what the model without K keeps (IOI's completeness)",
    CIRCUIT_QUOTE,
    Kind.NO_EFFECT,
    tally=Tally.OURS,
)
MINIMAL = StudyClaim(
    "patching.circuit_minimal",
    "09_patching",
    "The circuit found is minimal: each of its heads adds to what it keeps (IOI's minimality, read as each head's "
    "share inside the circuit)",
    CIRCUIT_QUOTE,
    Kind.EFFECT,
    direction=1,
    tally=Tally.OURS,
)
CLAIMS = (CARRIES_REPLACED, BEYOND_IDENTITY, COST_SPECIFIC, HANDS_ON, READS, FAITHFUL, COMPLETE, MINIMAL)


def _heads(heads) -> str:
    return ", ".join(f"{l}.{h}" for l, h in heads)


CONTRASTS = {
    "": "held-out pairs whose shared terms were replaced",
    "injected": "held-out pairs with a query term put into the title in place of a word the query lacks (TFC1)",
}
CONTROL_CLAIMS = {
    "injected": "The same on pairs that gained a query term instead (TFC1)",
}


def _gap(result: dict, gap: str = "gap") -> str:
    return f"{result[gap]:+.3g} [{result[f'{gap}_lo']:+.3g}, {result[f'{gap}_hi']:+.3g}]"


def _carry_row(result: dict, part: str, direction: int, names: str) -> Claim:
    """The matching heads against random heads on one contrast (``part``: "" for the corrupted one), gated on its
    gap (:func:`gap_moves`; ``direction`` 0: either sign)."""
    claim = CONTROL_CLAIMS.get(part)
    pairs = f"{result['n_examples']} {CONTRASTS[part]}"
    if "gap" not in result:
        return Claim.not_measured(
            CARRIES_REPLACED, part=part, claim=claim, unit=CARRY, reason=f"Not measured: only {pairs}"
        )
    if not gap_moves(result, direction):
        return Claim.not_measured(
            CARRIES_REPLACED,
            part=part,
            claim=claim,
            unit=CARRY,
            reason=(
                f"Not measured: on {pairs}, the contrast moves the grade logit by {_gap(result)} (original minus "
                "contrast, mean and 95% interval), which does not exclude 0 on the side it should lie: no difference "
                "to restore a share of"
            ),
        )
    replacements = result.get("n_replacements", 1)
    return Claim.measured(
        CARRIES_REPLACED,
        part=part,
        claim=claim,
        ours=result["difference"],
        lo=result["lo"],
        hi=result["hi"],
        unit=CARRY,
        method=CARRY_METHOD
        if replacements == 1
        else f"{CARRY_METHOD}, over {replacements} draws of the replaced words",
        n_examples=result["n_examples"],
        n_draws=result["n_draws"],
        reason=(
            f"On {pairs} (grade-logit difference {_gap(result)}), patching the term-matching heads ({names}) back from "
            f"the original pairs restores {result['tested']:.1%} of it; {result['n_draws']} random sets of as many "
            f"lower-half heads restore {result['draws_mean']:.1%} on average (single draws {result['draws_lo']:.1%} "
            f"to {result['draws_hi']:.1%}); shares above 100% overshoot"
        ),
    )


def _identity_row(result: dict) -> Claim:
    """Term matching against a word's identity (:func:`identity_difference`), measured only where both contrasts
    move the grade logit: the shared word's loss the way it should (down), the unshared word's either way."""
    shared, unshared = MATCHED_KINDS
    pairs = f"{result['n_examples']} held-out pairs with a shared and an unshared title word of the same shape and band"
    if "difference" not in result:
        return Claim.not_measured(BEYOND_IDENTITY, unit=IDENTITY, reason=f"Not measured: only {pairs}")
    gaps = (
        f"replacing the shared word moves the grade logit by {_gap(result, f'{shared}_gap')}, the unshared word by "
        f"{_gap(result, f'{unshared}_gap')} (original minus contrast, mean and 95% interval)"
    )
    if not (gap_moves(result, 1, f"{shared}_gap") and gap_moves(result, 0, f"{unshared}_gap")):
        return Claim.not_measured(
            BEYOND_IDENTITY,
            unit=IDENTITY,
            reason=f"Not measured: on {pairs}, {gaps}; a share of a difference that may be 0 reads as anything",
        )
    return Claim.measured(
        BEYOND_IDENTITY,
        ours=result["difference"],
        lo=result["lo"],
        hi=result["hi"],
        unit=IDENTITY,
        method=IDENTITY_METHOD,
        n_examples=result["n_examples"],
        n_draws=result["n_replacements"],
        reason=(
            f"On {pairs} ({result['n_replacements']} draws of the replaced words), {gaps}; patched back, the "
            f"term-matching heads restore {result[shared]:.1%} of the first and {result[unshared]:.1%} of the second"
        ),
    )


def claims(
    against: dict,
    controls: dict[str, dict],
    identity: dict,
    specificity: dict,
    ranking: pd.DataFrame,
    senders: pd.DataFrame,
    circuit: dict[str, pd.DataFrame],
    matching,
    receiver,
) -> list[Claim]:
    """Page 09's claims, one row each, judged by :func:`headlab.judging.verdicts.judge`: the matching heads carry
    what the replaced words changed (patching them restores more of the grade logit than random heads:
    :func:`restored_against_draws`, only where the contrast moves it, :func:`gap_moves`; the TFC1 contrast,
    :func:`contrast_controls`, as a sub-row); they carry term matching beyond a word's identity
    (:func:`identity_difference`); mean-ablating them moves the grade logit more on pairs that share a term, at the
    same grade and starting logit, than random heads do (:func:`ablation_specificity`; the matching heads alone as a
    sub-row); notebook 07's ``[CLS]`` head hands their change to the
    classifier through its output at ``[CLS]`` (``ranking``, :func:`receivers_view`) and reads them more than random
    heads of their layers (``senders``, :func:`sender_view`; its rank's interval as a sub-row); the circuit found is
    faithful, complete and minimal as IOI measured its circuit (``circuit``, :func:`circuit_measures`)."""
    return [
        *carry_claims(against, matching),
        *control_claims(controls, matching),
        *identity_claims(identity),
        *specificity_claims(specificity, matching),
        *reader_claims(ranking, senders, matching, receiver),
        *circuit_claims(circuit),
    ]


def carry_claims(against: dict, matching) -> list[Claim]:
    """:func:`claims`' first row, rendered where the page measures it: the matching heads against random heads."""
    return [_carry_row(against, "", 1, _heads(matching))]


def control_claims(controls: dict[str, dict], matching) -> list[Claim]:
    """:func:`claims`' rows of the other contrasts (TFC1: a query term put in)."""
    return [_carry_row(controls[kind], kind, direction, _heads(matching)) for kind, direction in CONTROLS.items()]


def identity_claims(identity: dict) -> list[Claim]:
    """:func:`claims`' row on term matching against a word's identity."""
    return [_identity_row(identity)]


def specificity_claims(specificity: dict, matching) -> list[Claim]:
    """:func:`claims`' rows on whether the heads' cost is specific to pairs that share a term."""
    return _specific_rows(specificity, _heads(matching))


def reader_claims(ranking: pd.DataFrame, senders: pd.DataFrame, matching, receiver) -> list[Claim]:
    """:func:`claims`' rows on notebook 07's head as the reader of the matching heads."""
    return _receiver_rows(ranking, senders, matching, receiver)


def circuit_claims(circuit: dict[str, pd.DataFrame]) -> list[Claim]:
    """:func:`claims`' rows on the circuit found (IOI's measures)."""
    return _circuit_rows(circuit)


def _specific_rows(result: dict, names: str) -> list[Claim]:
    """The specificity (:func:`ablation_specificity`) judged on the matching heads minus random heads, and the
    matching heads alone as a sub-row."""
    if np.isnan(result["difference"]):
        why = (
            f"Not measured: no gold grade has {MIN_GROUP} pairs in both groups"
            if not result["n_strata"]
            else "Not measured: no random sets to compare with"
        )
        return [Claim.not_measured(COST_SPECIFIC, reason=why, unit=GRADE_SHIFT_SPECIFICITY)]
    common = {
        "unit": GRADE_SHIFT_SPECIFICITY,
        "method": SPECIFIC_METHOD,
        "n_examples": result["n_sharing"] + result["n_none"],
    }
    where = (
        f"on {result['n_sharing']} held-out pairs that share a term and {result['n_none']} that share none, within "
        f"{result['n_strata']} gold grades ({result['n_left_out']} pairs of grades with fewer than {MIN_GROUP} in a "
        "group left out) and at the same unablated grade logit"
    )
    return [
        Claim.measured(
            COST_SPECIFIC,
            ours=result["difference"],
            lo=result["lo"],
            hi=result["hi"],
            n_draws=result["n_draws"],
            reason=(
                f"Mean-ablated, the matching heads ({names}) move the grade logit {result['named']:+.3g} within-group "
                f"standard deviations more on pairs that share a term than on pairs that share none, "
                f"{result['n_draws']} random sets of as many lower-half heads {result['random']:+.3g} on average, "
                f"{where} (their mean moves: {result['move_sharing']:+.3g} and {result['move_none']:+.3g} logits)"
            ),
            **common,
        ),
        Claim.measured(
            COST_SPECIFIC,
            part="alone",
            claim="The matching heads alone, before the random heads' difference is taken off",
            ours=result["named"],
            lo=result["named_lo"],
            hi=result["named_hi"],
            reason=f"The matching heads' own standardised difference, {where}",
            **common,
        ),
    ]


HALF = 0.5  # IOI's circuit kept most of the model's behaviour: the faithfulness claim asks for more than half
CIRCUIT_UNITS = ((FAITHFUL, CIRCUIT_KEPT), (COMPLETE, CIRCUIT_INCOMPLETE), (MINIMAL, HEAD_ADDED))


def _faithful_conditions(table: pd.DataFrame) -> list[tuple[float, float, float]]:
    """The two conditions faithfulness names, from one ablation's table: the share kept above half (IOI's circuit kept
    most) and above random circuits of its size, each (value, lo, hi)."""
    f = table.set_index("what")
    kept, over = f.loc["faithfulness"], f.loc["circuit minus random"]
    return [(kept["value"] - HALF, kept["lo"] - HALF, kept["hi"] - HALF), (over["value"], over["lo"], over["hi"])]


def _under(resampled: pd.DataFrame) -> str:
    return ", under mean and under resample ablation" if not resampled.empty else ", under mean ablation"


def _resampled_note(resampled: pd.DataFrame) -> str:
    """One sentence: the circuit's faithfulness under resample ablation, beside mean ablation."""
    if resampled.empty:
        return ""
    r = resampled.set_index("what")
    kept, random = r.loc["faithfulness"], r.loc["random circuits"]
    return (
        f" Under resample ablation (each ablated head outputting what it output on one real training pair, at the "
        f"position of the same class and rank; the random circuits read the same pairs) it keeps {kept['value']:.1%} "
        f"[{kept['lo']:.1%}, {kept['hi']:.1%}], random circuits {random['value']:.1%} "
        f"[{random['lo']:.1%}, {random['hi']:.1%}]."
    )


def circuit_takeaway(circuit: dict[str, pd.DataFrame]) -> str:
    """The circuit graph's caption: what the circuit keeps on its own, under each ablation, beside random circuits."""
    parts = []
    for way, table in (("mean", circuit["faithfulness"]), ("resample", circuit.get("resampled", pd.DataFrame()))):
        if table.empty:
            continue
        f = table.set_index("what")
        kept, random = f.loc["faithfulness"], f.loc["random circuits"]
        parts.append(
            f"under {way} ablation it keeps {kept['value']:.1%} [{kept['lo']:.1%}, {kept['hi']:.1%}] of the full "
            f"model's grade-logit difference, random circuits of its size {random['value']:.1%}"
        )
    if not parts:
        return "The circuit was not measured: no part of the pairs left to measure it on."
    size = int(circuit["faithfulness"].set_index("what").loc["faithfulness", "size"])
    return f"The circuit of {size} heads, on the pairs that did not choose it: " + "; ".join(parts) + "."


def faithfulness_both_ways(circuit: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The circuit's faithfulness table (:func:`circuit_measures`) under mean ablation and under resample ablation,
    one below the other with an ``ablation`` column."""
    ways = {"mean": circuit["faithfulness"], "resample": circuit["resampled"]}
    tables = [t.assign(ablation=way) for way, t in ways.items() if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _circuit_rows(circuit: dict[str, pd.DataFrame]) -> list[Claim]:
    """IOI's three measures of the circuit found (:func:`circuit_measures`), each on the part of the pairs that did
    not choose it, and only where the full model's difference on that part lies above 0 (a share of it is what every
    number is). Faithfulness is the weakest of its readings, the share kept above half (IOI's circuit kept most) and
    above random circuits of its size, under mean and under resample ablation; completeness the subset whose
    interval reaches farthest from 0; minimality the head whose interval reaches lowest: each row the weakest of the
    conditions its claim names every one of."""
    faithful = circuit["faithfulness"]
    if faithful.empty:
        why = "Not measured: no head lies above the matching heads, or a part of 07's held-out contrast pairs is empty"
        return [Claim.not_measured(spec, reason=why, unit=unit) for spec, unit in CIRCUIT_UNITS]
    f = faithful.set_index("what")
    full, n = f.loc["full model"], int(f.loc["full model", "n_examples"])
    pairs = f"on the {n} contrast pairs of 07's held-out half that did not choose the circuit"
    if not full["lo"] > 0:
        why = (
            f"Not measured: {pairs}, the full model's grade-logit difference is {full['value']:+.3g} "
            f"[{full['lo']:+.3g}, {full['hi']:+.3g}], which does not exclude 0: no difference to keep a share of"
        )
        return [Claim.not_measured(spec, reason=why, unit=unit) for spec, unit in CIRCUIT_UNITS]
    kept, random, over = f.loc["faithfulness"], f.loc["random circuits"], f.loc["circuit minus random"]
    resampled = circuit.get("resampled", pd.DataFrame())
    conditions = [*_faithful_conditions(faithful), *([] if resampled.empty else _faithful_conditions(resampled))]
    weaker = min(conditions, key=lambda x: x[1])
    size = int(kept["size"])
    on_pairs = f"{pairs[0].upper()}{pairs[1:]}"
    rows = [
        Claim.measured(
            FAITHFUL,
            ours=weaker[0],
            lo=weaker[1],
            hi=weaker[2],
            unit=CIRCUIT_KEPT,
            method=f"{CIRCUIT_METHOD} and random circuits",
            n_examples=n,
            n_draws=int(random["n_draws"]),
            weakest_of=len(conditions),
            reason=(
                f"{on_pairs}, the circuit of {size} heads, every other head mean-ablated per token class, keeps "
                f"{kept['value']:.1%} [{kept['lo']:.1%}, {kept['hi']:.1%}] of the full model's grade-logit difference "
                f"({full['value']:+.3g}); {int(random['n_draws'])} random circuits of {size} heads keep "
                f"{random['value']:.1%} on average ({100 * over['value']:+.1f} points "
                f"[{100 * over['lo']:+.1f}, {100 * over['hi']:+.1f}] for the circuit); with every head ablated the "
                f"difference is {f.loc['empty circuit', 'value']:+.3g}.{_resampled_note(resampled)} Judged on the "
                f"weakest of its share above half and above the random circuits{_under(resampled)}"
            ),
        )
    ]
    complete = circuit["completeness"]
    worst = complete.loc[complete[["lo", "hi"]].abs().max(axis=1).idxmax()]
    others = complete["incompleteness"].drop(worst.name).max() if len(complete) > 1 else 0.0
    rows.append(
        Claim.measured(
            COMPLETE,
            ours=worst["value"],
            lo=worst["lo"],
            hi=worst["hi"],
            unit=CIRCUIT_INCOMPLETE,
            method=CIRCUIT_METHOD,
            n_examples=n,
            weakest_of=len(complete),
            reason=(
                f"{on_pairs}, of {len(complete)} subsets K of the circuit (greedy ones chosen on the other pairs, "
                f"random ones), {worst['subset']} ({worst['heads']}) reaches farthest: the circuit without it keeps "
                f"{100 * worst['value']:+.1f} points of the full model's difference more than the model without it "
                f"(F(C∖K) − F(M∖K)); the largest of the others, {100 * others:.1f} points either way"
            ),
        )
    )
    minimal = circuit["minimality"].sort_values(["lo", "layer", "head"]).reset_index(drop=True)
    least = minimal.iloc[0]
    rows.append(
        Claim.measured(
            MINIMAL,
            ours=least["value"],
            lo=least["lo"],
            hi=least["hi"],
            unit=HEAD_ADDED,
            method=CIRCUIT_METHOD,
            n_examples=n,
            weakest_of=len(minimal),
            reason=(
                f"{on_pairs}, head {int(least['layer'])}.{int(least['head'])} adds the least for certain inside the "
                f"circuit, {100 * least['value']:+.1f} points [{100 * least['lo']:+.1f}, {100 * least['hi']:+.1f}] "
                f"of the full model's difference (F(C) − F(C∖{{v}})); every head of the {len(minimal)} adds "
                f"{100 * minimal['value'].min():+.1f} to {100 * minimal['value'].max():+.1f} points"
            ),
        )
    )
    return rows


def _percent(x: float) -> str:
    """A share as the receiver rows write it: a small one keeps its digits."""
    return f"{x:.2%}" if abs(x) < 0.01 else f"{x:.1%}"


def _receiver_rows(ranking: pd.DataFrame, senders: pd.DataFrame, matching, receiver) -> list[Claim]:
    """Notebook 07's ``[CLS]`` head: what comes back through its output at ``[CLS]`` alone (the route to the
    classifier); what it reads from the matching heads against random senders (:func:`sender_view`), with its rank
    among the receivers and the rank's interval as a sub-row."""
    layer, head = receiver
    mine = ranking[(ranking["layer"] == layer) & (ranking["head"] == head)] if len(ranking) else ranking
    if not len(mine) or len(ranking) < 2:
        why = path_not_measured(receiver, matching) if not len(mine) else "It is the only head above them."
        return [
            Claim.not_measured(HANDS_ON, reason=f"Not measured. {why}", unit=CLS_ROUTE),
            Claim.not_measured(READS, reason=f"Not measured. {why}", unit=READS_SENDERS),
        ]
    r, others, n = mine.iloc[0], len(ranking) - 1, int(mine.iloc[0]["n_examples"])
    where = f"on {n} contrast pairs of 07's held-out half"
    if not gap_moves(r, 1):
        why = (
            f"Not measured: {where}, the contrast moves the grade logit by {_gap(r)} (original minus contrast, mean "
            "and 95% interval), which does not exclude 0 on the side it should lie: no difference to bring back a "
            "share of"
        )
        return [
            Claim.not_measured(HANDS_ON, reason=why, unit=CLS_ROUTE),
            Claim.not_measured(READS, reason=why, unit=READS_SENDERS),
        ]
    mean_others = (ranking["cls_restored"].sum() - r["cls_restored"]) / others
    rows = [
        Claim.measured(
            HANDS_ON,
            ours=r["cls_restored"],
            lo=r["cls_lo"],
            hi=r["cls_hi"],
            unit=CLS_ROUTE,
            method=RECEIVER_METHOD,
            n_examples=n,
            reason=(
                f"Head {layer}.{head} (notebook 07's) reading the matching heads' change through its output at [CLS] "
                f"alone brings back {_percent(r['cls_restored'])} of the grade-logit drop {where} (at every position, "
                f"{_percent(r['restored'])}); the {others} other heads above the matching heads bring back "
                f"{_percent(mean_others)} through [CLS] on average"
            ),
        )
    ]
    control = senders[(senders["layer"] == layer) & (senders["head"] == head)] if len(senders) else senders
    if not len(control):
        return [
            *rows,
            Claim.not_measured(READS, reason="Not measured: no random-sender control ran", unit=READS_SENDERS),
        ]
    c = control.iloc[0]
    sample = f"on {int(c['n_examples'])} of those pairs (a seeded sample)"
    if not gap_moves(c, 1):
        return [
            *rows,
            Claim.not_measured(
                READS,
                reason=f"Not measured: {sample}, the contrast moves the grade logit by {_gap(c)}, which does not "
                "exclude 0 on the side it should lie",
                unit=READS_SENDERS,
            ),
        ]
    rows.append(
        Claim.measured(
            READS,
            ours=c["over_random"],
            lo=c["lo"],
            hi=c["hi"],
            unit=READS_SENDERS,
            method=SENDER_METHOD,
            n_examples=int(c["n_examples"]),
            n_draws=int(c["n_draws"]),
            reason=(
                f"Head {layer}.{head} alone reading the matching heads' change brings back {_percent(c['restored'])} "
                f"of the grade-logit drop {sample}; reading {int(c['n_draws'])} random sets of as many heads in their "
                f"layers instead, {_percent(c['random_mean'])} on average. Among the {others + 1} heads above the "
                f"matching heads it ranks {int(r['rank'])} ({int(r['rank_lo'])} to {int(r['rank_hi'])} over the "
                "resampled pairs)"
            ),
        )
    )
    rows.append(
        Claim.measured(
            READS,
            part="rank",
            claim="Its rank among the heads above the matching heads by what it reads of them (1: reads most), "
            "with the rank's 95% interval over the resampled pairs",
            ours=float(r["rank"]),
            lo=float(r["rank_lo"]),
            hi=float(r["rank_hi"]),
            unit=RECEIVER_RANK,
            method=RECEIVER_METHOD,
            n_examples=n,
            reason=f"It ranks {int(r['rank'])} of {others + 1}",
        )
    )
    return rows


def held_out_contrast(lab: Lab, limit: int | None, stopwords=None, kind: str = "corrupted", draw: int = 0) -> Contrast:
    """The ``kind`` contrast of notebook 05's held-out pairs (those its term-matching heads were not chosen on), with
    ``examples`` and ``changes`` naming positions in the evaluated split; ``draw`` > 0: other replacement words."""
    held = measured_examples(len(lab.encoded), limit, lab.params.seed)
    made = contrast_pairs(lab.encoded.subset(held), lab.tokenizer, kind, stopwords, lab.params.seed, draw=draw)
    return _in_split(made, held)


def _in_split(made: Contrast, held: np.ndarray) -> Contrast:
    """A contrast built on the pairs ``held`` with its ``examples`` and ``changes`` naming positions in the split."""
    return replace(
        made, examples=held[made.examples], changes=made.changes.assign(example=held[made.changes["example"]])
    )


def identity_tables(lab: Lab, matching, limit: int | None, stopwords, draws: int) -> dict[str, list[pd.DataFrame]]:
    """Per kind of :func:`headlab.measures.contrast.matched_contrasts` (one shared title word replaced, one unshared
    word of its shape and frequency band), per draw of the words (``draws``), the matching heads patched back from
    the original pairs: on notebook 05's held-out pairs, the pairs every draw qualifies, each table's ``example`` the
    pair's position in the evaluated split (what :func:`identity_difference` takes)."""
    held = measured_examples(len(lab.encoded), limit, lab.params.seed)
    pairs = lab.encoded.subset(held)
    made = [matched_contrasts(pairs, lab.tokenizer, stopwords, lab.params.seed, draw=d) for d in range(draws)]
    common = set.intersection(*(set(held[shared.examples]) for shared, _ in made))
    tables: dict[str, list[pd.DataFrame]] = {kind: [] for kind in MATCHED_KINDS}
    for draw, both in enumerate(made):
        for contrast in both:
            table = lab.patch(
                contrast.original,
                contrast.changed,
                {"matching": sorted(tuple(h) for h in matching)},
                f"restore-{contrast.kind}-{draw}",
                progress=False,
            )
            table = table.assign(example=held[contrast.examples[table["example"].to_numpy()]])
            tables[contrast.kind].append(table[table["example"].isin(common)].reset_index(drop=True))
    return tables


def contrast_examples(contrast: Contrast, lab: Lab, n: int = 6) -> pd.DataFrame:
    """The first ``n`` contrast pairs as a reader checks them: query, title, the changed title, the words replaced."""
    rows = []
    for i, example in enumerate(contrast.examples[:n]):
        pair = read_pair(lab.tokenizer, contrast.changed.input_ids[i])
        changed = lab.tokenizer.decode([pair.ids[j] for j in pair.title])
        words = contrast.changes[contrast.changes["example"] == example]
        rows.append(
            {
                "example": int(example),
                "query": lab.frame.iloc[example]["query"],
                "title": lab.frame.iloc[example]["title"],
                "changed title": changed,
                "replaced": ", ".join(f"{r.was} → {r.now}" for r in words.itertuples()),
            }
        )
    return pd.DataFrame(rows)


HEAD_MAP_PAIRS = 256  # contrast pairs every head alone is patched on, and attribution patching audited on


def head_map_pairs(contrast: Contrast, seed: int, size: int | None = None) -> np.ndarray:
    """A seeded sample of ``size`` (:data:`HEAD_MAP_PAIRS`) of the contrast's pairs (positions in its ``examples``,
    in order; all of them if fewer): the head map's patches, one per head, are the page's largest cost (144 on a
    12 x 12 model); the named sets read every pair, and no claim reads the map."""
    order = np.random.default_rng([seed, 0x4EAD]).permutation(len(contrast.examples))
    return np.sort(order[: HEAD_MAP_PAIRS if size is None else size])


def restoring_patches(
    lab: Lab, contrast: Contrast, plan: dict, progress: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(named, heads)``: the contrast pairs with each patch of ``plan`` taken from the original pairs (does the head
    restore the grade?), :func:`headlab.core.patching.run_patching` tables: the named sets (the matching heads, the
    random sets) on every pair, every head alone on :func:`head_map_pairs`. Only this direction is patched for every
    head; the other (the original pairs with heads taken from the contrast pairs: does it break the grade?) runs for
    the named sets and the top receivers alone (:func:`both_directions`), not for every head, which would cost as
    many patches again (#51)."""
    single = {name: heads for name, heads in plan.items() if name not in ("matching", *random_patches(plan))}
    named = {name: heads for name, heads in plan.items() if name not in single}
    sample = contrast.subset(head_map_pairs(contrast, lab.params.seed))
    return (
        lab.patch(contrast.original, contrast.changed, named, f"restore-{contrast.kind}", progress),
        lab.patch(sample.original, sample.changed, single, f"heads-{contrast.kind}", progress),
    )


BOTH_WAYS_RECEIVERS = 2  # the top receivers patched both ways (each way is one patch over every contrast pair)
BOTH_WAYS_DRAWS = 4  # the random lower-half sets patched both ways (the first of the plan's)


def _drawn_shares(table: pd.DataFrame, drawn: list[str], way: str, n_boot: int, seed: int) -> dict:
    """The mean share of the difference the ``drawn`` random sets move, with its two-stage 95% interval (pairs and
    draws resampled), as ``way``, ``<way>_lo``, ``<way>_hi``."""
    wide = table.pivot(index="example", columns="patch", values=METRIC)
    target = wide["target"].to_numpy()
    weights = bootstrap_weights(len(target), n_boot, seed)
    counts = draw_counts(len(drawn), n_boot, [seed, len(drawn)])
    point, boot = draws_ratio_of_means(
        wide[drawn].to_numpy().T - target, wide["source"].to_numpy() - target, weights, counts
    )
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {way: point, f"{way}_lo": float(lo), f"{way}_hi": float(hi)}


def both_directions(
    lab,
    contrast: Contrast,
    restoring: pd.DataFrame,
    plan: dict,
    ranking: pd.DataFrame,
    n_boot: int = N_BOOT,
    k: int = BOTH_WAYS_RECEIVERS,
    draws: int = BOTH_WAYS_DRAWS,
) -> pd.DataFrame:
    """The named sets (the matching heads, the first ``draws`` random lower-half sets) and the ``k`` top receivers of
    ``ranking`` patched both ways on the contrast pairs: ``restored`` (sufficiency: the contrast pair with the heads
    from the original, read from ``restoring``) and ``broken`` (necessity: the original pair with the heads from the
    contrast, the share of the drop the patch alone causes; the receivers' restoring patches run here, on every pair),
    each with its 95% paired bootstrap interval; the random sets as one row, their mean over draws with a two-stage
    interval (pairs and draws resampled: :func:`headlab.core.stats.draws_ratio_of_means`; ``n_draws`` sets, few, so
    the spread between sets is understated, and one draw of the replacement words)."""
    receivers = [f"{int(l)}.{int(h)}" for l, h in zip(ranking["layer"].head(k), ranking["head"].head(k))]
    drawn_sets = random_patches(plan)[:draws]
    names = ["matching", *drawn_sets, *receivers]
    breaking = lab.patch(
        contrast.changed, contrast.original, {n: plan[n] for n in names}, f"break-{contrast.kind}", progress=False
    )
    read = lab.patch(  # the head map patches every head on a sample of the pairs: the receivers here on every pair
        contrast.original, contrast.changed, {r: plan[r] for r in receivers}, f"restore-{contrast.kind}", False
    )
    restoring = pd.concat([restoring, read[read["patch"].isin(receivers)]], ignore_index=True)
    seed = lab.params.seed
    ways = {"restored": restoring, "broken": breaking}
    ways = {way: table[table["patch"].isin(["source", "target", *names])] for way, table in ways.items()}
    tables = {
        way: restored_shares(table, n_boot, seed)
        .set_index("patch")
        .loc[names, ["restored", "lo", "hi"]]
        .add_prefix(f"{way}_")
        for way, table in ways.items()
    }
    both = (
        tables["restored"]
        .join(tables["broken"])
        .rename(columns={"restored_restored": "restored", "broken_restored": "broken"})
    )
    drawn = pd.DataFrame(
        [{k: v for way, table in ways.items() for k, v in _drawn_shares(table, drawn_sets, way, n_boot, seed).items()}],
        index=[f"random lower-half sets (mean of {len(drawn_sets)})"],
    )
    kept = both.drop(index=drawn_sets)
    rows = pd.concat([kept.iloc[:1], drawn, kept.iloc[1:]])
    rows = rows.assign(n_draws=np.where(rows.index.isin(drawn.index), len(drawn_sets), 1))
    return rows.rename_axis("patch").reset_index().assign(n_examples=len(contrast.examples))


def head_views(
    lab,
    restoring: pd.DataFrame,
    single_heads,
    limit: int | None,
    stopwords,
    by: str,
    n_boot: int = N_BOOT,
    attributed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per head, the three views of it: the share of the grade it restores (patching, with its interval), its
    masking cost on the held-out pairs (``single_heads``: notebook 02's single-head masks,
    :func:`headlab.measures.grids.single_head_correct`) and its role score ``by`` on the pairs the matching heads
    were chosen on (notebook 05); with ``attributed`` (:func:`circuit_views`), attribution patching's estimate of
    the share each head restores (``attribution``)."""
    seed = lab.params.seed
    views = restored_shares(restoring, n_boot, seed)
    views = views[views["layer"] >= 0].drop(columns="patch")
    correct, base = single_heads.correct, single_heads.base_correct
    held = measured_examples(len(lab.encoded), limit, seed)
    cost = base[held].mean() - correct.iloc[:, held].to_numpy(dtype=np.float64).mean(axis=1)
    views = views.merge(
        pd.DataFrame(
            {
                "layer": correct.index.get_level_values("layer"),
                "head": correct.index.get_level_values("head"),
                "masking_cost": cost,
            }
        ),
        on=["layer", "head"],
    )
    roles = head_roles(lab, choice_limit(len(lab.encoded), limit), stopwords)
    views = views.merge(roles[["layer", "head", by]].rename(columns={by: "role_score"}), on=["layer", "head"])
    if attributed is not None:
        views = views.merge(
            attributed[["layer", "head", "estimate"]].rename(columns={"estimate": "attribution"}), on=["layer", "head"]
        )
    return views


def agreement(views: pd.DataFrame, matching, k: int, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """How the patching map agrees with the two other views: the top-k heads by restored share against the matching
    heads (05) and against the top-k by masking cost (02), each with its chance overlap and p; Spearman's rank
    correlation of the restored share with the masking cost and with the role score, over every head."""
    n = len(views)
    top = top_heads(views, k)
    rows = []
    for comparison, chosen in (
        (f"top {k} by patching vs term-matching heads (05)", matching),
        (f"top {k} by patching vs top {k} by masking cost (02)", top_heads(views, k, by="masking_cost")),
    ):
        o = top_overlap(top, chosen, n)
        rows.append(
            {
                "comparison": comparison,
                "value": o["shared"],
                "lo": np.nan,
                "hi": np.nan,
                "chance": o["chance"],
                "p": o["p"],
                "heads": _heads(o["heads"]),
            }
        )
    for column, name in {"masking_cost": "masking cost (02)", "role_score": "role score (05)"}.items():
        r = rank_correlation(views["restored"], views[column], n_boot, seed)
        rows.append(
            {
                "comparison": f"rank correlation of the restored share with the {name}",
                "value": r["rho"],
                "lo": r["lo"],
                "hi": r["hi"],
                "chance": 0.0,
                "p": np.nan,
                "heads": "",
            }
        )
    return pd.DataFrame(rows)


ATTRIBUTION_TOP = (5, 10)  # the exact top-k heads whose recall by attribution patching is checked


def attribution_agreement(views: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Attribution patching (``attribution``, computed in fp32: :func:`circuit_views`) audited against exact patching
    (``restored``) over every head: Spearman's rank correlation with its bootstrap interval over heads; per k of
    :data:`ATTRIBUTION_TOP`, the share of the exact top-k heads that attribution's top k recalls, with the heads
    where they disagree; and, for attribution's own top heads, its estimate over the exact share (1: exact; far
    from 1 where the patch is too large for a first-order estimate, AtP's saturation, Kramár et al. 2024)."""
    r = rank_correlation(views["restored"], views["attribution"], n_boot, seed)
    rows = [{"measure": "rank correlation (Spearman)", "value": r["rho"], "lo": r["lo"], "hi": r["hi"], "heads": ""}]
    for k in ATTRIBUTION_TOP:
        exact, estimated = set(top_heads(views, k)), set(top_heads(views, k, "attribution"))
        missed, added = sorted(exact - estimated), sorted(estimated - exact)
        rows.append(
            {
                "measure": f"recall of the exact top {k}",
                "value": len(exact & estimated) / k,
                "lo": np.nan,
                "hi": np.nan,
                "heads": f"missed: {_heads(missed) or 'none'}; ranked in instead: {_heads(added) or 'none'}",
            }
        )
    indexed = views.set_index(["layer", "head"])
    for layer, head in top_heads(views, ATTRIBUTION_TOP[0], "attribution"):
        estimate, exact_share = indexed.loc[(layer, head), ["attribution", "restored"]]
        rows.append(
            {
                "measure": f"attribution over exact, head {layer}.{head}",
                "value": float(estimate / exact_share) if exact_share else np.nan,
                "lo": np.nan,
                "hi": np.nan,
                "heads": f"{layer}.{head}: estimate {estimate:+.1%}, exact {exact_share:+.1%}",
            }
        )
    return pd.DataFrame(rows).assign(n_heads=len(views))


SPECIFIC_DRAWS = 6  # random lower-half sets mean-ablated for the specificity (each a pass over the held-out pairs)


def specificity(
    lab: Lab, matching, limit: int | None, stopwords, n_boot: int = N_BOOT, draws: int = SPECIFIC_DRAWS
) -> dict:
    """The matching heads mean-ablated per token class (:meth:`headlab.lab.Lab.class_means`, IOI's ablation, as the
    circuit's) against ``draws`` random lower-half sets: how much more each moves the grade logit on notebook 05's
    held-out pairs that share a term than on those that share none, at the same gold grade and unablated grade logit
    (:func:`ablation_specificity`). A mean-ablated model does not fall to one answer, and the grade logit moves where a
    right-or-wrong does not."""
    layers, heads = head_grid(lab.model)
    seed = lab.params.seed
    held = measured_examples(len(lab.encoded), limit, seed)
    pairs = lab.encoded.subset(held)
    sets = [[], sorted(tuple(h) for h in matching), *random_lower_sets(layers, heads, matching, draws, seed)]
    key = {
        "examples": [int(e) for e in held],
        "sets": [[list(h) for h in heads_set] for heads_set in sets],
        "ablation": "mean per token class",
        "mean_pairs": MEAN_PAIRS,
    }
    table = lab.stored("patching_specificity", key, lambda: _ablated_grade_logits(lab, pairs, sets))
    grade_logits = table.pivot(index="set", columns="pair", values="grade_logit").to_numpy()
    base, ablated = grade_logits[0], grade_logits[1:]
    shares = shares_terms(pairs, lab.tokenizer, stopwords)
    return ablation_specificity(ablated - base, base, shares, pairs.grades, n_boot, seed)


def _ablated_grade_logits(lab: Lab, pairs: Encoded, sets) -> pd.DataFrame:
    """One row per head set (``set``: its place in ``sets``, the first empty) and pair: the grade logit with the set
    mean-ablated per token class."""
    logits = mean_ablated_logits(
        lab.model,
        pairs,
        pair_classes(lab.tokenizer, pairs),
        lab.class_means(),
        sets,
        lab.batch_size,
        lab.device,
        lab.pad_id,
    )
    n_sets, n_pairs, _ = logits.shape
    return pd.DataFrame(
        {
            "set": np.repeat(np.arange(n_sets), n_pairs),
            "pair": np.tile(np.arange(n_pairs), n_sets),
            "grade_logit": grade_logit(logits).ravel(),
        }
    )


CONTROLS = {"injected": -1}  # contrast kind -> the sign its gap should have


def replacement_tables(
    lab, contrast: Contrast, restoring: pd.DataFrame, plan: dict, draws: int, limit: int | None, stopwords
) -> list[pd.DataFrame]:
    """The matching heads and the random sets of ``plan`` patched back on ``draws`` draws of the contrast's replacement
    words (the first is ``contrast`` itself, whose patches ``restoring`` holds), each table on the pairs every draw
    qualifies, its ``example`` the pair's position in the evaluated split: what :func:`restored_against_draws` takes
    to put the choice of replacement words in its interval."""
    together = {name: heads for name, heads in plan.items() if name == "matching" or name.startswith("random-d")}
    made = [(contrast, restoring)]
    for draw in range(1, draws):
        other = held_out_contrast(lab, limit, stopwords, contrast.kind, draw)
        made.append(
            (other, lab.patch(other.original, other.changed, together, f"restore-{contrast.kind}-{draw}", False))
        )
    common = set(contrast.examples)
    for other, _ in made[1:]:
        common &= set(other.examples)
    tables = []
    for other, table in made:
        named = table[table["patch"].isin(["source", "target", *together])]
        named = named.assign(example=other.examples[named["example"].to_numpy()])
        tables.append(named[named["example"].isin(common)].reset_index(drop=True))
    return tables


def contrast_controls(
    lab: Lab, matching, plan: dict, limit: int | None, stopwords, n_boot: int = N_BOOT
) -> dict[str, dict]:
    """The matching heads against random heads (:func:`restored_against_draws`, on :data:`METRIC`) on the other
    contrast of the held-out pairs, ``injected`` (TFC1: a query term put into the title, which should raise the grade,
    so the original lies below its contrast). A word the query lacks, replaced, is :func:`identity_tables`' control,
    matched in size to one shared term. A contrast of fewer than two pairs gives only ``n_examples``."""
    results = {}
    together = {name: heads for name, heads in plan.items() if name == "matching" or name.startswith("random-d")}
    for kind in CONTROLS:
        contrast = held_out_contrast(lab, limit, stopwords, kind)
        if len(contrast.examples) < 2:
            results[kind] = {"n_examples": len(contrast.examples)}
            continue
        table = lab.patch(contrast.original, contrast.changed, together, f"restore-{kind}", progress=False)
        results[kind] = restored_against_draws(table, "matching", random_patches(plan), n_boot, lab.params.seed)
    return results


def controls_table(controls: dict[str, dict]) -> pd.DataFrame:
    """:func:`contrast_controls` as a table, one row per contrast."""
    return pd.DataFrame([{"contrast": kind, **result} for kind, result in controls.items()])


def circuit_views(
    lab, contrast: Contrast, matching, stopwords, n_boot: int = N_BOOT
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(positions, attribution)`` on the contrast pairs: the matching heads patched back at each group of positions
    (:func:`headlab.measures.circuit.restored_by_position`) and attribution patching per head in fp32
    (:func:`headlab.measures.circuit.attribution_scores`) on the pairs every head is patched on
    (:func:`head_map_pairs`, so the audit compares like with like), each kept (:meth:`headlab.lab.Lab.stored`)."""
    key = {
        "examples": [int(e) for e in contrast.examples],
        "kind": contrast.kind,
        "matching": sorted([int(l), int(h)] for l, h in matching),
        "stopwords": sorted(stopwords or ()),
        "n_boot": n_boot,
        "seed": lab.params.seed,
    }
    engine = PatchEngine(lab.model, contrast.original, contrast.changed, lab.batch_size, lab.device, lab.pad_id)
    groups = position_groups(contrast, lab.tokenizer, stopwords)
    seed = lab.params.seed
    positions = lab.stored(
        "patching_positions", key, lambda: restored_by_position(engine, matching, groups, n_boot, seed)
    )
    sampled = head_map_pairs(contrast, seed)
    sample = contrast.subset(sampled)
    exact = PatchEngine(
        lab.model, sample.original, sample.changed, lab.batch_size, lab.device, lab.pad_id, autocast=False
    )  # fp32: the smallest shares sit below bf16's resolution of the logits
    attributed = lab.stored(
        "patching_attribution",
        {**key, "precision": "fp32", "sampled": [int(i) for i in sampled]},
        lambda: attribution_scores(
            exact, {g: [where[i] for i in sampled] for g, where in groups.items()}, n_boot, seed
        ),
    )
    return positions, attributed


def _held_out_receivers(lab: Lab, contrast: Contrast, matching, single_heads):
    """Notebook 07's head (chosen, as there, on its selection half of ``single_heads``), every head in a layer above
    the matching heads, and the contrast pairs of 07's held-out half (the half 05 did not choose its heads on
    either), by their index in ``contrast``."""
    layers, heads = head_grid(lab.model)
    select, estimate = split_halves(len(lab.encoded), lab.params.seed)
    focus = focus_head(selection_grid(single_heads.correct, single_heads.base_correct, select), layers)
    receiver = (int(focus["layer"]), int(focus["head"]))
    top = max(int(l) for l, _ in matching)
    receivers = [(l, h) for l in range(top + 1, layers) for h in range(heads)]
    return receiver, receivers, np.flatnonzero(np.isin(contrast.examples, estimate))


def _engine(lab: Lab, contrast: Contrast, keep) -> PatchEngine:
    return PatchEngine(
        lab.model,
        contrast.original.subset(keep),
        contrast.changed.subset(keep),
        lab.batch_size,
        lab.device,
        lab.pad_id,
    )


def _circuit_key(lab: Lab, contrast: Contrast, matching, keep, n_boot: int) -> dict:
    return {
        "examples": [int(e) for e in contrast.examples[keep]],
        "kind": contrast.kind,
        "matching": sorted([int(l), int(h)] for l, h in matching),
        "n_boot": n_boot,
        "seed": lab.params.seed,
    }


def receiver_moves_view(lab: Lab, contrast: Contrast, matching, single_heads) -> tuple[pd.DataFrame, tuple, np.ndarray]:
    """``(moves, receiver, keep)``: path patching from the matching heads to every head in a layer above them, per
    pair (:func:`headlab.measures.circuit.receiver_moves`), on the contrast pairs of notebook 07's held-out half
    (``keep``, by index in ``contrast``; a move's ``pair`` is its position in ``keep``), kept
    (:meth:`headlab.lab.Lab.stored`): the one set of path passes that both the ranking (:func:`receivers_view`) and the
    circuit's choice of receivers (:func:`circuit_measures`, on one part) read. ``receiver`` is 07's head. Empty where
    no layer lies above the matching heads or no pair lies in that half."""
    receiver, receivers, keep = _held_out_receivers(lab, contrast, matching, single_heads)
    if not receivers or not len(keep):
        return pd.DataFrame(), receiver, keep
    key = {k: v for k, v in _circuit_key(lab, contrast, matching, keep, 0).items() if k != "n_boot"}
    moves = lab.stored(
        "patching_receiver_moves",
        {**key, "receivers": [list(r) for r in receivers]},
        lambda: receiver_moves(_engine(lab, contrast, keep), matching, receivers),
    )
    return moves, receiver, keep


def receivers_view(
    lab: Lab, contrast: Contrast, matching, single_heads, n_boot: int = N_BOOT
) -> tuple[pd.DataFrame, tuple]:
    """``(ranking, receiver)``: every head in a layer above the matching heads ranked by what it reads of them
    (:func:`headlab.measures.circuit.receiver_ranking`) on the contrast pairs of notebook 07's held-out half
    (:func:`receiver_moves_view`); ``receiver`` is 07's head, to find in the ranking. An empty table where no layer
    lies above the matching heads or no pair lies in that half."""
    moves, receiver, _ = receiver_moves_view(lab, contrast, matching, single_heads)
    if moves.empty:
        return pd.DataFrame(), receiver
    return receiver_ranking(moves, n_boot, lab.params.seed), receiver


def routes_view(lab: Lab, contrast: Contrast, matching, single_heads, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Notebook 07's head reading the matching heads' change through its query, key or value alone, and all three
    (:func:`headlab.measures.circuit.route_shares`), on the pairs :func:`receivers_view` ranks on, kept. Empty where
    the head sits no higher than the matching heads or no pair lies in that half."""
    receiver, _, keep = _held_out_receivers(lab, contrast, matching, single_heads)
    if not _above(receiver, matching) or not len(keep):
        return pd.DataFrame()
    key = {**_circuit_key(lab, contrast, matching, keep, n_boot), "receiver": list(receiver)}
    return lab.stored(
        "patching_routes",
        key,
        lambda: route_shares(_engine(lab, contrast, keep), matching, receiver, n_boot, lab.params.seed),
    )


SENDER_RECEIVERS = 1  # the top receivers the random-sender control runs for, beside notebook 07's head
# pairs (a seeded sample of those the receivers are ranked on) the control runs on: each receiver costs a path pass
# over them per random set
SENDER_PAIRS = 128


def sender_view(
    lab,
    contrast: Contrast,
    matching,
    single_heads,
    ranking: pd.DataFrame,
    draws: int,
    n_boot: int = N_BOOT,
    top: int = SENDER_RECEIVERS,
) -> pd.DataFrame:
    """The random-sender control (:func:`headlab.measures.circuit.sender_control`) for notebook 07's head and the
    ``top`` receivers of ``ranking`` (each receiver costs a path pass per random set): what each reads of the
    matching heads against what it reads of ``draws`` random sets of as many heads in their layers
    (:func:`headlab.measures.circuit.random_senders`, none of them a matching head or 07's head), on
    :data:`SENDER_PAIRS` of the pairs :func:`receivers_view` ranked on (a seeded sample), kept. Empty where there is
    no ranking or too few heads to draw from."""
    if ranking.empty:
        return pd.DataFrame()
    receiver, _, held = _held_out_receivers(lab, contrast, matching, single_heads)
    keep = np.sort(held[np.random.default_rng([lab.params.seed, 0x5A3F]).permutation(len(held))[:SENDER_PAIRS]])
    chosen = [(int(l), int(h)) for l, h in zip(ranking["layer"].head(top), ranking["head"].head(top))]
    in_ranking = ((ranking["layer"] == receiver[0]) & (ranking["head"] == receiver[1])).any()
    receivers = chosen + [receiver] if in_ranking and receiver not in chosen else chosen
    if len(sender_pool(matching, lab.shape[1], [receiver])) < len(matching):
        return pd.DataFrame()  # a toy model: too few other heads up to the matching heads' layers to draw from
    random_sets = random_senders(matching, lab.shape[1], draws, lab.params.seed, avoid=[receiver])
    key = {
        **_circuit_key(lab, contrast, matching, keep, n_boot),
        "receivers": [list(r) for r in receivers],
        "random_senders": [[list(h) for h in s] for s in random_sets],
    }
    return lab.stored(
        "patching_senders",
        key,
        lambda: sender_control(_engine(lab, contrast, keep), matching, receivers, random_sets, n_boot, lab.params.seed),
    )


CIRCUIT_RECEIVERS = 3  # receivers of the circuit scored with IOI's measures (chosen on pairs it is not scored on)
# pairs the circuit is scored on, and its greedy subsets chosen on (other pairs): each of its ~45 mean-ablated runs
# reads them all (on the default column's 156 scoring pairs the completeness intervals spanned 2 to 8 points of F(M);
# 64 pairs widen them by about the square root of 156/64, 1.6x)
CIRCUIT_PAIRS = 64
GREEDY_STEPS = 1  # IOI's greedy search for the subset that shows the circuit most incomplete: its steps
RANDOM_SUBSETS = 4  # random subsets of the circuit removed beside the greedy ones


CIRCUIT_TABLES = ("chosen", "scored", "faithfulness", "resampled", "completeness", "minimality", "edges")


def circuit_halves(keep: np.ndarray, seed: int, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Two seeded disjoint parts of ``keep`` (contrast pairs, by index): the second, half of them or ``size`` pairs
    (:data:`CIRCUIT_PAIRS`) if fewer, scores the circuit; the first, every other pair, chooses its receivers and its
    greedy subsets, so no number is measured on the pairs that chose it."""
    order = np.random.default_rng([seed, 0xC1C]).permutation(len(keep))
    scored = min(len(keep) // 2, CIRCUIT_PAIRS if size is None else size)
    return np.sort(keep[order[scored:]]), np.sort(keep[order[:scored]])


def circuit_measures(
    lab, contrast: Contrast, matching, single_heads, draws: int, n_boot: int = N_BOOT
) -> dict[str, pd.DataFrame]:
    """The circuit found, scored as IOI scored its circuit (Wang et al. 2023; :mod:`headlab.measures.faithfulness`),
    on the contrast pairs of notebook 07's held-out half, in two parts (:func:`circuit_halves`): on the first, path
    patching ranks every head above the matching heads (``chosen``, read off :func:`receiver_moves_view`'s passes)
    and the :data:`CIRCUIT_RECEIVERS` that read most join the matching heads as the circuit, the classifier reading
    ``[CLS]`` never ablated, and on :data:`CIRCUIT_PAIRS` of them (a seeded sample) the greedy subsets are chosen;
    on the second, with every head outside it mean-ablated per token class over training pairs
    (:meth:`headlab.lab.Lab.class_means`): ``faithfulness`` beside ``draws`` random circuits of its size and layer
    makeup (``resampled``: the same with each ablated head outputting what it output on one real training pair at
    the position of the same class and rank, :meth:`headlab.lab.Lab.class_donors`), ``completeness`` (the greedy
    subsets, random ones), ``minimality``, what each receiver reads there (``scored``, for the graph: ``chosen`` is
    inflated by the choice), and the ``edges`` (each sender read by each receiver alone). Each kept
    (:meth:`headlab.lab.Lab.stored`); empty tables where no head lies above the matching heads or a part is
    empty."""
    moves, _, keep = receiver_moves_view(lab, contrast, matching, single_heads)
    choose, score = circuit_halves(keep, lab.params.seed)
    if moves.empty or not len(choose) or not len(score):
        return {name: pd.DataFrame() for name in CIRCUIT_TABLES}
    seed = lab.params.seed
    key = {
        **_circuit_key(lab, contrast, matching, choose, n_boot),
        "scored": [int(e) for e in contrast.examples[score]],
    }
    chosen = receiver_ranking(moves[moves["pair"].isin(np.searchsorted(keep, choose))], n_boot, seed)
    top = [
        (int(l), int(h))
        for l, h in zip(chosen["layer"].head(CIRCUIT_RECEIVERS), chosen["head"].head(CIRCUIT_RECEIVERS))
    ]
    circuit = sorted({*map(tuple, matching), *top})
    key |= {
        "circuit": [list(h) for h in circuit],
        "draws": draws,
        "greedy_steps": GREEDY_STEPS,
        "random_subsets": RANDOM_SUBSETS,
        "random_circuits": "layer makeup",
        "mean_pairs": MEAN_PAIRS,
        "donors": DONORS,
    }
    # the greedy search runs a mean-ablated pass per candidate: on CIRCUIT_PAIRS of the choosing pairs (a seeded sample)
    greedy = np.sort(np.random.default_rng([seed, 0x6EED]).permutation(choose)[:CIRCUIT_PAIRS])
    key["greedy_pairs"] = [int(e) for e in contrast.examples[greedy]]
    engines: dict = {}

    def engine(part: np.ndarray, resample: bool = False) -> AblationEngine:
        name = ("score" if part is score else "greedy", resample)
        if name not in engines:
            engines[name] = AblationEngine(
                lab.model,
                contrast.original.subset(part),
                contrast.changed.subset(part),
                lab.class_donors() if resample else lab.class_means(),
                lab.tokenizer,
                lab.batch_size,
                lab.device,
                lab.pad_id,
                seed=seed,
            )
        return engines[name]

    return {
        "chosen": chosen,
        "scored": receiver_ranking(moves[moves["pair"].isin(np.searchsorted(keep, score))], n_boot, seed),
        "faithfulness": lab.stored(
            "patching_faithfulness", key, lambda: faithfulness(engine(score), circuit, draws, seed, n_boot)
        ),
        "resampled": lab.stored(
            "patching_faithfulness_resampled",
            key,
            lambda: faithfulness(engine(score, resample=True), circuit, draws, seed, n_boot),
        ),
        "completeness": lab.stored(
            "patching_completeness",
            key,
            lambda: completeness(
                engine(score), circuit, RANDOM_SUBSETS, GREEDY_STEPS, seed, n_boot, chosen_on=engine(greedy)
            ),
        ),
        "minimality": lab.stored("patching_minimality", key, lambda: minimality(engine(score), circuit, seed, n_boot)),
        "edges": lab.stored(
            "patching_circuit_edges",
            key,
            lambda: found_circuit(_engine(lab, contrast, score), matching, top, n_boot, seed),
        ),
    }


def receiver_note(ranking: pd.DataFrame, receiver) -> str:
    """One sentence: where notebook 07's ``[CLS]`` head ranks among the heads that read the matching heads, and which
    head leads (the circuit found, set against the one assumed)."""
    layer, head = receiver
    if ranking.empty:
        return "No head lies above the matching heads on pairs of 07's held-out half: no receiver to rank."
    lead = ranking.iloc[0]
    mine = ranking[(ranking["layer"] == layer) & (ranking["head"] == head)]
    where = (
        f"head {layer}.{head} (notebook 07's) ranks {int(mine['rank'].iloc[0])} of {len(ranking)}, restoring "
        f"{mine['restored'].iloc[0]:.1%} [{mine['lo'].iloc[0]:.1%}, {mine['hi'].iloc[0]:.1%}]"
        if len(mine)
        else f"head {layer}.{head} (notebook 07's) is not above them"
    )
    return (
        f"Of the {len(ranking)} heads above the matching heads, each alone reading their change on "
        f"{int(lead['n_examples'])} contrast pairs: head {int(lead['layer'])}.{int(lead['head'])} restores most, "
        f"{lead['restored']:.1%} [{lead['lo']:.1%}, {lead['hi']:.1%}] of the grade-logit drop "
        f"({lead['cls_restored']:.1%} through its output at [CLS] alone); {where}."
    )


def identity_note(identity: dict) -> str:
    """One sentence on :func:`identity_difference`: the two shares on the same pairs and their difference, or why
    there are none."""
    shared, unshared = MATCHED_KINDS
    if "difference" not in identity:
        return f"Only {identity['n_examples']} held-out pairs have a shared and an unshared title word to match."
    return (
        f"On {identity['n_examples']} pairs and {identity['n_replacements']} draws of the words, replacing one shared "
        f"word moves the grade logit by {_gap(identity, f'{shared}_gap')} and one unshared word by "
        f"{_gap(identity, f'{unshared}_gap')}; patched back, the matching heads restore {identity[shared]:.1%} of the "
        f"first and {identity[unshared]:.1%} of the second, a difference of {100 * identity['difference']:+.1f} "
        f"points [{100 * identity['lo']:+.1f}, {100 * identity['hi']:+.1f}]."
    )


def sender_note(senders: pd.DataFrame, receiver) -> str:
    """One sentence on :func:`sender_view` for notebook 07's head, or why there is none."""
    layer, head = receiver
    mine = senders[(senders["layer"] == layer) & (senders["head"] == head)] if len(senders) else senders
    if not len(mine):
        return f"Head {layer}.{head} (notebook 07's) has no path from the matching heads to compare: no control ran."
    r = mine.iloc[0]
    return (
        f"Head {layer}.{head} (notebook 07's) brings back {_percent(r['restored'])} of the grade-logit drop reading "
        f"the matching heads and {_percent(r['random_mean'])} reading {int(r['n_draws'])} random sets of as many "
        f"heads in their layers: {100 * r['over_random']:+.1f} points [{100 * r['lo']:+.1f}, {100 * r['hi']:+.1f}]."
    )


def specificity_note(specific: dict) -> str:
    """One sentence on :func:`specificity`, or why there is none."""
    if not specific["n_strata"]:
        return (
            f"No gold grade has {MIN_GROUP} held-out pairs that share a term and {MIN_GROUP} that share none: "
            "the ablations' moves cannot be compared within grades."
        )
    return (
        f"Within {specific['n_strata']} gold grades ({specific['n_left_out']} pairs of smaller grades left out) and at "
        "the same unablated grade logit, mean-ablated: the matching heads move the grade logit "
        f"{specific['named']:+.3g} [{specific['named_lo']:+.3g}, {specific['named_hi']:+.3g}] within-group standard "
        f"deviations more on the {specific['n_sharing']} pairs that share a term than on the {specific['n_none']} "
        f"that share none; {specific['n_draws']} random lower-half sets {specific['random']:+.3g} "
        f"[{specific['random_lo']:+.3g}, {specific['random_hi']:+.3g}]."
    )


def _above(receiver, matching) -> bool:
    """Whether the ``[CLS]`` head sits in a layer above every matching head (else there is no path from them to it)."""
    return receiver[0] > max(l for l, _ in matching)


def path_not_measured(receiver, matching) -> str:
    """Why :func:`receivers_view` has no row for the ``[CLS]`` head: it sits no higher than the matching heads, or no
    contrast pair lies in notebook 07's held-out half (which is 05's held-out half: with 05's heads chosen on fewer
    pairs, ``ROLE_LIMIT``, or on all of them, its contrast pairs can miss that half)."""
    layer, head = receiver
    if not _above(receiver, matching):
        return f"Head {layer}.{head} sits no higher than the matching heads: no path to patch."
    return (
        f"No contrast pair lies in the half of the pairs head {layer}.{head} was not chosen on (notebook 07's held-out "
        "half): the path is not measured on pairs that chose the head."
    )
