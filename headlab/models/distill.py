"""Distil a smaller student from the fine-tuned teacher: the study's advice ("when distilling, keep more of the low
layers' heads") tested as advice, not by pruning alone.

A student is the teacher with some heads removed for real (:func:`headlab.core.pruning.prune_heads`: it starts as
the pruned teacher, so a budget of zero is the pruning curve's point), trained on the teacher's training pairs to
match the teacher's grade distribution softened by a temperature T (Hinton et al. 2015: the KL divergence times T²)
and the gold grades, ``alpha`` of the first and the rest of the second. The teacher's logits are computed once per
process (:data:`TEACHER_LOGITS`: every student of a build step shares them); the
loop is the fine-tune's own (:func:`headlab.models.finetune.fit`: seeded, one thread, resumable), and the student is
cached under a key of the teacher's, the heads removed and every setting, so every notebook that asks for it gets the
same weights.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from headlab.core.evaluate import predict
from headlab.core.pruning import prune_heads
from headlab.models.finetune import (
    FinetuneConfig,
    cache_entry,
    checkpoint_dir,
    fit_and_save,
    training_batch,
    training_pairs,
)
from headlab.models.loading import load_classifier
from headlab.models.training import cached

DISTILL_PROCEDURE = 1  # bump when the loop changes what a config trains to
# the teacher's logits on its training pairs, kept for this process by teacher (folder and weights' time), pairs,
# precision and device: a preset's students (10, in one build step) share them, the same numbers each would compute
TEACHER_LOGITS: dict[tuple, torch.Tensor] = {}


@dataclass(frozen=True)
class DistillConfig:
    """Everything that decides a student's weights (and so its cache key): the teacher's fine-tuning, the heads the
    student lacks, the temperature, the weight of the teacher's grades against the gold ones, and its own budget."""

    teacher: FinetuneConfig
    drop: tuple[tuple[int, int], ...]
    temperature: float = 2.0
    alpha: float = 0.5
    epochs: int = 1
    lr: float = 5e-5
    train_limit: int | None = None
    seed: int = 0

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {self.alpha}")
        if int(self.epochs) < 1:
            raise ValueError(f"epochs must be a positive integer, got {self.epochs}")
        object.__setattr__(self, "drop", tuple(sorted((int(l), int(h)) for l, h in self.drop)))

    def training(self) -> FinetuneConfig:
        """The teacher's settings with the student's budget and seed (its batches and dropout): what
        :func:`headlab.models.finetune.fit` runs. The pairs stay the teacher's (its seed splits data that has no
        split column)."""
        return replace(self.teacher, epochs=self.epochs, lr=self.lr, train_limit=self.train_limit, seed=self.seed)


def student_dir(config: DistillConfig) -> Path:
    """Where the student of ``config`` lives in the cache (beside the teacher's fine-tunes)."""
    settings = {k: v for k, v in asdict(config).items() if k != "teacher"}
    return cache_entry(config.teacher, prefix="student-", procedure=DISTILL_PROCEDURE, student=settings)


def distillation_loss(student_logits, teacher_logits, labels, temperature: float, alpha: float) -> torch.Tensor:
    """``alpha`` x T² x KL(teacher || student), both softened by T, plus (1 - ``alpha``) x the cross-entropy on the
    gold grades (``labels``: 0-based); T² keeps the soft term's gradients the size of the hard term's."""
    soft = F.kl_div(
        F.log_softmax(student_logits / temperature, dim=-1),
        F.log_softmax(teacher_logits / temperature, dim=-1),
        log_target=True,
        reduction="batchmean",
    )
    return alpha * temperature**2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distill(config: DistillConfig, device="cpu", progress: bool = True, score_dev: bool = True) -> Path:
    """The student's folder, trained first if it is not cached (the teacher must be: it is fine-tuned first); with
    ``score_dev`` False its history leaves the dev scores empty (a pass over the dev pairs saved where none reads
    them; the weights are the same)."""
    return cached(student_dir(config), lambda work: _train(config, work, torch.device(device), progress, score_dev))


def _train(config: DistillConfig, work: Path, device: torch.device, progress: bool, score_dev: bool) -> None:
    training = config.training()
    tokenizer, _, _, train_enc, dev_enc = training_pairs(replace(config.teacher, train_limit=config.train_limit))
    pad_id = tokenizer.pad_token_id or 0
    teacher_folder = checkpoint_dir(config.teacher)
    if not (teacher_folder / "model.safetensors").exists():
        raise FileNotFoundError(f"the teacher {teacher_folder} is not in the cache: fine-tune it before its students")
    teacher = load_classifier(str(teacher_folder), train_enc.scale).to(device)
    key = (
        str(teacher_folder),
        (teacher_folder / "model.safetensors").stat().st_mtime_ns,
        config.train_limit,
        training.precision,
        str(device),
    )
    if key not in TEACHER_LOGITS:
        TEACHER_LOGITS[key] = torch.as_tensor(
            predict(
                teacher,
                train_enc,
                batch_size=64,
                device=device,
                pad_id=pad_id,
                precision=training.precision,
                logits=True,
            )
        )
    teacher_logits = TEACHER_LOGITS[key]
    torch.manual_seed(config.seed)
    student = prune_heads(teacher, config.drop).to(device)
    del teacher
    student.get_input_embeddings().requires_grad_(not training.freeze_word_embeddings)

    def batch_loss(idx):
        inputs, labels, rows = training_batch(student, train_enc, idx, pad_id, device)
        logits = student(**inputs).logits.float()
        return distillation_loss(logits, teacher_logits[idx[rows]].to(device), labels, config.temperature, config.alpha)

    started = time.time()
    fit_and_save(student, training, work, device, progress, tokenizer, train_enc, dev_enc, batch_loss, score_dev)
    (work / "training.json").write_text(
        json.dumps(
            {
                "distill": {**asdict(config), "teacher": asdict(config.teacher)},
                "teacher": teacher_folder.name,
                "train_examples": len(train_enc),
                "dev_examples": len(dev_enc),
                "heads_removed": len(config.drop),
                "parameters": int(sum(p.numel() for p in student.parameters())),
                "device": str(device),
                "torch": torch.__version__,
                "seconds_this_run": round(time.time() - started, 1),
            },
            indent=2,
        )
    )
