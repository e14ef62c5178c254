"""Findings 2 and 7, layer dependence and the single-head grid: the study's claims and our verdicts.

The study's BERT has 12 layers. A model of another depth is compared by relative depth: a study layer
maps to our layer that holds its middle (for 6 layers, study layers 2l and 2l+1 map to our layer l).
Each claim of the study the page tests is one :class:`headlab.findings.claims.Claim` row (``halves_claims``,
``layers_claims``, ``heads_claims``): our number with its 95% interval, the verdict and why. The verdicts shown on
the page are those rows rendered, followed by the numbers behind them.
"""
from __future__ import annotations

import pandas as pd

from headlab.core.stats import by_interval, equivalent
from headlab.findings.claims import Claim, render

STUDY_LAYERS = 12
STUDY_GAIN_LAYERS = range(5, 10)  # masking any one of these whole layers improved accuracy
STUDY_BEST_LAYER, STUDY_BEST_GAIN = 8, 0.023
STUDY_MATCHING_LAYERS = range(2, 5)  # where the five term-matching heads sit
STUDY_HIGH_HEAD_LAYER = 10  # the high head that hands the matching features to the classifier
STUDY_COLLAPSE_SHARES = {0.4: "80%", 0.5: "100%"}  # share of all heads -> share of the low heads


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _interval(value: float, lo: float, hi: float) -> str:
    return f"{_pct(value)} [{_pct(lo)}, {_pct(hi)}]"


def _span(values) -> str:
    """"2–4" for a run of numbers, "2, 5" otherwise."""
    values = list(values)
    if len(values) > 1 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(str(v) for v in values)


def _head(layer, head) -> str:
    return f"{int(layer)}.{int(head)}"


def study_layer_to_ours(layer: int, layers: int) -> int:
    """Our layer at the relative depth of the middle of the study's ``layer`` (of 12)."""
    if not 0 <= layer < STUDY_LAYERS:
        raise ValueError(f"the study's layers are 0..{STUDY_LAYERS - 1}, got {layer}")
    return (2 * layer + 1) * layers // (2 * STUDY_LAYERS)


def study_layers_to_ours(study_layers, layers: int) -> list[int]:
    """Our layers at the relative depth of a set of the study's layers."""
    return sorted({study_layer_to_ours(k, layers) for k in study_layers})


def depth_note(layers: int) -> str:
    """One sentence on how the study's layer numbers translate to this model."""
    if layers == STUDY_LAYERS:
        return "Our model has 12 layers like the study's, so layer numbers compare one to one."
    pairs = []
    for ours in range(layers):
        theirs = [k for k in range(STUDY_LAYERS) if study_layer_to_ours(k, layers) == ours]
        if theirs:
            pairs.append(f"{_span(theirs)} → {ours}")
    return (f"The study's BERT has {STUDY_LAYERS} layers and ours {layers}, so layers are compared by relative depth "
            f"(study layers → our layer: {'; '.join(pairs)}).")


# --- the rows -----------------------------------------------------------------------------------------

FINDING = "02 layer dependence"
CHANGE = "relative change of accuracy"


def _claim(slug: str, claim: str, study: float | None, numbers, n_examples: int, n_draws: int, p: float | None,
           verdict: str, reason: str, unit: str = CHANGE) -> Claim:
    """One row of this page; ``numbers`` is our number with its 95% interval, ``(ours, lo, hi)``."""
    ours, lo, hi = (float(x) for x in numbers)
    return Claim(f"layer_dependence.{slug}", FINDING, claim, study, ours, lo, hi, unit, int(n_examples), int(n_draws),
                 None if p is None else float(p), verdict, reason)


def _not_measured(slug: str, claim: str, study: float | None, reason: str, unit: str = CHANGE) -> Claim:
    nan = float("nan")
    return _claim(slug, claim, study, (nan, nan, nan), 0, 0, None, "cannot tell", reason, unit)


# --- low versus high layers ----------------------------------------------------------------------------

COLLAPSE_CLAIM = "Masking 80% and 100% of the low heads makes accuracy collapse"
COSTS_LESS_CLAIM = "Masking most of the high heads costs far less than masking the low heads"
GAP_UNIT = f"{CHANGE}, upper half minus lower half"


def _which_half(row) -> str:
    return by_interval(row.gap_lo, row.gap_hi, "the lower half costs more", "the upper half costs more",
                       "no difference distinguishable from zero")


