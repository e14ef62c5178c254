"""Comparing the MLM+NSP and MLM-only Chinese models: the right rows are read, differences and their intervals
are computed, and the verdict follows the numbers."""

import json

import pandas as pd
import pytest

from headlab.judging.verdicts import render
from headlab.models.names import named_model_dir
from headlab.pages.objectives import (
    NSP_ACCURACY,
    claims,
    compare_objectives,
    main,
    objective_results,
    pretrained_name,
    verdict,
)


def write_results(folder, term_change, term_ci, seg_gain, seg_ci, accuracy=0.4):
    """The four tables notebooks 00, 03 and 05 write, with only the columns the comparison reads (plus noise rows)."""
    folder.mkdir(parents=True)
    pd.DataFrame(
        {
            "metric": ["accuracy", "macro_f1"],
            "value": [accuracy, 0.3],
            "lo": [accuracy - 0.04, 0.2],
            "hi": [accuracy + 0.04, 0.4],
            "n_examples": [1361, 1361],
        }
    ).to_csv(folder / "baseline_metrics.csv")
    seg = []
    for subset in ("all tokens", "multi-token words"):
        for measure in (
            "majority class",
            "best head, chosen on other examples",
            "probe on all heads, held-out examples",
        ):
            gain = 0.0 if measure == "majority class" else seg_gain
            seg.append(
                {
                    "subset": subset,
                    "measure": measure,
                    "gain": gain,
                    "gain_lo": gain - seg_ci,
                    "gain_hi": gain + seg_ci,
                    "n_test_tokens": 6068,
                }
            )
    pd.DataFrame(seg).to_csv(folder / "segmentation_comparison_pku-1998.csv", index=False)
    pd.DataFrame(
        {
            "condition": ["none", "random", "matching"],
            "rel_change": [0.0, -0.01, term_change],
            "lo": [0, -0.02, term_change - term_ci],
            "hi": [0, 0.0, term_change + term_ci],
            "n_examples": [1361] * 3,
        }
    ).to_csv(folder / "term_matching_table.csv", index=False)
    pd.DataFrame(
        {
            "tested": ["matching", "matching"],
            "reference": ["random", "random_lower"],
            "difference": [term_change + 0.02, term_change],
            "difference_lo": [term_change + 0.02 - term_ci, term_change - term_ci],
            "difference_hi": [term_change + 0.02 + term_ci, term_change + term_ci],
            "n_draws": [20, 20],
        }
    ).to_csv(folder / "term_matching_vs_random.csv", index=False)
    return folder


VERSUS = "matching heads minus the mean of random heads: relative change, in points"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_longest_pretrained_name_wins(tmp_path):
    assert pretrained_name(tmp_path / "zh-char-mlm-stsb-zh-0123456789ab-test-all") == "zh-char-mlm"
    assert pretrained_name(tmp_path / "zh-char-stsb-zh-0123456789ab-test-500") == "zh-char"
    with pytest.raises(ValueError, match="minilm-stsb-en"):
        pretrained_name(tmp_path / "minilm-stsb-en-0123456789ab-test-all")


def test_results_read_the_named_rows_and_the_pretraining_report(cache):
    folder = write_results(cache / "runs" / "zh-char-stsb-zh-k-test-all", -0.30, 0.05, 0.02, 0.01)
    report = named_model_dir("zh-char")
    report.mkdir(parents=True)
    (report / "pretraining.json").write_text(
        json.dumps(
            {
                "masked_token_accuracy": 0.14,
                "masked_token_accuracy_lo": 0.13,
                "masked_token_accuracy_hi": 0.15,
                "masked_tokens": 5772,
                "final_train": {"mlm_accuracy": 0.14, "nsp_accuracy": 0.58},
                "config": {"batch_size": 16},
            }
        )
    )
    table = objective_results(folder).set_index("measure")
    assert set(table["objective"]) == {"mlm+nsp"}
    assert table.loc["masked-token accuracy (held-out sentences)", "value"] == 0.14
    nsp = table.loc[NSP_ACCURACY]
    assert nsp["value"] == 0.58 and nsp["n"] == 800  # 50 steps of 16 pairs
    assert 0.54 < nsp["lo"] < 0.55 and 0.61 < nsp["hi"] < 0.62  # Wilson interval of 464 / 800
    assert table.loc["test accuracy", "value"] == 0.4  # the accuracy row, not macro-F1
    assert table.loc["the 5 term-matching heads masked: relative change", "value"] == -0.30
    versus = table.loc[VERSUS]
    assert versus["value"] == pytest.approx(-0.28) and versus["n"] == 20  # against random heads, not the lower half
    assert table.loc["best head: gain over the majority class (all tokens)", "lo"] == pytest.approx(0.01)
    mlm = write_results(cache / "runs" / "zh-char-mlm-stsb-zh-k-test-all", -0.01, 0.05, 0.02, 0.01)
    assert "random next sentences on 58.0% [54.5%, 61.4%] of its last 800" in verdict(compare_objectives(folder, mlm))


