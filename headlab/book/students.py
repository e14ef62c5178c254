"""The build's ``students`` step: page 10's distilled students trained into the cache before the page runs, so the
page and any rerun only load them (:mod:`headlab.pages.pruning` says what the students are)."""

from __future__ import annotations

from headlab.lab.lab import Lab
from headlab.lab.pages import page
from headlab.models.training import one_thread
from headlab.pages.pruning import StudentSettings, distilled_students, student_drops


def train_students(settings: dict) -> None:
    """The build's ``students`` step: page 10's students of the preset's model trained into the cache (the teacher is
    fine-tuned in the step before), so the page and any rerun only load them. ``settings``: the preset's notebook
    parameters; page 10's defaults fill the rest."""
    names = {**page("10_pruning").defaults(), **settings}
    student_settings = StudentSettings.from_globals(names)
    with one_thread():  # the dev importance as the build's notebooks compute it (one thread each), beside a lane
        lab = Lab.from_globals(names)
        importance = lab.on_split(student_settings.order_split, names.get("EVAL_LIMIT")).importance()
        drops = student_drops(importance, *lab.shape, student_settings.share)
        distilled_students(lab, drops, student_settings, progress=True)
