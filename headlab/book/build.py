"""Build the book: execute the notebooks headless with papermill, then build the static site with jupyter-book 1.

The pages are :data:`headlab.lab.pages.PAGES` (``book/_toc.yml`` is generated from it): each page's notebook
``notebooks/ID.ipynb`` runs with the chosen parameters it declares. The site's own toc is generated from it
(:func:`site_toc`): the scorecard first, then the pages once per preset built. A notebook that fails stops the build
with its name and cell; Sphinx warnings (a missing page, an output it cannot show) are errors.

The training steps and the notebooks, which only load the models, run side by side (:func:`in_lanes`, by default
two at a time with the cores shared out between them): a model headlab pretrains first, then the cross-encoder and
page 08's two towers at once (a pretraining or fine-tune runs on one thread wherever it runs, so its weights are
those a notebook run alone trains, and another preset's work runs beside it), each notebook after the models and
pages it reads (:func:`step_needs`: the artifact registry and the fine-tunes), the longest chain of work first
(:func:`critical_path_first`, from the last build's timings), so no lane idles at the end while the other runs a long
page; their single-threaded parts (a kernel's start, tables, charts) overlap. Several presets share one pool
(:func:`execute_presets`): one progress view, and one preset's last long page runs beside another's work.
Inference with fewer threads gives the same grades (probabilities can differ in their last float digits), so the
claims are those of a build that runs one notebook at a time.

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
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np

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
from headlab.book.students import train_students
from headlab.core.device import resolve_device
from headlab.core.worklog import WORK_LOG, work_noted
from headlab.lab.pages import (
    CROSS_ENCODER,
    PRESET_TOTAL,
    PRETRAINING,
    STUDENTS,
    TRAINING_WAITS,
    page_ids,
    page_needs,
    tiny_settings,
    training_needs,
)
from headlab.lab.params import REPO, Params
from headlab.models.names import is_pretrained_name
from headlab.models.pretrain import ensure_named
from headlab.models.training import NO_TRAINING
from headlab.models.two_tower import finetune_two_tower
from headlab.report.bookjs import write_scripts
from headlab.report.render import static_tables, static_widgets

# Parameter sets passed to every notebook that declares the parameter (papermill ignores the rest).
PRESETS = {
    "default": {},
    "tiny": tiny_settings(),  # each page declares its tiny values (headlab.lab.pages)
    # all-mpnet-base-v2 (12 x 12 heads) on one GPU: 30 random draws per share and random condition (the CPU defaults
    # use 3-20)
    "mpnet": {
        "MODEL": "mpnet",
        "DEVICE": "cuda",
        "REDUNDANCY_DRAWS": 30,
        "HALF_DRAWS": 30,
        "MATCHING_DRAWS": 30,
        "N_BOOT": 2000,
        "BATCH_SIZE": 256,
    },
    # the character-level Chinese BERT headlab pretrains (12 x 12 heads; headlab.models.pretrain), on Chinese STS-B;
    # LR and EPOCHS: chosen on the dev split, never on test, by `python -m headlab.book.tuning zh-char` (its grid is
    # headlab.book.tuning.GRIDS; the table and the choice: see README)
    "zh-char": {
        "MODEL": "zh-char",
        "DATA": "stsb-zh",
        "SEG_CORPUS": "pku-1998",
        "SEG_ALSO": "eval-jieba",
        "LR": 2e-4,
        "EPOCHS": 4,
    },
}
# the same pretrained without next-sentence prediction: the study credits NSP for the term-matching heads;
# it keeps zh-char's LR and EPOCHS, so the two models differ only in their pretraining
PRESETS["zh-char-mlm"] = {**PRESETS["zh-char"], "MODEL": "zh-char-mlm"}
# multilingual-e5-small (12 x 12 heads, XLM-R SentencePiece pieces; the e5-small asset), on Chinese and English STS-B,
# its 96M-weight word-embedding matrix frozen (headlab.models.finetune.FinetuneConfig); LR and EPOCHS chosen on the
# dev split by `python -m headlab.book.tuning e5-zh` (e5-en) over headlab.book.tuning.GRIDS (the runs: README)
E5_SETTINGS = {"MODEL": "e5-small", "FREEZE_WORD_EMBEDDINGS": True}
PRESETS["e5-zh"] = {
    **E5_SETTINGS,
    "DATA": "stsb-zh",
    "SEG_CORPUS": "pku-1998",
    "SEG_ALSO": "eval-jieba",
    "LR": 5e-5,
    "EPOCHS": 2,
}
PRESETS["e5-en"] = {**E5_SETTINGS, "LR": 5e-5, "EPOCHS": 3}
# the same weights reading Chinese one character per token, as the study's BERT did (the e5-small-char asset,
# headlab.inputs.e5_chars), so page 03 judges its word-segmentation heads against People's Daily's and jieba's words;
# MODEL (e5-small-char, or e5-small-char-mlm: first a short masked-LM pass over People's Daily characters), LR and
# EPOCHS chosen on the dev split by `python -m headlab.book.tuning e5-zh-char` over GRIDS (12 runs: README)
PRESETS["e5-zh-char"] = {**PRESETS["e5-zh"], "MODEL": "e5-small-char", "LR": 5e-5, "EPOCHS": 3}


# seconds a cell may run (HEADLAB_CELL_TIMEOUT overrides): a cell that hangs (e.g. a widget waiting on a kernel) fails
# the build instead of holding it forever. Sweep cells are long: e5-zh's single-head sweep (02) at one torch thread on
# a 2-core AMD EPYC ran past an hour; 6 hours leaves a slower laptop room. A sweep saves each mask as it goes, so a
# build stopped here resumes where it stopped.
CELL_TIMEOUT = 6 * 3600
CELL_TIMEOUT_VARIABLE = "HEADLAB_CELL_TIMEOUT"
REPOSITORY_VARIABLE = "HEADLAB_REPOSITORY_URL"  # the repository the site links to, over _config.yml's repository.url
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")  # torch's and numpy's thread pools


class BookError(RuntimeError):
    """A notebook or the site build failed; the message says which and where."""


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


def cell_timeout() -> int:
    """Seconds a notebook cell may run: :data:`CELL_TIMEOUT`, or the environment's HEADLAB_CELL_TIMEOUT."""
    raw = os.environ.get(CELL_TIMEOUT_VARIABLE)
    if raw is None:
        return CELL_TIMEOUT
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise BookError(f"{CELL_TIMEOUT_VARIABLE} must be a positive whole number of seconds, got {raw!r}")
    return seconds


