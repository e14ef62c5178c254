"""Steps run side by side in worker processes (lanes), each after the steps it needs, the longest chain first, the
cores shared out between lanes; a worker dies with the build that started it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import numpy as np

from headlab.book.notebooks import BookError

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")  # torch's and numpy's thread pools


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
