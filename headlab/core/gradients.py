"""Gradient head importance: which heads matter, to first order, in one backward pass over the data.

Ablation (mask a head, measure accuracy) asks the question exactly but costs one pass per head. Michel, Levy &
Neubig (2019, "Are Sixteen Heads Really Better than One?") ask it to first order: the gradient of the loss with
respect to each head's mask variable. Where the two rankings agree, the cheap proxy can stand in for the sweep.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import head_grid, mask_heads


@contextmanager
def only_masks_need_grad(model):
    """Eval mode and no parameter gradients inside the block; both restored after it.

    With every parameter frozen, backward reaches only the head mask, so it is cheaper and leaves each
    parameter's ``.grad`` (and ``requires_grad``) exactly as the caller had them.
    """
    flags = [(p, p.requires_grad) for p in model.parameters()]
    was_training = model.training
    model.eval()
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)


def gradient_importance(
    model, encoded: Encoded, batch_size: int = 32, device="cpu", pad_id: int = 0, normalize: bool = True
) -> pd.DataFrame:
    """Michel et al.'s head importance I_h = E_x |dL(x)/d xi_h|, with xi the head mask at 1 (all kept).

    L(x) is the cross-entropy of the gold grade. Every example gets its own row of a (batch, layers, heads)
    mask, so one backward pass of the summed loss yields each example's own gradient and the absolute
    value is taken per example, as in the paper's definition. (Their code takes it per token of the head's
    output; HuggingFace's ``run_bertology`` takes it per batch, which lets opposite signs within a batch
    cancel and makes the score depend on the batch size; per example does neither.)

    ``importance_raw`` is that mean over examples. ``importance`` divides it by its layer's L2 norm when
    ``normalize`` (as their code does, so every layer sums to one in squares), else repeats the raw value.
    """
    layers, heads = head_grid(model)
    total = torch.zeros(layers, heads, dtype=torch.float64)
    with only_masks_need_grad(model):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            xi = torch.ones(len(idx), layers, heads, device=device, requires_grad=True)
            labels = torch.as_tensor(encoded.classes[idx], dtype=torch.long, device=device)
            with mask_heads(model, xi):
                logits = model(**model_inputs(model, batch, device)).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
            (grad,) = torch.autograd.grad(loss, xi)
            total += grad.abs().sum(dim=0).double().cpu()
    raw = total / len(encoded)
    score = raw / (raw.norm(dim=1, keepdim=True) + 1e-20) if normalize else raw
    layer_idx, head_idx = np.divmod(np.arange(layers * heads), heads)
    return pd.DataFrame(
        {
            "layer": layer_idx,
            "head": head_idx,
            "importance": score.flatten().numpy(),
            "importance_raw": raw.flatten().numpy(),
        }
    )
