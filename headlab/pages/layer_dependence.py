"""Findings 2 and 7, layer dependence and the single-head grid: the study's claims and our verdicts.

The study's BERT has 12 layers. A model of another depth is compared by relative depth: a study layer
maps to our layer that holds its middle (for 6 layers, study layers 2l and 2l+1 map to our layer l).
Each claim of the study the page tests is one :class:`headlab.judging.verdicts.Claim` row (``halves_claims``,
``layers_claims``, ``heads_claims``), built with ``Claim.measured``: our number with its 95% interval and how it was
computed, the evidence in words, and the verdict of :func:`headlab.judging.verdicts.judge` (the one rule of the book).
Accuracy effects carry the share of quadratic kappa lost beside them; "collapse" and "costs far less" are judged on
that scale (0 for the unmasked model, 100% for no agreement with the gold grades beyond chance). The page
shows those rows rendered, then the numbers behind them (``halves_details``, ``layers_details``, ``heads_details``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.stats import by_interval, equivalent, floor_bound
from headlab.core.sweep import (
    baseline_correct,
    baseline_spec,
    layer_specs,
    plan_table,
    share_curve,
    single_head_specs,
    summarize,
)
from headlab.judging.sizes import MARGIN_WHY, NO_CHANGE_MARGIN
from headlab.judging.units import ACCURACY_CHANGE, HALF_GAP, HEADS_NOTHING, KAPPA_LOST, PAIRED, TWO_STAGE, with_interval
from headlab.judging.verdicts import (
    Claim,
    Kind,
    StudyClaim,
    draws_df_default,
    each_level,
    far_end,
    judge,
    reach,
    with_mean_ablation,
)
from headlab.lab.lab import Lab
from headlab.measures.halves import HALVES, collapse_shares, half_gap, half_specs
from headlab.measures.study_layers import (
    STUDY_GAIN_LAYERS,
    STUDY_HIGH_HEAD_LAYER,
    STUDY_LAYERS,
    study_layer_to_ours,
    study_layers_to_ours,
)

_pct = ACCURACY_CHANGE.number  # a relative change of accuracy as the pages write it

STUDY_BEST_LAYER, STUDY_BEST_GAIN = 8, 0.023


def _change(value: float, lo: float, hi: float) -> str:
    return with_interval(ACCURACY_CHANGE, value, lo, hi)


def _span(values) -> str:
    """ "2–4" for a run of numbers, "2, 5" otherwise."""
    values = list(values)
    if len(values) > 1 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(str(v) for v in values)


def _head(layer, head) -> str:
    return f"{int(layer)}.{int(head)}"


def depth_note(layers: int) -> str:
    """One sentence on how the study's layer numbers translate to this model."""
    if layers == STUDY_LAYERS:
        return "Our model has 12 layers like the study's, so layer numbers compare one to one."
    pairs = []
    for ours in range(layers):
        theirs = [k for k in range(STUDY_LAYERS) if study_layer_to_ours(k, layers) == ours]
        if theirs:
            pairs.append(f"{_span(theirs)} → {ours}")
    return (
        f"The study's BERT has {STUDY_LAYERS} layers and ours {layers}, so layers are compared by relative depth "
        f"(study layers → our layer: {'; '.join(pairs)})."
    )


# --- the rows -----------------------------------------------------------------------------------------


def _kappa(row):
    """A layer's or head's kappa columns (``kappa=`` of :meth:`Claim.measured`), or None for a table without them."""
    return row if "kappa_lost" in row.index else None


def _simultaneous(ours: float, lo: float, hi: float, m: int) -> tuple[float, float]:
    """A 95% interval widened so that it holds for ``m`` intervals at once (Bonferroni), by the ratio of normal
    quantiles: used to *choose* a head among ``m``; its verdict widens the raw interval once, for the head and the
    family together (``search`` in :meth:`Claim.measured`)."""
    scale = float(sps.norm.ppf(1 - 0.025 / m) / sps.norm.ppf(0.975))
    return ours - (ours - lo) * scale, ours + (hi - ours) * scale


def _weakest(spec: StudyClaim, candidates, numbers, **judged):
    """The candidate whose judged (adjusted) interval reaches least far in the claim's direction: a claim about all
    of them is no stronger than its weakest."""

    def weakness(c):
        ours, lo, hi = numbers(c)
        return reach(
            spec, judge(spec, ours, lo, hi, weakest_of=len(candidates), **{k: v(c) for k, v in judged.items()})
        )

    return min(candidates, key=weakness)


# --- low versus high layers ----------------------------------------------------------------------------

