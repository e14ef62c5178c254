"""The book end to end: notebooks are clean and parameterized, `make book` picks the preset, and the whole book
builds from tiny runs on the real default model and data, and runs on a tiny MPNet."""

import ast
import builtins
import importlib
import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest
from test_layers import LAYERS

from headlab.book.presets import PRESETS
from headlab.judging.verdicts import KINDS, VERDICTS, quote_in
from headlab.lab.pages import page_ids, parameters_cell
from headlab.lab.params import REPO
from headlab.pages.claims import STUDY_CLAIMS

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
MOST_HEADLAB_MODULES = 8  # per notebook: the package, a few layers, the page's own module and its measures
PAGE_LAYERS = ("measures", "pages")  # whose modules a notebook may import from by name


def code_cells(path):
    """The notebook's code cells as dicts, their source joined (plain JSON: nbformat costs seconds to import)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [{**c, "source": "".join(c["source"])} for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_clean_with_the_registrys_parameters_cell(path):
    code = code_cells(path)
    assert all(not c["outputs"] and c["execution_count"] is None for c in code), "clear the outputs before committing"
    tagged = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    assert tagged[0]["source"] == parameters_cell(path.stem), "run python -m tools.pages"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.stem)
def test_every_finding_page_saves_its_claims_one_way_and_ends_on_its_verdicts(path):
    code = "\n".join(c["source"] for c in code_cells(path))
    [saved] = re.findall(r"^save_claims\(lab, (\w+)\)(?:  #.*)?$", code, flags=re.M)
    assert "claims_table(" not in code and "claims_file(" not in code
    assert code_cells(path)[-1]["source"] == f"Markdown(verdict_table({saved}))"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_work_through_the_lab_they_get(path):
    """A page sets up one ``lab`` and leaves the device, batch size, pad id and model passes to it (``lab.device``,
    ``lab.pad_id``, ``lab.attention()``, ``lab.importance()``): no keyword passes them by hand."""
    code = "\n".join(c["source"] for c in code_cells(path) if "parameters" not in c["metadata"].get("tags", []))
    assert re.search(r"^lab = Lab\.from_globals\(globals\(\)\)$", code, flags=re.M)
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)]
    by_hand = [ast.unparse(c) for c in calls for k in c.keywords if k.arg in ("device", "pad_id", "batch_size")]
    assert not by_hand, f"{path.name} passes the lab's settings by hand: {by_hand}"
    names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    assert not names & {"setup", "study"}, f"{path.name} calls its lab something else: {names & {'setup', 'study'}}"
    for pattern in (
        "torch_device",
        "pad_token_id",
        "BATCH_SIZE",
        r"\battention_maps\(",
        r"\bgradient_importance\(",
        r"\bhead_grid\(lab\.model\)",
    ):
        assert not re.search(pattern, code), f"{path.name} uses {pattern!r}; use the lab's own"


# the study's text (../shared/STUDY.md), kept in docs/: a checkout alone can read it and check the pages against it
STUDY = REPO / "docs" / "study.md"
SHARED_STUDY = REPO.parent / "shared" / "STUDY.md"
# numbers a page may state without computing them, all choices of method: interval levels and the test level, the
# bootstrap's percentile bounds, a notebook's number when it names another page, and the year of a cited paper
STATED_NUMBERS = {"90%", "95%", "5%", "2.5", "97.5%", "2019", "2024", "2025", *(i.split("_")[0] for i in page_ids())}


def markdown_cells(path) -> list[str]:
    """The notebook's markdown text, without code spans (names and parameters, not statements)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [re.sub(r"`[^`]*`", "", "".join(c["source"])) for c in cells if c["cell_type"] == "markdown"]


