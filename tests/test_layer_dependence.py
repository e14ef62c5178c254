import numpy as np
import pandas as pd
import pytest

from headlab.core.stats import holm
from headlab.findings.layer_dependence import (
    depth_note,
    halves_verdict,
    heads_verdict,
    layer_reference,
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
    return gap


def test_halves_verdict_when_the_lower_half_collapses():
    gap = _gap([(0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                (0.2, 14, -0.10, -0.15, -0.05, -0.02, -0.05, 0.01, -0.01, 0.15),
                (0.403, 29, -0.60, -0.65, -0.55, -0.05, -0.09, -0.01, 0.48, 0.62),
                (0.5, 36, -0.70, -0.75, -0.65, -0.10, -0.14, -0.06, 0.53, 0.67)])
    text = halves_verdict(gap, majority=0.25)
    assert "**The lower half matters more here**" in text and "2 of 3 shares" in text
    assert "+60.0 points [+53.0, +67.0] at 50%" in text  # the widest difference
    assert "lower -60.0% [-65.0%, -55.0%], upper -5.0% [-9.0%, -1.0%]" in text
    assert "at 40% and 50%" in text and "24.0% (-60.0%) and 18.0% (-70.0%)" in text
    assert "at or below that floor at 2 of these 2 points" in text and "**holds**" in text
    assert "no difference distinguishable from zero" in text  # the 20% share


def test_halves_verdict_when_the_halves_do_not_differ():
    gap = _gap([(0.1, 7, -0.01, -0.03, 0.01, 0.0, -0.02, 0.02, -0.03, 0.05),
                (0.5, 36, -0.30, -0.35, -0.25, -0.28, -0.33, -0.23, -0.04, 0.08)])
    text = halves_verdict(gap, majority=0.1)
    assert "**No difference between the halves is distinguishable from zero**" in text
    one = gap.assign(gap_lo=[-0.03, 0.01])  # the lower half costs more at the whole half only: not "matters more"
    assert "**Only at 1 of 2 shares does the lower half cost more** (never less)" in halves_verdict(one)
    assert "at 50%:" in text and "at or below that floor at 0 of these 1 points" in text and "**does not hold**" in text
    assert "Not tested" in halves_verdict(gap.iloc[:1])


def _layers(changes, p_values=None, half_width=0.01):
    c = np.array(changes)
    p = np.where(np.abs(c) > half_width, 0.001, 0.5) if p_values is None else np.asarray(p_values)
    table = pd.DataFrame({"layer": range(len(c)), "accuracy": 0.5 * (1 + c), "rel_change": c,
                          "lo": c - half_width, "hi": c + half_width, "p_mcnemar": p, "p_holm": holm(p)})
    table["distinguishable"] = table["p_holm"] < 0.05
    return table


def test_layers_verdict_compares_by_depth_and_with_the_study_numbers():
    text = layers_verdict(_layers([-0.5, -0.2, 0.03, 0.0, 0.02, -0.1]), 6)
    assert "study layers → our layer" in text
    assert "our layers 2–4): 2 of 3 show a distinguishable gain" in text and "holds in part" in text
    assert "layer 2: +3.0% [+2.0%, +4.0%] (gain)" in text and "layer 3: +0.0% [-1.0%, +1.0%];" in text
    assert "(our layer 4): we measure +2.0% [+1.0%, +3.0%] (Holm p = 0.006), a gain distinguishable from zero; the interval contains" in text
    assert "Holm correction over all 6 layers" in text
    assert "the largest loss is layer 0: -50.0%" in text
    text = layers_verdict(_layers([-0.5] * 12), 12)
    assert "one to one" in text and "0 of 5 show a distinguishable gain" in text and "does **not** hold" in text
    assert "a loss distinguishable from zero; the interval excludes" in text and "gain at no layer" in text


def test_layers_verdict_needs_holm_across_layers_not_one_interval():
    # layer 2's interval excludes zero and p = 0.02, but six layers were tested: Holm makes it 0.1
    text = layers_verdict(_layers([0.0, 0.0, 0.03, 0.0, 0.0, 0.0], p_values=[1, 1, 0.02, 1, 1, 1]), 6)
    assert "layer 2: +3.0% [+2.0%, +4.0%];" in text and "0 of 3 show a distinguishable gain" in text
    assert "gain at no layer" in text


def _grid(rows):
    grid = pd.DataFrame(rows, columns=["layer", "head", "rel_change", "p_mcnemar", "p_holm"])
    grid["lo"], grid["hi"] = grid["rel_change"] - 0.02, grid["rel_change"] + 0.02
    grid["lo90"], grid["hi90"] = grid["rel_change"] - 0.015, grid["rel_change"] + 0.015
    grid["significant"] = grid["p_holm"] < 0.05
    grid["direction"] = np.where(~grid["significant"], "none", np.where(grid["rel_change"] < 0, "hurts", "helps"))
    return grid


def test_heads_verdict_counts_and_names_the_heads():
    grid = _grid([(0, 0, -0.30, 1e-6, 1e-5), (1, 1, -0.10, 1e-4, 1e-3), (2, 0, 0.05, 1e-3, 0.01),
                  (2, 1, 0.02, 0.01, 0.2), (0, 1, 0.0, 1.0, 1.0), (1, 0, -0.01, 0.6, 1.0)])
    text = heads_verdict(grid, layers=3)
    assert "6 heads" in text and "**3 significant**" in text
    assert "2 hurt when masked: 0.0 -30.0%" in text and "1 help: 2.0 +5.0%" in text
    # only head 0.1 (+0.0% [-1.5%, +1.5%]) lies within ±2%; 1.0 and 2.1 are not significant, yet not shown null
    assert "1 of 6 heads (17%) are shown to change nothing (90% interval within ±2%, MARGIN); 3 show no significant" in text
    assert "The claim **is not shown** here" in text
    assert "2 improve accuracy at an uncorrected p < 0.05" in text and "1 of them survive the Holm correction: 2.0" in text
    assert "our layers 1 and 2" not in text and "our layers 0–1 and 2" in text
    assert "1.1 -10.0% [-12.0%, -8.0%] in layers 0–1" in text and "none in layer 2" in text


def test_heads_verdict_without_any_improving_head():
    grid = _grid([(0, 0, -0.30, 1e-6, 1e-5), (0, 1, 0.01, 0.5, 1.0)])
    text = heads_verdict(grid, layers=2)
    assert "none, even before the correction" in text and "head 0.1: +1.0%" in text


def test_proxy_verdict_thresholds():
    def agreement(rho, p=1e-4):
        return {"spearman_rho": rho, "p_value": p, "n_heads": 72, "k": 7, "top_overlap": 3, "top_overlap_expected": 0.68}
    assert "**it can stand in**" in proxy_verdict({"raw": agreement(0.8), "per layer": agreement(0.3)})
    assert "Best agreement: raw" in proxy_verdict({"raw": agreement(0.8), "per layer": agreement(0.3)})
    assert "**it agrees only loosely**" in proxy_verdict({"raw": agreement(0.5)})
    assert "**it cannot stand in**" in proxy_verdict({"raw": agreement(0.8, p=0.2)})
    text = proxy_verdict({"raw": agreement(0.1)}, n_significant=4)
    assert "Only 4 of 72" in text and "share 3 (two random sets of 7 would share 0.7" in text
