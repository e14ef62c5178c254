"""One notebook executed headless by papermill: its parameters checked first, a cell that hangs stopped, a failure
reported by its name and cell, and the executed copy tagged so the site folds set-up cells away."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

from headlab.lab.params import REPO

# seconds a cell may run (HEADLAB_CELL_TIMEOUT overrides): a cell that hangs (e.g. a widget waiting on a kernel) fails
# the build instead of holding it forever. Sweep cells are long: e5-zh's single-head sweep (02) at one torch thread on
# a 2-core AMD EPYC ran past an hour; 6 hours leaves a slower laptop room. A sweep saves each mask as it goes, so a
# build stopped here resumes where it stopped.
CELL_TIMEOUT = 6 * 3600


CELL_TIMEOUT_VARIABLE = "HEADLAB_CELL_TIMEOUT"


class BookError(RuntimeError):
    """A notebook or the site build failed; the message says which and where."""


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


# the kernel's own log off the build's console: it runs on localhost TCP, it saw its parent exit, and a kernel shut
# down while the machine is busy logs "KeyboardInterrupt caught in kernel" at ERROR level. A cell's error reaches the
# build as papermill's, with its cell; what a notebook's code warns of still lands in its cell's output
KERNEL_QUIET = "--IPKernelApp.log_level=CRITICAL"


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


def check_settings(settings: dict, notebooks: list[Path]) -> None:
    """A setting no notebook declares is a typo (or a parameter papermill cannot parse): say so, run nothing."""
    missing = [nb for nb in notebooks if not nb.exists()]
    if missing:
        raise BookError(f"the table of contents lists {missing[0].stem}, but {missing[0]} does not exist")
    declared = set().union(*(notebook_parameters(nb) for nb in notebooks))
    unknown = sorted(set(settings) - declared - {"RUN_DIR"})
    if unknown:
        raise BookError(f"no notebook declares the parameter(s) {unknown}; declared: {sorted(declared)}")
