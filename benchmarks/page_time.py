"""What a change costs one page, lane for lane: the page's code cells run in-process (one torch thread, as one lane
of ``make book``) at two commits side by side, each cell timed, on the same warm prerequisites.

    python benchmarks/page_time.py --page 09_patching --before b247bbf --warm RUN_DIR [--preset default]

``--warm``: a run folder that holds what the page reads from earlier pages (e.g. 02's sweep, 05's roles), copied
afresh for each side so that neither reads the other's tables; a page's own tables start empty. Prints one line per
cell (before, after, difference in seconds) and the totals; the two sides run at once, as two lanes do.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cells(repo: str, page: str, preset: str, run_dir: str, out: str) -> None:
    """One side: ``page``'s code cells of the checkout at ``repo``, in order, each timed, into ``out`` (JSON)."""
    sys.path.insert(0, repo)
    import torch

    torch.set_num_threads(1)
    import headlab
    from headlab.book.presets import PRESETS

    assert str(Path(headlab.__file__).resolve()).startswith(str(Path(repo).resolve())), headlab.__file__
    cells = json.loads((Path(repo) / "notebooks" / f"{page}.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    settings = {**PRESETS[preset], "RUN_DIR": run_dir}
    scope: dict = {"__name__": "__main__"}
    times = []
    for i, source in enumerate(sources):
        if i == 0:  # the parameters cell, then the preset's settings over it, as papermill injects them
            source += "\n" + "\n".join(f"{k} = {v!r}" for k, v in settings.items())
        start = time.perf_counter()
        exec(compile(source.replace("show(", "(lambda *a, **k: None)("), f"{page} cell {i}", "exec"), scope)
        times.append({"cell": i, "seconds": round(time.perf_counter() - start, 1), "first": source.split("\n")[0]})
    Path(out).write_text(json.dumps(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", required=True)
    parser.add_argument("--before", required=True, help="the commit to compare the working tree with")
    parser.add_argument("--warm", required=True, help="a run folder with the page's prerequisites")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--side", nargs=3, help=argparse.SUPPRESS)  # internal: repo, run folder, output
    args = parser.parse_args()
    if args.side:
        run_cells(args.side[0], args.page, args.preset, args.side[1], args.side[2])
        return
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-f", "--detach", str(before), args.before], check=True
        )
        try:
            sides = {"before": before, "after": REPO}
            runs = {}
            for name, repo in sides.items():
                folder = Path(tmp) / f"runs-{name}"
                shutil.copytree(args.warm, folder)
                command = [sys.executable, __file__, "--page", args.page, "--before", args.before, "--warm", args.warm]
                command += ["--preset", args.preset, "--side", str(repo), str(folder), str(Path(tmp) / f"{name}.json")]
                runs[name] = subprocess.Popen(command)
            if any(run.wait() for run in runs.values()):
                raise SystemExit("a side failed: its traceback is above")
            times = {name: json.loads((Path(tmp) / f"{name}.json").read_text()) for name in sides}
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)], check=False)
    for name, cells in times.items():
        print(f"{name}: " + ", ".join(f"{c['cell']}:{c['seconds']}s {c['first'][:40]!r}" for c in cells))
    totals = {name: sum(c["seconds"] for c in cells) for name, cells in times.items()}
    print(
        f"total: before {totals['before']:.1f} s, after {totals['after']:.1f} s, "
        f"{totals['after'] - totals['before']:+.1f} s ({(totals['after'] - totals['before']) / 60:+.2f} lane-minutes)"
    )


if __name__ == "__main__":
    main()