COLLAPSE = StudyClaim(
    "layer_dependence.low_heads_collapse",
    "02_layer_dependence",
    "Masking 80% and 100% of the low heads makes accuracy collapse",
    "Masking 80% and 100% of the low heads (40% and 50% on the axis) makes accuracy collapse",
    Kind.EFFECT,
    direction=1,
)
COSTS_LESS = StudyClaim(
    "layer_dependence.high_heads_cost_less",
    "02_layer_dependence",
    "Masking most of the high heads costs far less than masking the low heads",
    "masking most of the high heads costs far less",
    Kind.COMPARE,
    direction=1,
)


def _which_half(row) -> str:
    return by_interval(
        row.gap_lo,
        row.gap_hi,
        "the lower half costs more",
        "the upper half costs more",
        "no difference distinguishable from zero",
    )


def _collapse_points(gap: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``gap`` where the study made its claim (:func:`headlab.measures.halves.collapse_shares`)."""
    masked = gap[gap["share"] > 0].sort_values("share")
    return masked[masked["share"].isin(collapse_shares(masked["share"].tolist()))]


def _method(draws: int) -> str:
    return TWO_STAGE if int(draws) > 1 else PAIRED


def _lost(values) -> str:
    return " and ".join(f"{v:.0%}" for v in values)


def _collapse(points: pd.DataFrame, at: str) -> Claim:
    """The collapse on the kappa scale, judged at the weaker of the two points (the claim names both)."""

    def numbers(r):
        return r.lower_kappa_lost, r.lower_kappa_lo, r.lower_kappa_hi

    shown = _weakest(
        COLLAPSE,
        list(points.itertuples()),
        numbers,
        df=lambda r: _df(r, "lower_kappa_df"),
        n_draws=lambda r: int(r.lower_draws),
        n_examples=lambda r: int(r.n_examples),
    )
    ours, lo, hi = numbers(shown)
    return Claim.measured(
        COLLAPSE,
        ours=ours,
        lo=lo,
        hi=hi,
        unit=KAPPA_LOST,
        method=_method(shown.lower_draws),
        n_examples=shown.n_examples,
        n_draws=shown.lower_draws,
        df=_df(shown, "lower_kappa_df"),
        weakest_of=len(points),
        at_floor=bool(shown.lower_at_floor),
        floor_reason=str(shown.lower_floor_reason),
        reason=f"With the low heads masked at {at} of all heads, {_lost(points['lower_kappa_lost'])} of the "
        f"unmasked model's quadratic κ is lost (accuracy {' and '.join(f'{a:.1%}' for a in points['lower_accuracy'])}"
        f", unmasked {points['base_accuracy'].iloc[0]:.1%}; relative change "
        f"{' and '.join(_pct(c) for c in points['lower_change'])}). The claim names both points, so the row shows "
        f"the weaker, {shown.share:.0%} of all heads, {shown.lower_draws} draw(s); there the masked model "
        f"{'sits' if shown.lower_at_floor else 'does not sit'} at the floor ({shown.lower_floor_reason})",
    )


def _df(row, column: str) -> float:
    """The gap table's degrees of freedom in ``column`` (Welch–Satterthwaite over the draws), else the most cautious
    reading of the lower half's draws."""
    df = getattr(row, column, None)
    return draws_df_default(row.lower_draws) if df is None or pd.isna(df) else float(df)


def _saturated(r) -> bool:
    return bool(r.lower_at_floor) and bool(r.upper_at_floor)


def _costs_less(points: pd.DataFrame, at: str) -> Claim:
    """The lower half's share of kappa lost minus the upper half's, judged at the weaker of the two points; a point
    where both halves sit at the floor says nothing and is set aside while another point can speak."""

    def numbers(r):
        return r.kappa_gap, r.kappa_gap_lo, r.kappa_gap_hi

    rows = list(points.itertuples())
    informative = [r for r in rows if not _saturated(r)]
    shown = _weakest(
        COSTS_LESS,
        informative or rows,
        numbers,
        df=lambda r: _df(r, "kappa_gap_df"),
        at_floor=_saturated,
        n_draws=lambda r: int(r.lower_draws),
        n_examples=lambda r: int(r.n_examples),
    )
    ours, lo, hi = numbers(shown)
    aside = [f"{r.share:.0%}" for r in rows if _saturated(r)]
    note = (
        (
            f" At {' and '.join(aside)} of all heads both halves sit at the floor, where neither can fall "
            f"further" + (", so the row shows another point." if informative else ".")
        )
        if aside
        else ""
    )
    return Claim.measured(
        COSTS_LESS,
        ours=ours,
        lo=lo,
        hi=hi,
        unit=HALF_GAP,
        method=f"{_method(shown.lower_draws)} (the same resampled pairs for both halves, each half's draws resampled)",
        n_examples=shown.n_examples,
        n_draws=shown.lower_draws,
        df=_df(shown, "kappa_gap_df"),
        weakest_of=len(informative or rows),
        at_floor=_saturated(shown),
        censored=floor_bound(bool(shown.lower_at_floor), bool(shown.upper_at_floor)),
        floor_reason=f"lower half: {shown.lower_floor_reason}; upper half: {shown.upper_floor_reason}",
        reason=f"At {at} of all heads, masking the lower half loses {_lost(points['lower_kappa_lost'])} of the "
        f"unmasked quadratic κ, the upper half {_lost(points['upper_kappa_lost'])} (relative changes of accuracy: "
        f"lower {' and '.join(_pct(c) for c in points['lower_change'])}, upper "
        f"{' and '.join(_pct(c) for c in points['upper_change'])}). The claim names both points, so the row "
        f"shows the weaker, {shown.share:.0%} of all heads.{note}",
    )


def halves_claims(gap: pd.DataFrame) -> list[Claim]:
    """The study's two claims about the halves, measured where it made them: 80% and 100% of the low heads masked
    (40% and 50% of all heads on the axis), on the kappa scale.

    ``gap`` comes from :func:`headlab.measures.halves.half_gap`. "Collapse": the share of the unmasked model's
    quadratic kappa lost with the low heads masked, judged at the weaker of the two points. "Far less": the lower
    half's share lost minus the upper half's (one bootstrap for both, :func:`headlab.core.stats.kappa_contrast`),
    judged at the weaker point among those where the two halves are not both at the floor (decided from their
    predictions); when both are at the floor at every point the comparison is saturated. Both verdicts come from
    :func:`headlab.judging.verdicts.judge`.
    """
    points = _collapse_points(gap)
    if points.empty:
        reason = "Not tested: no share near 40% or 50% of all heads (raise HALF_STEPS)"
        return [
            Claim.not_measured(COLLAPSE, reason=reason, unit=KAPPA_LOST),
            Claim.not_measured(COSTS_LESS, reason=reason, unit=HALF_GAP),
        ]
    undefined = points["kappa_reason"].astype(str).str.len() > 0
    if undefined.any():
        reason = f"Not measured: no kappa scale ({points.loc[undefined, 'kappa_reason'].iloc[0]})"
        return [
            Claim.not_measured(COLLAPSE, reason=reason, unit=KAPPA_LOST),
            Claim.not_measured(COSTS_LESS, reason=reason, unit=HALF_GAP),
        ]
    at = " and ".join(f"{s:.0%}" for s in points["share"])
    return [_collapse(points, at), _costs_less(points, at)]


def halves_details(gap: pd.DataFrame) -> str:
    """The difference between the halves at every share (markdown), for under the claims."""
    masked = gap[gap["share"] > 0].sort_values("share")
    if masked.empty:
        return "- No share above 0 was masked: nothing to compare."
    widest = masked.loc[masked["gap"].abs().idxmax()]
    lower, upper = int((masked["gap_lo"] > 0).sum()), int((masked["gap_hi"] < 0).sum())
    lines = [
        f"- Over all {len(masked)} shares masked, the lower half costs more at {lower} and the upper half at "
        f"{upper} (a difference whose 95% paired interval excludes zero); the largest difference (upper minus "
        f"lower change) is {widest.gap * 100:+.1f} points [{widest.gap_lo * 100:+.1f}, "
        f"{widest.gap_hi * 100:+.1f}] at {widest.share:.0%} of all heads."
    ]
    for r in masked.itertuples():
        lines.append(
            f"  - {r.share:.1%} of all heads ({r.n_heads} heads, {2 * r.share:.0%} of a half): "
            f"lower {_change(r.lower_change, r.lower_lo, r.lower_hi)}, upper "
            f"{_change(r.upper_change, r.upper_lo, r.upper_hi)}; difference {r.gap * 100:+.1f} points "
            f"[{r.gap_lo * 100:+.1f}, {r.gap_hi * 100:+.1f}]: {_which_half(r)}."
        )
    return "\n".join(lines)


def halves_takeaway(gap: pd.DataFrame) -> str:
    """The halves figure's caption: the two halves at the study's first collapse point (80% of a half), where the
    claims are judged with the 50% point."""
    points = _collapse_points(gap)
    if points.empty:
        return "No share at the study's collapse points was masked: the figure shows the halves as far as they were."
    at = points.iloc[0]
    return (
        f"At {at.share:.0%} of all heads masked ({2 * at.share:.0%} of a half, the study's first collapse point), "
        "heads drawn from the lower half cost "
        f"{_change(at.lower_change, at.lower_lo, at.lower_hi)} of accuracy and heads from the upper half "
        f"{_change(at.upper_change, at.upper_lo, at.upper_hi)}: {_which_half(at)} (upper minus lower, "
        f"{at.gap * 100:+.1f} points [{at.gap_lo * 100:+.1f}, {at.gap_hi * 100:+.1f}])."
    )


# --- whole layers --------------------------------------------------------------------------------------

GAINS = StudyClaim(
    "layer_dependence.layers_5_9_gain",
    "02_layer_dependence",
    "Masking any one of layers 5–9 (of 12) raises accuracy",
    "masking any of layers 5-9 *improves* accuracy",
    Kind.EFFECT,
    direction=1,
)
LAYER_8 = StudyClaim(
    "layer_dependence.layer_8_gain",
    "02_layer_dependence",
    "Masking all of layer 8 (of 12) raises accuracy by 2.3%",
    "masking all of layer 8 gives +2.3%",
    Kind.EFFECT,
    direction=1,
)


def layer_reference(layers: int) -> pd.DataFrame:
    """The study's one number for whole layers (+2.3% at layer 8), placed at our layer of the same depth."""
    ours = study_layer_to_ours(STUDY_BEST_LAYER, layers)
    return pd.DataFrame(
        [
            {
                "layer": ours,
                "rel_change": STUDY_BEST_GAIN,
                "label": f"study: layer {STUDY_BEST_LAYER} of {STUDY_LAYERS}, +2.3%",
            }
        ]
    )


def _layer_state(row) -> str:
    if not row["distinguishable"]:
        return ""
    return " (gain after Holm)" if row["rel_change"] > 0 else " (loss after Holm)"


def _layers(table: pd.DataFrame) -> str:
    return (
        ", ".join(f"layer {int(r.layer)} ({_pct(r.rel_change)}, Holm p = {r.p_holm:.2g})" for r in table.itertuples())
        or "no layer"
    )


def _gains(rows: pd.DataFrame, layers: int, n_examples: int) -> Claim:
    """Gains at the study's layers 5–9: the claim says every one, so it is judged at the layer of ours at that depth
    whose interval reaches lowest."""
    ours = [l for l in study_layers_to_ours(STUDY_GAIN_LAYERS, layers) if l in rows.index]
    if not ours:
        return Claim.not_measured(
            GAINS,
            reason="Not tested: none of our layers at the depth of layers 5–9 of 12 was masked",
            unit=ACCURACY_CHANGE,
        )
    effects = rows.loc[ours]
    weakness = {
        layer: reach(GAINS, judge(GAINS, r.rel_change, r.lo, r.hi, weakest_of=len(effects), n_examples=n_examples))
        for layer, r in effects.iterrows()
    }
    shown = effects.loc[min(weakness, key=lambda layer: weakness[layer])]
    parts = "; ".join(
        f"layer {l}: {_change(r['rel_change'], r['lo'], r['hi'])}{_layer_state(r)}" for l, r in effects.iterrows()
    )
    return Claim.measured(
        GAINS,
        ours=shown.rel_change,
        lo=shown.lo,
        hi=shown.hi,
        unit=ACCURACY_CHANGE,
        method=PAIRED,
        n_examples=n_examples,
        weakest_of=len(effects),
        p=shown.p_holm,
        kappa=_kappa(shown),
        reason=f"At the same depth, our layers {_span(ours)}: {parts}. The claim says every one of them, so the row "
        f"shows layer {int(shown.name)}, whose interval reaches lowest, with its Holm p",
    )


def _layer_8(rows: pd.DataFrame, layers: int, n_examples: int) -> Claim:
    """The study's one number for whole layers, at our layer of the same depth."""
    best = study_layer_to_ours(STUDY_BEST_LAYER, layers)
    if best not in rows.index:
        return Claim.not_measured(
            LAYER_8,
            reason=f"Not tested: our layer {best}, at the depth of layer 8 of 12, was not masked",
            unit=ACCURACY_CHANGE,
            study=STUDY_BEST_GAIN,
        )
    r = rows.loc[best]
    contains = "contains" if r["lo"] <= STUDY_BEST_GAIN <= r["hi"] else "excludes"
    return Claim.measured(
        LAYER_8,
        ours=r["rel_change"],
        lo=r["lo"],
        hi=r["hi"],
        unit=ACCURACY_CHANGE,
        method=PAIRED,
        n_examples=n_examples,
        p=r["p_holm"],
        study=STUDY_BEST_GAIN,
        kappa=_kappa(r),
        reason=f"Our layer {best} at the same depth: exact McNemar test, Holm p = {r['p_holm']:.2g} over the "
        f"{len(rows)} layers; the 95% interval {contains} the study's +2.3%",
    )


def layers_claims(table: pd.DataFrame, layers: int, n_examples: int, alpha: float = 0.05) -> list[Claim]:
    """The study's two claims about whole layers, at our layers of the same relative depth.

    ``table`` comes from :func:`headlab.measures.grids.layer_effects`, over ``n_examples`` test pairs: each
    layer's relative change with its 95% paired bootstrap interval, and its exact McNemar test Holm-corrected over all
    layers (kept beside the interval as the row's p). "Any of layers 5–9" is judged at the one of our layers there
    whose interval reaches lowest (the claim says every one); "layer 8" at our layer of that depth. Verdicts come from
    :func:`headlab.judging.verdicts.judge`, the share of kappa lost beside (where the table has it). ``alpha`` is the
    level of the table's Holm calls, named in :func:`layers_details`.
    """
    rows = table.set_index("layer")
    return [_gains(rows, layers, n_examples), _layer_8(rows, layers, n_examples)]


def layers_details(table: pd.DataFrame, layers: int, alpha: float = 0.05) -> str:
    """Every layer's gain or loss after Holm (markdown), for under the claims."""
    called = table[table["distinguishable"]]
    worst = table.loc[table["rel_change"].idxmin()]
    return "\n".join(
        [
            f'- {depth_note(layers)} A layer\'s gain or loss is marked "after Holm" when its exact McNemar test '
            f"survives the Holm correction over all {len(table)} layers ({alpha:.0%}).",
            f"- Across all {len(table)} layers, masking a whole layer gives a gain after Holm at "
            f"{_layers(called[called['rel_change'] > 0])} and a loss after Holm at "
            f"{_layers(called[called['rel_change'] < 0])}; the largest loss is layer {int(worst.layer)}: "
            f"{_change(worst.rel_change, worst.lo, worst.hi)}.",
        ]
    )


def layers_takeaway(table: pd.DataFrame) -> str:
    """The whole-layer figure's caption: the largest loss, the largest rise and how many layers Holm keeps."""
    table = table.dropna(subset=["rel_change"])
    if table.empty:
        return "No whole layer was masked."
    worst, best = table.loc[table["rel_change"].idxmin()], table.loc[table["rel_change"].idxmax()]
    return (
        f"Masking layer {int(worst.layer)} costs most, {_change(worst.rel_change, worst.lo, worst.hi)}; the "
        f"highest bar is layer {int(best.layer)}, {_change(best.rel_change, best.lo, best.hi)}; "
        f"{int(table['distinguishable'].sum())} of {len(table)} layers change accuracy after Holm."
    )


# --- single heads --------------------------------------------------------------------------------------

NOTHING = StudyClaim(
    "layer_dependence.most_heads_change_nothing",
    "02_layer_dependence",
    "Most single heads change nothing when masked",
    "most single heads change nothing",
    Kind.EFFECT,
    direction=1,
    null=0.5,
    counts_heads=True,
)
IMPROVE = StudyClaim(
    "layer_dependence.some_heads_improve",
    "02_layer_dependence",
    "Masking some single heads improves the model (the study's open question)",
    "heads whose removal *improves* the model",
    Kind.EFFECT,
    direction=1,
    existential=True,
)
CLAIMS = (COLLAPSE, COSTS_LESS, GAINS, LAYER_8, NOTHING, IMPROVE)
HEAD_MARGIN = NO_CHANGE_MARGIN  # a head "changes nothing" when its 90% interval lies within this (MARGIN_WHY)


def _heads(table: pd.DataFrame, with_p: bool = False) -> str:
    return ", ".join(
        f"{_head(r.layer, r.head)} {_change(r.rel_change, r.lo, r.hi)}"
        + (f" (p = {r.p_mcnemar:.2g}, Holm {r.p_holm:.2g})" if with_p else "")
        for r in table.itertuples()
    )


def _change_nothing(tested: pd.DataFrame, n_examples: int, margin: float) -> Claim:
    """ "Most heads change nothing": the share of heads shown equivalent to no change, against one half."""
    same = int(sum(equivalent(r.lo90, r.hi90, margin) for r in tested.itertuples()))
    n = len(tested)
    ci = sps.binomtest(same, n).proportion_ci(0.95, method="exact")
    changed = int(tested["significant"].sum())
    return Claim.measured(
        NOTHING,
        ours=same / n,
        lo=ci.low,
        hi=ci.high,
        unit=HEADS_NOTHING,
        method=f"Clopper–Pearson interval over the {n} heads masked, each head one trial (shown to change nothing or "
        "not)",
        n_examples=n_examples,
        reason=f"A head is shown to change nothing when its 90% paired bootstrap interval lies within ±{margin:.2%} "
        f"(an equivalence test at 5%; margin: {MARGIN_WHY}): {same} of {n} heads pass. {n - changed} show no "
        f"change that survives the Holm correction, which alone would not show that they change nothing; a "
        f"head that passes neither test is counted as not shown to change nothing",
    )


def _chosen(candidates: pd.DataFrame, pick: str):
    """The head chosen among ``candidates`` (the lowest widened upper end for a loss, the highest widened lower end for
    a gain), with its interval widened to hold for all of them at once."""
    m = len(candidates)
    widened = pd.DataFrame(
        [_simultaneous(r.rel_change, r.lo, r.hi, m) for r in candidates.itertuples()],
        columns=["w_lo", "w_hi"],
        index=candidates.index,
    )
    at = widened["w_hi"].idxmin() if pick == "loss" else widened["w_lo"].idxmax()
    return candidates.loc[at], widened.loc[at], m


def _selected_method(m: int, which: str) -> str:
    return (
        f"{PAIRED}; the verdict's interval widened once for the scorecard's claims and the {m} heads {which} "
        "(Bonferroni), since the head is chosen among them"
    )


def _improving(tested: pd.DataFrame, n_examples: int, alpha: float) -> Claim:
    """Heads whose masking improves accuracy: judged at the head whose interval lies highest, widened for the choice
    among all heads."""
    helps = tested[tested["direction"] == "helps"].sort_values("rel_change", ascending=False)
    better = tested[(tested["p_mcnemar"] < alpha) & (tested["rel_change"] > 0)]
    shown, widened, m = _chosen(tested, "gain")
    named = f": {_heads(helps)}" if len(helps) else ""
    # an existential claim: it fails only if every head's adjusted upper end lies short of the size (judge)
    _, upper = far_end(IMPROVE, tested["rel_change"], tested["lo"], tested["hi"], math.inf, each_level(IMPROVE, m))
    return Claim.measured(
        IMPROVE,
        ours=shown.rel_change,
        lo=shown.lo,
        hi=shown.hi,
        unit=ACCURACY_CHANGE,
        method=_selected_method(m, "masked"),
        search=m,
        every_far=float(np.max(upper)),
        n_examples=n_examples,
        p=shown.p_holm,
        kappa=_kappa(shown),
        reason=f"{len(better)} head(s) improve accuracy at an uncorrected McNemar p < {alpha}; {len(helps)} survive "
        f"the Holm correction over all {len(tested)} heads{named}. The row shows head "
        f"{_head(shown['layer'], shown['head'])} ({_change(shown.rel_change, shown.lo, shown.hi)}), whose "
        f"interval widened for the {m} heads lies highest, with its Holm p; picked for its size on the same pairs, so "
        f"its size "
        f"leans away from zero",
    )


def heads_claims(
    grid: pd.DataFrame,
    layers: int,
    n_examples: int,
    alpha: float = 0.05,
    margin: float = HEAD_MARGIN,
) -> list[Claim]:
    """The study's claims about single heads (its finding 7), and the gain it left open.

    ``grid`` comes from :func:`headlab.measures.grids.head_grid_table` (with the same ``alpha``), over
    ``n_examples`` test pairs. "Changes nothing": the share of heads whose 90% interval lies within ±``margin``, with
    a Clopper–Pearson interval over the heads, against one half (more than half: "most"). "Some heads improve": the
    head with the strongest interval among all heads, judged with its interval widened once for the scorecard's
    claims and the heads it was chosen from (``search``), its Holm p kept beside it. Verdicts come from
    :func:`headlab.judging.verdicts.judge`. The study's sentences about the term-matching heads and one head of layer
    10 are tested on page 07, which reads notebook 05's heads and chooses its head on one part of the pairs and
    measures them all on the other.
    """
    tested = grid[grid["direction"] != "untested"]
    if tested.empty:
        reason = "Not tested: no single head was masked"
        return [
            Claim.not_measured(NOTHING, reason=reason, unit=HEADS_NOTHING),
            Claim.not_measured(IMPROVE, reason=reason, unit=ACCURACY_CHANGE),
        ]
    return [
        _change_nothing(tested, n_examples, margin),
        _improving(tested, n_examples, alpha),
    ]


def heads_details(grid: pd.DataFrame, layers: int, alpha: float = 0.05) -> str:
    """Which heads hurt and help (markdown), for under the claims."""
    tested = grid[grid["direction"] != "untested"]
    if tested.empty:
        return "- No single head was masked."
    sig = tested[tested["significant"]]
    hurts = sig[sig["direction"] == "hurts"].sort_values("rel_change")
    helps = sig[sig["direction"] == "helps"].sort_values("rel_change", ascending=False)
    lines = [
        f"- Heads are named layer.head, from 0. Each of {len(tested)} heads was masked alone and compared "
        f"with the unmasked model on the same examples (exact McNemar test, Holm-corrected over the "
        f"{len(tested)} tests): **{len(sig)} significant** at {alpha:.0%}; {len(hurts)} hurt when masked"
        f"{': ' + _heads(hurts) if len(hurts) else ''}; {len(helps)} help"
        f"{': ' + _heads(helps) if len(helps) else ''}. Half of all single-head changes lie within "
        f"±{tested['rel_change'].abs().median():.1%}."
    ]
    high = study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)
    there = hurts[hurts["layer"] == high]
    lines.append(
        f"- At the depth of the study's layer {STUDY_HIGH_HEAD_LAYER} (our layer {high}), {len(there)} "
        f"head(s) hurt after Holm{': ' + _heads(there) if len(there) else ''}; the study's sentence about "
        f"that head is tested on page 07, which picks it on one part of the pairs and measures it on the "
        f"other."
    )
    better = tested[(tested["p_mcnemar"] < alpha) & (tested["rel_change"] > 0)].sort_values("p_mcnemar")
    if len(better):
        lines.append(f"- Heads that improve accuracy at an uncorrected p < {alpha}: {_heads(better, with_p=True)}.")
    worst = tested.nsmallest(min(5, len(tested)), "rel_change")
    lines.append(
        f"- The largest losses, significant or not: {_heads(worst)}. These heads were picked for their size "
        f"on the same pairs, so their sizes lean away from zero (the winner's curse); notebook 07 picks its "
        f"head on one part of the pairs and measures it on the other."
    )
    return "\n".join(lines)


