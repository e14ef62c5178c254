"""A step for headlab.book.build.in_lanes to run in its worker processes (a module of its own, so a worker imports
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
