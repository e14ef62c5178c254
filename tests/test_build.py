"""headlab.book.build: the table of contents, settings checked before anything runs, a failing notebook is loud."""

import os

import nbformat
import pandas as pd
import pytest

from headlab.book.build import build, main, parse_setting
from headlab.book.notebooks import CELL_TIMEOUT, BookError, cell_timeout, check_settings, execute_notebook, reading_tags
from headlab.book.presets import PRESETS
from headlab.book.steps import with_needs
from headlab.book.tuning import GRIDS
from headlab.inputs.assets import is_asset
from headlab.lab.pages import page_ids
from headlab.lab.params import REPO, Params

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_the_registry_and_the_notebooks_folder_agree():
    assert sorted(page_ids()) == [nb.stem for nb in NOTEBOOKS]


def test_parse_setting_reads_python_literals_and_strings():
    assert parse_setting("redundancy_draws=5") == ("REDUNDANCY_DRAWS", 5)
    assert parse_setting("SHARES=[0.0, 0.5]") == ("SHARES", [0.0, 0.5])
    assert parse_setting("MODEL=minilm") == ("MODEL", "minilm")
    with pytest.raises(BookError, match="KEY=VALUE"):
        parse_setting("REDUNDANCY_DRAWS")


def test_an_unknown_setting_is_refused_before_anything_runs():
    with pytest.raises(BookError, match="DRAWZ"):
        check_settings({"DRAWZ": 3}, NOTEBOOKS)
    for preset in PRESETS.values():  # every preset sets only parameters that notebooks declare
        check_settings(preset, NOTEBOOKS)


def test_a_failing_cell_names_the_notebook_and_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("X = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("y = 2"), nbformat.v4.new_code_cell("raise ValueError('bad X')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "broken.ipynb"
    nbformat.write(nb, source)
    with pytest.raises(
        BookError, match=r"broken\.ipynb failed in code cell 3 \(`raise ValueError\('bad X'\)`.*ValueError: bad X"
    ):
        execute_notebook(source, tmp_path / "out.ipynb", {"X": 2}, tmp_path)


@pytest.mark.parametrize("preset", ["e5-zh", "e5-en", "e5-zh-char"])
def test_e5_presets_name_registered_assets_freeze_the_word_embeddings_and_have_a_grid(preset):
    settings = PRESETS[preset]
    params = Params.from_globals(settings)
    assert is_asset(params.model) and is_asset(params.data) and is_asset(settings.get("SEG_CORPUS", "stsb-en"))
    assert params.finetune_config.freeze_word_embeddings
    assert params.lr in GRIDS[preset]["lrs"] and params.epochs in GRIDS[preset]["epochs"]
    chinese = preset != "e5-en"
    assert (params.data, settings.get("SEG_ALSO")) == (("stsb-zh", "eval-jieba") if chinese else ("stsb-en", None))


def test_reading_tags_show_results_without_their_code_and_fold_the_parameters():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("MODEL = 'minilm'", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(f'RUN_DIR = "{REPO}/runs"', metadata={"tags": ["injected-parameters"]}),
            nbformat.v4.new_code_cell("show(charts.head_heatmap(grid).properties(\n    title='x'))"),
            nbformat.v4.new_code_cell("Markdown(verdict(curve))"),
            nbformat.v4.new_code_cell("curve = share_curve(x)\nMarkdown(verdict(curve))"),
            nbformat.v4.new_code_cell("table.round(4)"),
            nbformat.v4.new_markdown_cell("## text"),
            nbformat.v4.new_code_cell("figures.show(charts.bars(t), layers_takeaway(t))"),
            nbformat.v4.new_code_cell(
                "import altair as alt\nfrom headlab import Lab\n\nlab = Lab.from_globals(globals())"
            ),
            nbformat.v4.new_code_cell(
                "from headlab import Lab\n\nlab = Lab.from_globals(globals())\na = f(lab)\nb = g(a)"
            ),
        ]
    )
    reading_tags(nb)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert "hide-cell" in tags[0] and "hide-cell" in tags[1]
    assert nb.cells[1].source == 'RUN_DIR = "runs"'  # not the builder's absolute path
    assert "remove-input" in tags[2] and "remove-input" in tags[3]
    assert "remove-input" not in tags[4] + tags[5]  # cells that compute keep their code on the page
    assert "remove-input" in tags[7]  # a numbered figure (render.Figures.show) is an output too
    assert tags[8] == ["hide-input"] and not any("hide-input" in t for t in tags[:8])  # the imports, folded
    assert tags[9] == []  # a cell that goes on to compute stays open


