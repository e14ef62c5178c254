"""headlab.book.standing: the models on one data set side by side from results/, and which column is shaped like
the study (a character-reading model above the lexical grader), read from tables made up here."""

import pandas as pd

from headlab.report.standing import SEGMENTATION, standing, standing_markdown, standing_note, study_shaped


def _results(tmp_path, char_accuracy=(0.55, 0.52, 0.58), char_against_lexical=(-0.05, -0.097, -0.005)):
    tmp_path.mkdir(parents=True, exist_ok=True)
    models = pd.DataFrame(
        [
            {"preset": p, "model": m, "data": d, "accuracy": a, "accuracy_lo": lo, "accuracy_hi": hi, "majority": 0.32}
            for p, m, d, (a, lo, hi) in (
                ("default", "minilm", "stsb-en", (0.55, 0.52, 0.57)),
                ("zh-char", "zh-char", "stsb-zh", (0.40, 0.37, 0.42)),
                ("e5-zh", "e5-small", "stsb-zh", (0.53, 0.50, 0.55)),
                ("e5-zh-char", "e5-small-char", "stsb-zh", char_accuracy),
            )
        ]
    )
    two_tower = pd.DataFrame(
        [
            {
                "preset": p,
                "label": label,
                "accuracy": acc,
                "kappa_base": k,
                "kappa_base_lo": k - 0.02,
                "kappa_base_hi": k + 0.02,
                # page 08's paired comparison with the model on the same pairs (the cross-encoder's own row: 0)
                **dict(zip(["rel_change", "lo", "hi"], change if label != "cross-encoder" else (0, 0, 0))),
                "p_mcnemar": 0.04 if label != "cross-encoder" else float("nan"),
            }
            for p, k, change in (
                ("zh-char", float("nan"), (0.25, 0.17, 0.33)),
                ("e5-zh", 0.6, (-0.06, -0.1, -0.02)),
                ("e5-zh-char", 0.62, char_against_lexical),
            )
            for label, acc in (("cross-encoder", 0.5), ("lexical overlap grader", 0.496))
        ]
    )
    verdict = {"zh-char": "holds", "e5-zh": "not comparable", "e5-zh-char": "cannot tell"}
    scorecard = pd.DataFrame(
        [
            {"preset": p, "claim_id": c, "ours": 0.1, "lo": 0.05, "hi": 0.15, "verdict": v}
            for p, v in verdict.items()
            for c in SEGMENTATION
        ]
    )
    for name, table in (("models", models), ("two_tower", two_tower), ("scorecard", scorecard)):
        table.to_csv(tmp_path / f"{name}.csv", index=False)
    return tmp_path


def test_the_chinese_columns_side_by_side_with_their_reading_kappa_and_floors(tmp_path):
    table = standing(_results(tmp_path))
    assert list(table["preset"]) == ["zh-char", "e5-zh", "e5-zh-char"]  # the data's presets only, in results' order
    by = table.set_index("preset")
    assert by.loc["e5-zh", "reading"] == "pieces that give word ends away"
    assert by.loc["e5-zh-char", "reading"] == by.loc["zh-char", "reading"] == "one character per token"
    assert by.loc["e5-zh-char", "kappa"] == 0.62 and by.loc["e5-zh-char", "lexical"] == 0.496
    lines = standing_markdown(table)
    assert len(lines) == 2 + 3 and "| — |" in lines[2]  # zh-char recorded no κ
    assert "+10.0 [+5.0, +15.0], cannot tell" in lines[4]
    assert "49.6% (-5.0% [-9.7%, -0.5%] relative to the model on the same pairs; McNemar p = 0.04)" in lines[4]


def test_the_study_shaped_column_reads_characters_and_beats_the_lexical_grader(tmp_path):
    table = standing(_results(tmp_path))
    assert study_shaped(table) == "e5-zh-char"  # e5-zh grades about as well, but reads pieces
    assert "The column shaped like the study is e5-zh-char" in standing_note(table)
    # paired on the same pairs, the grader's change reaches 0: not better than the grader, whatever the accuracy
    # interval alone says (it lies above the grader's 49.6% here)
    level = standing(_results(tmp_path, char_against_lexical=(-0.04, -0.09, 0.01)))
    assert study_shaped(level) is None
    note = standing_note(level)
    assert "No column is shaped like the study" in note and "+5.4 points" in note and "[-9.0%, +1.0%]" in note


def test_data_no_character_model_reads_has_no_note_and_missing_tables_give_no_rows(tmp_path):
    results = _results(tmp_path)
    english = standing(results, "stsb-en")
    assert list(english["preset"]) == ["default"] and standing_note(english) == ""
    (results / "models.csv").unlink()
    assert standing(results).empty and standing_markdown(standing(results)) == [
        "No preset on this data is in `results/` yet."
    ]


def test_the_study_shaped_column_comes_first_of_the_chinese_columns_once_results_show_it(tmp_path):
    """tools.readme orders the columns (the rows of every table it merges) by PRESETS, except that the column shaped
    like the study moves ahead of the other presets on its data; a column that is not (the lexical grader's paired
    change reaches 0) keeps its place."""
    from tools import readme

    results = _results(tmp_path / "results")
    order = readme.column_order(results)
    assert order.index("e5-zh-char") < min(order.index("zh-char"), order.index("e5-zh"))
    assert order.index("default") < order.index("e5-zh-char") and sorted(order) == sorted(readme.PRESETS)
    runs = tmp_path / "runs"
    runs.mkdir()
    pd.read_csv(results / "models.csv").query("preset == 'zh-char'").to_csv(runs / "models.csv", index=False)
    readme.collect(runs, results)  # any merge puts every table it touched in column order
    assert list(pd.read_csv(results / "models.csv")["preset"]) == ["default", "e5-zh-char", "zh-char", "e5-zh"]
    level = _results(tmp_path / "level", char_against_lexical=(-0.04, -0.09, 0.01))
    assert readme.column_order(level) == list(readme.PRESETS)
