"""Live notebooks in JupyterLab need no network: a tiny copy of notebook 02, run in JupyterLab in headless Chromium,
draws every chart and attention view, renders its controls, redraws the explorer when a control changes, requests
nothing from any host but this one, and writes its results where a relative RUN_DIR says, read from the repository
root although the kernel starts in the notebook's own folder.

JupyterLab runs on 127.0.0.1 with its own config, data, settings and workspace folders and no token; the server
and its kernel are stopped by their process ids, also when the test fails. Chromium: as in tests/test_browser.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from test_browser import browser, is_external  # noqa: F401  (browser: the Chromium fixture)

from headlab.book.notebooks import notebook_parameters
from headlab.book.presets import PRESETS
from headlab.lab.params import REPO, results_root

NOTEBOOK = REPO / "notebooks" / "02_layer_dependence.ipynb"
# `make lab`'s settings that keep JupyterLab offline and quiet: no news prompt, no update check
LAB_QUIET = ("--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
RUN_TIMEOUT_MS = 600_000  # Run All of the tiny notebook: under 3 minutes on 2 cores shared with a training job

# Every code cell has run (a number in its prompt), or one has failed (then the rest never run).
_FAILED = """() => [...document.querySelectorAll('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')]
                     .map(el => el.innerText).filter(t => t.includes('Traceback (most recent call last)'))"""
_DONE = f"""() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                     .every(p => /\\[\\d+\\]/.test(p.textContent)) || ({_FAILED})().length > 0"""
# Each drawn chart: a vega-embed container holding Vega's svg (or canvas) with marks in it (not only its menu icon).
_CHARTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea .vega-embed')]
                     .filter(el => el.querySelector('svg.marks path, svg.marks text, canvas.marks')).length"""


