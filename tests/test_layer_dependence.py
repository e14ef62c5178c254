import numpy as np
import pandas as pd
import pytest

from headlab.core.stats import holm
from headlab.findings.claims import render
from headlab.findings.layer_dependence import (
    depth_note,
    halves_claims,
    halves_verdict,
    heads_claims,
    heads_verdict,
    layer_reference,
    layers_claims,
    layers_verdict,
    proxy_verdict,
    study_layer_to_ours,
    study_layers_to_ours,
)


def test_study_layers_map_by_relative_depth():
    assert [study_layer_to_ours(k, 12) for k in range(12)] == list(range(12))
    assert [study_layer_to_ours(k, 6) for k in range(12)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert study_layers_to_ours(range(5, 10), 6) == [2, 3, 4]
    assert study_layer_to_ours(8, 6) == 4 and study_layer_to_ours(10, 6) == 5
    assert study_layers_to_ours(range(5, 10), 3) == [1, 2]
    with pytest.raises(ValueError):
        study_layer_to_ours(12, 6)
    assert "one to one" in depth_note(12)
    assert "8–9 → 4" in depth_note(6) and "0–1 → 0" in depth_note(6)
    assert layer_reference(6).to_dict("records")[0]["layer"] == 4


def _gap(rows):
    columns = ["share", "n_heads", "lower_change", "lower_lo", "lower_hi", "upper_change", "upper_lo", "upper_hi",
               "gap_lo", "gap_hi"]
    gap = pd.DataFrame(rows, columns=columns)
    gap["gap"] = gap["upper_change"] - gap["lower_change"]
    gap["base_accuracy"] = 0.6
    gap["lower_accuracy"] = 0.6 * (1 + gap["lower_change"])
    gap["upper_accuracy"] = 0.6 * (1 + gap["upper_change"])
    gap["lower_draws"] = np.where(gap["share"].isin([0.0, 0.5]), 1, 5)
    gap["n_examples"] = 500
    return gap


COLLAPSING = [(0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
              (0.2, 14, -0.10, -0.15, -0.05, -0.02, -0.05, 0.01, -0.01, 0.15),
              (0.403, 29, -0.60, -0.65, -0.55, -0.05, -0.09, -0.01, 0.48, 0.62),
              (0.5, 36, -0.70, -0.75, -0.65, -0.10, -0.14, -0.06, 0.53, 0.67)]


def _by_slug(rows):
    return {c.claim_id.removeprefix("layer_dependence."): c for c in rows}


def test_halves_claims_are_judged_at_80_and_100_percent_of_the_low_heads():
    gap = _gap(COLLAPSING)
    rows = _by_slug(halves_claims(gap, majority=0.25))
    collapse, less = rows["low_heads_collapse"], rows["high_heads_cost_less"]
    assert (collapse.verdict, less.verdict) == ("holds", "holds")
    # shown: the point where accuracy stays highest (40%: 24.0%), and the point whose difference reaches lowest
    shown = gap.iloc[2]
    assert (collapse.ours, collapse.lo, collapse.hi) == (shown.lower_change, shown.lower_lo, shown.lower_hi)
    assert (collapse.n_examples, collapse.n_draws) == (500, 5)
    assert (less.ours, less.lo, less.hi) == (shown.gap, shown.gap_lo, shown.gap_hi)
    assert less.unit.endswith("upper half minus lower half")
    assert "accuracy is 24.0% and 18.0%, from 60.0% unmasked" in collapse.reason
    assert "at or below that floor at 2 of these 2 points" in collapse.reason
    # a floor below what the masked model keeps: no collapse
    above = _by_slug(halves_claims(gap, majority=0.2))["low_heads_collapse"]
    assert above.verdict == "does not hold" and "at 1 of these 2 points" in above.reason
    unknown = _by_slug(halves_claims(gap))["low_heads_collapse"]
    assert unknown.verdict == "cannot tell" and np.isnan(unknown.ours)
    # "at every point": a difference not distinguishable at 50% is not enough
    assert _by_slug(halves_claims(gap.assign(gap_lo=[0, -0.01, 0.48, -0.01]), 0.25))["high_heads_cost_less"].verdict \
        == "does not hold"
    # the upper half costing more, distinguishably, at both points is the opposite of the claim
    reversed_ = gap.assign(gap_lo=[0, -0.01, -0.2, -0.3], gap_hi=[0, 0.15, -0.1, -0.2])
    assert _by_slug(halves_claims(reversed_, 0.25))["high_heads_cost_less"].verdict == "opposite"
    untested = halves_claims(gap.iloc[:2], 0.25)
    assert {c.verdict for c in untested} == {"cannot tell"} and all(np.isnan(c.ours) for c in untested)
    assert all("raise HALF_STEPS" in c.reason for c in untested)


def test_halves_verdict_when_the_lower_half_collapses():
    gap = _gap(COLLAPSING)
    text = halves_verdict(gap, majority=0.25)
    assert text.startswith(render(halves_claims(gap, 0.25)))
    assert "*Masking 80% and 100% of the low heads makes accuracy collapse* **holds** here" in text
    assert "the lower half costs more at 2 and the upper half at 0" in text
    assert "+60.0 points [+53.0, +67.0] at 50%" in text  # the widest difference
    assert "lower -60.0% [-65.0%, -55.0%], upper -5.0% [-9.0%, -1.0%]" in text
    assert "At 40% and 50% of all heads, masking the upper half changes accuracy by -5.0% and -10.0%" in text
    assert "no difference distinguishable from zero" in text  # the 20% share


def test_halves_verdict_when_the_halves_do_not_differ():
    gap = _gap([(0.1, 7, -0.01, -0.03, 0.01, 0.0, -0.02, 0.02, -0.03, 0.05),
                (0.5, 36, -0.30, -0.35, -0.25, -0.28, -0.33, -0.23, -0.04, 0.08)])
    text = halves_verdict(gap, majority=0.1)
    assert "the lower half costs more at 0 and the upper half at 0" in text
    assert "*Masking most of the high heads costs far less than masking the low heads* does **not** hold here" in text
    assert "At 50% of all heads" in text and "at or below that floor at 0 of these 1 points" in text
    assert "Not tested" in halves_verdict(gap.iloc[:1])


def _layers(changes, p_values=None, half_width=0.01):
    c = np.array(changes)
    p = np.where(np.abs(c) > half_width, 0.001, 0.5) if p_values is None else np.asarray(p_values)
    table = pd.DataFrame({"layer": range(len(c)), "accuracy": 0.5 * (1 + c), "rel_change": c,
                          "lo": c - half_width, "hi": c + half_width, "p_mcnemar": p, "p_holm": holm(p)})
    table["distinguishable"] = table["p_holm"] < 0.05
    return table


def test_layers_claims_need_a_gain_at_every_layer_of_the_studys_depth():
    table = _layers([-0.5, -0.2, 0.03, 0.0, 0.02, -0.1])
    rows = _by_slug(layers_claims(table, 6, n_examples=400))
    gains, eight = rows["layers_5_9_gain"], rows["layer_8_gain"]
    assert gains.verdict == "does not hold" and "2 of 3 show a distinguishable gain" in gains.reason
    # shown: layer 3, whose interval reaches lowest
    assert (gains.ours, gains.lo, gains.hi, gains.p) == (0.0, -0.01, 0.01, table.at[3, "p_holm"])
    assert (eight.verdict, eight.ours, eight.lo, eight.hi, eight.study) == ("holds", 0.02, 0.01, 0.03, 0.023)
    assert eight.n_examples == 400 and eight.p == table.at[4, "p_holm"]
    every = _by_slug(layers_claims(_layers([-0.5, -0.2, 0.03, 0.03, 0.02, -0.1]), 6, 400))
    assert every["layers_5_9_gain"].verdict == "holds"
    losing = _by_slug(layers_claims(_layers([-0.5] * 12), 12, 400))
    assert losing["layers_5_9_gain"].verdict == "opposite" and losing["layer_8_gain"].verdict == "opposite"
    unclear = _by_slug(layers_claims(_layers([0.0, 0.0, 0.0, 0.0, 0.01, 0.0], p_values=[1] * 6), 6, 400))
    eight = unclear["layer_8_gain"]
    assert eight.verdict == "cannot tell" and "no change distinguishable" in eight.reason
    missing = layers_claims(_layers([-0.5, -0.2]), 6, 400)  # only layers 0 and 1 were masked
    assert [c.verdict for c in missing] == ["cannot tell"] * 2 and all(np.isnan(c.ours) for c in missing)


def test_layers_verdict_compares_by_depth_and_with_the_study_numbers():
    table = _layers([-0.5, -0.2, 0.03, 0.0, 0.02, -0.1])
    text = layers_verdict(table, 6, 400)
    assert text.startswith(render(layers_claims(table, 6, 400)))
    assert "study layers → our layer" in text
    assert "our layers 2–4: 2 of 3 show a distinguishable gain" in text
    assert "*Masking any one of layers 5–9 (of 12) raises accuracy* does **not** hold here" in text
    assert "layer 2: +3.0% [+2.0%, +4.0%] (gain); layer 3: +0.0% [-1.0%, +1.0%];" in text
    assert ("*Masking all of layer 8 (of 12) raises accuracy by 2.3%* **holds** here: +2.0% [+1.0%, +3.0%]" in text
            and "Our layer 4 at the same depth: a gain distinguishable from zero (Holm p = 0.006); the interval "
                "contains" in text)
    assert "Holm correction over all 6 layers" in text
    assert "the largest loss is layer 0: -50.0%" in text
    text = layers_verdict(_layers([-0.5] * 12), 12, 400)
    assert "one to one" in text and "0 of 5 show a distinguishable gain" in text and "the **opposite** holds" in text
    assert "a loss distinguishable from zero (Holm p" in text and "excludes" in text and "gain at no layer" in text


def test_layers_verdict_needs_holm_across_layers_not_one_interval():
    # layer 2's interval excludes zero and p = 0.02, but six layers were tested: Holm makes it 0.1
    table = _layers([0.0, 0.0, 0.03, 0.0, 0.0, 0.0], p_values=[1, 1, 0.02, 1, 1, 1])
    text = layers_verdict(table, 6, 400)
    assert "layer 2: +3.0% [+2.0%, +4.0%];" in text and "0 of 3 show a distinguishable gain" in text
    assert "gain at no layer" in text
    assert _by_slug(layers_claims(table, 6, 400))["layers_5_9_gain"].verdict == "does not hold"


def _grid(rows):
    grid = pd.DataFrame(rows, columns=["layer", "head", "rel_change", "p_mcnemar", "p_holm"])
    grid["lo"], grid["hi"] = grid["rel_change"] - 0.02, grid["rel_change"] + 0.02
    grid["lo90"], grid["hi90"] = grid["rel_change"] - 0.015, grid["rel_change"] + 0.015
    grid["significant"] = grid["p_holm"] < 0.05
    grid["direction"] = np.where(~grid["significant"], "none", np.where(grid["rel_change"] < 0, "hurts", "helps"))
    return grid


MIXED = [(0, 0, -0.30, 1e-6, 1e-5), (1, 1, -0.10, 1e-4, 1e-3), (2, 0, 0.05, 1e-3, 0.01),
         (2, 1, 0.02, 0.01, 0.2), (0, 1, 0.0, 1.0, 1.0), (1, 0, -0.01, 0.6, 1.0)]


def test_heads_claims_rules():
    grid = _grid(MIXED)
    rows = _by_slug(heads_claims(grid, layers=3, n_examples=300))
    # only head 0.1 lies within ±2%: not "most", and 3 of 6 significant is not more than half either
    nothing = rows["most_heads_change_nothing"]
    assert (nothing.verdict, nothing.ours, nothing.n_examples) == ("cannot tell", pytest.approx(1 / 6), 300)
    assert nothing.unit.startswith("share") and "1 of 6 heads pass" in nothing.reason
    # study layers 2–4 are our layers 0–1 of 3: heads 0.0 and 1.1 hurt after Holm; shown, the larger loss
    matching = rows["matching_layers_hurt"]
    worst = grid.iloc[0]
    assert matching.verdict == "holds"
    assert (matching.ours, matching.lo, matching.hi, matching.p) == (worst.rel_change, worst.lo, worst.hi, worst.p_holm)
    # study layer 10 is our layer 2, where no head hurts (2.0 helps)
    high = rows["layer_10_head_hurts"]
    assert high.verdict == "cannot tell" and high.ours == 0.02 and "0 head(s) hurt" in high.reason
    improve = rows["some_heads_improve"]
    best = grid.iloc[2]
    assert (improve.verdict, improve.ours, improve.lo, improve.hi, improve.p) == ("holds", best.rel_change, best.lo,
                                                                                   best.hi, best.p_holm)
    assert "2 head(s) improve accuracy at an uncorrected p < 0.05; 1 survive" in improve.reason
    quiet = _by_slug(heads_claims(_grid([(0, 0, 0.0, 1.0, 1.0), (0, 1, 0.001, 0.9, 1.0), (1, 0, 0.03, 0.04, 0.12)]),
                                  2, 300))
    assert quiet["most_heads_change_nothing"].verdict == "holds"
    assert quiet["some_heads_improve"].verdict == "cannot tell" and quiet["some_heads_improve"].ours == 0.03
    assert quiet["matching_layers_hurt"].verdict == "cannot tell"
    loud = _by_slug(heads_claims(_grid([(0, 0, -0.3, 1e-6, 1e-5), (0, 1, -0.2, 1e-6, 1e-5), (1, 0, 0.1, 1e-6, 1e-5)]),
                                 2, 300))
    assert loud["most_heads_change_nothing"].verdict == "does not hold"  # most heads change accuracy after Holm
    untested = heads_claims(_grid(MIXED).assign(direction="untested"), 3, 300)
    assert [c.verdict for c in untested] == ["cannot tell"] * 4 and all(np.isnan(c.ours) for c in untested)


def test_heads_verdict_counts_and_names_the_heads():
    grid = _grid(MIXED)
    text = heads_verdict(grid, layers=3, n_examples=300)
    assert text.startswith(render(heads_claims(grid, 3, 300)))
    assert "6 heads" in text and "**3 significant**" in text
    assert "2 hurt when masked: 0.0 -30.0%" in text and "1 help: 2.0 +5.0%" in text
    # only head 0.1 (+0.0% [-1.5%, +1.5%]) lies within ±2%; 1.0 and 2.1 are not significant, yet not shown null
    assert "1 of 6 heads pass; 3 show no change that survives the Holm correction" in text
    assert "*Most single heads change nothing when masked* **cannot be told** here" in text
    assert "2.0 +5.0% [+3.0%, +7.0%] (p = 0.001, Holm 0.01), 2.1 +2.0%" in text  # the uncorrected gains, with p
    assert "our layers 1 and 2" not in text and "our layer(s) 0–1 (this page" in text
    assert "0.0 -30.0% [-32.0%, -28.0%], 1.1 -10.0% [-12.0%, -8.0%] (the rule" in text
    assert "our layer(s) 2: 0 head(s)" in text


def test_heads_verdict_without_any_improving_head():
    grid = _grid([(0, 0, -0.30, 1e-6, 1e-5), (0, 1, 0.01, 0.5, 1.0)])
    text = heads_verdict(grid, layers=2, n_examples=300)
    assert "0 head(s) improve accuracy at an uncorrected p < 0.05; 0 survive" in text
    assert "Shown: head 0.1, the largest gain of any head" in text and "uncorrected p < 0.05:" not in text


def test_proxy_verdict_thresholds():
    def agreement(rho, p=1e-4):
        return {"spearman_rho": rho, "p_value": p, "n_heads": 72, "k": 7, "top_overlap": 3, "top_overlap_expected": 0.68}
    assert "**it can stand in**" in proxy_verdict({"raw": agreement(0.8), "per layer": agreement(0.3)})
    assert "Best agreement: raw" in proxy_verdict({"raw": agreement(0.8), "per layer": agreement(0.3)})
    assert "**it agrees only loosely**" in proxy_verdict({"raw": agreement(0.5)})
    assert "**it cannot stand in**" in proxy_verdict({"raw": agreement(0.8, p=0.2)})
    text = proxy_verdict({"raw": agreement(0.1)}, n_significant=4)
    assert "Only 4 of 72" in text and "share 3 (two random sets of 7 would share 0.7" in text
