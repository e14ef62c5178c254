"""Findings 2 and 7, layer dependence and the single-head grid: the study's claims and our verdicts.

The study's BERT has 12 layers. A model of another depth is compared by relative depth: a study layer
maps to our layer that holds its middle (for 6 layers, study layers 2l and 2l+1 map to our layer l).
Each verdict states the study's claim, our numbers with their 95% intervals, and whether the claim holds.
"""
from __future__ import annotations

import pandas as pd

from headlab.core.stats import by_interval, equivalent

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


# --- low versus high layers ----------------------------------------------------------------------------

def _which_half(row) -> str:
    return by_interval(row.gap_lo, row.gap_hi, "the lower half costs more", "the upper half costs more",
                       "no difference distinguishable from zero")


def halves_verdict(gap: pd.DataFrame, majority: float | None = None) -> str:
    """Which half matters more, by how much at each share, and the study's collapse claim (markdown).

    ``gap`` comes from :func:`headlab.findings.importance.half_gap`; ``majority`` is the accuracy of always answering
    the most frequent grade, the floor a "collapse" is measured against.
    """
    gap = gap.sort_values("share")
    masked = gap[gap["share"] > 0]
    if masked.empty:
        return "- No share above 0 was masked: nothing to compare."
    lower, upper = masked[masked["gap_lo"] > 0], masked[masked["gap_hi"] < 0]
    one_sided = [(w, c) for w, c, other in (("lower", lower, upper), ("upper", upper, lower)) if len(c) and other.empty]
    if one_sided:  # "matters more" needs most shares, not one of them
        which, costs = one_sided[0]
        head = (f"**The {which} half matters more here**: masking {which} heads costs more at {len(costs)} of "
                f"{len(masked)} shares, never less" if 2 * len(costs) > len(masked) else
                f"**Only at {len(costs)} of {len(masked)} shares does the {which} half cost more** (never less)")
    elif len(lower):
        head = (f"**Neither half matters more throughout**: lower heads cost more at {len(lower)} shares, "
                f"upper heads at {len(upper)}, of {len(masked)}")
    else:
        head = f"**No difference between the halves is distinguishable from zero** at any of the {len(masked)} shares"
    widest = masked.loc[masked["gap"].abs().idxmax()]
    lines = [f"- {head}; the largest difference (upper minus lower change) is {widest.gap * 100:+.1f} points "
             f"[{widest.gap_lo * 100:+.1f}, {widest.gap_hi * 100:+.1f}] at {widest.share:.0%} of all heads."]
    for r in masked.itertuples():
        lines.append(f"  - {r.share:.1%} of all heads ({r.n_heads} heads, {2 * r.share:.0%} of a half): "
                     f"lower {_interval(r.lower_change, r.lower_lo, r.lower_hi)}, upper "
                     f"{_interval(r.upper_change, r.upper_lo, r.upper_hi)}; difference {r.gap * 100:+.1f} points "
                     f"[{r.gap_lo * 100:+.1f}, {r.gap_hi * 100:+.1f}]: {_which_half(r)}.")
    points = []
    for target in STUDY_COLLAPSE_SHARES:
        nearest = masked.iloc[(masked["share"] - target).abs().argmin()]
        if abs(nearest.share - target) <= 0.05:
            points.append(nearest)
    claim = ("- *The study: masking 80% and 100% of the low heads (40% and 50% of all heads on the axis) makes "
             "accuracy collapse; masking most high heads costs far less.*")
    if not points:
        return "\n".join(lines + [f"{claim} Not tested: no share near 40% or 50% (raise HALF_STEPS)."])
    at = " and ".join(f"{p.share:.0%}" for p in points)
    lines.append(
        f"{claim} Here, at {at}: masking the lower half leaves accuracy at "
        f"{' and '.join(f'{p.lower_accuracy:.1%} ({_pct(p.lower_change)})' for p in points)}, the upper half at "
        f"{' and '.join(f'{p.upper_accuracy:.1%} ({_pct(p.upper_change)})' for p in points)}, "
        f"from {points[0].base_accuracy:.1%} unmasked.")
    if majority is not None:
        collapsed = sum(p.lower_accuracy <= majority for p in points)
        lines.append(f"  Always answering the most frequent grade scores {majority:.1%}; with the low heads masked, "
                     f"accuracy is at or below that floor at {collapsed} of these {len(points)} points.")
    holds = all(p.gap_lo > 0 for p in points)
    lines.append(f"  The lower half costs more, with a difference distinguishable from zero, at "
                 f"{sum(p.gap_lo > 0 for p in points)} of these {len(points)} points: the claim that low heads "
                 f"matter more {'**holds**' if holds else '**does not hold**'} here.")
    return "\n".join(lines)


