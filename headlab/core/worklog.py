"""What a run computed, noted where its caller asks: a book build gives every step a log of its own.

A sweep that evaluates masks and a training that fills a cache entry say so here, one line each, in the file the
``HEADLAB_WORK_LOG`` environment variable names (nothing is noted where it is unset). A notebook's kernel inherits
the variable, so a build that runs notebooks side by side still knows which of them computed anything and which
found everything cached (:mod:`headlab.book.build`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

WORK_LOG = "HEADLAB_WORK_LOG"


def note_work(what: str) -> None:
    """Append ``what`` (one line: what was computed) to this process's work log, if it has one."""
    path = os.environ.get(WORK_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(what.replace("\n", " ") + "\n")


def work_noted(path) -> list[str]:
    """The lines a work log holds (none when the file does not exist: nothing was computed)."""
    path = Path(path)
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@contextmanager
def logging_work(path):
    """Inside the block, this process (and every process it starts) notes its work in ``path``."""
    before = os.environ.get(WORK_LOG)
    os.environ[WORK_LOG] = str(path)
    try:
        yield Path(path)
    finally:
        if before is None:
            del os.environ[WORK_LOG]
        else:
            os.environ[WORK_LOG] = before
