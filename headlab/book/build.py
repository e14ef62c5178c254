"""Build the book: execute the notebooks headless with papermill, then build the static site with jupyter-book 1.

The pages are :data:`headlab.lab.pages.PAGES` (``book/_toc.yml`` is generated from it): each page's notebook
``notebooks/ID.ipynb`` runs with the chosen parameters it declares. The site's own toc is generated from it
(:func:`headlab.book.site.site_toc`): the scorecard first, then the pages once per preset built. A notebook that fails
stops the build with its name and cell; Sphinx warnings (a missing page, an output it cannot show) are errors.

The training steps and the notebooks, which only load the models, run side by side (:func:`headlab.book.lanes.in_lanes`,
by default two at a time with the cores shared out between them): a model headlab pretrains first, then the cross-
encoder and page 08's two towers at once (a pretraining or fine-tune runs on one thread wherever it runs, so its weights
are those a notebook run alone trains, and another preset's work runs beside it), each notebook after the models and
pages it reads (:func:`headlab.book.steps.step_needs`: the artifact registry and the fine-tunes), the longest chain of
work first (:func:`headlab.book.lanes.critical_path_first`, from the last build's timings), so no lane idles at the end
while the other runs a long page; their single-threaded parts (a kernel's start, tables, charts) overlap. Several
presets share one pool (:func:`execute_presets`): one progress view, and one preset's last long page runs beside
another's work. Inference with fewer threads gives the same grades (probabilities can differ in their last float
digits), so the claims are those of a build that runs one notebook at a time.

    python -m headlab.book                      # the whole book on the default model and data
    python -m headlab.book --preset tiny        # tiny sizes, for tests and a quick look
    python -m headlab.book --preset zh-char     # the character-level Chinese BERT headlab pretrains
    python -m headlab.book --preset e5-zh       # multilingual-e5-small on Chinese STS-B (e5-en: on English)
    python -m headlab.book --preset e5-zh-char  # the same reading Chinese one character per token
    python -m headlab.book --set DEVICE=cuda --set REDUNDANCY_DRAWS=50
    python -m headlab.book --presets default zh-char   # one site, each preset's pages, the scorecard across them
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headlab.book.lanes import call, critical_path_first, in_lanes, lanes_and_threads
from headlab.book.notebooks import BookError, cell_timeout, check_settings
from headlab.book.presets import PRESETS, pretrains
from headlab.book.records import (
    BuildClock,
    cache_state,
    models_table,
    overall_state,
    pruning_table,
    recorded_seconds,
    stacked,
)
from headlab.book.scorecard import scorecard_markdown, scorecard_table
from headlab.book.site import not_built_commands, site_config, site_toc
from headlab.book.steps import fine_tune_step, run_step, step_needs, with_needs
from headlab.core.device import resolve_device
from headlab.core.worklog import work_noted
from headlab.lab.pages import (
    PRESET_TOTAL,
    PRETRAINING,
    page_ids,
    training_needs,
)
from headlab.lab.params import REPO
from headlab.report.bookjs import write_scripts


def parse_setting(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` from the command line; the value is a Python literal if it parses as one."""
    if "=" not in text:
        raise BookError(f"--set expects KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip().upper(), value


def execute_presets(
    presets: dict[str, tuple[dict, Path]],
    names: list[str],
    only: list[str] | None,
    logs: Path,
    clock: BuildClock | None = None,
    lanes: int = 1,
    threads: int = 1,
    run=call,
) -> dict[str, tuple[str, bool]]:
    """Run every preset's work (``{name: (settings, executed folder)}``) in one pool of ``lanes`` (``threads``
    threads each): its model's pretraining where headlab pretrains it (:func:`pretrains`), its fine-tunes and its toc
    notebooks, a step once the models and pages of its own preset that it reads are done (:func:`step_needs`), the
    longest chain of work across all presets first (each preset's recorded seconds), so a preset's pretraining or
    last long page runs beside another preset's work. Each step's seconds go to ``clock`` under its preset, with the
    cache state the preset started from and whether the step computed anything (its work log in ``logs``), and each
    preset's wall time, from the start of the lanes to the end of its last step, as the step ``preset total``;
    ``run`` runs a step in its lane (:func:`in_lanes`). Returns each preset's state and whether any of its steps
    computed anything."""
    began, run_names = time.time(), [name for name in names if not only or name in only]
    for _, executed in presets.values():
        executed.mkdir(parents=True, exist_ok=True)
        for name in names:
            if only and name not in only and not (executed / f"{name}.ipynb").exists():
                raise BookError(f"--only skips {name}, but it has never been executed into {executed}")
    states = {preset: cache_state(settings) for preset, (settings, _) in presets.items()}  # before anything runs
    computed = dict.fromkeys(presets, False)
    done = 0

    def record(preset: str, step: str, seconds: float, log: Path, total: int | None = None) -> None:
        work = work_noted(log)
        computed[preset] = computed[preset] or bool(work)
        progress = f" ({done} of {total} steps done, {(time.time() - began) / 60:.0f} min in)" if total else ""
        print(
            f"[book] {preset}: {step}: {seconds:.0f} s, "
            + ("; ".join(work) if work else "all of it cached")
            + progress,
            flush=True,
        )
        if clock:
            clock.record(preset, states[preset], step, seconds, bool(work))

    steps, needs, expected = {}, {}, {}
    for preset, (settings, executed) in presets.items():
        timings = [Path(settings.get("RUN_DIR", "runs")) / "timings.csv", REPO / "results" / "timings.csv"]
        seconds_of = recorded_seconds(preset, states[preset], timings)
        own = step_needs(run_names)
        trained = (*((PRETRAINING,) if pretrains(settings) else ()), *training_needs(run_names))
        for name in (*trained, *run_names):
            key, log = f"{preset}/{name}", logs / f"{preset}-{name}.log"
            needs[key] = tuple(f"{preset}/{n}" for n in own.get(name, ()))
            if name in seconds_of:
                expected[key] = seconds_of[name]
            if name in run_names:
                source, target = REPO / "notebooks" / f"{name}.ipynb", executed / f"{name}.ipynb"
                steps[key] = (run_step, f"{preset}: {name}", source, target, settings, threads, log)
            else:
                steps[key] = (fine_tune_step, f"{preset}: {name}", settings, name, log)
    lanes_started, ended = time.time(), {}
    ordered = {key: steps[key] for key in critical_path_first(list(steps), needs, expected)}
    for key, seconds in in_lanes(ordered, needs, lanes, run):
        preset, name = key.split("/", 1)
        done += 1
        record(preset, name, seconds, steps[key][-1], len(steps))
        ended[preset] = time.time()
    if clock:
        for preset in presets:
            total = ended.get(preset, time.time()) - lanes_started
            clock.record(preset, states[preset], PRESET_TOTAL, total, computed[preset])
    return {preset: (states[preset], computed[preset]) for preset in presets}


def build(
    presets: dict[str, dict],
    work: Path | None = None,
    run_dir: Path | None = None,
    only: list[str] | None = None,
    lanes: int | None = None,
    site: bool = True,
    pages: list[str] | None = None,
) -> Path:
    """Execute the toc's notebooks for every preset (``{name: settings}``, in order), ``lanes`` at a time
    (:func:`lanes_and_threads`), and build one site whose first page is the scorecard across them; return the path
    of index.html.

    The first preset's pages are ``executed/NAME``, every other preset's ``executed/<preset>/NAME``. With ``site``
    False (``--no-site``: a GPU machine without jupyter-book) the pages are executed and every table and timing is
    written, but no site is built; the path returned is then that of the scorecard table. ``pages`` (``--pages``)
    executes only those pages and what they need (:func:`with_needs`) and builds no site: the tables and claims of a
    few pages, which :mod:`tools.readme` merges page by page into ``results/``.
    """
    if pages:
        if only:
            raise BookError("--pages and --only do not go together: --pages runs its pages and what they read")
        site = False
    lanes, threads = lanes_and_threads(lanes)
    cell_timeout()  # a bad HEADLAB_CELL_TIMEOUT stops the build here, not after its models are trained
    source = REPO / "book"
    work = Path(work) if work else source
    if work != source:  # a separate build folder (tests): copy the pages, keep the sources clean
        shutil.copytree(source, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns("_build", "executed", "_extra"))
    run_dir = str((run_dir or REPO / "runs").resolve())
    presets = {name: {"RUN_DIR": run_dir, **settings} for name, settings in presets.items()}
    os.environ.update(
        {
            "HEADLAB_BOOK": "1",
            "HEADLAB_NO_NETWORK": "1",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' own bars (loading, saving): the build shows its own
        }
    )
    names = with_needs(pages) if pages else page_ids()
    for settings in presets.values():  # a preset's settings for pages left out are not typos
        check_settings(settings, [REPO / "notebooks" / f"{name}.ipynb" for name in page_ids()])
    folders = {name: "executed" if i == 0 else f"executed/{name}" for i, name in enumerate(presets)}
    first = next(iter(presets.values()))
    clock = BuildClock(
        Path(run_dir) / "timings.csv", str(resolve_device(str(first.get("DEVICE", "auto")))), lanes, threads
    )
    with tempfile.TemporaryDirectory(prefix="headlab-work-") as logs:
        runs = execute_presets(
            {name: (settings, work / folders[name]) for name, settings in presets.items()},
            names,
            only,
            Path(logs),
            clock,
            lanes,
            threads,
        )
    state = overall_state([s for s, _ in runs.values()], any(computed for _, computed in runs.values()))
    table, models, two_tower = scorecard_table(presets), models_table(presets), stacked(presets, "two_tower_conditions")
    table.to_csv(Path(run_dir) / "scorecard.csv", index=False)
    models.to_csv(Path(run_dir) / "models.csv", index=False, float_format="%.6g")
    two_tower.to_csv(Path(run_dir) / "two_tower.csv", index=False, float_format="%.6g")
    pruning_table(presets).to_csv(Path(run_dir) / "pruning.csv", index=False, float_format="%.6g")
    attribution = stacked(presets, "patching_attribution_agreement")
    attribution.to_csv(Path(run_dir) / "attribution_agreement.csv", index=False, float_format="%.6g")
    if not site:
        clock.finish(state)
        return Path(run_dir) / "scorecard.csv"
    site_started = time.time()
    (work / "scorecard.md").write_text(
        scorecard_markdown(table, folders, not_built_commands(list(presets)), models, two_tower), encoding="utf-8"
    )
    toc = work / "_site_toc.yml"
    toc.write_text(site_toc(source / "_toc.yml", folders), encoding="utf-8")
    write_scripts(work / "_extra")
    jb = Path(sys.executable).with_name("jupyter-book")
    config = site_config(REPO / "_config.yml", work / "_site_config.yml")
    command = [
        str(jb if jb.exists() else "jupyter-book"),
        "build",
        str(work),
        "--config",
        str(config),
        "--toc",
        str(toc),
        "--path-output",
        str(work),  # else _build goes beside _config.yml
        "-W",
        "-n",
        "--keep-going",
        "--all",
    ]
    result = subprocess.run(command, cwd=REPO)
    if result.returncode != 0:
        raise BookError(f"jupyter-book build failed (exit {result.returncode}); warnings count as errors, see above")
    index = work / "_build" / "html" / "index.html"
    if not index.exists():
        raise BookError(f"jupyter-book finished but {index} does not exist")
    clock.record("all", state, "site", time.time() - site_started)
    clock.finish(state)
    return index


def main(argv=None) -> int:
    """``python -m headlab.book``: build the presets' pages and the site; a :class:`BookError` is one line, exit 1."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="default")
    parser.add_argument(
        "--presets",
        nargs="+",
        choices=sorted(PRESETS),
        metavar="PRESET",
        help="several presets in one site, the scorecard across them (overrides --preset)",
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a notebook parameter, e.g. --set DEVICE=cuda (repeatable)",
    )
    parser.add_argument("--work", type=Path, help="build folder (default: book/)")
    parser.add_argument("--run-dir", type=Path, help="where result tables go (default: runs/)")
    parser.add_argument("--only", nargs="*", help="execute only these notebooks (others must have run before)")
    parser.add_argument(
        "--pages",
        nargs="+",
        metavar="PAGE",
        help="execute only these pages, the pages they read and 00, into a fresh folder if need be; no site "
        "(python -m tools.readme merges their rows page by page)",
    )
    parser.add_argument("--lanes", type=int, help="notebooks run at once (default: 2, or 1 on a one-core machine)")
    parser.add_argument(
        "--no-site",
        dest="site",
        action="store_false",
        help="execute the notebooks and write the tables and timings, but build no site (no jupyter-book needed)",
    )
    args = parser.parse_args(argv)
    try:
        overrides = dict(parse_setting(s) for s in args.settings)
        names = list(dict.fromkeys(args.presets or [args.preset]))
        index = build(
            {name: {**PRESETS[name], **overrides} for name in names},
            args.work,
            args.run_dir,
            args.only,
            args.lanes,
            args.site,
            args.pages,
        )
    except BookError as err:
        print(f"[book] ERROR: {err}", file=sys.stderr)
        return 1
    print(f"[book] built: {index}" if args.site and not args.pages else f"[book] executed, no site built: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
