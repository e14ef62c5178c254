"""Kill work part-way, at a known point, to test that it resumes.

The work runs in a forked child, which inherits the loaded torch and headlab (no new interpreter to start). The child
first freezes at a known point (it touches a marker file, then sleeps until killed), so the kill lands part-way
through the work however fast the machine is.
"""

import os
import signal
import time
from pathlib import Path

import torch


def freeze_after(module, name, calls, marker, counts=lambda *args: True):
    """module.name runs as usual, but after its calls-th counted call it touches marker and sleeps until killed."""
    original, seen = getattr(module, name), []

    def frozen(*args, **kwargs):
        result = original(*args, **kwargs)
        if counts(*args):
            seen.append(1)
            if len(seen) == calls:
                Path(marker).touch()
                while True:
                    time.sleep(1)
        return result

    setattr(module, name, frozen)


def run_killed(work, marker: Path, sig) -> None:
    """Run ``work`` in a forked child, wait until it has frozen (``marker`` exists), send it ``sig``.

    The child must die of the signal: SIGKILL ends it at once; SIGINT raises KeyboardInterrupt in it, as in any
    Python program, and the work's own clean-up runs as the exception passes through it.
    """
    pid = os.fork()
    if pid == 0:  # the child: whatever happens, it ends here and never returns into pytest
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may have ignored it
            torch.set_num_threads(1)
            work()
            status = 0
        except BaseException:
            pass
        finally:
            os._exit(status)
    deadline, ended, status = time.time() + 120, 0, 0
    while not marker.exists() and time.time() < deadline:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            break
        time.sleep(0.02)
    if not ended:
        os.kill(pid, sig)
        _, status = os.waitpid(pid, 0)
    assert marker.exists() and status != 0, "the child did not freeze part-way and die of the signal"
