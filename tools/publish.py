"""Publish a built book: the static site on a ``gh-pages`` branch (GitHub Pages serves it), and one archive with the
site, the result tables and the executed notebooks, so a book built on one machine (a GPU runner) can be published
or compared on another.

    python -m tools.publish pages [--push]   # book/_build/html -> the gh-pages branch (make publish, PUSH=1)
    python -m tools.publish dist             # dist/headlab-book-<commit>.zip (make dist)

Both read what ``make book`` wrote (``book/_build/html``, ``book/executed``, ``runs/``; ``--book`` and ``--runs`` name
another build's folders) and stop with the command to
run when it is not there; nothing is pushed unless asked.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from headlab.book.records import commit
from headlab.lab.params import REPO

BOOK = REPO / "book"  # a build folder (python -m headlab.book --work): the site in _build/html, notebooks in executed/
RUNS = REPO / "runs"
DIST = REPO / "dist"
BRANCH = "gh-pages"
# what a published site must hold to be the book: its first page, the scorecard, and the JavaScript it ships
# (headlab.report.bookjs) so that it shows its charts with no CDN
SITE_MUST_HOLD = ("index.html", "scorecard.html", "headlab-js")


class PublishError(RuntimeError):
    """Nothing to publish, or git refused; the message says what to run."""


def check_site(site: Path) -> Path:
    """``site`` if it holds a built book (:data:`SITE_MUST_HOLD`); else a PublishError naming what is missing."""
    site = Path(site)
    missing = [name for name in SITE_MUST_HOLD if not (site / name).exists()]
    if missing:
        raise PublishError(f"{site} is not a built book (no {', '.join(missing)}): run `make book` first")
    return site


def site_of(book: Path) -> Path:
    """The static site a build folder holds."""
    return Path(book) / "_build" / "html"


def publish_pages(
    site: Path = site_of(BOOK), repo: Path = REPO, branch: str = BRANCH, push: bool = False, remote: str = "origin"
) -> str:
    """Commit the site as the whole tree of ``branch`` in the git repository ``repo`` (ghp-import, with
    ``.nojekyll`` so that GitHub Pages serves folders starting with ``_``), and push it to ``remote`` when asked.
    The branch's files, sorted."""
    site = check_site(site)
    message = f"book built from {commit()} at {datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    command = [
        str(Path(sys.executable).with_name("ghp-import")),
        "--no-jekyll",
        "--branch",
        branch,
        "--message",
        message,
        "--remote",
        remote,
        *(["--push", "--force"] if push else []),
        str(site.resolve()),
    ]
    result = subprocess.run(command, cwd=repo, capture_output=True, text=True)
    if result.returncode != 0:
        raise PublishError(f"ghp-import failed in {repo} (exit {result.returncode}): {result.stderr.strip()}")
    return branch_files(repo, branch)


def branch_files(repo: Path, branch: str = BRANCH) -> list[str]:
    """Every file on ``branch`` of the repository ``repo``."""
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", branch], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return sorted(listing.split())


def manifest(runs: Path) -> dict:
    """What an archive holds and where it came from: the presets built, the commit, the machine and the build's
    timings (``runs/timings.csv``), the models' accuracies (``runs/models.csv``)."""
    timings = pd.read_csv(runs / "timings.csv") if (runs / "timings.csv").exists() else pd.DataFrame()
    models = pd.read_csv(runs / "models.csv") if (runs / "models.csv").exists() else pd.DataFrame()
    last = timings[timings["build"] == timings["build"].iloc[-1]] if len(timings) else timings
    return {
        "commit": commit(),
        "packed": f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}",
        "presets": sorted(models["preset"].unique().tolist()) if len(models) else [],
        "build": str(last["build"].iloc[0]) if len(last) else None,
        "machine": str(last["machine"].iloc[0]) if len(last) else None,
        "device": str(last["device"].iloc[0]) if len(last) else None,
        "timings": last[["preset", "state", "step", "seconds"]].to_dict(orient="records") if len(last) else [],
        "models": models[["preset", "model", "data", "accuracy", "majority"]].to_dict(orient="records")
        if len(models)
        else [],
    }


def dist_archive(book: Path = BOOK, runs: Path = RUNS, out: Path = DIST) -> Path:
    """``out/headlab-book-<commit>.zip`` from the build folder ``book`` and its ``runs``: ``site/`` (the static book),
    ``runs/`` (the result tables, CSV), ``notebooks/`` (the executed notebooks, every preset's) and ``manifest.json``
    (:func:`manifest`). Its path."""
    site, executed = check_site(site_of(book)), Path(book) / "executed"
    for folder, made_by in ((runs, "the book's result tables"), (executed, "the executed notebooks")):
        if not Path(folder).is_dir():
            raise PublishError(f"{folder} does not exist ({made_by}): run `make book` first")
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"headlab-book-{commit()}.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as packed:
        for prefix, folder, pattern in (
            ("site", site, "*"),
            ("runs", runs, "*.csv"),
            ("notebooks", executed, "*.ipynb"),
        ):
            for path in sorted(Path(folder).rglob(pattern)):
                if path.is_file():
                    packed.write(path, f"{prefix}/{path.relative_to(folder).as_posix()}")
        packed.writestr("manifest.json", json.dumps(manifest(Path(runs)), indent=2, default=str))
    return archive


def main(argv=None) -> int:
    """``python -m tools.publish pages|dist``: the exit status (0 when done)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["pages", "dist"])
    parser.add_argument(
        "--book", type=Path, default=BOOK, help="the build folder (default: book/, the site in _build/html)"
    )
    parser.add_argument("--push", action="store_true", help="pages: push the branch to the remote")
    parser.add_argument("--remote", default="origin")
    parser.add_argument("--branch", default=BRANCH)
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--out", type=Path, default=DIST)
    args = parser.parse_args(argv)
    try:
        if args.what == "pages":
            files = publish_pages(site_of(args.book), REPO, args.branch, args.push, args.remote)
            where = f"pushed to {args.remote}" if args.push else "not pushed (PUSH=1 pushes)"
            print(f"{args.branch}: {len(files)} files, {where}")
        else:
            print(dist_archive(args.book, args.runs, args.out))
    except PublishError as err:
        print(f"[publish] ERROR: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