def _collapse_points(gap: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``gap`` where the study made its claim: the shares nearest 40% and 50% of all heads (80% and 100%
    of the low heads), each only if it lies within 5 points of its target, and once if both targets find it."""
    masked = gap[gap["share"] > 0].sort_values("share")
    points = []
    for target in STUDY_COLLAPSE_SHARES:
        if len(masked):
            nearest = (masked["share"] - target).abs().idxmin()
            if abs(masked.at[nearest, "share"] - target) <= 0.05:
                points.append(nearest)
    return masked.loc[list(dict.fromkeys(points))]


def _collapse(points: pd.DataFrame, majority: float | None, at: str) -> Claim:
    """The collapse, shown at the point where accuracy with the low heads masked stays highest."""
    if majority is None:
        return _not_measured("low_heads_collapse", COLLAPSE_CLAIM, None,
                             "Not measured: no floor was given (the accuracy of always answering the most frequent "
                             "grade), and a collapse is measured against it.")
    collapsed = points["lower_accuracy"] <= majority
    shown = points.loc[points["lower_accuracy"].idxmax()]
    return _claim("low_heads_collapse", COLLAPSE_CLAIM, None, (shown.lower_change, shown.lower_lo, shown.lower_hi),
                  shown.n_examples, shown.lower_draws, None, "holds" if collapsed.all() else "does not hold",
                  f"Shown: the point where accuracy stays highest. With the low heads masked at {at} of all heads, "
                  f"accuracy is {' and '.join(f'{a:.1%}' for a in points['lower_accuracy'])}, from "
                  f"{shown.base_accuracy:.1%} unmasked; always answering the most frequent grade scores "
                  f"{majority:.1%}, and accuracy is at or below that floor at {int(collapsed.sum())} of these "
                  f"{len(points)} points (the rule: at every point; point estimates).")


def _costs_less(points: pd.DataFrame, at: str) -> Claim:
    """The high heads costing less, shown at the point whose difference's interval reaches lowest."""
    lower, upper = points["gap_lo"] > 0, points["gap_hi"] < 0
    verdict = "holds" if lower.all() else "opposite" if upper.all() else "does not hold"
    shown = points.loc[points["gap_lo"].idxmin()]
    return _claim("high_heads_cost_less", COSTS_LESS_CLAIM, None, (shown.gap, shown.gap_lo, shown.gap_hi),
                  shown.n_examples, shown.lower_draws, None, verdict,
                  f"Shown: the point whose interval reaches lowest. At {at} of all heads, masking the upper half "
                  f"changes accuracy by {' and '.join(_pct(c) for c in points['upper_change'])}, the lower half by "
                  f"{' and '.join(_pct(c) for c in points['lower_change'])}; the lower half costs more, with a "
                  f"difference distinguishable from zero (its 95% paired interval above 0), at {int(lower.sum())} of "
                  f"these {len(points)} points (the rule: at every point).", GAP_UNIT)


def halves_claims(gap: pd.DataFrame, majority: float | None = None) -> list[Claim]:
    """The study's two claims about the halves, judged where it made them: 80% and 100% of the low heads masked
    (40% and 50% of all heads on the axis).

    ``gap`` comes from :func:`headlab.findings.importance.half_gap`; ``majority`` is the accuracy of always answering
    the most frequent grade, the floor a "collapse" is measured against: the collapse holds when accuracy with the
    low heads masked is at or below it at every point. "The high heads cost far less" holds when the paired
    difference (upper half's change minus lower half's) has its 95% interval above 0 at every point, and is the
    opposite when it lies below 0 at every point.
    """
    points = _collapse_points(gap)
    if points.empty:
        reason = "Not tested: no share near 40% or 50% of all heads (raise HALF_STEPS)."
        return [_not_measured("low_heads_collapse", COLLAPSE_CLAIM, None, reason),
                _not_measured("high_heads_cost_less", COSTS_LESS_CLAIM, None, reason, GAP_UNIT)]
    at = " and ".join(f"{s:.0%}" for s in points["share"])
    return [_collapse(points, majority, at), _costs_less(points, at)]


def halves_verdict(gap: pd.DataFrame, majority: float | None = None) -> str:
    """The study's claims about the halves (:func:`halves_claims`), then the difference at every share (markdown)."""
    lines = [render(halves_claims(gap, majority))]
    masked = gap[gap["share"] > 0].sort_values("share")
    if masked.empty:
        return "\n".join(lines + ["- No share above 0 was masked: nothing to compare."])
    widest = masked.loc[masked["gap"].abs().idxmax()]
    lower, upper = int((masked["gap_lo"] > 0).sum()), int((masked["gap_hi"] < 0).sum())
    lines.append(f"- Over all {len(masked)} shares masked, the lower half costs more at {lower} and the upper half at "
                 f"{upper} (a difference distinguishable from zero); the largest difference (upper minus lower "
                 f"change) is {widest.gap * 100:+.1f} points [{widest.gap_lo * 100:+.1f}, {widest.gap_hi * 100:+.1f}] "
                 f"at {widest.share:.0%} of all heads.")
    for r in masked.itertuples():
        lines.append(f"  - {r.share:.1%} of all heads ({r.n_heads} heads, {2 * r.share:.0%} of a half): "
                     f"lower {_interval(r.lower_change, r.lower_lo, r.lower_hi)}, upper "
                     f"{_interval(r.upper_change, r.upper_lo, r.upper_hi)}; difference {r.gap * 100:+.1f} points "
                     f"[{r.gap_lo * 100:+.1f}, {r.gap_hi * 100:+.1f}]: {_which_half(r)}.")
    return "\n".join(lines)


# --- whole layers --------------------------------------------------------------------------------------

GAINS_CLAIM = "Masking any one of layers 5–9 (of 12) raises accuracy"
LAYER_8_CLAIM = "Masking all of layer 8 (of 12) raises accuracy by 2.3%"


def layer_reference(layers: int) -> pd.DataFrame:
    """The study's one number for whole layers (+2.3% at layer 8), placed at our layer of the same depth."""
    ours = study_layer_to_ours(STUDY_BEST_LAYER, layers)
    return pd.DataFrame([{"layer": ours, "rel_change": STUDY_BEST_GAIN,
                          "label": f"study: layer {STUDY_BEST_LAYER} of {STUDY_LAYERS}, +2.3%"}])


def _layer_state(row) -> str:
    if not row["distinguishable"]:
        return ""
    return " (gain)" if row["rel_change"] > 0 else " (loss)"


def _layers(table: pd.DataFrame) -> str:
    return ", ".join(f"layer {int(r.layer)} ({_pct(r.rel_change)}, Holm p = {r.p_holm:.2g})"
                     for r in table.itertuples()) or "no layer"


def _gains(rows: pd.DataFrame, layers: int, n_examples: int, rule: str) -> Claim:
    """Gains at the study's layers 5–9, shown at the one of our layers whose interval reaches lowest."""
    ours = [l for l in study_layers_to_ours(STUDY_GAIN_LAYERS, layers) if l in rows.index]
    if not ours:
        return _not_measured("layers_5_9_gain", GAINS_CLAIM, None,
                             "Not tested: none of our layers at the depth of layers 5–9 of 12 was masked.")
    effects = rows.loc[ours]
    gains = effects["distinguishable"] & (effects["rel_change"] > 0)
    losses = effects["distinguishable"] & (effects["rel_change"] < 0)
    shown = effects.loc[effects["lo"].idxmin()]
    parts = "; ".join(f"layer {l}: {_interval(r['rel_change'], r['lo'], r['hi'])}{_layer_state(r)}"
                      for l, r in effects.iterrows())
    return _claim("layers_5_9_gain", GAINS_CLAIM, None, (shown.rel_change, shown.lo, shown.hi), n_examples, 1,
                  shown.p_holm, "holds" if gains.all() else "opposite" if losses.all() else "does not hold",
                  f"At the same depth, our layers {_span(ours)}: {int(gains.sum())} of {len(ours)} show a "
                  f"distinguishable gain ({parts}); a layer's gain counts when {rule} (the rule: a gain at every "
                  f"one of them). Shown: layer {int(shown.name)}, whose interval reaches lowest, with its Holm p.")


def _layer_8(rows: pd.DataFrame, layers: int, n_examples: int) -> Claim:
    """The study's one number for whole layers, at our layer of the same depth."""
    best = study_layer_to_ours(STUDY_BEST_LAYER, layers)
    if best not in rows.index:
        return _not_measured("layer_8_gain", LAYER_8_CLAIM, STUDY_BEST_GAIN,
                             f"Not tested: our layer {best}, at the depth of layer 8 of 12, was not masked.")
    r = rows.loc[best]
    verdict = ("holds" if r["rel_change"] > 0 else "opposite") if r["distinguishable"] else "cannot tell"
    change = ("a gain" if r["rel_change"] > 0 else "a loss") if r["distinguishable"] else "no change"
    contains = "contains" if r["lo"] <= STUDY_BEST_GAIN <= r["hi"] else "excludes"
    return _claim("layer_8_gain", LAYER_8_CLAIM, STUDY_BEST_GAIN, (r["rel_change"], r["lo"], r["hi"]), n_examples, 1,
                  r["p_holm"], verdict,
                  f"Our layer {best} at the same depth: {change} distinguishable from zero (Holm p = "
                  f"{r['p_holm']:.2g}); the interval {contains} the study's +2.3%.")


def layers_claims(table: pd.DataFrame, layers: int, n_examples: int, alpha: float = 0.05) -> list[Claim]:
    """The study's two claims about whole layers, at our layers of the same relative depth.

    ``table`` comes from :func:`headlab.findings.importance.layer_effects` (with the same ``alpha``), over
    ``n_examples`` test pairs: a change counts as a gain or a loss when its McNemar test survives the Holm
    correction over all layers (``distinguishable``); the intervals are 95% paired bootstrap intervals of each
    layer on its own. "Any of layers 5–9" holds when every one of our layers there gains, is the opposite when
    every one loses, and does not hold otherwise; "layer 8" holds on a gain, is the opposite on a loss, and
    cannot be told when neither is distinguishable.
    """
    rows = table.set_index("layer")
    rule = f"its exact McNemar test survives the Holm correction over all {len(table)} layers at {alpha:.0%}"
    return [_gains(rows, layers, n_examples, rule), _layer_8(rows, layers, n_examples)]


def layers_verdict(table: pd.DataFrame, layers: int, n_examples: int, alpha: float = 0.05) -> str:
    """The study's claims about whole layers (:func:`layers_claims`), then every layer's gain or loss (markdown)."""
    called = table[table["distinguishable"]]
    worst = table.loc[table["rel_change"].idxmin()]
    return "\n".join([
        render(layers_claims(table, layers, n_examples, alpha)),
        f"- {depth_note(layers)} A layer's gain or loss counts when its exact McNemar test survives the Holm "
        f"correction over all {len(table)} layers ({alpha:.0%}).",
        f"- Across all {len(table)} layers, masking a whole layer gives a distinguishable gain at "
        f"{_layers(called[called['rel_change'] > 0])} and a distinguishable loss at "
        f"{_layers(called[called['rel_change'] < 0])}; the largest loss is layer {int(worst.layer)}: "
        f"{_interval(worst.rel_change, worst.lo, worst.hi)}."])


# --- single heads --------------------------------------------------------------------------------------

NOTHING_CLAIM = "Most single heads change nothing when masked"
MATCHING_CLAIM = "The term-matching heads (layers 2–4 of 12) hurt when masked"
HIGH_HEAD_CLAIM = "One head of layer 10 (of 12) hurts when masked"
IMPROVE_CLAIM = "Masking some single heads improves the model (the study's open question)"
NOTHING_UNIT = "share of heads shown to change nothing"


def _heads(table: pd.DataFrame, with_p: bool = False) -> str:
    return ", ".join(f"{_head(r.layer, r.head)} {_interval(r.rel_change, r.lo, r.hi)}"
                     + (f" (p = {r.p_mcnemar:.2g}, Holm {r.p_holm:.2g})" if with_p else "")
                     for r in table.itertuples())


def _change_nothing(tested: pd.DataFrame, n_examples: int, margin: float) -> Claim:
    """"Most heads change nothing": it holds when more than half are shown equivalent to no change, and does not
    hold when more than half change (Holm); a head that is neither leaves the claim open."""
    same = int(sum(equivalent(r.lo90, r.hi90, margin) for r in tested.itertuples()))
    share = same / len(tested)
    changed = int(tested["significant"].sum())
    verdict = "holds" if share > 0.5 else "does not hold" if changed > len(tested) / 2 else "cannot tell"
    return _claim("most_heads_change_nothing", NOTHING_CLAIM, None, (share, float("nan"), float("nan")), n_examples, 1,
                  None, verdict,
                  f"A head is shown to change nothing when its 90% interval lies within ±{margin:.0%} (MARGIN): "
                  f"{same} of {len(tested)} heads pass; {len(tested) - changed} show no change that survives the Holm "
                  f"correction, which alone would not show that they change nothing. The rule: more than half shown "
                  f"to change nothing, or more than half changing after Holm for the opposite. A count over every "
                  f"head masked, so no interval.", NOTHING_UNIT)


def _hurting(slug: str, claim: str, tested: pd.DataFrame, ours: list[int], n_examples: int, note: str) -> Claim:
    """A claim that heads of ``ours`` layers hurt when masked: it holds when one of them does after Holm."""
    there = tested[tested["layer"].isin(ours)]
    if there.empty:
        return _not_measured(slug, claim, None, f"Not tested: no head of our layer(s) {_span(ours)} was masked.")
    hurts = there[there["direction"] == "hurts"].sort_values("rel_change")
    shown = (hurts if len(hurts) else there).nsmallest(1, "rel_change").iloc[0]
    named = f": {_heads(hurts)}" if len(hurts) else ""
    return _claim(slug, claim, None, (shown.rel_change, shown.lo, shown.hi), n_examples, 1, shown.p_holm,
                  "holds" if len(hurts) else "cannot tell",
                  f"At the same depth, our layer(s) {_span(ours)}{note}: {len(hurts)} head(s) hurt when masked, "
                  f"surviving the Holm correction over all {len(tested)} heads{named} (the rule: at least one). "
                  f"Shown: head {_head(shown['layer'], shown['head'])}, the lowest change there, with its Holm p; "
                  f"picked for its size on the same pairs, so its size leans away from zero.")


def _improving(tested: pd.DataFrame, n_examples: int, alpha: float) -> Claim:
    """Heads whose masking improves accuracy: it holds when one survives Holm; shown: the largest such gain."""
    helps = tested[tested["direction"] == "helps"].sort_values("rel_change", ascending=False)
    better = tested[(tested["p_mcnemar"] < alpha) & (tested["rel_change"] > 0)]
    shown = (helps if len(helps) else tested).nlargest(1, "rel_change").iloc[0]
    named = f": {_heads(helps)}" if len(helps) else ""
    which = "that survives" if len(helps) else "of any head"
    return _claim("some_heads_improve", IMPROVE_CLAIM, None, (shown.rel_change, shown.lo, shown.hi), n_examples, 1,
                  shown.p_holm, "holds" if len(helps) else "cannot tell",
                  f"{len(better)} head(s) improve accuracy at an uncorrected p < {alpha}; {len(helps)} survive the "
                  f"Holm correction over all {len(tested)} heads{named} (the rule: at least one). Shown: head "
                  f"{_head(shown['layer'], shown['head'])}, the largest gain {which}, "
                  f"with its Holm p; picked for its size on the same pairs, so its size leans away from zero.")


def heads_claims(grid: pd.DataFrame, layers: int, n_examples: int, alpha: float = 0.05,
                 margin: float = 0.02) -> list[Claim]:
    """The study's claims about single heads (its finding 7), and the gain it left open.

    ``grid`` comes from :func:`headlab.findings.importance.head_grid_table` (with the same ``alpha``), over
    ``n_examples`` test pairs. "Changes nothing" is a claim of no effect: a head makes it only when its 90% interval
    lies within ±``margin``, and the claim holds when more than half the heads do. A head hurts or helps when its
    McNemar test survives the Holm correction over all heads; the study's layers map to ours by relative depth, and
    this page does not pick the term-matching heads (notebook 05 does), so any head of their layers counts.
    """
    tested = grid[grid["direction"] != "untested"]
    if tested.empty:
        return [_not_measured(slug, claim, None, "Not tested: no single head was masked.", unit)
                for slug, claim, unit in (("most_heads_change_nothing", NOTHING_CLAIM, NOTHING_UNIT),
                                          ("matching_layers_hurt", MATCHING_CLAIM, CHANGE),
                                          ("layer_10_head_hurts", HIGH_HEAD_CLAIM, CHANGE),
                                          ("some_heads_improve", IMPROVE_CLAIM, CHANGE))]
    matching = " (this page does not pick the term-matching heads, notebook 05 does: any head there counts)"
    return [_change_nothing(tested, n_examples, margin),
            _hurting("matching_layers_hurt", MATCHING_CLAIM, tested,
                     study_layers_to_ours(STUDY_MATCHING_LAYERS, layers), n_examples, matching),
            _hurting("layer_10_head_hurts", HIGH_HEAD_CLAIM, tested,
                     [study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)], n_examples, ""),
            _improving(tested, n_examples, alpha)]