@pytest.mark.skipif(not SHARED_STUDY.exists(), reason=f"{SHARED_STUDY} is not beside this checkout")
def test_the_copy_of_the_study_is_the_study():
    assert STUDY.read_text(encoding="utf-8") == SHARED_STUDY.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_chart_shown_before_the_end_of_its_cell_is_displayed(path):
    """``show(chart)`` returns what a cell displays by ending on it; anywhere else (inside an ``if``, before another
    statement) it must go through ``display``, or the page silently lacks the chart."""
    for cell in code_cells(path):
        tree = ast.parse(cell["source"])
        last = tree.body[-1] if tree.body else None
        lost = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and "show" in (getattr(node.value.func, "id", None), getattr(node.value.func, "attr", None))
            and node is not last
        ]
        assert not lost, f"{path.name}: show(...) at line(s) {lost} of a cell is never displayed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_text_states_no_number_or_model_the_run_did_not_compute(path):
    """A page's prose quotes the study's numbers (``STUDY.md``) and nothing else: every fact about our model, data,
    sizes and timings comes from the run, as generated output. Model names are the run's too (MODEL may be any)."""
    study = set(re.findall(r"\d+(?:\.\d+)?%?", STUDY.read_text(encoding="utf-8")))
    study |= {n.rstrip("%") for n in study}
    for text in markdown_cells(path):
        numbers = re.findall(r"(?<![\w.\-])\d+(?:[.,]\d+)?%?", re.sub(r"^#.*$", "", text, flags=re.M))
        stray = [n for n in numbers if n not in study and n not in STATED_NUMBERS]
        assert not stray, f"{path.name} states {stray} in its text; compute them in a cell or quote the study"
        named = re.findall(r"MiniLM|mpnet|multilingual-e5|e5-small|zh-char", text, flags=re.I)
        assert not named, f"{path.name} names the model(s) {named} in its text; print MODEL from a cell instead"


