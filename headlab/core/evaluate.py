"""Tokenize once, predict in length-sorted batches, and score grades.

Grade ``first + i`` of the data's :class:`~headlab.core.grades.GradeScale` is class ``i`` inside the model; every
table headlab writes uses grades.
"""

from __future__ import annotations

import hashlib
import warnings
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from headlab.core.device import autocast
from headlab.core.grades import GradeScale
from headlab.core.masking import mask_heads


@dataclass
class Encoded:
    """A split tokenized once: token ids per example (unpadded), grades on their scale, and how many were
    truncated."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    grades: np.ndarray
    n_truncated: int
    scale: GradeScale

    @property
    def classes(self) -> np.ndarray:
        """The model's class index of each pair's grade (what a loss is computed on)."""
        return self.scale.classes(self.grades)

    def __len__(self) -> int:
        return len(self.input_ids)

    def subset(self, idx) -> Encoded:
        """The examples at positions ``idx``, in that order."""
        ids, types = [self.input_ids[i] for i in idx], [self.token_type_ids[i] for i in idx]
        return Encoded(ids, types, self.grades[idx], 0, self.scale)


def encode(tokenizer, frame: pd.DataFrame, scale: GradeScale, max_length: int = 128) -> Encoded:
    """Tokenize (query, title) pairs as ``[CLS] query [SEP] title [SEP]``; truncation is counted, never silent.

    ``scale`` is the data file's (:attr:`headlab.lab.params.Params.scale`), not read from ``frame``: one split
    may lack a grade. ``max_length`` is capped at the tokenizer's ``model_max_length`` (the model's positions)."""
    scale.check(frame["label"], "labels")
    max_length = min(max_length, getattr(tokenizer, "model_max_length", max_length) or max_length)
    queries, titles = frame["query"].tolist(), frame["title"].tolist()
    full = tokenizer(queries, titles, truncation=False)["input_ids"]
    n_truncated = sum(len(ids) > max_length for ids in full)
    if n_truncated:
        warnings.warn(
            f"{n_truncated} of {len(full)} pairs are longer than max_length={max_length} tokens and were "
            "truncated (longest first)",
            stacklevel=2,
        )
    enc = tokenizer(queries, titles, truncation="longest_first", max_length=max_length)
    token_types = enc.get("token_type_ids") or [[0] * len(ids) for ids in enc["input_ids"]]
    return Encoded(enc["input_ids"], token_types, frame["label"].to_numpy(dtype=np.int64), n_truncated, scale)


def padded(encoded: Encoded, idx, pad_id: int = 0) -> dict:
    """The examples at ``idx`` as padded ``input_ids``, ``token_type_ids`` and ``attention_mask`` tensors."""
    lengths = [len(encoded.input_ids[i]) for i in idx]
    width = max(lengths)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(idx), width), dtype=torch.long)
    attention = torch.zeros((len(idx), width), dtype=torch.long)
    for row, (i, n) in enumerate(zip(idx, lengths)):
        ids[row, :n] = torch.tensor(encoded.input_ids[i])
        types[row, :n] = torch.tensor(encoded.token_type_ids[i])
        attention[row, :n] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": attention}


def length_batches(encoded: Encoded, batch_size: int, pad_id: int = 0):
    """Yield (example indices, padded tensors) in order of length, so padding stays small."""
    lengths = np.array([len(ids) for ids in encoded.input_ids])
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield idx, padded(encoded, idx, pad_id)


def encode_sentences(tokenizer, texts, grades, scale: GradeScale, max_length: int = 128) -> Encoded:
    """Tokenize single sentences (``[CLS] text [SEP]``), for an encoder that reads query and title apart."""
    max_length = min(max_length, getattr(tokenizer, "model_max_length", max_length) or max_length)
    scale.check(grades, "grades")
    texts = list(texts)
    n_truncated = sum(len(ids) > max_length for ids in tokenizer(texts, truncation=False)["input_ids"])
    enc = tokenizer(texts, truncation=True, max_length=max_length)
    return Encoded(
        enc["input_ids"],
        [[0] * len(ids) for ids in enc["input_ids"]],
        np.asarray(grades, dtype=np.int64),
        n_truncated,
        scale,
    )


def sentence_ids(input_ids: torch.Tensor, sep_id: int) -> torch.Tensor:
    """0 for ``[CLS]``, the query and its ``[SEP]``; 1 for every later token (the title and its separators).

    Read from the first separator, not from token types: some tokenizers (e5's) give every token type 0."""
    is_sep = (input_ids == sep_id).long()
    return ((is_sep.cumsum(dim=1) - is_sep) > 0).long()


def within_sentence_mask(batch: dict, sep_id: int, dtype=torch.float32) -> torch.Tensor:
    """An additive (batch x 1 x query x key) attention mask that keeps every token inside its own sentence.

    ``[CLS]`` (position 0) reads both sentences and nothing else reads it, so no path carries the title to a
    query token or the query to a title token; padding is never read. A boolean 4D mask is not enough: eager
    attention adds it as 0/1 instead of blocking (measured in transformers 5.24), so blocked keys get the
    dtype's most negative value."""
    segment = sentence_ids(batch["input_ids"], sep_id)
    keys = batch["attention_mask"].bool()[:, None, :]
    allowed = (segment[:, :, None] == segment[:, None, :]) & keys
    allowed[:, :, 0] = False
    allowed[:, 0, :] = keys[:, 0, :]
    blocked = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return blocked[:, None]


def model_inputs(model, batch: dict, device) -> dict:
    """Move a batch to the device, dropping token types for encoders that have none (MPNet)."""
    if getattr(model.config, "type_vocab_size", 0) < 2:
        batch = {k: v for k, v in batch.items() if k != "token_type_ids"}
    return {k: v.to(device) for k, v in batch.items()}


_DIGESTS: dict[tuple, str] = {}  # weights_digest's, by the tensors' storage and in-place version counters


def weights_digest(model) -> str:
    """A hash of the model's weights (names and bytes): a key for results computed from them. Hashed once per state
    of the tensors (an in-place change bumps a tensor's version, so it is hashed again)."""
    state = sorted(model.state_dict().items())
    seen = (id(model), tuple((name, t.data_ptr(), t._version) for name, t in state))
    if seen not in _DIGESTS:
        digest = hashlib.sha256()
        for name, tensor in state:
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        _DIGESTS[seen] = digest.hexdigest()
    return _DIGESTS[seen]


@torch.inference_mode()
def predict(
    model,
    encoded: Encoded,
    mask=None,
    batch_size: int = 64,
    device="cpu",
    pad_id: int = 0,
    block_across: int | None = None,
    precision: str = "fp32",
    logits: bool = False,
) -> np.ndarray:
    """Grade probabilities (examples, grades) of the model, with the heads of ``mask`` removed if given; ``logits``:
    the logits instead (what a student is distilled from, :mod:`headlab.models.distill`).

    ``block_across=sep_id`` keeps attention inside each sentence (:func:`within_sentence_mask`); ``precision="bf16"``
    computes under bf16 autocast, as the sweeps do where :func:`headlab.core.device.precision` chooses it, so the
    probabilities compare with a sweep's unmasked row."""
    probs = np.zeros((len(encoded), encoded.scale.count), dtype=np.float32)
    model.eval()
    with mask_heads(model, mask) if mask is not None else nullcontext(), autocast(device, precision):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            if block_across is not None:
                batch["attention_mask"] = within_sentence_mask(batch, block_across)
            out = model(**model_inputs(model, batch, device)).logits.float()
            probs[idx] = (out if logits else torch.softmax(out, dim=-1)).cpu().numpy()
    return probs


def metrics(grades: np.ndarray, predicted: np.ndarray, scale: GradeScale) -> dict:
    """Accuracy and macro-F1 over the scale's grades that the pairs have or the model predicts (scikit-learn's
    labels: a grade of the scale that neither uses would add an F1 of 0 that says nothing about the model)."""
    scale.check(grades, "gold grades")
    scale.check(predicted, "predicted grades")
    f1s = []
    for g in sorted(set(np.asarray(grades).tolist()) | set(np.asarray(predicted).tolist())):
        tp = np.sum((predicted == g) & (grades == g))
        fp = np.sum((predicted == g) & (grades != g))
        fn = np.sum((predicted != g) & (grades == g))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return {"n": int(len(grades)), "accuracy": float(np.mean(grades == predicted)), "macro_f1": float(np.mean(f1s))}


def confusion(grades: np.ndarray, predicted: np.ndarray, scale: GradeScale) -> pd.DataFrame:
    """Tidy confusion matrix: true grade, predicted grade, count, share of the true grade's row."""
    rows = []
    for t in scale.grades:
        n_true = int(np.sum(grades == t))
        for p in scale.grades:
            count = int(np.sum((grades == t) & (predicted == p)))
            rows.append({"true": t, "predicted": p, "count": count, "share": count / n_true if n_true else 0.0})
    return pd.DataFrame(rows)
