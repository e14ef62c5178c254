"""Fine-tune an encoder into a 5-grade relevance classifier, with a plain, seeded PyTorch loop.

The checkpoint is cached under a key of (model, data, hyperparameters, seed): every notebook asks for the
same key and gets the same model. Training saves its state after every epoch, so an interrupted run
resumes and ends with the same weights as an uninterrupted one; a cache entry counts only once its marker
(written last, holding the weights' sha256) matches the weights.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from headlab.assets import cache_dir, is_asset, sha256_of
from headlab.data import get_split, load_data
from headlab.evaluate import encode, length_batches, metrics, model_inputs, predict, predicted_grades
from headlab.model import load_classifier, load_tokenizer

MARKER = ".headlab-complete"
TRAINING_PROCEDURE = 2  # bump when the loop changes what a config trains to, so old checkpoints are not reused


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

    def __post_init__(self):
        for name in ("epochs", "batch_size", "max_length"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.train_limit is not None and self.train_limit < 1:
            raise ValueError(f"train_limit must be a positive integer or None, got {self.train_limit}")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be in (0, 1), got {self.lr}")


def _fingerprint(spec: str) -> str:
    """An asset or hub name identifies itself; a local file or folder (or a model headlab pretrained) by its content."""
    from headlab.pretrain import REPORT, is_pretrained_name, named_model_dir

    path = named_model_dir(spec) if is_pretrained_name(spec) else Path(spec).expanduser()
    if is_asset(spec) or not path.exists():
        return spec
    if path.is_file():
        return sha256_of(path)
    # not the pretraining report: the same weights pretrained again differ only in its timings
    files = [p for p in sorted(path.glob("*")) if p.is_file() and p.name != REPORT]
    return hashlib.sha256(b"".join(sha256_of(p).encode() for p in files)).hexdigest()


def checkpoint_dir(config: FinetuneConfig) -> Path:
    """Where the fine-tuned model for ``config`` lives in the cache."""
    key_source = {**asdict(config), "model": _fingerprint(config.model), "data": _fingerprint(config.data),
                  "procedure": TRAINING_PROCEDURE}
    key = hashlib.sha256(json.dumps(key_source, sort_keys=True).encode()).hexdigest()[:12]
    name = Path(config.model).name if not is_asset(config.model) else config.model
    return cache_dir() / "finetuned" / f"{name}-{Path(config.data).stem}-{key}"


def is_complete(folder: Path) -> bool:
    """True when the marker exists and matches the weights on disk (a partial or corrupt entry is not)."""
    marker, weights = folder / MARKER, folder / "model.safetensors"
    return marker.is_file() and weights.is_file() and marker.read_text().strip() == sha256_of(weights)


def linear_schedule(optimizer, warmup_steps: int, total_steps: int):
    """Linear warm-up to the full learning rate, then linear decay to zero at ``total_steps``."""
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


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


def finetune(config: FinetuneConfig = FinetuneConfig(), device="cpu", progress: bool = True) -> Path:
    """Return the folder of the fine-tuned model, training it first if it is not cached."""
    out = checkpoint_dir(config)
    if is_complete(out):
        return out
    with exclusive_lock(out.with_name(out.name + ".lock")):
        return out if is_complete(out) else _train(config, out, torch.device(device), progress)


def _train(config: FinetuneConfig, out: Path, device: torch.device, progress: bool) -> Path:
    if out.exists():
        shutil.rmtree(out)  # partial or corrupt: rebuild
    work = out.with_name(out.name + ".partial")
    work.mkdir(parents=True, exist_ok=True)

    frame = load_data(config.data, seed=config.seed)
    train = get_split(frame, "train", limit=config.train_limit, seed=config.seed)
    dev = get_split(frame, "dev")
    tokenizer = load_tokenizer(config.model)
    train_enc, dev_enc = encode(tokenizer, train, config.max_length), encode(tokenizer, dev, config.max_length)

    torch.manual_seed(config.seed)
    model = load_classifier(config.model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = -(-len(train_enc) // config.batch_size)
    total = steps_per_epoch * config.epochs
    scheduler = linear_schedule(optimizer, max(1, int(config.warmup * total)), total)
    history, start_epoch = [], 0
    state_file = work / "state.pt"
    if state_file.exists():  # resume after the last finished epoch
        state = torch.load(state_file, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch = int(state["epoch"]) + 1
        history = [dict(zip(state["history_columns"], row)) for row in state["history"].tolist()]

    started = time.time()
    for epoch in range(start_epoch, config.epochs):
        model.train()
        torch.manual_seed(config.seed * 1000 + epoch)  # dropout stream, reproducible after a resume
        batches = length_bucketed_batches(train_enc, config.batch_size, np.random.default_rng([config.seed, epoch]))
        bar = tqdm(range(steps_per_epoch), desc=f"fine-tune epoch {epoch + 1}/{config.epochs}", disable=not progress)
        total_loss = 0.0
        for step in bar:
            idx = batches[step]
            sub = train_enc.subset(idx)
            (rows, batch), = length_batches(sub, len(idx), tokenizer.pad_token_id or 0)
            labels = torch.as_tensor(sub.grades[rows] - 1, device=device)
            loss = model(**model_inputs(model, batch, device), labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            total_loss += loss.item()
            bar.set_postfix(loss=f"{total_loss / (step + 1):.3f}")
        dev_probs = predict(model, dev_enc, batch_size=64, device=device, pad_id=tokenizer.pad_token_id or 0)
        dev_scores = metrics(dev_enc.grades, predicted_grades(dev_probs))
        history.append({"epoch": epoch + 1, "train_loss": total_loss / steps_per_epoch,
                        "dev_accuracy": dev_scores["accuracy"], "dev_macro_f1": dev_scores["macro_f1"]})
        # one file, replaced atomically: weights, optimizer, schedule and history always agree on a resume
        table = pd.DataFrame(history)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch,
                    "history": torch.tensor(table.to_numpy(dtype="float64")), "history_columns": list(table.columns)},
                   work / "state.tmp")
        os.replace(work / "state.tmp", state_file)

    table = pd.DataFrame(history)
    table["epoch"] = table["epoch"].astype(int)
    table.to_csv(work / "history.csv", index=False, float_format="%.6f")
    model.save_pretrained(work, safe_serialization=True)
    tokenizer.save_pretrained(work)
    (work / "training.json").write_text(json.dumps({
        "config": asdict(config), "train_examples": len(train_enc), "dev_examples": len(dev_enc),
        "train_truncated": train_enc.n_truncated, "device": str(device), "torch": torch.__version__,
        "seconds_this_run": round(time.time() - started, 1)}, indent=2))
    state_file.unlink()
    (work / MARKER).write_text(sha256_of(work / "model.safetensors"))
    os.replace(work, out)
    return out


def training_history(folder: Path) -> pd.DataFrame:
    """Per-epoch loss and dev scores of a fine-tuned checkpoint."""
    return pd.read_csv(Path(folder) / "history.csv")
