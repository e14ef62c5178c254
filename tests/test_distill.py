"""headlab.models.distill: a student is the pruned teacher trained towards the teacher's softened grades; the same
config gives the same weights, its key follows every setting, and the loss is the one Hinton et al. wrote."""

import shutil

import numpy as np
import pytest
import torch

from headlab.core.evaluate import encode, predict
from headlab.core.grades import STUDY_SCALE
from headlab.core.pruning import kept_heads, prune_heads
from headlab.inputs.data import get_split, load_data
from headlab.models.distill import DistillConfig, distill, distillation_loss, student_dir
from headlab.models.finetune import FinetuneConfig, finetune
from headlab.models.loading import load_classifier, load_tokenizer


def test_the_loss_is_the_softened_kl_times_t_squared_plus_the_gold_cross_entropy():
    torch.manual_seed(0)
    student, teacher, labels = torch.randn(6, 5), torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 4, 0])
    t = 3.0
    p = torch.softmax(teacher / t, -1)
    kl = (p * (torch.log(p) - torch.log_softmax(student / t, -1))).sum(-1).mean()
    ce = torch.nn.functional.cross_entropy(student, labels)
    got = distillation_loss(student, teacher, labels, t, 0.25)
    torch.testing.assert_close(got, 0.25 * t**2 * kl + 0.75 * ce)
    assert distillation_loss(teacher, teacher, labels, t, 1.0).abs() < 1e-6  # a student that is the teacher: nothing
    with pytest.raises(ValueError, match="alpha"):
        DistillConfig(FinetuneConfig(), (), alpha=1.5)
    with pytest.raises(ValueError, match="temperature"):
        DistillConfig(FinetuneConfig(), (), temperature=0)


def test_a_student_is_the_pruned_teacher_trained_again_the_same_way_twice(
    fresh_cache, tiny_model_folder, pairs_file, monkeypatch
):
    """... and a second student of the same teacher reuses the teacher's logits, computed once: the same weights."""
    import headlab.models.distill as distilling

    monkeypatch.setattr(distilling, "TEACHER_LOGITS", {})
    passes, real = [], distilling.predict
    monkeypatch.setattr(distilling, "predict", lambda *a, **k: passes.append(1) or real(*a, **k))
    teacher = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=1, train_limit=64, seed=2)
    teacher_folder = finetune(teacher, progress=False)
    config = DistillConfig(teacher, drop=[(1, 3), (0, 1), (1, 0)], temperature=2.0, epochs=1, lr=1e-3, seed=5)
    assert config.drop == ((0, 1), (1, 0), (1, 3))  # sorted: the same heads name the same student
    folder = distill(config, progress=False)
    student = load_classifier(str(folder), STUDY_SCALE)
    assert kept_heads(student) == [[0, 2, 3], [1, 2]]
    frame = load_data(str(pairs_file))
    test = encode(load_tokenizer(str(folder)), get_split(frame, "test"), STUDY_SCALE)
    pruned_probs = predict(
        prune_heads(load_classifier(str(teacher_folder), STUDY_SCALE), config.drop), test
    )  # its start
    trained_probs = predict(student, test)
    assert not np.allclose(trained_probs, pruned_probs, atol=1e-4)  # it was trained
    weights = (folder / "model.safetensors").read_bytes()
    shutil.rmtree(folder)
    assert (distill(config, progress=False) / "model.safetensors").read_bytes() == weights  # with the kept logits
    assert len(passes) == 1
    distilling.TEACHER_LOGITS.clear()
    shutil.rmtree(folder)
    assert (distill(config, progress=False) / "model.safetensors").read_bytes() == weights  # computed again
    assert len(passes) == 2
    others = [
        DistillConfig(teacher, drop=[(0, 1)], epochs=1, lr=1e-3, seed=5),
        DistillConfig(teacher, drop=config.drop, temperature=4.0, epochs=1, lr=1e-3, seed=5),
        DistillConfig(teacher, drop=config.drop, temperature=2.0, epochs=1, lr=1e-3, seed=6),
    ]
    assert len({student_dir(c) for c in [config, *others]}) == 4


def test_a_student_needs_its_teacher_in_the_cache(fresh_cache, tiny_model_folder, pairs_file):
    teacher = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=1, train_limit=32)
    with pytest.raises(FileNotFoundError, match="fine-tune it before its students"):
        distill(DistillConfig(teacher, drop=[(0, 0)]), progress=False)