# --- whole layers --------------------------------------------------------------------------------------

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


def layers_verdict(table: pd.DataFrame, layers: int, alpha: float = 0.05) -> str:
    """Whole-layer masking against the study's gains for layers 5–9 and +2.3% at layer 8 (markdown).

    ``table`` comes from :func:`headlab.findings.importance.layer_effects`: a change counts as a gain or a loss when its
    McNemar test survives the Holm correction over all layers (``distinguishable``); the intervals are 95%
    paired bootstrap intervals of each layer on its own.
    """
    rows = table.set_index("layer")
    lines = [f"- {depth_note(layers)} A layer's gain or loss counts when its exact McNemar test survives the Holm "
             f"correction over all {len(table)} layers ({alpha:.0%})."]
    gain_layers = [l for l in study_layers_to_ours(STUDY_GAIN_LAYERS, layers) if l in rows.index]
    if gain_layers:
        parts = "; ".join(f"layer {l}: {_interval(rows.at[l, 'rel_change'], rows.at[l, 'lo'], rows.at[l, 'hi'])}"
                          f"{_layer_state(rows.loc[l])}" for l in gain_layers)
        gains = sum(bool(rows.at[l, "distinguishable"]) and rows.at[l, "rel_change"] > 0 for l in gain_layers)
        state = "holds" if gains == len(gain_layers) else "holds in part" if gains else "does **not** hold"
        lines.append(f"- *Gains when masking any of layers 5–9 of 12* (our layers {_span(gain_layers)}): "
                     f"{gains} of {len(gain_layers)} show a distinguishable gain ({parts}); the claim {state} here.")
    best = study_layer_to_ours(STUDY_BEST_LAYER, layers)
    if best in rows.index:
        r = rows.loc[best]
        contains = "contains" if r["lo"] <= STUDY_BEST_GAIN <= r["hi"] else "excludes"
        gain = ("a gain" if r["rel_change"] > 0 else "a loss") if r["distinguishable"] else "no change"
        lines.append(f"- *+2.3% for layer 8 of 12* (our layer {best}): we measure "
                     f"{_interval(r['rel_change'], r['lo'], r['hi'])} (Holm p = {r['p_holm']:.2g}), {gain} "
                     f"distinguishable from zero; the interval {contains} the study's +2.3%.")
    called = table[table["distinguishable"]]
    worst = table.loc[table["rel_change"].idxmin()]
    lines.append(f"- Across all {len(table)} layers, masking a whole layer gives a distinguishable gain at "
                 f"{_layers(called[called['rel_change'] > 0])} and a distinguishable loss at "
                 f"{_layers(called[called['rel_change'] < 0])}; the largest loss is layer "
                 f"{int(worst.layer)}: {_interval(worst.rel_change, worst.lo, worst.hi)}.")
    return "\n".join(lines)


# --- single heads --------------------------------------------------------------------------------------

def _heads(table: pd.DataFrame, with_p: bool = False) -> str:
    return ", ".join(f"{_head(r.layer, r.head)} {_interval(r.rel_change, r.lo, r.hi)}"
                     + (f" (p = {r.p_mcnemar:.2g}, Holm {r.p_holm:.2g})" if with_p else "")
                     for r in table.itertuples())