def is_public_module(module: str) -> bool:
    """``headlab``, one of its layers (``headlab.core``), a page's own module (``headlab.pages.word_order``) or a
    measure it builds on (``headlab.measures.order``)."""
    parts = module.split(".")
    return parts[0] == "headlab" and (
        len(parts) == 1 or len(parts) == 2 and parts[1] in LAYERS or len(parts) == 3 and parts[1] in PAGE_LAYERS
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_use_the_public_api_and_every_name_they_use_exists(path):
    """A notebook imports public names from a few public modules, and reads no name it neither defines nor imports
    (a name dropped from an import line would otherwise fail only when the book is built)."""
    trees = [ast.parse(c["source"], filename=f"{path.name} cell") for c in code_cells(path)]
    nodes = [n for tree in trees for n in ast.walk(tree)]
    imports = [n for n in nodes if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("headlab")]
    assert not [n for n in nodes if isinstance(n, ast.Import) and any(a.name.startswith("headlab.") for a in n.names)]
    modules = {n.module for n in imports}
    assert len(modules) <= MOST_HEADLAB_MODULES, f"{path.name} imports from {len(modules)} modules: {sorted(modules)}"
    for node in imports:
        assert is_public_module(node.module), f"{node.module}: import from headlab or a layer (headlab.core, ...)"
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert not alias.name.startswith("_"), f"{path.name} imports the private {node.module}.{alias.name}"
            assert alias.name != "*", f"{path.name} star-imports {node.module}: name what it uses"
            assert hasattr(module, alias.name), f"{path.name}: {node.module} has no {alias.name}"
    from_headlab = {"headlab"} | {a.asname or a.name for n in imports for a in n.names}
    private = [
        ast.unparse(n)
        for n in nodes
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and ast.unparse(n.value).split(".")[0] in from_headlab
    ]
    assert not private, f"{path.name} uses private headlab names: {private}"

    bound = set(dir(builtins)) | {"display", "get_ipython"}  # the kernel's own names
    for n in nodes:
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
    unknown = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
    assert not unknown, f"{path.name} uses names it neither defines nor imports: {sorted(unknown)}"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(
    "model, preset, chinese",
    [
        ("zh-char", "zh-char", True),
        ("zh-char-mlm", "zh-char-mlm", True),
        ("/some/model", "default", False),
        ("", "default", False),
    ],
)
def test_make_book_model_picks_the_preset_and_its_assets(model, preset, chinese):
    """``make book MODEL=zh-char`` (the README's command) must run the Chinese preset with the Chinese assets."""
    plan = subprocess.run(
        ["make", "-n", "book", f"MODEL={model}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    book = next(line for line in plan.splitlines() if "-m headlab.book " in line)  # not headlab.report.bookjs
    fetch = next(line for line in plan.splitlines() if "-m headlab.inputs fetch" in line)
    assert f"--presets {preset} " in book + " "
    assert (f"--set MODEL={model}" in book) == bool(model)
    assert ("pku-1998 stsb-zh" in fetch) == chinese
    assert preset in PRESETS


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize(
    "preset, assets",
    [
        ("e5-zh", "pku-1998 stsb-zh e5-small"),
        ("e5-en", "stsb-en e5-small"),
        ("e5-zh-char", "pku-1998 stsb-zh e5-small-char"),
    ],
)
def test_make_book_fetches_the_e5_presets_assets(preset, assets):
    plan = subprocess.run(
        ["make", "-n", "book", f"PRESET={preset}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    fetch = next(line for line in plan.splitlines() if "-m headlab.inputs fetch" in line)
    assert set(assets.split()) <= set(fetch.split())
    assert ("e5-small" in fetch.split()) == ("e5-small" in assets.split())  # e5-zh-char: only its own copy
    assert f"--presets {preset} " in next(line for line in plan.splitlines() if "-m headlab.book " in line) + " "


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_book_presets_builds_one_site_with_every_presets_assets():
    plan = subprocess.run(
        ["make", "-n", "book", "PRESETS=default zh-char"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    fetch = next(line for line in plan.splitlines() if "-m headlab.inputs fetch" in line)
    assert "--presets default zh-char" in next(line for line in plan.splitlines() if "-m headlab.book " in line)
    assert all(f" {name}" in fetch for name in ["minilm", "stsb-en", "pku-1998", "stsb-zh"])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_site_builds_every_scorecard_preset_into_one_site_with_their_assets():
    plan = subprocess.run(["make", "-n", "site"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    build = next(line for line in plan.splitlines() if "-m headlab.book " in line)
    presets = build.split("--presets", 1)[1].split()
    assert presets[0] == "default" and {"zh-char", "e5-zh", "e5-en", "e5-zh-char"} <= set(presets)
    assert set(presets) <= set(PRESETS) - {"tiny"}
    fetch = set(next(line for line in plan.splitlines() if "-m headlab.inputs fetch" in line).split())
    assert {"minilm", "stsb-en", "pku-1998", "stsb-zh", "e5-small", "e5-small-char"} <= fetch


@pytest.mark.slow  # builds the whole book on the real minilm and STS-B assets
def test_tiny_book_builds_with_real_numbers(tiny_book):
    work, runs = tiny_book.work, tiny_book.runs
    index = work / "_build" / "html" / "index.html"
    assert f"built: {index}" in tiny_book.stdout
    for nb in NOTEBOOKS:
        page = (work / "_build" / "html" / "executed" / f"{nb.stem}.html").read_text()
        assert "Traceback" not in page
        assert "|—|" not in page and "|---|" not in page  # every Markdown table a page displays renders as a table
        # each finding page's answer, its verdict table (headlab.judging.render), is an HTML table
        assert nb.stem.startswith("00") or re.search(r"<th[^>]*><p>the study.s claim</p></th>", page), nb.stem
    redundancy = (work / "_build" / "html" / "executed" / "01_redundancy.html").read_text()
    assert "headlab-chart" in redundancy and "relative change" in redundancy
    assert (work / "_build" / "html" / "headlab-js" / "vega-embed.js").stat().st_size > 100_000
    tables = {p.name for p in runs.rglob("*.csv")}
    assert {"baseline_metrics.csv", "confusion.csv", "redundancy_curve.csv", "redundancy_draws.csv"} <= tables
    curve = next(runs.rglob("redundancy_curve.csv")).read_text().splitlines()
    assert len(curve) == 1 + len(PRESETS["tiny"]["SHARES"])
    # the first page is the scorecard: every finding page saved its claims, each cell links to its page
    scorecard = pd.read_csv(runs / "scorecard.csv")
    assert set(scorecard["page"]) == {nb.stem for nb in NOTEBOOKS if not nb.stem.startswith("00")}
    assert set(scorecard["verdict"]) <= set(VERDICTS)
    # one verdict rule for every row: each quotes the study word for word and carries its kind, rule and method
    study = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
    assert all(quote_in(study, q) for q in scorecard["quote"]) and scorecard["kind"].isin(KINDS).all()
    main_rows = scorecard[~scorecard["claim_id"].str.contains("/")]
    assert main_rows["claim_id"].is_unique and set(main_rows["claim_id"]) <= set(STUDY_CLAIMS)
    measured = scorecard[scorecard["ours"].notna() & scorecard["kind"].ne("beats_control")]
    assert (measured["lo_adj"] <= measured["lo"] + 1e-9).all() and (measured["hi_adj"] >= measured["hi"] - 1e-9).all()
    assert "url=scorecard.html" in index.read_text()  # the site opens on the scorecard
    front = (work / "_build" / "html" / "scorecard.html").read_text()
    assert "Scorecard" in front and 'href="executed/01_redundancy.html"' in front
    # the models are trained first (or found cached); the notebooks only load them, side by side, each after the pages
    # it reads: pages that sweep computed, the others found all they needed (07 reads 02's single-head sweep and
    # mean-ablates its one head; 09 patches)
    timings = pd.read_csv(runs / "timings.csv").set_index("step")
    computed = {step: str(flag) for step, flag in timings["computed"].items() if step[:2].isdigit()}
    order = list(timings.index)  # the fine-tunes, side by side, are recorded before the pages that load them end
    assert all(order.index("fine-tuning") < order.index(nb.stem) for nb in NOTEBOOKS)
    assert order.index("two-tower fine-tuning") < order.index("08_two_tower")
    computing = {"01", "02", "04", "05", "06", "07", "08", "09", "10"}  # 06 and 08 compute the tables they keep
    assert computed == {nb.stem: str(nb.stem[:2] in computing) for nb in NOTEBOOKS}
    assert timings.loc["preset total", "seconds"] < timings.loc["build", "seconds"]
    if (os.cpu_count() or 1) > 1:
        assert timings["machine"].str.contains("notebooks 2 at a time").all()


@pytest.mark.slow  # runs every notebook in a Jupyter kernel (minutes), on the minilm asset's vocabulary
@pytest.mark.timeout(1800)  # a kernel that never answers fails the test instead of hanging the suite
def test_every_notebook_runs_on_a_tiny_random_mpnet_on_cpu(mpnet_book):
    """The `mpnet` preset's architecture through the whole book (tests/tiny_mpnet.py, run beside the tiny book)."""
    grid = pd.read_csv(next(mpnet_book.glob("*/head_grid.csv")))
    assert len(grid) == 4 * 4  # every head of the MPNet was masked once


@pytest.mark.slow  # the tiny MPNet's run (above)
@pytest.mark.timeout(1800)
def test_every_notebook_runs_on_a_file_of_three_grades(mpnet_book):
    """The tiny MPNet's file grades 1-3 (tests/tiny_mpnet.py): the sweeps, the metrics and the claims use its scale,
    and page 04 says the study's case, told in its five grades, is not comparable."""
    from headlab.core.evaluate import metrics
    from headlab.core.grades import GradeScale
    from headlab.measures.order import grade_columns

    [results] = [d for d in mpnet_book.glob("*-test-*") if (d / "baseline_metrics.csv").exists()]
    sweep = pd.read_csv(next(results.glob("sweeps/layer_dependence-*/masks/none.csv")))
    assert grade_columns(sweep) == ["p1", "p2", "p3"]
    assert set(sweep["grade"]) <= {1, 2, 3} and set(sweep["predicted"]) <= {1, 2, 3}
    baseline = pd.read_csv(results / "baseline_metrics.csv").set_index("metric")["value"]
    expected = metrics(sweep["grade"].to_numpy(), sweep["predicted"].to_numpy(), GradeScale(1, 3))
    assert baseline["accuracy"] == pytest.approx(expected["accuracy"])
    assert baseline["macro_f1"] == pytest.approx(expected["macro_f1"], abs=1e-6)
    order = pd.read_csv(results / "claims_04_word_order.csv").set_index("claim_id")
    assert "(grades run 1 to 3)" in order.at["word_order.shuffle_lowers_grade", "reason"]  # judged on its scale
    page = (mpnet_book.parent / "executed" / "04_word_order.ipynb").read_text(encoding="utf-8")
    assert "Not comparable: the study's case is told in its grades 1-5" in page and "the data's are grades 1-3" in page
