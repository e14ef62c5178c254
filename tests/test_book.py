"""The book pipeline: notebooks are clean and parameterized, a failing notebook is loud, and the whole book
builds from tiny runs on the real default model and data."""
import shutil
import subprocess

import nbformat
import pytest

from headlab.book.build import PRESETS, REPO, BookError, _check_settings, execute_notebook, parse_setting, toc_notebooks

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_toc_and_notebooks_folder_agree():
    assert sorted(toc_notebooks(REPO / "book" / "_toc.yml")) == [nb.stem for nb in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_clean_with_a_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "clear the outputs before committing"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for name in ("MODEL", "DATA", "SEED", "DEVICE", "EVAL_LIMIT", "RUN_DIR"):
        assert f"{name} = " in tagged[0].source


def test_parse_setting_reads_python_literals_and_strings():
    assert parse_setting("draws=5") == ("DRAWS", 5)
    assert parse_setting("SHARES=[0.0, 0.5]") == ("SHARES", [0.0, 0.5])
    assert parse_setting("MODEL=minilm") == ("MODEL", "minilm")
    with pytest.raises(BookError, match="KEY=VALUE"):
        parse_setting("DRAWS")


def test_an_unknown_setting_is_refused_before_anything_runs():
    with pytest.raises(BookError, match="DRAWZ"):
        _check_settings({"DRAWZ": 3}, NOTEBOOKS)
    for preset in PRESETS.values():  # every preset sets only parameters that notebooks declare
        _check_settings(preset, NOTEBOOKS)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("model, preset, chinese", [("zh-char", "zh-char", True), ("zh-char-mlm", "zh-char-mlm", True),
                                                    ("/some/model", "default", False), ("", "default", False)])
def test_make_book_model_picks_the_preset_and_its_assets(model, preset, chinese):
    """``make book MODEL=zh-char`` (the README's command) must run the Chinese preset with the Chinese assets."""
    plan = subprocess.run(["make", "-n", "book", f"MODEL={model}"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    book = next(line for line in plan.splitlines() if "-m headlab.book " in line)  # not headlab.report.bookjs
    fetch = next(line for line in plan.splitlines() if "-m headlab.inputs.assets fetch" in line)
    assert f"--preset {preset} " in book + " "
    assert (f"--set MODEL={model}" in book) == bool(model)
    assert ("pku-1998 stsb-zh" in fetch) == chinese
    assert preset in PRESETS


def test_a_failing_cell_names_the_notebook_and_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("X = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("y = 2"), nbformat.v4.new_code_cell("raise ValueError('bad X')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "broken.ipynb"
    nbformat.write(nb, source)
    with pytest.raises(BookError, match=r"broken\.ipynb failed in code cell 3 \(`raise ValueError\('bad X'\)`.*ValueError: bad X"):
        execute_notebook(source, tmp_path / "out.ipynb", {"X": 2}, tmp_path)


def test_tiny_book_builds_with_real_numbers(tiny_book):
    work, runs = tiny_book.work, tiny_book.runs
    index = work / "_build" / "html" / "index.html"
    assert f"built: {index}" in tiny_book.stdout
    for nb in NOTEBOOKS:
        page = (work / "_build" / "html" / "executed" / f"{nb.stem}.html").read_text()
        assert "Traceback" not in page
    redundancy = (work / "_build" / "html" / "executed" / "01_redundancy.html").read_text()
    assert "headlab-chart" in redundancy and "relative change" in redundancy
    assert (work / "_build" / "html" / "headlab-js" / "vega-embed.js").stat().st_size > 100_000
    tables = {p.name for p in runs.rglob("*.csv")}
    assert {"baseline_metrics.csv", "confusion.csv", "redundancy_curve.csv", "redundancy_draws.csv"} <= tables
    curve = next(runs.rglob("redundancy_curve.csv")).read_text().splitlines()
    assert len(curve) == 1 + len(PRESETS["tiny"]["SHARES"])
