"""headlab.book.scorecard and the site's toc: claims saved by the notebooks of several presets become one table and
the book's first page, each cell linking to its evidence; models left out are named with the command that adds them."""
import math

import pandas as pd

from headlab.book.build import PRESETS, REPO, not_built_commands, site_toc
from headlab.book.scorecard import scorecard_markdown, scorecard_table
from headlab.findings.claims import Claim, claims_table


def _claim(claim_id="redundancy.gain_at_10", verdict="holds", ours=0.012, lo=0.004, hi=0.02, finding="01 redundancy"):
    return Claim(claim_id, finding, "Masking 10% of the heads raises accuracy by about 1%", 0.01, ours, lo, hi,
                 "relative change of accuracy", 1379, 10, None, verdict, "why")


def _save(tmp_path, settings, name, claims):
    from headlab.book.scorecard import results_folder

    claims_table(claims).to_csv(results_folder(settings) / f"claims_{name}.csv", index=False)


def test_claims_of_each_preset_are_stacked_with_their_page_and_model(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    first = {"RUN_DIR": str(tmp_path / "runs")}
    second = {**first, "MODEL": "minilm", "EPOCHS": 1}  # another checkpoint, so another results folder
    _save(tmp_path, first, "01_redundancy", [_claim(), _claim("redundancy.no_loss", "cannot tell", math.nan, math.nan,
                                                                math.nan)])
    _save(tmp_path, second, "01_redundancy", [_claim(verdict="opposite", ours=-0.03, lo=-0.05, hi=-0.01)])
    _save(tmp_path, second, "08_two_tower", [_claim("two_tower.worse", finding="08 two towers")])
    table = scorecard_table({"a": first, "b": second})
    assert list(table["preset"]) == ["a", "a", "b", "b"]
    assert list(table["page"]) == ["01_redundancy", "01_redundancy", "01_redundancy", "08_two_tower"]
    assert set(table["model"]) == {"minilm"} and table.loc[2, "verdict"] == "opposite"

    page = scorecard_markdown(table, {"a": "executed", "b": "executed/b"}, {"e5-zh": 'make book PRESETS="a b e5-zh"'})
    assert page.startswith("# Scorecard")
    row = next(line for line in page.splitlines() if line.startswith("| Masking 10%"))
    assert row == ("| Masking 10% of the heads raises accuracy by about 1% | +1.0% | {doc}`holds <executed/01_redundancy>`"
                   " +1.2% [+0.4%, +2.0%] | {doc}`opposite <executed/b/01_redundancy>` -3.0% [-5.0%, -1.0%] |")
    unmeasured = next(line for line in page.splitlines() if "cannot tell" in line and line.startswith("| Masking"))
    assert "{doc}`cannot tell <executed/01_redundancy>` | not run |" in unmeasured  # no number, b has no such row
    assert "| a (minilm, stsb-en) | 2 | 1 | 0 | 0 | 1 |" in page  # claims, then holds / not / opposite / cannot tell
    assert "## 08 two towers" in page and '- e5-zh: `make book PRESETS="a b e5-zh"`' in page


def test_a_build_with_no_claims_says_so():
    empty = scorecard_markdown(pd.DataFrame(columns=["preset", "finding", "verdict"]), {"default": "executed"}, {})
    assert "No notebook of this build saved any claim." in empty


def test_the_site_toc_puts_the_scorecard_first_and_each_preset_in_its_folder():
    one = site_toc(REPO / "book" / "_toc.yml", {"default": "executed"})
    assert one.splitlines()[:2] == ["format: jb-book", "root: scorecard"]
    assert "file: intro" in one and "file: executed/01_redundancy" in one and "(default)" not in one
    two = site_toc(REPO / "book" / "_toc.yml", {"default": "executed", "zh-char": "executed/zh-char"})
    assert two.count("file: executed/01_redundancy") == 1 and "file: executed/zh-char/01_redundancy" in two
    assert "caption: Findings (zh-char)" in two and "caption: Findings (default)" in two


def test_models_not_built_are_named_with_the_command_that_adds_them():
    commands = not_built_commands(["default", "zh-char"])
    assert "tiny" not in commands and "default" not in commands and "zh-char" not in commands
    assert commands["e5-zh"] == 'make book PRESETS="default zh-char e5-zh"'
    assert "needs a GPU" in commands["mpnet"] and set(commands) == set(PRESETS) - {"tiny", "default", "zh-char"}