# the kernel's own log (it runs on localhost TCP, it saw its parent exit) off the build's console below errors; what a
# notebook's code warns of still lands in its cell's output
KERNEL_QUIET = "--IPKernelApp.log_level=ERROR"


def execute_notebook(source: Path, target: Path, settings: dict, cwd: Path) -> float:
    """Run one notebook with the settings it declares as parameters; raise BookError naming the failing cell (or the
    cell that ran past :func:`cell_timeout`)."""
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError

    declared = notebook_parameters(source)
    params = {k: v for k, v in settings.items() if k in declared}
    limit = cell_timeout()
    started = time.time()
    try:
        pm.execute_notebook(
            str(source),
            str(target),
            parameters=params,
            kernel_name="python3",
            cwd=str(cwd),
            execution_timeout=limit,
            progress_bar=False,
            request_save_on_cell_execute=True,
            extra_arguments=[KERNEL_QUIET],
        )
    except pm.PapermillExecutionError as err:
        raise BookError(
            f"notebook {source.name} failed in {_cell(target, _raised)}: {err.ename}: {err.evalue}\n"
            f"(the executed copy with the traceback is {target})"
        ) from None
    except CellTimeoutError:
        raise BookError(
            f"notebook {source.name}: {_cell(target, _running)} ran longer than {limit} s, the limit a "
            f"cell has ({CELL_TIMEOUT_VARIABLE}). What its sweeps computed is saved: set a higher "
            f"{CELL_TIMEOUT_VARIABLE} and build again to resume."
        ) from None
    return time.time() - started


def _raised(cells: list) -> int | None:
    """The first cell with an error in its outputs."""
    return next(
        (i for i, c in enumerate(cells) if any(o.get("output_type") == "error" for o in c.get("outputs", []))), None
    )


def _running(cells: list) -> int | None:
    """The last cell that started: after a timeout, the one that was running (papermill marks it completed)."""
    started = [i for i, c in enumerate(cells) if c.metadata.get("papermill", {}).get("start_time")]
    return started[-1] if started else None


