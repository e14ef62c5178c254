"""Attention maps, per example, with the token roles needed to read them.

sdpa (the default, and fastest) returns no attention weights, so maps are taken with eager attention
inside :func:`eager_attention`, which switches back on exit. Maps are yielded one example at a time,
trimmed to the real tokens, so a whole test split never has to sit in memory at once.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import mask_heads


@contextmanager
def eager_attention(model):
    """Run ``model`` with eager attention (which can return weights) inside the block."""
    before = model.config._attn_implementation
    if before != "eager":
        model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        if before != "eager":
            model.set_attn_implementation(before)


@dataclass
class Tokens:
    """One tokenized pair: ``[CLS] query [SEP] title [SEP]`` and where each part sits."""

    ids: list[int]
    tokens: list[str]
    cls: int
    seps: list[int]
    query: range
    title: range


def token_roles(tokenizer, input_ids: list[int]) -> Tokens:
    """Locate ``[CLS]``, the ``[SEP]``s, and the query and title spans of one encoded pair."""
    tokens = tokenizer.convert_ids_to_tokens(input_ids)
    seps = [i for i, t in enumerate(input_ids) if t == tokenizer.sep_token_id]
    if input_ids[0] != tokenizer.cls_token_id or len(seps) < 2:
        raise ValueError(f"expected [CLS] query [SEP] title [SEP], got {tokens}")
    # RoBERTa/MPNet style pairs put two separators between the sentences: <s> a </s></s> b </s>
    title_start = seps[0] + 1 + (1 if len(seps) > 2 and seps[1] == seps[0] + 1 else 0)
    return Tokens(list(input_ids), tokens, 0, seps, range(1, seps[0]), range(title_start, seps[-1]))


def attention_maps(model, encoded: Encoded, indices=None, mask=None, batch_size: int = 32, device="cpu",
                   pad_id: int = 0):
    """Yield ``(example, maps)`` with maps of shape (layers, heads, tokens, tokens), rows attending to columns.

    ``mask`` removes heads first (so later layers' maps show the effect of the removal).
    """
    subset = encoded if indices is None else encoded.subset(list(indices))
    positions = np.arange(len(subset)) if indices is None else np.asarray(list(indices))
    model.eval()
    with torch.inference_mode(), eager_attention(model), (mask_heads(model, mask) if mask is not None else nullcontext()):
        for idx, batch in length_batches(subset, batch_size, pad_id):
            out = model(**model_inputs(model, batch, device), output_attentions=True)
            stacked = torch.stack(out.attentions, dim=1).float().cpu().numpy()  # batch, layers, heads, T, T
            lengths = batch["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(idx):
                n = lengths[row]
                yield int(positions[i]), stacked[row, :, :, :n, :n]
