"""The build's steps: a model's training (pretraining, the cross-encoder, the two towers, the students) and each
page's notebook, and what each waits for (the artifact registry and the models it loads)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from headlab.book.lanes import THREAD_VARIABLES
from headlab.book.notebooks import BookError, execute_notebook, reading_tags
from headlab.book.students import train_students
from headlab.core.worklog import WORK_LOG
from headlab.lab.pages import (
    CROSS_ENCODER,
    PRETRAINING,
    STUDENTS,
    TRAINING_WAITS,
    page_ids,
    page_needs,
    training_needs,
)
from headlab.lab.params import REPO, Params
from headlab.models.pretrain import ensure_named
from headlab.models.training import NO_TRAINING
from headlab.models.two_tower import finetune_two_tower
from headlab.report.render import static_tables, static_widgets


def fine_tune_step(label: str, settings: dict, which: str, log: Path) -> float:
    """Train, or find in the cache, one model the notebooks load, in a lane's worker process with its own work
    log: ``which`` is :data:`~headlab.lab.pages.PRETRAINING`, the model headlab pretrains that the others start from
    (:func:`headlab.models.pretrain.ensure_named`), :data:`CROSS_ENCODER`, the model every page reads,
    :data:`~headlab.lab.pages.TWO_TOWER`, page 08's two towers, or :data:`STUDENTS`, page 10's students distilled
    from the cross-encoder (:func:`headlab.book.students.train_students`). Each trains on one torch thread wherever
    it runs (:func:`headlab.models.training.one_thread`; this worker's torch is already started, so thread variables
    would not reach it), so two share a 2-core machine and give the weights a notebook run alone gives. The seconds."""
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