def _cell(executed: Path, pick) -> str:
    """The code cell of the source notebook that ``pick(code_cells)`` points at: its number among the code cells and
    its first line."""
    import nbformat

    code = [
        c
        for c in nbformat.read(str(executed), as_version=4).cells
        if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])
    ]
    index = pick(code)
    if index is None:
        return "an unknown cell"
    first_line = code[index].source.strip().splitlines()[0] if code[index].source.strip() else ""
    return f"code cell {index + 1} (`{first_line}`)"


ONLY_OUTPUT = {"show", "Markdown", "display"}  # a cell that is one call of these shows a result and nothing else


def _only_renders(source: str) -> bool:
    """True for a cell that is a single ``show(...)``, ``Markdown(...)`` or ``display(...)`` call."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Call)
        and (getattr(body[0].value.func, "id", None) or getattr(body[0].value.func, "attr", None)) in ONLY_OUTPUT
    )


def _sets_up(source: str) -> bool:
    """Whether a cell is the page's set-up: it starts with imports and they are at least half its statements (the
    rest: the lab, the model's shape, the page's figures), boilerplate a reader opens only on demand. A cell that
    goes on to compute is shown: the notebooks keep their computation out of the imports cell."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    imports = sum(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)
    return bool(body) and isinstance(body[0], (ast.Import, ast.ImportFrom)) and 2 * imports >= len(body)


def reading_tags(nb, repo: Path = REPO) -> None:
    """Tag an executed notebook for reading: a cell that only renders a chart or a verdict shows its output without
    its code; the imports are folded (:func:`_sets_up`), so the computation that matters is what a reader sees; the
    parameters and papermill's injected parameters are folded away (one click opens them), and a
    ``RUN_DIR`` inside the repository is written relative to it, not as the builder's absolute path. The notebooks
    in ``notebooks/`` keep all their code."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        if {"parameters", "injected-parameters"} & set(tags):
            tags.append("hide-cell")
            cell.source = cell.source.replace(f"{repo.resolve()}/", "")
        elif _only_renders(cell.source):
            tags.append("remove-input")
        elif _sets_up(cell.source):
            tags.append("hide-input")


def notebook_parameters(notebook: Path) -> set[str]:
    """The parameters a notebook declares: the names its ``parameters`` cell assigns (as papermill reads them)."""
    import nbformat

    cells = [
        c
        for c in nbformat.read(str(notebook), as_version=4).cells
        if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])
    ]
    if len(cells) > 1:
        raise BookError(f"{notebook} has {len(cells)} cells tagged 'parameters'; papermill reads one")
    body = ast.parse(cells[0].source).body if cells else []
    targets = [t for n in body if isinstance(n, ast.Assign) for t in n.targets]
    targets += [n.target for n in body if isinstance(n, ast.AnnAssign)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _check_settings(settings: dict, notebooks: list[Path]) -> None:
    """A setting no notebook declares is a typo (or a parameter papermill cannot parse): say so, run nothing."""
    missing = [nb for nb in notebooks if not nb.exists()]
    if missing:
        raise BookError(f"the table of contents lists {missing[0].stem}, but {missing[0]} does not exist")
    declared = set().union(*(notebook_parameters(nb) for nb in notebooks))
    unknown = sorted(set(settings) - declared - {"RUN_DIR"})
    if unknown:
        raise BookError(f"no notebook declares the parameter(s) {unknown}; declared: {sorted(declared)}")


def pretrains(settings: dict) -> bool:
    """Whether the preset's model is one headlab pretrains (``zh-char``): its build has a :data:`PRETRAINING` step."""
    model = settings.get("MODEL")
    return isinstance(model, str) and is_pretrained_name(model)


def fine_tune_step(label: str, settings: dict, which: str, log: Path) -> float:
    """Train, or find in the cache, one model the notebooks load, in a lane's worker process with its own work
    log: ``which`` is :data:`PRETRAINING`, the model headlab pretrains that the others start from
    (:func:`headlab.models.pretrain.ensure_named`), :data:`CROSS_ENCODER`, the model every page reads,
    :data:`TWO_TOWER`, page 08's two towers, or :data:`STUDENTS`, page 10's students distilled from the cross-encoder
    (:func:`headlab.book.students.train_students`). Each trains on one torch thread wherever it runs
    (:func:`headlab.models.training.one_thread`; this worker's torch is already started, so thread variables would
    not reach it), so two share a 2-core machine and give the weights a notebook run alone gives. The seconds."""
    os.environ[WORK_LOG] = str(log)
    os.environ.pop(NO_TRAINING, None)
    params = Params.from_globals(settings)
    print(f"[book] {label}: {which} of {params.model} on {params.data} (cached after the first run) ...", flush=True)
    started = time.time()
    if which == PRETRAINING:
        ensure_named(params.model, params.torch_device)
    elif which == CROSS_ENCODER:
        params.fine_tune()
    elif which == STUDENTS:
        train_students(settings)
    else:
        finetune_two_tower(params.finetune_config, device=params.torch_device)
    return time.time() - started


