"""A step for headlab.book.lanes.in_lanes to run in its worker processes (a module of its own, so a worker imports
nothing heavy): it records when it started and ended, or fails at once."""

import json
import os
import time


def timed_step(name: str, seconds: float, folder: str, fail: bool = False) -> str:
    started = time.time()
    if fail:
        raise ValueError(f"{name} failed on purpose")
    time.sleep(seconds)
    with open(os.path.join(folder, f"{name}.json"), "w") as out:
        json.dump({"start": started, "end": time.time(), "pid": os.getpid()}, out)
    return name


def labelled_step(function, label: str, *args) -> float:
    """In place of a build step (a notebook or a fine-tune, ``function(label, ...)``): note its label, start and end
    in the folder named by ``HEADLAB_TEST_STEPS`` and take a moment. A fine-tune first waits (at most a minute) until
    ``HEADLAB_TEST_MEET`` fine-tunes have started: two run at once only if two lanes took them."""
    started, folder = time.time(), os.environ["HEADLAB_TEST_STEPS"]
    if function.__name__ == "fine_tune_step":
        open(os.path.join(folder, f"{label.replace(': ', '--')}.started"), "w").close()
        meet = int(os.environ.get("HEADLAB_TEST_MEET", "1"))
        while len([n for n in os.listdir(folder) if n.endswith(".started")]) < meet and time.time() - started < 60:
            time.sleep(0.05)
    time.sleep(0.5)
    with open(os.path.join(folder, f"{label.replace(': ', '--')}.json"), "w") as out:
        json.dump({"function": function.__name__, "start": started, "end": time.time()}, out)
    return time.time() - started


def pid_then_sleep(folder: str) -> None:
    """Write this worker's pid to ``folder``/worker.pid, then sleep long: a step the build is killed during."""
    with open(os.path.join(folder, "worker.pid"), "w") as out:
        out.write(str(os.getpid()))
    time.sleep(300)