def heads_verdict(grid: pd.DataFrame, layers: int, alpha: float = 0.05, margin: float = 0.02) -> str:
    """How many single heads matter after Holm, which hurt, which help, against the study (markdown).

    ``grid`` comes from :func:`headlab.findings.importance.head_grid_table` (with the same ``alpha``). "Changes nothing"
    is a claim of no effect: a head makes it only when its 90% interval lies within ±``margin``.
    """
    tested = grid[grid["direction"] != "untested"]
    if tested.empty:
        return "- No single head was masked."
    sig = tested[tested["significant"]]
    hurts = sig[sig["direction"] == "hurts"].sort_values("rel_change")
    helps = sig[sig["direction"] == "helps"].sort_values("rel_change", ascending=False)
    lines = [f"- Heads are named layer.head, from 0. Each of {len(tested)} heads was masked alone and compared "
             f"with the unmasked model on the same examples (exact McNemar test, Holm-corrected over the "
             f"{len(tested)} tests): **{len(sig)} significant** at {alpha:.0%}; {len(hurts)} hurt when masked"
             f"{': ' + _heads(hurts) if len(hurts) else ''}; {len(helps)} help{': ' + _heads(helps) if len(helps) else ''}."]
    quiet = len(tested) - len(sig)
    same = int(sum(equivalent(r.lo90, r.hi90, margin) for r in tested.itertuples()))
    share = same / len(tested)
    holds = "**holds**" if share > 0.5 else "**is not shown**"
    lines.append(f"- *Most single heads change nothing* (study): {same} of {len(tested)} heads ({share:.0%}) are shown "
                 f"to change nothing (90% interval within ±{margin:.0%}, MARGIN); {quiet} show no significant change, "
                 f"which alone would not show that they change nothing. The claim {holds} here. Half of all "
                 f"single-head changes lie within ±{tested['rel_change'].abs().median():.1%}.")
    better = tested[(tested["p_mcnemar"] < alpha) & (tested["rel_change"] > 0)].sort_values("p_mcnemar")
    if better.empty:
        top = tested.loc[tested["rel_change"].idxmax()]
        lines.append(f"- *Heads whose removal improves the model* (the study's open question): none, even before the "
                     f"correction (uncorrected p < {alpha}); the largest gain is head {_head(top['layer'], top['head'])}: "
                     f"{_interval(top.rel_change, top.lo, top.hi)}, p = {top.p_mcnemar:.2g}.")
    else:
        survive = better[better["significant"]]
        lines.append(f"- *Heads whose removal improves the model* (the study's open question): {len(better)} improve "
                     f"accuracy at an uncorrected p < {alpha}: {_heads(better, with_p=True)}; "
                     f"{len(survive)} of them survive the Holm correction"
                     f"{': ' + ', '.join(_head(r.layer, r.head) for r in survive.itertuples()) if len(survive) else ''}.")
    low = study_layers_to_ours(STUDY_MATCHING_LAYERS, layers)
    high = study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)
    in_low = hurts[hurts["layer"].isin(low)]
    in_high = hurts[hurts["layer"] == high]
    lines.append(f"- *The term-matching heads (layers 2–4 of 12) and one head of layer 10 hurt when masked* (study): "
                 f"at the same depth, our layers {_span(low)} and {high}. Significant hurting heads there: "
                 f"{_heads(in_low) or 'none'} in layers {_span(low)}; {_heads(in_high) or 'none'} in layer {high}.")
    worst = tested.nsmallest(min(5, len(tested)), "rel_change")
    lines.append(f"- The largest losses, significant or not: {_heads(worst)}. These heads were picked for their size on "
                 f"the same pairs, so their sizes lean away from zero (the winner's curse); notebook 07 picks its head "
                 f"on one part of the pairs and measures it on the other.")
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
