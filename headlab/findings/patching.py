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
  points of accuracy, within gold grades, with a bootstrap interval resampling pairs within each grade and group.

Shares are of the grade logit (:data:`METRIC`), and a contrast that does not move it the way it should is not
measured (:func:`gap_moves`). Page 09 runs them through :func:`held_out_contrast` (notebook 05's held-out pairs),
:func:`restoring_patches`, :func:`circuit_views` (per group of positions, and attribution patching), :func:`head_views`
and :func:`agreement`, :func:`restored_against_draws`, :func:`contrast_controls` (TFC1 and the control),
:func:`specificity` (05's own masks, read per pair), :func:`receivers_view` (path patching to every head above the
matching heads, notebook 07's head among them) and :func:`circuit_view` (the circuit found, with its mediated share),
and judges them with :func:`claims`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.masking import head_grid
from headlab.core.patching import PatchEngine, single_head_patches
from headlab.core.stats import bootstrap_weights, draw_counts
from headlab.core.sweep import BASELINE, correct_matrix, kappa_columns, predicted_matrix
from headlab.findings.circuit import (
    attribution_scores,
    found_circuit,
    position_groups,
    receiver_ranking,
    restored_by_position,
)
from headlab.findings.cls_head import focus_head, selection_grid, split_halves
from headlab.findings.contrast import Contrast, contrast_pairs
from headlab.findings.term_matching import (
    choice_limit,
    head_roles,
    measured_examples,
    on_examples,
    random_lower_sets,
    term_matching_specs,
)
from headlab.findings.two_tower import shares_terms
from headlab.findings.units import CARRY, MASK_SPECIFICITY, RECEIVER
from headlab.findings.verdicts import Claim, StudyClaim
from headlab.inputs.pair import read_pair

METRIC = "grade_logit"  # what a share is of: headlab.core.patching.grade_logit, linear in the logits


def restored_shares(table: pd.DataFrame, n_boot: int = 2000, seed: int = 0, metric: str = METRIC) -> pd.DataFrame:
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


def rank_agreement(a, b, n_boot: int = 2000, seed: int = 0) -> dict:
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


def masking_specificity(
    masked_correct, base_correct, shares, n_boot: int = 2000, seed: int = 0, strata=None, min_group: int = MIN_GROUP
) -> dict:
    """A mask's cost (masked minus unmasked accuracy, points) on the pairs that share a term, minus its cost on the
    pairs that share none: negative when the mask costs more where there are terms to match. ``masked_correct`` is
    one mask (pairs) or several draws of one kind of mask (draws x pairs, averaged).

    With ``strata`` (per pair, e.g. its gold grade), the difference is taken within each stratum that has at least
    ``min_group`` pairs in both groups and averaged with the weights n_sharing x n_none / n of each (Cochran-Mantel-
    Haenszel's): pairs that share terms are mostly graded high, and a mask that pushes every grade down costs most on
    high-grade pairs whatever they share, so only a comparison within grades speaks to terms. 95% interval: the pairs
    resampled within each stratum and group, the draws kept. ``cost_sharing``/``cost_none`` are the same weighted
    means; ``n_left_out`` counts the pairs of strata too small to compare."""
    masked = np.atleast_2d(np.asarray(masked_correct, dtype=np.float64)).mean(axis=0)
    base = np.asarray(base_correct, dtype=np.float64)
    shares = np.asarray(shares, dtype=bool)
    strata = np.zeros(len(shares), dtype=int) if strata is None else np.asarray(strata)
    if not (len(masked) == len(base) == len(shares) == len(strata)):
        raise ValueError(f"per-pair arrays differ in length: {len(masked)}, {len(base)}, {len(shares)}, {len(strata)}")
    moved = masked - base
    kept, weights, costs, boots = [], [], [], []
    for k, stratum in enumerate(np.unique(strata)):
        groups = [(strata == stratum) & shares, (strata == stratum) & ~shares]
        if min(g.sum() for g in groups) < max(1, min_group):
            continue
        kept.append(stratum)
        n_sharing, n_none = (int(g.sum()) for g in groups)
        weights.append(n_sharing * n_none / (n_sharing + n_none))
        costs.append([moved[g].mean() for g in groups])
        boots.append(
            [
                bootstrap_weights(int(g.sum()), n_boot, seed + 2 * k + j) @ moved[g] / g.sum()
                for j, g in enumerate(groups)
            ]
        )
    in_kept = np.isin(strata, kept)
    counts = {"n_sharing": int((in_kept & shares).sum()), "n_none": int((in_kept & ~shares).sum())}
    if not kept:
        nan = np.nan
        return {
            **dict.fromkeys(["cost_sharing", "cost_none", "difference", "lo", "hi"], nan),
            "n_strata": 0,
            "n_left_out": len(strata),
            **counts,
        }
    w = np.asarray(weights) / np.sum(weights)
    cost = w @ np.asarray(costs)  # (sharing, none)
    boot = sum(wk * (b[0] - b[1]) for wk, b in zip(w, boots))
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {
        "cost_sharing": float(cost[0]),
        "cost_none": float(cost[1]),
        "difference": float(cost[0] - cost[1]),
        "lo": float(lo),
        "hi": float(hi),
        "n_strata": len(kept),
        "n_left_out": int((~in_kept).sum()),
        **counts,
    }


def restored_against_draws(
    tables, tested: str, draws: list[str], n_boot: int = 2000, seed: int = 0, metric: str = METRIC
) -> dict:
    """The share of the difference in ``metric`` that patch ``tested`` restores minus the mean share the patches
    ``draws`` (random head sets of its size) restore, with a 95% bootstrap interval over every source of chance:
    each replicate resamples the pairs (the same pairs for both sides and every replacement, so the comparison stays
    paired), the random sets and, given several ``tables`` (one per draw of the contrast's replacement words, on the
    same pairs: :func:`replacement_tables`), those draws. ``gap``, ``gap_lo``, ``gap_hi``: the mean source-target
    difference and its 95% interval over the pairs (:func:`gap_moves` reads it)."""
    tables = [tables] if isinstance(tables, pd.DataFrame) else list(tables)
    wides = [t.pivot(index="example", columns="patch", values=metric) for t in tables]
    if any(not w.index.equals(wides[0].index) for w in wides):
        raise ValueError("replacement draws must cover the same pairs: take their common pairs first")
    targets = [w["target"].to_numpy() for w in wides]
    gaps = np.stack([w["source"].to_numpy() - t for w, t in zip(wides, targets)])  # replacements x pairs
    tested_moved = np.stack([w[tested].to_numpy() - t for w, t in zip(wides, targets)])
    draws_moved = np.stack([w[list(draws)].to_numpy().T - t for w, t in zip(wides, targets)])  # r x draws x pairs
    gap = gaps.mean(axis=0)
    weights = bootstrap_weights(gaps.shape[1], n_boot, seed)
    gap_lo, gap_hi = np.quantile(weights @ gap / len(gap), [0.025, 0.975])
    counts = draw_counts(len(draws), n_boot, [seed, len(draws)])
    replaced = draw_counts(len(tables), n_boot, [seed, len(draws), len(tables)])
    boot = np.zeros(n_boot)
    for r in range(len(tables)):
        boot_gap = weights @ gaps[r]
        per_draw = (weights @ draws_moved[r].T) / boot_gap[:, None]  # n_boot x draws
        boot += replaced[:, r] * ((weights @ tested_moved[r]) / boot_gap - (counts * per_draw).sum(axis=1) / len(draws))
    boot /= len(tables)
    restored_tested = np.mean(tested_moved.sum(axis=1) / gaps.sum(axis=1))
    restored_draws = (draws_moved.sum(axis=2) / gaps.sum(axis=1)[:, None]).mean(axis=0)  # per random set
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


def gap_moves(result: dict, direction: int) -> bool:
    """Whether a contrast moves the metric the way it should (``direction`` +1: the original pairs above their
    contrast): the gap's 95% interval lies wholly on that side of 0. A contrast that does not has nothing to restore,
    so a share of it is not measured (a share of a gap that may be 0 or of the other sign reads as anything)."""
    return bool(result["gap_lo"] > 0) if direction > 0 else bool(result["gap_hi"] < 0)


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
SPECIFIC_METHOD = "bootstrap over held-out pairs, resampled within each group"
RECEIVER_METHOD = "paired bootstrap over contrast pairs, the same resamples for every receiver"
CARRIES_MATCHING = StudyClaim(
    "patching.matching_heads_carry_matching",
    "09_patching",
    "The term-matching heads carry the term-matching signal: patched back into pairs whose shared terms were "
    "replaced, they restore more of the grade than as many random lower-half heads",
    "Some heads put high attention between identical terms in the two sentences, most clearly 5 heads in layers 2-4",
    "effect",
    direction=1,
    tally="ours",
)
COST_SPECIFIC = StudyClaim(
    "patching.cost_specific_to_shared_terms",
    "09_patching",
    "Masking the term-matching heads costs more on pairs that share a term than on pairs that share none",
    "Whether query and title share terms is a key feature",
    "compare",
    direction=-1,
    tally="ours",
)
CLS_HEAD_HANDS_ON = StudyClaim(
    "patching.cls_head_hands_on",
    "09_patching",
    "The high [CLS] head reads the matching heads' signal more than other heads do: of the grade-logit difference, "
    "more comes back through it alone (path patching) than through the other heads above the matching heads",
    "hands them to the classifier",
    "effect",
    direction=1,
    tally="ours",
)
CLAIMS = (CARRIES_MATCHING, COST_SPECIFIC, CLS_HEAD_HANDS_ON)


def _heads(heads) -> str:
    return ", ".join(f"{l}.{h}" for l, h in heads)


CONTRASTS = {
    "": "held-out pairs whose shared terms were replaced",
    "injected": "held-out pairs with a query term put into the title in place of a word the query lacks (TFC1)",
    "unshared": "held-out pairs with a title word the query lacks replaced, every shared term kept (the control)",
}
CONTROL_CLAIMS = {
    "injected": "The same on pairs that gained a query term instead (TFC1)",
    "unshared": "The same on pairs that lost a word the query lacks (the control: little to restore)",
}


def _gap(result: dict) -> str:
    return f"{result['gap']:+.3g} [{result['gap_lo']:+.3g}, {result['gap_hi']:+.3g}]"


def _carry_row(result: dict, part: str, direction: int, names: str) -> Claim:
    """The matching heads against random heads on one contrast (``part``: "" for the corrupted one), gated on its
    gap (:func:`gap_moves`; ``direction`` 0: either sign)."""
    claim = CONTROL_CLAIMS.get(part)
    pairs = f"{result['n_examples']} {CONTRASTS[part]}"
    if "gap" not in result:
        return Claim.not_measured(
            CARRIES_MATCHING, part=part, claim=claim, unit=CARRY, reason=f"Not measured: only {pairs}"
        )
    moves = gap_moves(result, direction) if direction else gap_moves(result, 1) or gap_moves(result, -1)
    if not moves:
        return Claim.not_measured(
            CARRIES_MATCHING,
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
        CARRIES_MATCHING,
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


def claims(
    against: dict,
    controls: dict[str, dict],
    specificity: dict,
    specificity_random: dict,
    ranking: pd.DataFrame,
    matching,
    receiver,
) -> list[Claim]:
    """Page 09's claims, one row each, judged by :func:`headlab.findings.verdicts.judge`: the matching heads carry the
    term-matching signal (patching them restores more of the grade logit than random heads:
    :func:`restored_against_draws`, only where the contrast moves it, :func:`gap_moves`; the TFC1 and control
    contrasts, :func:`contrast_controls`, as sub-rows); their masking cost is specific to pairs that share a term
    within gold grades (:func:`masking_specificity`, random heads as a sub-row); notebook 07's ``[CLS]`` head reads
    what they carry more than the other heads above them (``ranking``, :func:`receivers_view`: whole, and as a
    sub-row through its output at ``[CLS]`` alone)."""
    names = _heads(matching)
    rows = [_carry_row(against, "", 1, names)]
    rows += [_carry_row(controls[kind], kind, direction, names) for kind, direction in CONTROLS.items()]
    for part, result, what in (
        ("", specificity, f"the matching heads ({names})"),
        ("random", specificity_random, "random sets of as many lower-half heads"),
    ):
        if np.isnan(result["difference"]):
            rows.append(
                Claim.not_measured(
                    COST_SPECIFIC,
                    part=part,
                    reason=f"Not measured: no gold grade has {MIN_GROUP} pairs in both groups",
                    unit=MASK_SPECIFICITY,
                )
            )
            continue
        rows.append(
            Claim.measured(
                COST_SPECIFIC,
                part=part,
                ours=result["difference"],
                lo=result["lo"],
                hi=result["hi"],
                unit=MASK_SPECIFICITY,
                method=SPECIFIC_METHOD,
                n_examples=result["n_sharing"] + result["n_none"],
                at_floor=result.get("at_floor", False),
                floor_reason=result.get("floor_reason", ""),
                claim="Masking 5 random lower-half heads instead (the same comparison)" if part else None,
                reason=(
                    f"Masking {what} changes the share graded right by {100 * result['cost_sharing']:+.1f} points on "
                    f"the {result['n_sharing']} pairs that share a term and by {100 * result['cost_none']:+.1f} "
                    f"points on the {result['n_none']} that share none, compared within {result['n_strata']} gold "
                    f"grades ({result['n_left_out']} pairs of grades with fewer than {MIN_GROUP} in a group left out)"
                    + (
                        f". With them masked the model sits at its floor ({result['floor_reason']}): within a grade, "
                        "a model that gives nearly every pair one grade is right wherever that grade is the gold one, "
                        "whatever the pair shares"
                        if result.get("at_floor")
                        else ""
                    )
                ),
            )
        )
    rows += _receiver_rows(ranking, matching, receiver)
    return rows


def _receiver_rows(ranking: pd.DataFrame, matching, receiver) -> list[Claim]:
    """The ``[CLS]`` head against the other receivers (:func:`receivers_view`): whole, and through its output at
    ``[CLS]`` alone."""
    layer, head = receiver
    mine = ranking[(ranking["layer"] == layer) & (ranking["head"] == head)] if len(ranking) else ranking
    if not len(mine) or len(ranking) < 2:
        why = path_not_measured(receiver, matching) if not len(mine) else "It is the only head above them."
        return [Claim.not_measured(CLS_HEAD_HANDS_ON, reason=f"Not measured. {why}", unit=RECEIVER)]
    r, others = mine.iloc[0], len(ranking) - 1
    rows = []
    for part, prefix, route in (("", "", "alone"), ("cls", "cls_", "through its output at [CLS] alone")):
        mean_others = r[f"{prefix}restored"] - r[f"{prefix}over_others"]
        share = lambda x: f"{x:.2%}" if abs(x) < 0.01 else f"{x:.1%}"  # noqa: E731  (a small share keeps its digits)
        rank = int((ranking[f"{prefix}restored"] > r[f"{prefix}restored"]).sum()) + 1
        rows.append(
            Claim.measured(
                CLS_HEAD_HANDS_ON,
                part=part,
                ours=r[f"{prefix}over_others"],
                lo=r[f"{prefix}over_lo"],
                hi=r[f"{prefix}over_hi"],
                unit=RECEIVER,
                method=RECEIVER_METHOD,
                n_examples=int(r["n_examples"]),
                claim="The same through its output at [CLS] alone (elsewhere it outputs what it did on the contrast "
                "pair)"
                if part
                else None,
                reason=(
                    f"Head {layer}.{head} (notebook 07's) reading the matching heads' change {route} brings back "
                    f"{share(r[f'{prefix}restored'])} [{share(r[f'{prefix}lo'])}, {share(r[f'{prefix}hi'])}] of the "
                    f"grade-logit drop on {int(r['n_examples'])} contrast pairs of 07's held-out half; the {others} "
                    f"other heads above the matching heads {share(mean_others)} on average; it ranks {rank} of "
                    f"{others + 1}"
                ),
            )
        )
    return rows


def held_out_contrast(lab, limit: int | None, stopwords=None, kind: str = "corrupted", draw: int = 0) -> Contrast:
    """The ``kind`` contrast of notebook 05's held-out pairs (those its term-matching heads were not chosen on), with
    ``examples`` and ``changes`` naming positions in the evaluated split; ``draw`` > 0: other replacement words."""
    held = measured_examples(len(lab.encoded), limit, lab.params.seed)
    made = contrast_pairs(lab.encoded.subset(held), lab.tokenizer, kind, stopwords, lab.params.seed, draw=draw)
    return replace(
        made, examples=held[made.examples], changes=made.changes.assign(example=held[made.changes["example"]])
    )


def contrast_examples(contrast: Contrast, lab, n: int = 6) -> pd.DataFrame:
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


def restoring_patches(lab, contrast: Contrast, plan: dict, progress: bool = True) -> pd.DataFrame:
    """The contrast pairs with each patch of ``plan`` taken from the original pairs (does the head restore the
    grade?): a :func:`headlab.core.patching.run_patching` table. Only this direction is patched per head: every claim
    reads it, and the other (the original pairs with a head taken from the contrast pairs: does it break the grade?)
    fed only a column of the table of top heads, at the cost of as many patches again (#51)."""
    return lab.patch(contrast.original, contrast.changed, plan, f"restore-{contrast.kind}", progress)


def head_views(
    lab,
    restoring: pd.DataFrame,
    single_heads,
    limit: int | None,
    stopwords,
    by: str,
    n_boot: int = 2000,
    attributed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per head, the three views of it: the share of the grade it restores (patching, with its interval), its
    masking cost on the held-out pairs (``single_heads``: notebook 02's single-head masks,
    :func:`headlab.findings.cls_head.single_head_correct`) and its role score ``by`` on the pairs the matching heads
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


def agreement(views: pd.DataFrame, matching, k: int, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """How the patching map agrees with the two other views: the top-k heads by restored share against the matching
    heads (05) and against the top-k by masking cost (02), each with its chance overlap and p; Spearman's rank
    correlation of the restored share with the masking cost and with the role score, over every head. Where
    ``views`` has attribution patching's estimate (``attribution``), the same two checks of it against exact
    patching: does the one-backward-pass approximation rank the heads as patching each one does?"""
    n = len(views)
    top = top_heads(views, k)
    costly = top_heads(views, k, by="masking_cost")
    overlaps = [
        (f"top {k} by patching vs term-matching heads (05)", top, matching),
        (f"top {k} by patching vs top {k} by masking cost (02)", top, costly),
    ]
    if "attribution" in views:
        overlaps.append(
            (f"top {k} by attribution patching vs top {k} by patching", top_heads(views, k, "attribution"), top)
        )
    rows = []
    for comparison, ranked, chosen in overlaps:
        o = top_overlap(ranked, chosen, n)
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
    others = {"masking_cost": "masking cost (02)", "role_score": "role score (05)"}
    if "attribution" in views:
        others["attribution"] = "estimate of attribution patching (one backward pass)"
    for column, name in others.items():
        r = rank_agreement(views["restored"], views[column], n_boot, seed)
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


def specificity(
    lab, matching, limit: int | None, draws: int, keep_draws: int, stopwords, n_boot: int = 2000
) -> tuple[dict, dict]:
    """The matching heads' and random lower-half heads' masking cost on held-out pairs that share a term against
    those that share none, within gold grades (:func:`masking_specificity`), read from notebook 05's sweep (the same
    masks)."""
    layers, heads = head_grid(lab.model)
    seed = lab.params.seed
    per_example = lab.sweep(
        term_matching_specs(layers, heads, matching, draws, keep_draws, seed), "term_matching", progress=False
    )
    held = measured_examples(len(lab.encoded), limit, seed)
    on_held = on_examples(per_example, held)
    correct, predicted = correct_matrix(on_held), predicted_matrix(on_held)
    pairs = lab.encoded.subset(held)
    shares = shares_terms(pairs, lab.tokenizer, stopwords)
    base = correct.loc[BASELINE].to_numpy()
    drawn = [m for m in correct.index if str(m).startswith("random_lower-")]
    floor = kappa_columns(
        predicted.loc["matching"].to_numpy(), predicted.loc[BASELINE].to_numpy(), pairs.grades, n_boot, seed
    )
    return (
        {
            **masking_specificity(correct.loc["matching"].to_numpy(), base, shares, n_boot, seed, strata=pairs.grades),
            "at_floor": bool(floor["at_floor"]),
            "floor_reason": floor["floor_reason"],
        },
        masking_specificity(correct.loc[drawn].to_numpy(), base, shares, n_boot, seed, strata=pairs.grades),
    )


CONTROLS = {"injected": -1, "unshared": 0}  # contrast kind -> the sign its gap should have (0: none expected)


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


def contrast_controls(lab, matching, plan: dict, limit: int | None, stopwords, n_boot: int = 2000) -> dict[str, dict]:
    """The matching heads against random heads (:func:`restored_against_draws`, on :data:`METRIC`) on the two other
    contrasts of the held-out pairs: ``injected`` (TFC1: a query term put into the title, which should raise the grade,
    so the original lies below its contrast) and ``unshared`` (the LNC-style control: a word the query lacks replaced,
    which should move the grade little). A contrast of fewer than two pairs gives only ``n_examples``."""
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
    lab, contrast: Contrast, matching, stopwords, n_boot: int = 2000
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(positions, attribution)`` on the contrast pairs: the matching heads patched back at each group of positions
    (:func:`headlab.findings.circuit.restored_by_position`) and attribution patching per head
    (:func:`headlab.findings.circuit.attribution_scores`), each kept (:meth:`headlab.lab.Lab.stored`)."""
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
    attributed = lab.stored("patching_attribution", key, lambda: attribution_scores(engine, groups, n_boot, seed))
    return positions, attributed


def _held_out_receivers(lab, contrast: Contrast, matching, single_heads):
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


def _engine(lab, contrast: Contrast, keep) -> PatchEngine:
    return PatchEngine(
        lab.model,
        contrast.original.subset(keep),
        contrast.changed.subset(keep),
        lab.batch_size,
        lab.device,
        lab.pad_id,
    )


def _circuit_key(lab, contrast: Contrast, matching, keep, n_boot: int) -> dict:
    return {
        "examples": [int(e) for e in contrast.examples[keep]],
        "kind": contrast.kind,
        "matching": sorted([int(l), int(h)] for l, h in matching),
        "n_boot": n_boot,
        "seed": lab.params.seed,
    }


def receivers_view(lab, contrast: Contrast, matching, single_heads, n_boot: int = 2000) -> tuple[pd.DataFrame, tuple]:
    """``(ranking, receiver)``: path patching from the matching heads to every head in a layer above them
    (:func:`headlab.findings.circuit.receiver_ranking`), on the contrast pairs of notebook 07's held-out half, kept
    (:meth:`headlab.lab.Lab.stored`); ``receiver`` is 07's head, to find in the ranking. An empty table where no
    layer lies above the matching heads or no pair lies in that half."""
    receiver, receivers, keep = _held_out_receivers(lab, contrast, matching, single_heads)
    if not receivers or not len(keep):
        return pd.DataFrame(), receiver
    key = {**_circuit_key(lab, contrast, matching, keep, n_boot), "baseline": "the other receivers", "cls": "output"}
    return lab.stored(
        "patching_receivers",
        key,
        lambda: receiver_ranking(_engine(lab, contrast, keep), matching, receivers, n_boot, lab.params.seed),
    ), receiver


def circuit_view(
    lab, contrast: Contrast, matching, single_heads, ranking: pd.DataFrame, k: int, n_boot: int = 2000
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(edges, mediation)`` of the circuit found: the matching heads and the ``k`` receivers of ``ranking`` that
    read most (:func:`headlab.findings.circuit.found_circuit`, on the pairs :func:`receivers_view` ranked on),
    kept; empty tables where there is no ranking."""
    if ranking.empty:
        return pd.DataFrame(), pd.DataFrame()
    _, _, keep = _held_out_receivers(lab, contrast, matching, single_heads)
    top = [(int(l), int(h)) for l, h in zip(ranking["layer"].head(k), ranking["head"].head(k))]
    key = {**_circuit_key(lab, contrast, matching, keep, n_boot), "receivers": [list(r) for r in top]}
    found: list = []  # found_circuit's two tables, computed at most once for both

    def table(part: int) -> pd.DataFrame:
        if not found:
            found.extend(found_circuit(_engine(lab, contrast, keep), matching, top, n_boot, lab.params.seed))
        return found[part]

    edges = lab.stored("patching_circuit_edges", key, lambda: table(0))
    mediation = lab.stored("patching_mediation", key, lambda: table(1))
    return edges, mediation


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


def specificity_note(specific: dict, specific_random: dict) -> str:
    """One sentence on :func:`specificity`'s two results, or why there are none."""
    if np.isnan(specific["difference"]):
        return (
            f"No gold grade has {MIN_GROUP} held-out pairs that share a term and {MIN_GROUP} that share none: "
            "the masks' costs cannot be compared within grades."
        )
    return (
        f"Within {specific['n_strata']} gold grades ({specific['n_left_out']} pairs of smaller grades left out): "
        f"the matching heads {100 * specific['cost_sharing']:+.1f} points on {specific['n_sharing']} pairs that "
        f"share a term, {100 * specific['cost_none']:+.1f} on {specific['n_none']} that share none; random lower-half "
        f"sets {100 * specific_random['cost_sharing']:+.1f} and {100 * specific_random['cost_none']:+.1f}."
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
