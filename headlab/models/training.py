"""What fine-tuning and pretraining share: a cache entry trained once, resumable state, a warm-up schedule.

A trained model is a cache folder that counts only once its marker (written last, holding the weights' sha256)
matches the weights. :func:`cached` trains into ``<folder>.partial`` under a lock, so two processes never train
the same entry, and moves the finished folder into place in one rename. The optimizer state is saved atomically
(:func:`save_state`) so an interrupted run resumes (:func:`load_state`) and ends with the same weights.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from headlab.core.worklog import note_work
from headlab.inputs.assets import sha256_of

MARKER = ".headlab-complete"
STATE = "state.pt"
NO_TRAINING = "HEADLAB_NO_TRAINING"  # set: a model missing from the cache is an error, not trained (see cached)


class TrainingError(RuntimeError):
    """A model had to be trained where training is not allowed (:data:`NO_TRAINING`)."""


def is_complete(folder: Path) -> bool:
    """True when the marker exists and matches the weights on disk (a partial or corrupt entry is not)."""
    marker, weights = folder / MARKER, folder / "model.safetensors"
    return marker.is_file() and weights.is_file() and marker.read_text().strip() == sha256_of(weights)


@contextmanager
def exclusive_lock(path: Path):
    """Hold an exclusive lock file, so two processes never train the same checkpoint at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached(out: Path, train) -> Path:
    """``out`` if it is complete; else ``train(work)`` fills ``<out>.partial`` (its saved state, if any, is
    resumed), which is then marked complete and renamed to ``out``.

    Where :data:`NO_TRAINING` is set (a book build's notebooks), a missing entry is an error instead: the build
    trains every model in steps of its own, which the notebooks that load it wait for."""
    if is_complete(out):
        return out
    if os.environ.get(NO_TRAINING):
        raise TrainingError(
            f"{out.name} is not in the cache, and this run may not train it ({NO_TRAINING} is set): "
            "the book trains every model in steps of its own, before the notebooks that load it; "
            "train it first (a notebook run alone does) or unset the variable"
        )
    with exclusive_lock(out.with_name(out.name + ".lock")):
        if is_complete(out):
            return out
        note_work(f"trained {out.name}")
        if out.exists():
            shutil.rmtree(out)  # partial or corrupt: rebuild
        work = out.with_name(out.name + ".partial")
        work.mkdir(parents=True, exist_ok=True)
        train(work)
        (work / STATE).unlink(missing_ok=True)
        (work / MARKER).write_text(sha256_of(work / "model.safetensors"))
        os.replace(work, out)
    return out


@contextmanager
def one_thread():
    """Train with one torch thread, whatever the machine: the weights a training reaches depend on its thread count
    (the order of float sums), so a model trained in a book's lane, beside another, is the model a notebook run
    alone trains, and two trainings can share a 2-core machine (headlab.book.build)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def linear_schedule(optimizer, warmup_steps: int, total_steps: int):
    """Linear warm-up to the full learning rate, then linear decay to zero at ``total_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def optimizer_and_schedule(
    model, lr: float, weight_decay: float, warmup: float, total_steps: int, fused: bool = False, params=None
):
    """AdamW and a linear schedule that warms up over the first ``warmup`` share of ``total_steps``.

    ``params``: parameter groups of their own (e.g. a new head with a larger learning rate); all of ``model``'s by
    default.

    ``fused``: torch's fused AdamW, one kernel over all parameters (the same update; on a 2-core AMD EPYC its step
    over MiniLM's 22.7M weights took a sixth of the per-parameter loop's time, about 0.12 s of a 1 s training step);
    the pretraining keeps the loop, so the models it trained keep their cache keys."""
    params = model.parameters() if params is None else params
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)
    return optimizer, linear_schedule(optimizer, max(1, int(warmup * total_steps)), total_steps)


def train_step(model, loss: torch.Tensor, optimizer, scheduler) -> None:
    """Backward, clip the gradient norm at 1, step the optimizer and the schedule, clear the gradients."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def save_state(work: Path, model, optimizer, scheduler, **progress) -> None:
    """Weights, optimizer, schedule and ``progress`` in one file, replaced atomically: they always agree on a resume."""
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            **progress,
        },
        work / "state.tmp",
    )
    os.replace(work / "state.tmp", work / STATE)


def load_state(work: Path, model, optimizer, scheduler, device) -> dict | None:
    """Restore what :func:`save_state` saved in ``work`` (if anything) and return its progress entries."""
    path = work / STATE
    if not path.exists():
        return None
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state.pop("model"))
    optimizer.load_state_dict(state.pop("optimizer"))
    scheduler.load_state_dict(state.pop("scheduler"))
    return state


class Progress:
    """A pretraining pass's progress, resumable: where it stands (``step``, ``tokens_seen``, ``seconds``), its history
    (the mean of each score over every ``log_every`` steps) and a checkpoint every ``save_every`` steps, so the saved
    state and the history always agree on a resume."""

    def __init__(self, work: Path, parts: tuple, device, total: int, log_every: int, save_every: int):
        self.work, self.parts, self.total = work, parts, total
        self.log_every, self.save_every = log_every, save_every
        state = load_state(work, *parts, device)
        self.step, self.tokens_seen, self.seconds, self.history = (
            (state["step"], state["tokens_seen"], state["seconds"], state["history"]) if state else (0, 0, 0.0, [])
        )
        self.window: list[dict] = []
        self.began = time.time()

    def done(self, step: int, tokens: int, scores: dict, bar) -> None:
        """Step ``step`` (0-based) is trained on ``tokens`` tokens with these ``scores``: log and checkpoint if due."""
        self.tokens_seen += tokens
        self.window.append(scores)
        if (step + 1) % self.log_every == 0 or step + 1 == self.total:
            means = {k: float(np.mean([w[k] for w in self.window])) for k in self.window[0]}
            self.history.append({"step": step + 1, "tokens_seen": self.tokens_seen, **means})
            bar.set_postfix(mlm_acc=f"{means['mlm_accuracy']:.3f}")
            self.window = []
        if (step + 1) % self.save_every == 0 and step + 1 < self.total:
            save_state(
                self.work,
                *self.parts,
                step=step + 1,
                tokens_seen=self.tokens_seen,
                seconds=self.seconds + time.time() - self.began,
                history=self.history,
            )

    def finish(self) -> None:
        """The pass is over: its seconds, this run's and any before a resume."""
        self.seconds += time.time() - self.began