def heads_takeaway(grid: pd.DataFrame) -> str:
    """The single-head figures' caption: how many heads Holm keeps each way, and the costliest head."""
    tested = grid.dropna(subset=["rel_change"])
    if tested.empty:
        return "No single head was masked."
    worst, best = tested.loc[tested["rel_change"].idxmin()], tested.loc[tested["rel_change"].idxmax()]
    hurt, helps = int((grid["direction"] == "hurts").sum()), int((grid["direction"] == "helps").sum())
    costliest, highest = _head(worst["layer"], worst["head"]), _head(best["layer"], best["head"])
    return (
        f"Of {len(tested)} heads masked one at a time, {hurt} cost accuracy and {helps} raise it after Holm; the "
        f"costliest is {costliest}, {_change(worst.rel_change, worst.lo, worst.hi)}, and the "
        f"highest {highest}, {_change(best.rel_change, best.lo, best.hi)}."
    )


def within_margin_takeaway(grid: pd.DataFrame, margin: float = HEAD_MARGIN) -> str:
    """The sorted-intervals figure's caption: how many heads are shown to change nothing (90% interval within
    ±``margin``) and how many intervals exclude zero before any correction."""
    tested = grid.dropna(subset=["rel_change"])
    within = int(sum(equivalent(r.lo90, r.hi90, margin) for r in tested.itertuples()))  # as the claim counts them
    excluding = int(((tested["lo"] > 0) | (tested["hi"] < 0)).sum())
    return (
        f"{within} of {len(tested)} heads have a 90% interval within ±{ACCURACY_CHANGE.size(margin)} (shown to change "
        "nothing); "
        f"{excluding} have a 95% interval that excludes zero before any correction."
    )