def test_a_cell_past_the_time_limit_names_the_notebook_and_cell(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("y = 2"), nbformat.v4.new_code_cell("import time; time.sleep(30)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "slow.ipynb"
    nbformat.write(nb, source)
    monkeypatch.setenv("HEADLAB_CELL_TIMEOUT", "2")
    with pytest.raises(
        BookError,
        match=r"slow\.ipynb: code cell 2 \(`import time; time.sleep\(30\)`\) ran longer "
        r"than 2 s.*HEADLAB_CELL_TIMEOUT.*resume",
    ):
        execute_notebook(source, tmp_path / "out.ipynb", {}, tmp_path)


@pytest.mark.parametrize("raw", ["0", "-5", "an hour"])
def test_a_bad_cell_time_limit_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv("HEADLAB_CELL_TIMEOUT", raw)
    with pytest.raises(
        BookError, match=rf"HEADLAB_CELL_TIMEOUT must be a positive whole number of seconds, got '{raw}'"
    ):
        cell_timeout()


def test_the_cell_time_limit_is_the_default_unless_the_environment_sets_one(monkeypatch):
    monkeypatch.delenv("HEADLAB_CELL_TIMEOUT", raising=False)
    assert cell_timeout() == CELL_TIMEOUT >= 6 * 3600  # e5-zh's 02 sweep cell ran past 1 hour at one thread
    monkeypatch.setenv("HEADLAB_CELL_TIMEOUT", "90")
    assert cell_timeout() == 90


def test_a_bad_cell_time_limit_stops_the_build_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CELL_TIMEOUT", "0")
    with pytest.raises(BookError, match="HEADLAB_CELL_TIMEOUT must be a positive whole number"):
        build({"tiny": PRESETS["tiny"]}, work=tmp_path / "book", run_dir=tmp_path / "runs")
    assert not (tmp_path / "book").exists() and not (tmp_path / "runs").exists()


def test_no_site_writes_the_tables_and_the_build_time_and_builds_no_site(tmp_path, monkeypatch):
    """``--no-site``: a GPU machine without jupyter-book executes the pages and writes every table and timing."""
    import headlab.book.build as book

    for name in ("HEADLAB_BOOK", "HEADLAB_NO_NETWORK", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # build() sets them: undone after this test, not leaked
    monkeypatch.setattr(book, "execute_presets", lambda presets, *args: dict.fromkeys(presets, ("cold", True)))
    (tmp_path / "runs").mkdir()  # where the pages write their tables
    monkeypatch.setattr(book, "scorecard_table", lambda presets: pd.DataFrame({"claim_id": ["a.b"]}))
    monkeypatch.setattr(book, "models_table", lambda presets: pd.DataFrame({"preset": list(presets)}))
    for name in ("stacked", "pruning_table"):
        monkeypatch.setattr(book, name, lambda *args: pd.DataFrame(columns=["preset"]))
    monkeypatch.setattr(book, "write_scripts", lambda folder: pytest.fail("the site's scripts were written"))
    built = build({"tiny": PRESETS["tiny"]}, work=tmp_path / "book", run_dir=tmp_path / "runs", site=False)
    assert built == tmp_path / "runs" / "scorecard.csv" and built.exists()
    assert {p.name for p in (tmp_path / "runs").iterdir()} >= {
        "models.csv",
        "two_tower.csv",
        "pruning.csv",
        "attribution_agreement.csv",
    }
    assert pd.read_csv(tmp_path / "runs" / "timings.csv")["step"].tolist() == ["build"]
    assert not (tmp_path / "book" / "_build").exists()
    calls = []
    monkeypatch.setattr(book, "build", lambda *args: calls.append(args) or built)
    assert main(["--preset", "tiny", "--no-site"]) == 0 and calls[0][-2:] == (False, None)
    assert main(["--preset", "tiny"]) == 0 and calls[1][-2:] == (True, None)
    assert main(["--preset", "tiny", "--pages", "09_patching"]) == 0 and calls[2][-1] == ["09_patching"]


def test_a_notebook_declares_what_its_parameters_cell_assigns(tmp_path):
    from headlab.book.notebooks import notebook_parameters

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('MODEL: str = "minilm"  # the model\nEXAMPLE = None\nDRAWS = 3')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell("x = MODEL")]
    source = tmp_path / "page.ipynb"
    nbformat.write(nb, source)
    assert notebook_parameters(source) == {"MODEL", "EXAMPLE", "DRAWS"}
    nb.cells.append(nb.cells[0])
    nbformat.write(nb, source)
    with pytest.raises(BookError, match="2 cells tagged 'parameters'"):
        notebook_parameters(source)


def test_a_few_pages_bring_the_pages_they_read_and_the_setup():
    assert with_needs(["09_patching"]) == ["00_setup", "02_layer_dependence", "05_term_matching", "09_patching"]
    assert with_needs(["06_finetune_delta", "01_redundancy"]) == [
        "00_setup",
        "01_redundancy",
        "05_term_matching",
        "06_finetune_delta",
    ]
    with pytest.raises(BookError, match="no page 11_nothing"):
        with_needs(["11_nothing"])
    with pytest.raises(BookError, match="do not go together"):
        build({"tiny": PRESETS["tiny"]}, only=["00_setup"], pages=["09_patching"])


def test_a_notebook_runs_with_the_kernels_own_log_off_the_console_and_its_warnings_in_its_output(tmp_path, capfd):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import warnings; warnings.warn('a real one')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "warns.ipynb"
    nbformat.write(nb, source)
    execute_notebook(source, tmp_path / "out.ipynb", {}, tmp_path)
    _, err = capfd.readouterr()
    assert "IPKernelApp" not in err  # "Kernel is running over TCP without encryption" and the like
    outputs = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4).cells[0].outputs
    assert any("a real one" in o.get("text", "") for o in outputs)  # the notebook's own warning stays on its page
