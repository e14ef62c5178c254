"""The page registry (headlab.lab.pages) is the one list of pages: the files derived from it agree with it, papermill
reads every notebook's parameters, and a toy page added to it reaches the table of contents, the scorecard's
headings, the build's order, the tiny preset and the timings without touching anything else."""

import json
import shutil
import subprocess
import sys
import types

import pytest

from headlab.book import lanes, notebooks, presets
from headlab.book.steps import step_needs
from headlab.judging.verdicts import FAMILIES, StudyClaim
from headlab.lab import pages
from headlab.lab.pages import CROSS_ENCODER, PRESET_TOTAL, Artifact, Page, Parameter, tiny
from headlab.lab.params import REPO
from headlab.pages import claims

PAPERMILL = shutil.which("papermill", path=str(REPO / ".venv" / "bin")) or shutil.which("papermill")


def test_every_derived_file_agrees_with_the_registry():
    result = subprocess.run([sys.executable, "-m", "tools.pages", "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_derived_file_edited_by_hand_is_named(tmp_path):
    from tools import pages as tool

    for folder in ("notebooks", "book"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("_build", "executed"))
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    toc = tmp_path / "book" / "_toc.yml"
    toc.write_text(toc.read_text().replace("      - file: executed/04_word_order\n", ""))
    stale = [p for p, text in tool.derived_files(tmp_path).items() if p.read_text(encoding="utf-8") != text]
    assert stale == [toc]
    (tmp_path / "README.md").write_text("no block here\n")
    with pytest.raises(ValueError, match="no <!-- pages"):
        tool.derived_files(tmp_path)


@pytest.mark.parametrize("page", pages.page_ids())
def test_papermill_reads_every_parameter_of_every_notebook(page):
    """What ``papermill --help-notebook`` lists, and what ``-p`` is checked against."""
    import papermill

    found = papermill.inspect_notebook(str(REPO / "notebooks" / f"{page}.ipynb"))
    assert {name: p["default"] for name, p in found.items()} == {
        q.name: repr(q.default).replace("'", '"') for q in pages.page(page).all_parameters
    }


@pytest.mark.skipif(PAPERMILL is None, reason="needs papermill")
def test_papermill_help_lists_a_notebooks_parameters_and_p_warns_nothing(tmp_path, caplog):
    import papermill

    notebook = REPO / "notebooks" / "02_layer_dependence.ipynb"
    result = subprocess.run([PAPERMILL, "--help-notebook", str(notebook)], capture_output=True, text=True, check=True)
    assert "HALF_DRAWS: int (default 3)" in result.stdout and "Can't infer" not in result.stdout
    with caplog.at_level("WARNING", logger="papermill"):
        papermill.execute_notebook(str(notebook), str(tmp_path / "a.ipynb"), {"HALF_DRAWS": 4}, prepare_only=True)
        assert not caplog.records
        papermill.execute_notebook(str(notebook), str(tmp_path / "b.ipynb"), {"DRAWZ": 4}, prepare_only=True)
    assert "Passed unknown parameter: DRAWZ" in caplog.text


def test_parameter_names_mean_one_thing_and_tiny_values_agree():
    by_name: dict[str, set] = {}
    for p in pages.PAGES:
        names = [q.name for q in p.all_parameters]
        assert len(names) == len(set(names)), f"{p.id} takes a parameter twice"
        for q in p.all_parameters:
            by_name.setdefault(q.name, set()).add(repr((q.default, q.tiny, q.tiny_value)))
    drawn = [n for n in by_name if n.endswith("DRAWS")]
    assert "DRAWS" not in by_name and len(drawn) == len(set(drawn))
    assert pages.tiny_settings()["REDUNDANCY_DRAWS"] == 2 and presets.PRESETS["tiny"] == pages.tiny_settings()
    with pytest.raises(ValueError, match="a None default needs a hint"):
        Parameter("X", None, "no type")


def test_an_unknown_page_or_artifact_is_an_error_naming_the_registry():
    with pytest.raises(KeyError, match="no page '99_nothing' in headlab.lab.pages.PAGES"):
        pages.page("99_nothing")
    with pytest.raises(KeyError, match="no shared artifact 'nothing'"):
        pages.artifact("nothing")


TOY = Page(
    "11_toy",
    "11 a toy finding",
    "(a toy) heads that read the toy table",
    "the toy measure",
    "whether a toy page reaches every list of pages",
    (tiny("TOY_DRAWS", 9, "random sets per toy condition", 1), Parameter("TOY_SHARE", 0.5, "share of toy heads")),
    produces=(Artifact("toy_table", pages.TABLE, "the toy's heads"),),
    reads=("layer_dependence",),
)


def test_a_toy_page_is_one_row_and_every_list_of_pages_picks_it_up(monkeypatch, tmp_path):
    monkeypatch.setattr(pages, "PAGES", (*pages.PAGES, TOY))
    assert pages.page_ids()[-1] == "11_toy"
    assert "      - file: executed/11_toy\n" in pages.toc_yaml()  # the table of contents
    assert "[11 a toy finding](notebooks/11_toy.ipynb)" in pages.readme_table()
    assert "{doc}`executed/11_toy`" in pages.intro_table()
    claim = StudyClaim("toy.heads_read", "11_toy", "heads read", "q", "effect", 1, 0.05, "toy")
    assert claim.finding == "11 a toy finding"  # the scorecard's heading for its claims
    cell = pages.parameters_cell("11_toy")
    assert "TOY_DRAWS: int = 9" in cell and 'MODEL: str = "minilm"' in cell  # its own and the shared parameters
    assert pages.tiny_settings()["TOY_DRAWS"] == 1  # the tiny preset
    assert pages.artifact("toy_table").page == "11_toy"
    needs = step_needs(pages.page_ids())  # the build: after the page it reads and the fine-tune
    assert needs["11_toy"] == ("02_layer_dependence", CROSS_ENCODER)
    order = lanes.critical_path_first(pages.page_ids(), needs)
    assert order.index("02_layer_dependence") < order.index("11_toy")
    ledger = pages.timing_steps()  # the timings ledger
    assert ledger.index("11_toy") == ledger.index(PRESET_TOTAL) - 1
    notebook = tmp_path / "11_toy.ipynb"  # its notebook: the generated cell is all papermill needs
    notebook.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": cell, "outputs": []},
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    assert notebooks.notebook_parameters(notebook) == set(pages.page("11_toy").defaults())


def test_a_toy_claim_is_one_declaration_in_its_page_module_and_its_family_a_stated_rule(monkeypatch):
    """A page's module is found from the registry (``11_toy``: ``headlab.pages.toy``); the claim it declares in its
    ``CLAIMS`` reaches the registry of claims with no other list to edit. Its tally's family grows by one, and the
    family is the correction's size, a rule stated before the results: the registry says where to state it."""
    toy = types.ModuleType("headlab.pages.toy")
    toy.CLAIMS = (StudyClaim("toy.heads_read", "11_toy", "heads read", "q", "effect", 1, 0.05, "toy", tally="ours"),)
    monkeypatch.setitem(sys.modules, "headlab.pages.toy", toy)
    modules = claims.claim_modules((*pages.PAGES, TOY))
    assert modules[-2] is toy and modules[-1] is claims.objectives  # in the book's order, the objectives last
    found = claims.study_claims(modules)
    assert list(found)[-len(claims.objectives.CLAIMS) - 1] == "toy.heads_read"  # the page's place in the book
    assert set(found) - set(claims.STUDY_CLAIMS) == {"toy.heads_read"}
    with pytest.raises(ValueError, match=r"FAMILIES states .*raise RULE_VERSION"):
        claims.check_families(found, FAMILIES)
    stated = {**FAMILIES, "ours": FAMILIES["ours"] + 1}
    claims.check_families(found, stated)  # stated with it: the registry takes the page's claim
    del toy.CLAIMS
    with pytest.raises(AttributeError, match="headlab.pages.toy: a page module lists its claims in CLAIMS"):
        claims.study_claims(modules)