def explorer_takeaway(grid: pd.DataFrame) -> str:
    """The head explorer's caption: which head it opens on, and why."""
    tested = grid.dropna(subset=["rel_change"])
    if tested.empty:
        return "The explorer opens on the first head: no single head was masked."
    worst = tested.loc[tested["rel_change"].idxmin()]
    return (
        f"The explorer opens on head {_head(worst['layer'], worst['head'])}, whose removal costs most "
        f"({_pct(worst['rel_change'])}); click any cell of the grid for another head's attention on the pair."
    )


def importance_takeaway(agreements: dict[str, dict]) -> str:
    """The gradient-importance figure's caption: how well each score ranks the heads as the ablations do."""
    return (
        "Gradient importance against the single-head ablations: "
        + "; ".join(
            f"{label}, Spearman ρ {a['spearman_rho']:+.2f} over {a['n_heads']} heads" for label, a in agreements.items()
        )
        + "."
    )


# --- gradient importance as a proxy --------------------------------------------------------------------

PROXY_GOOD, PROXY_LOOSE = 0.7, 0.4  # Spearman rho thresholds for "stands in" and "agrees loosely"


def proxy_verdict(agreements: dict[str, dict], n_significant: int | None = None) -> str:
    """Can the gradient importance stand in for the ablations? (markdown)

    ``agreements`` maps a label to a :func:`headlab.measures.grids.rank_agreement` result. The answer uses the
    best rho: at least 0.7 (and p < 0.05) stands in, at least 0.4 agrees loosely, below that it cannot.
    """
    lines = []
    for label, a in agreements.items():
        lines.append(
            f"- {label}: Spearman ρ = {a['spearman_rho']:+.2f} (p = {a['p_value']:.2g}) over "
            f"{a['n_heads']} heads; the top {a['k']} heads of each ranking share {a['top_overlap']} "
            f"(two random sets of {a['k']} would share {a['top_overlap_expected']:.1f} on average)."
        )
    label, best = max(agreements.items(), key=lambda item: item[1]["spearman_rho"])
    rho, p = best["spearman_rho"], best["p_value"]
    if rho >= PROXY_GOOD and p < 0.05:
        answer = "**it can stand in** for the ablations' ranking"
    elif rho >= PROXY_LOOSE and p < 0.05:
        answer = "**it agrees only loosely**: good for shortlisting heads to ablate, not for replacing the ablations"
    else:
        answer = "**it cannot stand in** for the ablations here"
    lines.append(
        f"- Best agreement: {label}, ρ = {rho:+.2f}: {answer} (thresholds: ρ ≥ {PROXY_GOOD} stands in, "
        f"ρ ≥ {PROXY_LOOSE} loose, both with p < 0.05)."
    )
    if n_significant is not None:
        lines.append(
            f"- Only {n_significant} of {best['n_heads']} single-head ablations are distinguishable from "
            f"zero after Holm, so most of the ablation ranking is noise, which caps any rank correlation; "
            f"the overlap of the top heads is the more telling number."
        )
    return "\n".join(lines)


