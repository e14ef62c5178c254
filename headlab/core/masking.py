"""Head masking with hooks.

transformers 5 dropped ``head_mask`` and silently ignores the argument, so headlab masks heads itself:
a forward pre-hook on each layer's attention *output projection* scales that layer's per-head slices of
the concatenated head outputs before they are mixed back into the residual stream. A masked head's output
is therefore exactly zero, whatever the input -- the study's HEAD-MASK. The hooks live only inside the
``mask_heads`` context, so every intervention undoes itself.
"""

from __future__ import annotations

from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from headlab.core.arch import architecture

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class Ablation(str, Enum):
    """What a removed head's output becomes: zero (the study's HEAD-MASK) or its mean over training pairs
    (mean-ablation, the check that an effect is not an artefact of zeroing). A string of the same value is one too."""

    ZERO = "zero"
    MEAN = "mean"

    @classmethod
    def of(cls, value: Ablation | str) -> Ablation:
        """``value`` as an :class:`Ablation`; anything else is an error naming the choices."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"ablation must be 'zero' or 'mean', got {value!r}") from None


def encoder_layers(model: PreTrainedModel) -> list[Any]:
    """The transformer layers of an encoder or of a model with an encoder inside (``model.base_model``), each the
    architecture's own module (``BertLayer``, ``MPNetLayer``: their submodules differ, hence ``Any``)."""
    architecture(model)  # an architecture headlab cannot take apart is refused here, by name
    return list(model.base_model.encoder.layer)


def output_projections(model: PreTrainedModel) -> list[nn.Linear]:
    """The Linear per layer whose input is the concatenation of that layer's head outputs."""
    path = architecture(model).output_projection
    return [cast(nn.Linear, layer.get_submodule(path)) for layer in encoder_layers(model)]


def query_key_value(model: PreTrainedModel, layer: int) -> tuple[Any, list[nn.Linear]]:
    """Layer ``layer``'s self-attention, the architecture's own module (hence ``Any``), and its query, key and value
    projections (each head's rows are its slice of ``attention_head_size`` rows)."""
    adapter = architecture(model)
    attention = encoder_layers(model)[layer].get_submodule(adapter.self_attention)
    return attention, [cast(nn.Linear, getattr(attention, name)) for name in adapter.projections]


def head_grid(model: PreTrainedModel) -> tuple[int, int]:
    """(layers, heads per layer) of the model."""
    return len(encoder_layers(model)), model.config.num_attention_heads


KEPT_HEADS = "headlab_kept_heads"  # a pruned model's config field (headlab.core.pruning): its kept heads per layer


def _check_mask(model: PreTrainedModel, mask: torch.Tensor) -> torch.Tensor:
    layers, heads = head_grid(model)
    mask = torch.as_tensor(mask)
    if getattr(model.config, KEPT_HEADS, None) is not None and bool((mask != 1).any()):
        raise ValueError(
            "this model is pruned (its layers keep only some heads, headlab.core.pruning): mask the "
            "original model, whose head indices these are"
        )
    if mask.dim() not in (2, 3) or tuple(mask.shape[-2:]) != (layers, heads):
        raise ValueError(
            f"head mask must have shape ({layers}, {heads}) or (batch, {layers}, {heads}) for this model, "
            f"got {tuple(mask.shape)}"
        )
    return mask if mask.is_floating_point() else mask.float()


@contextmanager
def mask_heads(model: PreTrainedModel, mask, means: torch.Tensor | None = None):
    """Scale every head's output by ``mask[layer, head]`` (1 keeps, 0 removes) inside the ``with`` block.

    ``mask`` is (layers, heads) for the whole batch, or (batch, layers, heads) to give every example of a
    batch its own mask (several masks in one forward pass). A float mask that requires grad gives
    gradients with respect to each head's mask variable (Michel et al., 2019). Layers whose mask is all
    ones get no hook at all, so an all-ones mask leaves the outputs bit-identical.

    With ``means`` ((layers, hidden): each head's mean output, :func:`head_means`) a removed head's output is
    replaced by its mean instead of zero (mean-ablation, the usual check that an effect of zeroing is not an
    artefact of an input the later layers never saw): ``output * m + mean * (1 - m)``.
    """
    mask = _check_mask(model, mask)
    heads = mask.shape[-1]
    handles = []
    for layer, projection in enumerate(output_projections(model)):
        layer_mask = mask[..., layer, :]
        if not layer_mask.requires_grad and bool((layer_mask == 1).all()):
            continue

        def scale_heads(module, args, layer_mask=layer_mask, layer=layer):
            hidden, *rest = args
            head_dim = hidden.shape[-1] // heads
            scale = layer_mask.to(device=hidden.device, dtype=hidden.dtype).repeat_interleave(head_dim, dim=-1)
            if scale.dim() == 2:  # one mask per example: (batch, hidden) -> (batch, 1, hidden)
                scale = scale[:, None, :]
            if means is None:
                return (hidden * scale, *rest)
            mean = means[layer].to(device=hidden.device, dtype=hidden.dtype)
            return (hidden * scale + mean * (1 - scale), *rest)

        handles.append(projection.register_forward_pre_hook(scale_heads))
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


def keep_all(model: PreTrainedModel) -> torch.Tensor:
    """A (layers, heads) mask of ones: the unmasked model."""
    return torch.ones(head_grid(model))


@torch.inference_mode()
def head_means(model: PreTrainedModel, batches) -> torch.Tensor:
    """(layers, hidden): every head's output (the input of the output projection) averaged over the real tokens of
    ``batches`` (model inputs with an ``attention_mask``): what mean-ablation puts in place of a removed head."""
    projections = output_projections(model)
    sums = torch.zeros(len(projections), projections[0].in_features, dtype=torch.float64)
    count = 0
    current: dict[str, torch.Tensor] = {}

    def record(layer):
        def hook(module, args):
            hidden = args[0].double()
            real = current["real"].to(hidden.device)
            sums[layer] += (hidden * real[..., None]).sum(dim=(0, 1)).cpu()

        return hook

    handles = [p.register_forward_pre_hook(record(i)) for i, p in enumerate(projections)]
    try:
        model.eval()
        for inputs in batches:
            current["real"] = inputs["attention_mask"].double()
            count += int(inputs["attention_mask"].sum())
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    if not count:
        raise ValueError("head_means needs at least one token")
    return (sums / count).float()
