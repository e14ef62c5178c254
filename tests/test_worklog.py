"""headlab.core.worklog: sweeps and trainings note what they compute where a build asks, and nothing when all of it
was cached; where training is not allowed (a book build's notebooks), a model missing from the cache is an error."""

import pytest
from conftest import random_encoded, tiny_bert

from headlab.core.sweep import run_sweep, single_head_specs
from headlab.core.worklog import WORK_LOG, logging_work, note_work, work_noted
from headlab.models.training import MARKER, NO_TRAINING, TrainingError, cached


def test_nothing_is_noted_without_a_log_and_the_log_is_restored(tmp_path, monkeypatch):
    monkeypatch.delenv(WORK_LOG, raising=False)
    note_work("lost")  # no log asked for: nothing written anywhere
    with logging_work(tmp_path / "a.log"):
        note_work("first\nline")
        with logging_work(tmp_path / "b.log"):
            note_work("inner")
        note_work("second")
    assert WORK_LOG not in __import__("os").environ
    assert work_noted(tmp_path / "a.log") == ["first line", "second"]
    assert work_noted(tmp_path / "b.log") == ["inner"] and work_noted(tmp_path / "none.log") == []


def test_a_sweep_notes_the_masks_it_evaluates_and_nothing_once_they_are_saved(tmp_path):
    model, encoded = tiny_bert(), random_encoded(n=12)
    specs = single_head_specs(3, 4)[:3]
    with logging_work(tmp_path / "first.log"):
        run_sweep(model, encoded, specs, tmp_path / "sweep-abc", batch_size=4, progress=False)
    assert work_noted(tmp_path / "first.log") == ["sweep sweep-abc: 4 masks"]  # the three and the unmasked model
    with logging_work(tmp_path / "again.log"):
        run_sweep(model, encoded, specs, tmp_path / "sweep-abc", batch_size=4, progress=False)
    assert work_noted(tmp_path / "again.log") == []


def _train(work):
    (work / "model.safetensors").write_bytes(b"weights")


def test_a_training_is_noted_once_and_refused_where_training_is_not_allowed(tmp_path, monkeypatch):
    out = tmp_path / "finetuned" / "tiny-abc"
    monkeypatch.setenv(NO_TRAINING, "1")
    with pytest.raises(TrainingError, match=f"tiny-abc is not in the cache.*{NO_TRAINING}"):
        cached(out, _train)
    assert not out.exists() and not out.with_name("tiny-abc.partial").exists()  # nothing trained
    monkeypatch.delenv(NO_TRAINING)
    with logging_work(tmp_path / "train.log"):
        assert cached(out, _train) == out and (out / MARKER).exists()
    assert work_noted(tmp_path / "train.log") == ["trained tiny-abc"]
    monkeypatch.setenv(NO_TRAINING, "1")  # a model in the cache is loaded wherever training is not allowed
    with logging_work(tmp_path / "cached.log"):
        assert cached(out, _train) == out
    assert work_noted(tmp_path / "cached.log") == []