def mean_ablation_specs(specs) -> list:
    """The masks this page checks with mean-ablation (a handful, not the sweep): every whole layer, and the halves at
    the shares nearest the study's collapse points (40% and 50% of all heads), each with its draws."""
    near = set(collapse_shares(sorted({float(s.meta["share"]) for s in specs if s.kind in HALVES})))
    return [s for s in specs if s.kind in ("none", "layer") or (s.kind in HALVES and float(s.meta["share"]) in near)]


# --- the page's sweeps ----------------------------------------------------------------------------------


@dataclass
class Sweeps:
    """Page 02's masks and what they did: the plan and per-pair results of its sweep (the halves' random draws, every
    whole layer, every head alone, with the unmasked model) and their summary, and the same for the handful of masks
    the method check mean-ablates (:func:`mean_ablation_specs`)."""

    plan: pd.DataFrame
    per_example: pd.DataFrame
    summary: pd.DataFrame
    mean_plan: pd.DataFrame
    mean_example: pd.DataFrame
    mean_summary: pd.DataFrame

    def note(self, lab: Lab) -> str:
        """What ran, in one sentence: the masks of each kind, the pairs, the model's shape and its floor."""
        layers, heads = lab.shape
        kinds = self.plan["kind"].value_counts().to_dict()
        return (
            f"{len(self.plan)} masks ({kinds}) on {len(lab.encoded)} {lab.params.eval_split} pairs of a {layers} x "
            f"{heads} model; unmasked accuracy {baseline_correct(self.per_example).mean():.1%}, always answering the "
            f"most frequent grade {lab.floor.majority:.1%}."
        )