def heads_verdict(grid: pd.DataFrame, layers: int, n_examples: int, alpha: float = 0.05, margin: float = 0.02) -> str:
    """The study's claims about single heads (:func:`heads_claims`), then which heads hurt and help (markdown)."""
    lines = [render(heads_claims(grid, layers, n_examples, alpha, margin))]
    tested = grid[grid["direction"] != "untested"]
    if tested.empty:
        return "\n".join(lines + ["- No single head was masked."])
    sig = tested[tested["significant"]]
    hurts = sig[sig["direction"] == "hurts"].sort_values("rel_change")
    helps = sig[sig["direction"] == "helps"].sort_values("rel_change", ascending=False)
    lines.append(f"- Heads are named layer.head, from 0. Each of {len(tested)} heads was masked alone and compared "
                 f"with the unmasked model on the same examples (exact McNemar test, Holm-corrected over the "
                 f"{len(tested)} tests): **{len(sig)} significant** at {alpha:.0%}; {len(hurts)} hurt when masked"
                 f"{': ' + _heads(hurts) if len(hurts) else ''}; {len(helps)} help"
                 f"{': ' + _heads(helps) if len(helps) else ''}. Half of all single-head changes lie within "
                 f"±{tested['rel_change'].abs().median():.1%}.")
    better = tested[(tested["p_mcnemar"] < alpha) & (tested["rel_change"] > 0)].sort_values("p_mcnemar")
    if len(better):
        lines.append(f"- Heads that improve accuracy at an uncorrected p < {alpha}: {_heads(better, with_p=True)}.")
    worst = tested.nsmallest(min(5, len(tested)), "rel_change")
    lines.append(f"- The largest losses, significant or not: {_heads(worst)}. These heads were picked for their size "
                 f"on the same pairs, so their sizes lean away from zero (the winner's curse); notebook 07 picks its "
                 f"head on one part of the pairs and measures it on the other.")
    return "\n".join(lines)


