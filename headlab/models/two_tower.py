"""A two-tower (siamese) grader: query and title encoded apart by one shared encoder, then compared.

The study blames the two-tower design for a poor relevance model: encoding the sentences apart makes the
term-matching heads impossible. This is that design with everything else kept: the same pretrained encoder,
data, epochs, learning rate, seed, batches and training loop as the cross-encoder of :mod:`headlab.models.finetune`.
Each sentence is mean-pooled over its tokens (the pooling all-MiniLM-L6-v2 and e5 were trained with; ``[CLS]``
and ``[SEP]`` included, padding not), and the pair features ``[u, v, |u - v|, u * v]`` go into a per-grade linear
head. Checkpoints are cached like the cross-encoder's, under a key that also names the architecture.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from headlab.core.evaluate import Encoded, encode_sentences, model_inputs, padded
from headlab.core.grades import GradeScale
from headlab.models.finetune import (
    TRAINING_PROCEDURE,
    FinetuneConfig,
    cache_entry,
    fit,
    training_pairs,
    write_training_report,
)
from headlab.models.loading import load_encoder
from headlab.models.training import cached

HEAD_FILE = "two_tower_head.safetensors"


class TwoTower(torch.nn.Module):
    """One encoder for both sentences; a linear grader on ``[u, v, |u - v|, u * v]`` of their mean-pooled vectors."""

    def __init__(self, encoder: torch.nn.Module, grades: int):
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(4 * encoder.config.hidden_size, grades)  # one logit per grade of the scale

    def embed(self, batch: dict) -> torch.Tensor:
        """Mean of the last hidden states over each sentence's tokens (padding excluded)."""
        hidden = self.encoder(**batch).last_hidden_state
        weights = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1)

    def forward(self, query: dict, title: dict) -> torch.Tensor:
        """Grade logits of each (query, title) pair; neither sentence's tokens ever see the other's."""
        u, v = self.embed(query), self.embed(title)
        return self.head(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))


def two_tower_dir(config: FinetuneConfig) -> Path:
    """Where the two-tower model for ``config`` lives in the cache (a key apart from the cross-encoder's)."""
    return cache_entry(
        config, prefix="two-tower-", architecture="two-tower mean-pool [u, v, |u-v|, u*v]", procedure=TRAINING_PROCEDURE
    )


def finetune_two_tower(config: FinetuneConfig = FinetuneConfig(), device="cpu", progress: bool = True) -> Path:
    """Return the folder of the fine-tuned two-tower model, training it first if it is not cached."""
    return cached(two_tower_dir(config), lambda work: _train(config, work, torch.device(device), progress))


def pair_encodings(tokenizer, frame, scale: GradeScale, max_length: int = 128) -> tuple[Encoded, Encoded]:
    """Queries and titles of ``frame`` tokenized apart, each with the pairs' grades."""
    grades = frame["label"].to_numpy()
    return (
        encode_sentences(tokenizer, frame["query"], grades, scale, max_length),
        encode_sentences(tokenizer, frame["title"], grades, scale, max_length),
    )


def _train(config: FinetuneConfig, work: Path, device: torch.device, progress: bool) -> None:
    # the cross-encoder's pair encoding orders the batches, so both models see the same examples in each step
    tokenizer, train, dev, train_pairs, dev_pairs = training_pairs(config)
    pad_id = tokenizer.pad_token_id or 0
    queries, titles = pair_encodings(tokenizer, train, train_pairs.scale, config.max_length)
    dev_queries, dev_titles = pair_encodings(tokenizer, dev, dev_pairs.scale, config.max_length)

    torch.manual_seed(config.seed)
    # eager attention: under bf16 autocast on a CPU, sdpa with padding masks ran 0.83 s a step where eager ran 0.59
    model = TwoTower(load_encoder(config.model, attn="eager"), train_pairs.scale.count).to(device)
    model.encoder.get_input_embeddings().requires_grad_(not config.freeze_word_embeddings)

    def batch_loss(idx):
        logits = model(*(model_inputs(model.encoder, padded(enc, idx, pad_id), device) for enc in (queries, titles)))
        labels = torch.as_tensor(train_pairs.classes[idx], device=device)
        return torch.nn.functional.cross_entropy(logits, labels)

    def dev_probs():
        return predict_two_tower(model, dev_queries, dev_titles, batch_size=64, device=device, pad_id=pad_id)

    started = time.time()
    fit(model, config, work, device, progress, train_pairs, batch_loss, dev_probs, dev_pairs)
    model.encoder.save_pretrained(work, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in model.head.state_dict().items()}, work / HEAD_FILE)
    tokenizer.save_pretrained(work)
    write_training_report(work, config, train_pairs, dev_pairs, device, started)


def load_two_tower(folder) -> TwoTower:
    """A fine-tuned two-tower model from its folder (safetensors only)."""
    folder = Path(folder)
    if not (folder / HEAD_FILE).is_file():
        raise FileNotFoundError(f"{folder}: no {HEAD_FILE}; this is not a two-tower model folder")
    head = load_file(folder / HEAD_FILE)
    model = TwoTower(load_encoder(str(folder), attn="sdpa"), grades=head["weight"].shape[0])
    model.head.load_state_dict(head)
    return model.eval()


@torch.inference_mode()
def predict_two_tower(
    model: TwoTower, queries: Encoded, titles: Encoded, batch_size: int = 64, device="cpu", pad_id: int = 0
) -> np.ndarray:
    """Grade probabilities (pairs, grades), in batches ordered by the pairs' lengths."""
    model.eval()
    lengths = np.array([len(q) + len(t) for q, t in zip(queries.input_ids, titles.input_ids)])
    order = np.argsort(lengths, kind="stable")
    probs = np.zeros((len(queries), model.head.out_features), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        logits = model(*(model_inputs(model.encoder, padded(enc, idx, pad_id), device) for enc in (queries, titles)))
        probs[idx] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return probs