def run_sweeps(lab: Lab, half_steps: int, half_draws: int, deciding_draws: int, n_boot: int, seed: int) -> Sweeps:
    """The page's sweep, saved mask by mask and resumed (:meth:`headlab.lab.Lab.sweep`), and its mean-ablated method
    check (each removed head's output replaced by its mean over training pairs instead of zero)."""
    layers, heads = lab.shape
    specs = [
        baseline_spec(),
        *half_specs(layers, heads, half_steps, half_draws, seed, deciding_draws),
        *layer_specs(layers, heads),
        *single_head_specs(layers, heads),
    ]
    plan, per_example = plan_table(specs), lab.sweep(specs, "layer_dependence")
    mean_specs = mean_ablation_specs(specs)
    mean_plan, mean_example = plan_table(mean_specs), lab.sweep(mean_specs, "layer_dependence", ablation="mean")
    return Sweeps(
        plan,
        per_example,
        summarize(per_example, plan, n_boot=n_boot, seed=seed),
        mean_plan,
        mean_example,
        summarize(mean_example, mean_plan, n_boot=n_boot, seed=seed),
    )


@dataclass
class Halves:
    """The two halves masked at the same shares: each half's curve over the shares (``curve``; ``draws``, one row per
    draw), the gap between them per share (``gap``) and the claims they give, marked where mean-ablation moves them."""

    curve: pd.DataFrame
    draws: pd.DataFrame
    gap: pd.DataFrame
    rows: list[Claim]


def compare_halves(sweeps: Sweeps, n_boot: int, seed: int) -> Halves:
    """:class:`Halves` from the page's sweeps: the share curves of each half (:func:`headlab.core.sweep.share_curve`),
    their gap (:func:`headlab.measures.halves.half_gap`), zeroed and mean-ablated, and :func:`halves_claims` marked
    where mean-ablation moves them."""
    curves, draws = zip(
        *(share_curve(sweeps.per_example, sweeps.plan, kind=half, n_boot=n_boot, seed=seed) for half in HALVES)
    )
    gap = half_gap(sweeps.per_example, sweeps.plan, n_boot=n_boot, seed=seed)
    mean_gap = half_gap(sweeps.mean_example, sweeps.mean_plan, n_boot=n_boot, seed=seed)
    rows = with_mean_ablation(halves_claims(gap), halves_claims(mean_gap))
    return Halves(pd.concat(curves, ignore_index=True), pd.concat(draws, ignore_index=True), gap, rows)