def test_a_relative_run_dir_lies_in_the_repository_wherever_the_kernel_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # JupyterLab starts a notebook's kernel in the notebook's folder
    assert results_root("runs") == REPO / "runs"  # what a notebook's default RUN_DIR means, as under `make book`
    assert results_root(tmp_path / "elsewhere") == tmp_path / "elsewhere"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_fetches_the_assets_then_starts_the_venvs_jupyterlab_on_the_repository():
    plan = subprocess.run(["make", "-n", "lab"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = plan.splitlines()
    fetch = next(i for i, line in enumerate(lines) if "-m headlab.inputs fetch" in line)
    scripts = next(i for i, line in enumerate(lines) if "-m headlab.report" in line)
    lab = next(i for i, line in enumerate(lines) if "jupyter lab" in line)
    assert fetch < scripts < lab
    assert lines[lab].startswith(".venv/bin/jupyter lab ") and f'--ServerApp.root_dir="{REPO}"' in lines[lab]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(url: str, server: subprocess.Popen, log: Path, seconds: float = 180) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with opener.open(url + "api/status", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    pytest.fail(f"JupyterLab did not answer on {url} within {seconds} s:\n{log.read_text()[-3000:]}")


def _stop(server: subprocess.Popen) -> None:
    """Stop the server and every process it started (the kernel), each by its process id."""
    try:
        kernels = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kernels = []
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    for kernel in kernels:
        if kernel.is_running():
            kernel.terminate()
    for kernel in psutil.wait_procs(kernels, timeout=10)[1]:
        kernel.kill()


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on a free port of 127.0.0.1 over ``tmp_path/lab``; yields its URL and root folder."""
    root, home = tmp_path / "lab", tmp_path / "jupyter"
    root.mkdir()
    settings = {
        "notebook-extension/tracker": {"windowingMode": "none"},  # every cell stays in the page
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    }
    for name, values in settings.items():
        path = home / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, log = _free_port(), tmp_path / "jupyterlab.log"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }  # the kernel: this headlab
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                "--IdentityProvider.token=",
                "--ServerApp.password=",
                f"--ServerApp.root_dir={root}",
                f"--LabApp.user_settings_dir={home / 'settings'}",
                f"--LabApp.workspaces_dir={home / 'workspaces'}",
                *LAB_QUIET,
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],  # CI runs as root
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_until_up(url, server, log)
        yield SimpleNamespace(url=url, root=root, log=log)
    finally:
        _stop(server)


def _tiny_copy(folder: Path, run_dir: Path) -> tuple[Path, nbformat.NotebookNode]:
    """Notebook 02 with the tiny preset's parameters injected as papermill does, and a RUN_DIR relative to the
    repository (from the kernel's folder it would name another place)."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    declared = notebook_parameters(NOTEBOOK)  # what its cell assigns (headlab.lab.pages)
    params = {k: v for k, v in PRESETS["tiny"].items() if k in declared}
    assert {"EVAL_LIMIT", "TRAIN_LIMIT", "EPOCHS"} <= set(params), "the tiny sizes must reach the notebook"
    params["RUN_DIR"] = os.path.relpath(run_dir, REPO)
    nb = parameterize_notebook(load_notebook_node(str(NOTEBOOK)), params, kernel_name="python3", language="python")
    path = folder / "02_tiny.ipynb"
    nbformat.write(nb, path)
    return path, nb


@pytest.mark.slow
def test_notebook_02_runs_live_in_jupyterlab_with_no_network(lab, browser, tmp_path):  # noqa: F811
    runs = tmp_path / "runs"
    path, nb = _tiny_copy(lab.root, runs)
    n_charts = sum("show(" in c.source for c in nb.cells if c.cell_type == "code") + 1  # + the explorer's chart
    explorer = next(i for i, c in enumerate(nb.cells) if "head_explorer(" in c.source)
    shot = tmp_path / "jupyterlab.png"

    tab = browser.new_page()
    external, errors = [], []
    tab.on("request", lambda r: is_external(r.url) and external.append(r.url))
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        tab.goto(f"{lab.url}lab/tree/{path.name}", wait_until="load")
        # the kernel has started and is idle (the status bar says so only once it is connected)
        tab.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\(ipykernel\) \| Idle$")).wait_for(timeout=120_000)
        tab.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        tab.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        tab.wait_for_function(_DONE, timeout=RUN_TIMEOUT_MS, polling=1000)
        failed = tab.evaluate(_FAILED)
        assert not failed, f"a cell failed:\n{failed[0][-3000:]}"

        # every chart is drawn, and so is bertviz's head view, from JavaScript that came with Python packages
        tab.wait_for_function(f"() => ({_CHARTS})() >= {n_charts}", timeout=60_000)
        assert tab.evaluate(_CHARTS) == n_charts
        head_view = tab.locator(".jp-Notebook .headlab-view")
        head_view.locator("svg text").first.wait_for(timeout=30_000)
        assert head_view.count() == 1 and head_view.locator("select").count() >= 1
        page_text = tab.locator(".jp-Notebook").inner_text()
        assert "Error displaying widget" not in page_text and "JavaScript Error" not in page_text

        # the explorer's controls render, and a new head redraws its text and its chart
        cell = tab.locator(".jp-Notebook .jp-Cell").nth(explorer)
        head_box = cell.locator(".widget-dropdown", has=tab.locator("label", has_text="head")).locator("select")
        text, chart = cell.locator(".widget-output"), cell.locator(".vega-embed svg.marks")
        assert cell.locator(".widget-dropdown").count() == 2 and cell.locator(".widget-text input").count() == 1
        assert "Head 0.0 masked alone" in text.inner_text()
        before = chart.inner_html()
        head_box.select_option("3")
        text.get_by_text("Head 0.3 masked alone").wait_for(timeout=60_000)
        tab.wait_for_function(
            """([i, old]) => {
            const svg = document.querySelectorAll('.jp-Notebook .jp-Cell')[i].querySelector('.vega-embed svg.marks');
            return svg !== null && svg.innerHTML !== old; }""",
            arg=[explorer, before],
            timeout=30_000,
        )
        assert "head 0.3, example 0" in chart.inner_html()
    finally:
        tab.screenshot(path=str(shot), full_page=True)
        print(f"\nscreenshot of the notebook in JupyterLab: {shot}")
        tab.close()
    assert not external, f"requests that left localhost: {external}"
    assert not errors, f"uncaught JavaScript errors: {errors}"
    # the tables went to RUN_DIR read from the repository root, not from the kernel's folder
    assert {p.name for p in runs.rglob("*.csv")} >= {"head_grid.csv", "layer_effects.csv", "halves_curve.csv"}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_asks_for_no_news_and_checks_for_no_update():
    """JupyterLab asks on its first start whether to fetch news from the network; `make lab` turns that off."""
    command = subprocess.run(["make", "-n", "lab"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert all(flag in command for flag in LAB_QUIET), command


def test_jupyterlab_reads_the_quiet_settings():
    from jupyterlab.labapp import LabApp

    app = LabApp()
    app.parse_command_line(list(LAB_QUIET))
    assert app.news_url is None and app.check_for_updates_class.__name__ == "NeverCheckForUpdate"
