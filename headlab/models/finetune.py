"""Fine-tune an encoder into a relevance classifier, one class per grade of the data, with a plain, seeded PyTorch loop.

The checkpoint is cached under a key of (model, data, hyperparameters, seed): every notebook asks for the
same key and gets the same model. Training saves its state after every epoch, so an interrupted run
resumes and ends with the same weights as an uninterrupted one; a cache entry counts only once its marker
(written last, holding the weights' sha256) matches the weights.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from headlab.core.device import autocast
from headlab.core.evaluate import encode, length_batches, metrics, model_inputs, predict
from headlab.inputs.assets import cache_dir, is_asset, sha256_of
from headlab.inputs.data import get_split, grade_scale, load_data
from headlab.models.loading import load_classifier, load_tokenizer, resolve_model
from headlab.models.names import REPORT, is_pretrained_name
from headlab.models.training import cached, load_state, one_thread, optimizer_and_schedule, save_state, train_step

TRAINING_PROCEDURE = 3  # bump when the loop changes what a config trains to, so old checkpoints are not reused
# (3: fused AdamW, headlab.models.training.optimizer_and_schedule, and one torch thread)


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything that decides the fine-tuned weights (and so the cache key)."""

    model: str = "minilm"
    data: str = "stsb-en"
    epochs: int = 3
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 128
    train_limit: int | None = None
    warmup: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    # keep the word-embedding matrix as pretrained: e5's is 96M of its 118M weights, one row per piece of 250k
    # in many languages, which a few thousand pairs of one language cannot train (and AdamW would decay every row)
    freeze_word_embeddings: bool = False
    # "bf16": the forward and backward passes under bf16 autocast (weights and optimizer in fp32), where the hardware
    # computes bf16 natively (headlab.core.device.precision); a key apart from the fp32 checkpoint's
    precision: str = "fp32"

    def __post_init__(self):
        for name in ("epochs", "batch_size", "max_length"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.train_limit is not None and self.train_limit < 1:
            raise ValueError(f"train_limit must be a positive integer or None, got {self.train_limit}")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be in (0, 1), got {self.lr}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {self.precision!r}")


def fingerprint(spec: str) -> str:
    """An asset or hub name identifies itself; a local file or folder (or a model headlab pretrained) by its content.

    A model headlab pretrains must be in the cache already (:func:`resolve_model` says how to train it): its
    content is the key, so a key made without it would name a checkpoint that can never exist."""
    path = Path(resolve_model(spec)) if is_pretrained_name(spec) else Path(spec).expanduser()
    if is_asset(spec) or not path.exists():
        return spec
    if path.is_file():
        return sha256_of(path)
    # not the pretraining report: the same weights pretrained again differ only in its timings
    files = [p for p in sorted(path.glob("*")) if p.is_file() and p.name != REPORT]
    return hashlib.sha256(b"".join(sha256_of(p).encode() for p in files)).hexdigest()


def cache_entry(config: FinetuneConfig, prefix: str = "", **extra) -> Path:
    """The cache folder of a model fine-tuned with ``config``: named by model and data, keyed by every setting,
    the model's and data's content, and ``extra`` (what else decides the weights)."""
    settings = asdict(config)
    for option, default in (("freeze_word_embeddings", False), ("precision", "fp32")):
        if settings[option] == default:
            del settings[option]  # the keys of checkpoints trained before the option stay the same
    key_source = {**settings, "model": fingerprint(config.model), "data": fingerprint(config.data), **extra}
    key = hashlib.sha256(json.dumps(key_source, sort_keys=True).encode()).hexdigest()[:12]
    name = Path(config.model).name if not is_asset(config.model) else config.model
    return cache_dir() / "finetuned" / f"{prefix}{name}-{Path(config.data).stem}-{key}"


def checkpoint_dir(config: FinetuneConfig) -> Path:
    """Where the fine-tuned model for ``config`` lives in the cache."""
    return cache_entry(config, procedure=TRAINING_PROCEDURE)


def length_bucketed_batches(encoded, batch_size: int, rng: np.random.Generator, pool: int = 50) -> list[np.ndarray]:
    """Shuffled batches of examples of similar length, so little compute goes to padding.

    Examples are shuffled, cut into pools of ``pool`` batches, sorted by length within a pool and batched;
    then the order of the batches is shuffled. Every example appears exactly once per epoch.
    """
    order = rng.permutation(len(encoded))
    lengths = np.array([len(ids) for ids in encoded.input_ids])
    batches = []
    for start in range(0, len(order), pool * batch_size):
        chunk = order[start : start + pool * batch_size]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def finetune(config: FinetuneConfig = FinetuneConfig(), device="cpu", progress: bool = True) -> Path:
    """Return the folder of the fine-tuned model, training it first if it is not cached."""
    return cached(checkpoint_dir(config), lambda work: _train(config, work, torch.device(device), progress))


def training_pairs(config: FinetuneConfig):
    """``(tokenizer, train, dev, train_enc, dev_enc)``: the pairs a fine-tune learns from and is scored on, as
    frames and as ``[CLS] query [SEP] title [SEP]`` encodings."""
    frame = load_data(config.data, seed=config.seed)
    scale = grade_scale(frame)
    train = get_split(frame, "train", limit=config.train_limit, seed=config.seed)
    dev = get_split(frame, "dev")
    tokenizer = load_tokenizer(config.model)
    return (
        tokenizer,
        train,
        dev,
        encode(tokenizer, train, scale, config.max_length),
        encode(tokenizer, dev, scale, config.max_length),
    )


def _train(config: FinetuneConfig, work: Path, device: torch.device, progress: bool) -> None:
    tokenizer, _, _, train_enc, dev_enc = training_pairs(config)
    pad_id = tokenizer.pad_token_id or 0

    torch.manual_seed(config.seed)
    model = load_classifier(config.model, train_enc.scale).to(device)
    model.get_input_embeddings().requires_grad_(not config.freeze_word_embeddings)  # no gradient: AdamW skips it

    def batch_loss(idx):
        inputs, labels, _ = training_batch(model, train_enc, idx, pad_id, device)
        return model(**inputs, labels=labels).loss

    started = time.time()
    fit_and_save(model, config, work, device, progress, tokenizer, train_enc, dev_enc, batch_loss)
    write_training_report(work, config, train_enc, dev_enc, device, started)


def training_batch(model, train_enc, idx, pad_id: int, device):
    """The examples ``idx`` of ``train_enc`` as one padded batch: the model's inputs, their gold classes and
    ``rows``, the batch's order (its row ``r`` is example ``idx[rows[r]]``)."""
    sub = train_enc.subset(idx)
    ((rows, batch),) = length_batches(sub, len(idx), pad_id)
    return model_inputs(model, batch, device), torch.as_tensor(sub.classes[rows], device=device), rows


def fit_and_save(
    model, config, work: Path, device, progress: bool, tokenizer, train_enc, dev_enc, batch_loss, score_dev: bool = True
) -> None:
    """:func:`fit` with the dev pairs scored after each epoch (unless ``score_dev`` is False: a run whose dev scores
    nobody reads), then the model and its tokenizer saved in ``work``."""
    pad_id = tokenizer.pad_token_id or 0

    def dev_probs():
        return predict(model, dev_enc, batch_size=64, device=device, pad_id=pad_id)

    fit(model, config, work, device, progress, train_enc, batch_loss, dev_probs if score_dev else None, dev_enc)
    model.save_pretrained(work, safe_serialization=True)
    tokenizer.save_pretrained(work)


def fit(
    model, config: FinetuneConfig, work: Path, device, progress: bool, train_enc, batch_loss, dev_probs, dev_pairs
) -> pd.DataFrame:
    """The epochs every classifier shares: seeded length-bucketed batches, AdamW with warm-up and decay, the state
    saved after each epoch (an interrupted run resumes to the same weights), dev scores per epoch; one torch thread
    (:func:`headlab.models.training.one_thread`: the same weights wherever it runs).

    ``batch_loss(example indices)`` gives a batch's loss and ``dev_probs()`` the grade probabilities of ``dev_pairs``
    (None: the dev scores are left empty, NaN); the history is written to ``work/history.csv`` and returned."""
    with one_thread():
        return _fit(model, config, work, device, progress, train_enc, batch_loss, dev_probs, dev_pairs)


def _fit(
    model, config: FinetuneConfig, work: Path, device, progress: bool, train_enc, batch_loss, dev_probs, dev_pairs
) -> pd.DataFrame:
    steps_per_epoch = -(-len(train_enc) // config.batch_size)
    optimizer, scheduler = optimizer_and_schedule(
        model, config.lr, config.weight_decay, config.warmup, steps_per_epoch * config.epochs, fused=True
    )
    history, start_epoch = [], 0
    state = load_state(work, model, optimizer, scheduler, device)
    if state is not None:  # resume after the last finished epoch
        start_epoch = int(state["epoch"]) + 1
        history = [dict(zip(state["history_columns"], row)) for row in state["history"].tolist()]

    for epoch in range(start_epoch, config.epochs):
        model.train()
        torch.manual_seed(config.seed * 1000 + epoch)  # dropout stream, reproducible after a resume
        batches = length_bucketed_batches(train_enc, config.batch_size, np.random.default_rng([config.seed, epoch]))
        bar = tqdm(range(steps_per_epoch), desc=f"fine-tune epoch {epoch + 1}/{config.epochs}", disable=not progress)
        total_loss = 0.0
        for step in bar:
            with autocast(device, config.precision):
                loss = batch_loss(batches[step])
            train_step(model, loss, optimizer, scheduler)
            total_loss += loss.item()
            bar.set_postfix(loss=f"{total_loss / (step + 1):.3f}")
        model.eval()
        dev_scores = {"accuracy": float("nan"), "macro_f1": float("nan")}
        if dev_probs is not None:
            with autocast(device, config.precision):
                dev_scores = metrics(dev_pairs.grades, dev_pairs.scale.predicted(dev_probs()), dev_pairs.scale)
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": total_loss / steps_per_epoch,
                "dev_accuracy": dev_scores["accuracy"],
                "dev_macro_f1": dev_scores["macro_f1"],
            }
        )
        table = pd.DataFrame(history)
        save_state(
            work,
            model,
            optimizer,
            scheduler,
            epoch=epoch,
            history=torch.tensor(table.to_numpy(dtype="float64")),
            history_columns=list(table.columns),
        )

    table = pd.DataFrame(history)
    table["epoch"] = table["epoch"].astype(int)
    table.to_csv(work / "history.csv", index=False, float_format="%.6f")
    return table


def write_training_report(work: Path, config: FinetuneConfig, train_enc, dev_enc, device, started: float) -> None:
    """``training.json``: the config, example counts, truncation, device, torch and this run's seconds."""
    (work / "training.json").write_text(
        json.dumps(
            {
                "config": asdict(config),
                "train_examples": len(train_enc),
                "dev_examples": len(dev_enc),
                "train_truncated": train_enc.n_truncated,
                "device": str(device),
                "torch": torch.__version__,
                "seconds_this_run": round(time.time() - started, 1),
            },
            indent=2,
        )
    )


def training_history(folder: Path) -> pd.DataFrame:
    """Per-epoch loss and dev scores of a fine-tuned checkpoint."""
    return pd.read_csv(Path(folder) / "history.csv")