# --- gradient importance as a proxy --------------------------------------------------------------------

PROXY_GOOD, PROXY_LOOSE = 0.7, 0.4  # Spearman rho thresholds for "stands in" and "agrees loosely"


def proxy_verdict(agreements: dict[str, dict], n_significant: int | None = None) -> str:
    """Can the gradient importance stand in for the ablations? (markdown)

    ``agreements`` maps a label to a :func:`headlab.findings.importance.rank_agreement` result. The answer uses the
    best rho: at least 0.7 (and p < 0.05) stands in, at least 0.4 agrees loosely, below that it cannot.
    """
    lines = []
    for label, a in agreements.items():
        lines.append(f"- {label}: Spearman ρ = {a['spearman_rho']:+.2f} (p = {a['p_value']:.2g}) over "
                     f"{a['n_heads']} heads; the top {a['k']} heads of each ranking share {a['top_overlap']} "
                     f"(two random sets of {a['k']} would share {a['top_overlap_expected']:.1f} on average).")
    label, best = max(agreements.items(), key=lambda item: item[1]["spearman_rho"])
    rho, p = best["spearman_rho"], best["p_value"]
    if rho >= PROXY_GOOD and p < 0.05:
        answer = "**it can stand in** for the ablations' ranking"
    elif rho >= PROXY_LOOSE and p < 0.05:
        answer = "**it agrees only loosely**: good for shortlisting heads to ablate, not for replacing the ablations"
    else:
        answer = "**it cannot stand in** for the ablations here"
    lines.append(f"- Best agreement: {label}, ρ = {rho:+.2f}: {answer} (thresholds: ρ ≥ {PROXY_GOOD} stands in, "
                 f"ρ ≥ {PROXY_LOOSE} loose, both with p < 0.05).")
    if n_significant is not None:
        lines.append(f"- Only {n_significant} of {best['n_heads']} single-head ablations are distinguishable from "
                     f"zero after Holm, so most of the ablation ranking is noise, which caps any rank correlation; "
                     f"the overlap of the top heads is the more telling number.")
    return "\n".join(lines)