def test_difference_and_its_interval(cache):
    nsp = write_results(cache / "zh-char-stsb-zh-k-test-all", -0.30, 0.03, 0.02, 0.01)
    mlm = write_results(cache / "zh-char-mlm-stsb-zh-k-test-all", -0.02, 0.04, 0.02, 0.01)
    table = compare_objectives(nsp, mlm).set_index("measure")
    row = table.loc["the 5 term-matching heads masked: relative change"]
    assert row["difference"] == pytest.approx(-0.28)
    assert row["difference_hi"] - row["difference"] == pytest.approx(0.05)  # sqrt(0.03^2 + 0.04^2)
    assert "pretraining" not in set(table["finding"])  # nothing pretrained in this cache: no report rows
    text = verdict(table.reset_index())
    rows = {c.claim_id: c for c in claims(table.reset_index())}
    matching = rows["objectives.nsp_made_matching_heads"]
    assert (matching.ours, matching.tally, matching.level) == (pytest.approx(-0.28), "objectives", 1 - 0.05 / 2)
    # -28 points [-33, -23], adjusted for a family of 2 to about [-34, -22]: not beyond half the study's -52.4%
    assert matching.verdict == "cannot tell"
    strong = write_results(cache / "zh-char-stsb-zh-s-test-all", -0.60, 0.03, 0.02, 0.01)
    found = {c.claim_id: c for c in claims(compare_objectives(strong, mlm))}["objectives.nsp_made_matching_heads"]
    assert found.verdict == "holds" and found.ours == pytest.approx(-0.58)
    seg = rows["objectives.mlm_made_segmentation_heads"]
    assert seg.kind == "no_effect" and seg.ours == 0 and seg.verdict == "holds"  # the same gains, within ±5 points
    assert rows["objectives.mlm_made_segmentation_heads/multi-token"].verdict == "not judged"
    assert text.startswith(render(list(rows.values())))
    assert "on all tokens by +2.0 [+1.0, +3.0] points with NSP" in text
    versus = table.loc[VERSUS]  # the named heads against random heads: a difference, so differenced like the others
    assert versus["value_nsp"] == pytest.approx(-0.28) and versus["difference"] == pytest.approx(-0.28)
    assert "one pretraining run" in text
    with pytest.raises(ValueError, match="MLM\\+NSP model's results first"):
        compare_objectives(mlm, nsp)


def test_verdict_when_the_heads_do_not_matter_even_with_nsp(cache, capsys):
    nsp = write_results(cache / "zh-char-stsb-zh-k-test-all", 0.015, 0.03, 0.01, 0.008)
    mlm = write_results(cache / "zh-char-mlm-stsb-zh-k-test-all", -0.01, 0.03, 0.03, 0.008)
    table = compare_objectives(nsp, mlm)
    rows = {c.claim_id: c for c in claims(table)}
    # the heads cost nothing with NSP either: the difference lies short of the study's size, so NSP is not credited
    assert rows["objectives.nsp_made_matching_heads"].verdict == "does not hold"
    # the MLM-only model segments 2 points better, within the ±5-point margin: the same, as the study credits MLM
    assert rows["objectives.mlm_made_segmentation_heads"].verdict == "holds"
    text = verdict(table)
    assert "**does not hold** ·" in text and "Not supported" not in text
    assert main([str(nsp), str(mlm), "--out", str(cache / "out.csv")]) == 0
    assert "written:" in capsys.readouterr().out
    assert len(pd.read_csv(cache / "out.csv")) == len(compare_objectives(nsp, mlm))


def test_a_missing_table_names_the_file(cache):
    folder = write_results(cache / "zh-char-stsb-zh-k-test-all", 0.0, 0.01, 0.0, 0.01)
    (folder / "term_matching_table.csv").unlink()
    with pytest.raises(FileNotFoundError, match="term_matching_table.csv"):
        objective_results(folder)
