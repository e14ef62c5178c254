"""The models headlab pretrains, by name (``zh-char``, ``zh-char-mlm``, ``zh-char-gpu``, ``e5-small-char-mlm``), and
where each is cached.

A name stands for a :class:`PretrainConfig` (a BERT pretrained from scratch) or a :class:`ContinuedPretraining` (a
published model's masked-LM pretraining continued): everything that decides the weights, and so the cache key. Loading a
model (:mod:`headlab.models.loading`) and fine-tuning one (:mod:`headlab.models.finetune`) need only this registry,
not the pretraining code (:mod:`headlab.models.pretrain`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from headlab.core.device import precision, resolve_device
from headlab.inputs.assets import cache_dir

OBJECTIVES = ("mlm", "mlm+nsp")
PROCEDURE = 1  # bump when the loop changes what a config trains to, so old models are not reused
REPORT = "pretraining.json"


@dataclass(frozen=True)
class PretrainConfig:
    """Everything that decides the pretrained weights (and so the cache key). Sized for 2 CPU cores by default."""

    objective: str = "mlm+nsp"
    layers: int = 12
    heads: int = 12
    hidden: int = 192
    max_length: int = 128  # also the model's positions: Chinese STS-B pairs run to ~110 characters (99th percentile)
    steps: int = 1500
    batch_size: int = 16
    lr: float = 5e-4
    warmup: float = 0.1
    weight_decay: float = 0.01
    mask_share: float = 0.15
    min_char_count: int = 2
    held_out_share: float = 0.1
    eval_sentences: int = 1000
    seed: int = 0

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        for name in ("layers", "heads", "hidden", "steps", "batch_size", "min_char_count", "eval_sentences"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.max_length < 8:
            raise ValueError(f"max_length must be at least 8, got {self.max_length}")
        if not 0 < self.mask_share < 1:
            raise ValueError(f"mask_share must lie in (0, 1), got {self.mask_share}")


@dataclass(frozen=True)
class ContinuedPretraining:
    """A short masked-LM pass of a published model (an asset) over People's Daily, read by that model's own tokenizer;
    everything that decides the weights. The held-out sentences (``held_out_share``, ``seed``: those page 03 scores
    on) are never read. Sized for minutes on 2 CPU cores (:mod:`headlab.models.adapt`)."""

    base: str = "e5-small-char"
    objective: str = "mlm"  # as zh-char-mlm's: no next-sentence prediction
    # 200 steps of 32 sentences read 0.24M of the 1.5M training tokens: 14 min on a 2-core AMD EPYC (Zen 3, fp32) shared
    # with tests (100 steps alone: 4.7 min); held-out masked characters 11.6% [10.3, 12.9] right, against 4.0% for
    # always the commonest
    steps: int = 200
    batch_size: int = 32
    max_length: int = 64  # a People's Daily sentence runs to ~50 characters (longer ones are cut)
    lr: float = 5e-5
    # the masked-LM head is new (e5 ships none): at the encoder's 5e-5, 100 steps guessed held-out characters no better
    # than always answering the commonest one (4.2% [3.4, 5.0] vs 4.0% [3.3, 4.8]), so the head learns faster
    head_lr: float = 1e-3
    warmup: float = 0.1
    weight_decay: float = 0.01
    mask_share: float = 0.15
    freeze_word_embeddings: bool = True  # as the fine-tune does: 96M of e5-small's 118M weights, one row per piece
    held_out_share: float = 0.1
    eval_sentences: int = 500
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_sentences"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"ContinuedPretraining: {name} must be a positive integer, got {getattr(self, name)}")
        if self.max_length < 8:
            raise ValueError(f"ContinuedPretraining: max_length must be at least 8, got {self.max_length}")
        if not 0 < self.mask_share < 1 or not 0 < self.lr < 1 or not 0 < self.head_lr < 1:
            raise ValueError(
                "ContinuedPretraining: mask_share, lr and head_lr must lie in (0, 1), got "
                f"{self.mask_share}, {self.lr} and {self.head_lr}"
            )
        if self.objective != "mlm":
            raise ValueError(f"ContinuedPretraining: objective must be 'mlm', got {self.objective!r}")


MODELS: dict[str, PretrainConfig | ContinuedPretraining] = {
    "zh-char": PretrainConfig(),  # one thread of an AMD EPYC Zen 5: 0.67 s a step in bf16 (1.08 in fp32), 17 minutes
    "zh-char-mlm": PretrainConfig(objective="mlm"),  # the same without next-sentence prediction
    # for one GPU (benchmarks/gpu_book.sh): wider, longer sequences, ~40 passes over the corpus; 13M parameters
    "zh-char-gpu": PretrainConfig(hidden=288, max_length=128, steps=6000, batch_size=128, lr=3e-4, warmup=0.06),
    # e5-small reading characters (the e5-small-char asset), its masked-LM pretraining continued on People's Daily's
    # characters; the e5-zh-char preset keeps it or e5-small-char, whichever the dev split prefers
    "e5-small-char-mlm": ContinuedPretraining(),
}


def is_pretrained_name(spec: str) -> bool:
    """Whether ``spec`` names a model headlab pretrains (:data:`MODELS`), not an asset or a folder."""
    return spec in MODELS


def model_dir(config: PretrainConfig | ContinuedPretraining, name: str = "char-bert", device=None) -> Path:
    """Where the model for ``config`` lives in the cache. A BERT pretrained from scratch trains on one thread in the
    precision of ``device`` (None: the one a run picks, :func:`headlab.core.device.resolve_device`), as a fine-tune
    does: that precision is part of its key, so a bf16 and an fp32 pretraining are never taken for each other."""
    source = {**asdict(config), "procedure": PROCEDURE}
    if isinstance(config, PretrainConfig):
        source |= {"threads": 1, "precision": pretraining_precision(device)}
    key = hashlib.sha256(json.dumps(source, sort_keys=True).encode())
    return cache_dir() / "pretrained" / f"{name}-{key.hexdigest()[:12]}"


def pretraining_precision(device=None) -> str:
    """``bf16`` or ``fp32``: the precision a BERT pretrained from scratch computes in on ``device`` (None: the one a
    run picks), that of every other product the book computes there (:func:`headlab.core.device.precision`)."""
    return precision(resolve_device("auto") if device is None else device)


def named_model_dir(name: str, device=None) -> Path:
    """Where the pretrained model ``name`` lives in the cache (trained on ``device``: :func:`model_dir`); ValueError
    for an unknown name."""
    if name not in MODELS:
        raise ValueError(f"unknown pretrained model {name!r}; known: {', '.join(sorted(MODELS))}")
    return model_dir(MODELS[name], name, device)