def step_needs(names: list[str]) -> dict[str, tuple]:
    """The pages whose tables each notebook of ``names`` reads (:func:`headlab.lab.pages.page_needs`, from the
    registry the labs find them through), and the models it loads (:func:`headlab.lab.pages.training_needs`): what
    each waits for."""
    reads = page_needs()
    needs = {name: tuple(reads.get(name, ())) for name in names}
    for step, pages in training_needs(names).items():
        needs[step] = TRAINING_WAITS.get(step, ())
        for page in pages:
            needs[page] = (*needs[page], step)
    return needs


def call(function, *args):
    """``function(*args)``: a lane's step, notebook or training (:func:`in_lanes`)."""
    return function(*args)


def lanes_and_threads(lanes: int | None = None) -> tuple[int, int]:
    """How many notebooks run at once, and torch threads each: by default two at a time (one on a one-core machine),
    the cores shared out between them."""
    cores = os.cpu_count() or 1
    lanes = min(2, cores) if lanes is None else lanes
    if not isinstance(lanes, int) or lanes < 1:
        raise BookError(f"--lanes must be a positive integer, got {lanes!r}")
    return lanes, max(1, cores // lanes)


def critical_path_first(
    names: list[str], needs: dict[str, tuple], seconds: dict[str, float] | None = None
) -> list[str]:
    """``names`` ordered by the longest chain of work each one starts, longest first: its own expected ``seconds``
    plus the longest chain among the steps that wait on it (directly or through another). The lanes take the first
    step whose pages are done, so a long page others wait on starts at once and a long page nobody waits on does
    not end the build alone. A step without recorded seconds counts as the median of those with them (1 s when none
    has any); ties keep the order given."""
    seconds = {n: s for n, s in (seconds or {}).items() if n in names}
    default = float(np.median(list(seconds.values()))) if seconds else 1.0
    chains: dict[str, float] = {}

    def chain(name: str) -> float:
        if name not in chains:
            waiting = [n for n in names if name in needs.get(n, ())]
            chains[name] = seconds.get(name, default) + max((chain(n) for n in waiting), default=0.0)
        return chains[name]

    return sorted(names, key=chain, reverse=True)  # stable: ties keep the order given


def run_step(label: str, source: Path, target: Path, settings: dict, threads: int, log: Path) -> float:
    """One notebook, in a lane's worker process: its kernel gets ``threads`` threads, the step's work log and no
    permission to train (the models are trained first); the executed copy is made static and tagged for reading.
    Returns its seconds."""
    import nbformat

    os.environ.update({**{name: str(threads) for name in THREAD_VARIABLES}, WORK_LOG: str(log), NO_TRAINING: "1"})
    print(f"[book] {label}: executing notebooks/{source.name} ...", flush=True)
    seconds = execute_notebook(source, target, settings, REPO)
    nb = nbformat.read(str(target), as_version=4)
    static_widgets(nb)  # the static book embeds no widgets: no widget JavaScript from a CDN
    static_tables(nb)  # "—" for a missing number, no -0
    reading_tags(nb)
    nbformat.write(nb, str(target))
    return seconds


def die_with_the_build(build: int) -> None:
    """A lane worker's start: a thread ends it (``os._exit``, SIGTERM's exit status) within a second of the build
    (process ``build``) that started it dying, when another process adopts it; on any POSIX system, whatever
    signals the kernel delivers. Not ``sys.exit``: the pool's worker loop would catch that and wait for work forever.
    Every model, mask and table is written atomically, so exiting mid-step loses only the step's unsaved work; the
    kernel of the notebook it ran exits in turn (ipykernel polls its parent, ``JPY_PARENT_PID``). A killed build
    leaves no worker training or sweeping on its own: the next build finds the cores free."""
    threading.Thread(target=_exit_when_orphaned, args=(build,), name="die-with-the-build", daemon=True).start()


def _exit_when_orphaned(build: int, every: float = 1.0) -> None:
    """Exit this process once its parent is no longer ``build`` (it died and another process adopted this one)."""
    while os.getppid() == build:
        time.sleep(every)
    os._exit(128 + signal.SIGTERM)


def in_lanes(steps: dict[str, tuple], needs: dict[str, tuple], lanes: int, run=call):
    """Run ``run(*steps[name])`` (by default a step is its function and arguments: :func:`call`) for every step,
    ``lanes`` at a time in worker processes that die with the build (:func:`die_with_the_build`), each step once
    every step it ``needs`` (of those in ``steps``) has finished, else in the order given; yield ``(name, result)``
    as each finishes. After a failure nothing new starts: the steps still running finish, then the first error is
    raised."""
    pending, running, done, failure = list(steps), {}, set(), None
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(lanes, mp_context=spawn, initializer=die_with_the_build, initargs=(os.getpid(),)) as pool:
        while running or (pending and failure is None):
            for name in [n for n in pending if failure is None and set(needs.get(n, ())) & set(steps) <= done]:
                if len(running) == lanes:
                    break
                pending.remove(name)
                running[pool.submit(run, *steps[name])] = name
            if not running:
                raise BookError(f"the steps {pending} wait on each other: {[(n, needs.get(n)) for n in pending]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    result = future.result()
                except Exception as err:  # noqa: BLE001 (any failure stops the build, after the running steps)
                    failure = failure or err
                    still = f" (waiting for {sorted(running.values())} to finish)" if running else ""
                    print(f"[book] ERROR: {err}{still}", file=sys.stderr, flush=True)
                    continue
                done.add(name)
                yield name, result
    if failure is not None:
        raise failure


def site_toc(template: Path, folders: dict[str, str]) -> str:
    """The site's table of contents: the scorecard as the first page, the introduction, then the template's parts
    once per preset, each pointing at that preset's executed pages (``executed/NAME`` becomes ``<folder>/NAME``)
    and captioned with the preset when there are several."""
    text = template.read_text(encoding="utf-8")
    parts = text[text.index("parts:") :].splitlines()[1:]
    lines = [
        "format: jb-book",
        "root: scorecard",
        "parts:",
        "  - caption: Introduction",
        "    chapters:",
        "      - file: intro",
    ]
    for preset, folder in folders.items():
        for line in parts:
            line = re.sub(r"file:\s*executed/", f"file: {folder}/", line)
            if len(folders) > 1:
                line = re.sub(r"caption:\s*(.*)", rf"caption: \1 ({preset})", line)
            lines.append(line)
    return "\n".join(lines) + "\n"


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


def site_config(template: Path, target: Path) -> Path:
    """The site's jupyter-book config: ``template`` (``_config.yml``) with ``repository.url`` from
    :data:`REPOSITORY_VARIABLE` where it is set, and the repository button on exactly when there is a URL, written
    to ``target``."""
    import yaml

    config = yaml.safe_load(template.read_text(encoding="utf-8"))
    url = os.environ.get(REPOSITORY_VARIABLE) or config.get("repository", {}).get("url") or ""
    if url:
        config["repository"] = {**config.get("repository", {}), "url": url}
    else:
        config.pop("repository", None)  # an empty URL would still reach the theme
    config.setdefault("html", {})["use_repository_button"] = bool(url)
    target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


def not_built_commands(built: list[str]) -> dict[str, str]:
    """For every preset of :data:`PRESETS` left out of this build (the tiny test preset aside), the command that
    builds the site with it added."""

    def command(preset: str) -> str:
        gpu = str(PRESETS[preset].get("DEVICE", "")).startswith("cuda")
        return f'make book PRESETS="{" ".join([*built, preset])}"' + (
            ' TORCH="torch==2.14.1"  (needs a GPU)' if gpu else ""
        )

    return {p: command(p) for p in PRESETS if p not in built and p != "tiny"}


def with_needs(pages: list[str]) -> list[str]:
    """``pages``, every page they read from (:func:`headlab.lab.pages.page_needs`, transitively) and 00 (whose
    baseline every models table reads), in the book's order; an unregistered page is an error that names it."""
    known, reads = page_ids(), page_needs()
    unknown = [p for p in pages if p not in known]
    if unknown:
        raise BookError(f"--pages: no page {', '.join(unknown)} (the pages: {', '.join(known)})")
    wanted, todo = {known[0]}, list(pages)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(reads.get(name, ()))
    return [name for name in known if name in wanted]


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
        _check_settings(settings, [REPO / "notebooks" / f"{name}.ipynb" for name in page_ids()])
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
