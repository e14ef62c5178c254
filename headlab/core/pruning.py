"""Remove heads for real: a BERT whose layers keep only some heads, to serve faster than a masked one.

Masking a head (:mod:`headlab.core.masking`) zeroes its output but still computes it, so a masked model is no
faster (transformers 5 removed ``prune_heads``). :func:`prune_heads` rebuilds each layer with only the kept heads'
rows of the query, key and value matrices and their columns of the output projection: the same function as masking
those heads (a removed head adds nothing through the output projection), with a smaller model. A layer that keeps
no head keeps only the projection's bias (:class:`NoHeads`). The kept heads are written into the config
(:data:`KEPT_HEADS`), so :func:`shape_for_kept_heads` can rebuild the smaller layers from it before the weights are
loaded from safetensors (:func:`headlab.models.loading.load_classifier`); no remote code.
"""

from __future__ import annotations

import copy
import re
import warnings
from typing import TYPE_CHECKING

import torch

from headlab.core.arch import architecture
from headlab.core.masking import KEPT_HEADS, encoder_layers

KEPT_NEURONS = "headlab_kept_neurons"  # a compressed model's config field: its kept feed-forward neurons per layer

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class NoHeads(torch.nn.Module):
    """The self-attention of a layer that keeps no head: its output has no columns, so the output projection adds
    its bias alone."""

    def forward(self, hidden_states, *args, **kwargs):
        """A (batch, tokens, 0) output and no attention weights, whatever the input."""
        return hidden_states.new_zeros(*hidden_states.shape[:-1], 0), None


def kept_heads(model) -> list[list[int]] | None:
    """Per layer, the original indices of the heads a pruned model keeps; None for a model that was not pruned."""
    kept = getattr(model.config, KEPT_HEADS, None)
    return None if kept is None else [list(map(int, layer)) for layer in kept]


def cannot_prune(model) -> str:
    """Why :func:`prune_heads` cannot rebuild this model ("" when it can): it rebuilds BERT's encoder layers only
    (:attr:`headlab.core.arch.Architecture.bert_layers`; an MPNet, for one, adds a relative position bias per head
    that its layers share)."""
    config = model.config
    adapter = architecture(model)
    if not adapter.bert_layers or config.is_decoder or config.add_cross_attention:
        return f"pruning rebuilds BERT's encoder layers; {adapter.name}'s are not"
    return ""


def _check_bert(model) -> None:
    why = cannot_prune(model)
    if why:
        raise ValueError(why)


def _shrink(layer, heads: list[int], size: int, copy_weights: bool) -> None:
    """Give ``layer`` the matrices of ``heads`` only (their weights copied when ``copy_weights``)."""
    attention, mixing = layer.attention.self, layer.attention.output.dense
    if not heads:
        layer.attention.self = NoHeads()
        with warnings.catch_warnings():  # a weight with no columns has nothing to initialise, and torch says so
            warnings.filterwarnings("ignore", "Initializing zero-element tensors is a no-op")
            projection = torch.nn.Linear(0, mixing.out_features, device=mixing.weight.device, dtype=mixing.weight.dtype)
        if copy_weights:
            projection.bias.data.copy_(mixing.bias.data)
        layer.attention.output.dense = projection
        return
    rows = (torch.as_tensor(heads)[:, None] * size + torch.arange(size)).reshape(-1).to(mixing.weight.device)
    for name in ("query", "key", "value"):
        old = getattr(attention, name)
        new = torch.nn.Linear(old.in_features, len(rows), device=old.weight.device, dtype=old.weight.dtype)
        if copy_weights:
            new.weight.data.copy_(old.weight.data[rows])
            new.bias.data.copy_(old.bias.data[rows])
        setattr(attention, name, new)
    projection = torch.nn.Linear(len(rows), mixing.out_features, device=mixing.weight.device, dtype=mixing.weight.dtype)
    if copy_weights:
        projection.weight.data.copy_(mixing.weight.data[:, rows])
        projection.bias.data.copy_(mixing.bias.data)
    layer.attention.output.dense = projection
    attention.num_attention_heads, attention.all_head_size = len(heads), len(rows)


def _shrink_layers(model, kept: list[list[int]], copy_weights: bool):
    """Give every layer that loses a head the matrices of its ``kept`` heads only (:func:`_shrink`); the model."""
    size = model.config.hidden_size // model.config.num_attention_heads
    for layer, heads in zip(encoder_layers(model), kept):
        if len(heads) < model.config.num_attention_heads:
            _shrink(layer, heads, size, copy_weights)
    return model


def _kept_from_drop(model, drop) -> list[list[int]]:
    layers, heads = len(encoder_layers(model)), model.config.num_attention_heads
    dropped = {(int(l), int(h)) for l, h in drop}
    outside = sorted((l, h) for l, h in dropped if not (0 <= l < layers and 0 <= h < heads))
    if outside:
        raise ValueError(f"heads {outside} are not in this model's {layers} layers x {heads} heads")
    return [[h for h in range(heads) if (l, h) not in dropped] for l in range(layers)]


def prune_heads(model: PreTrainedModel, drop) -> PreTrainedModel:
    """A copy of the BERT ``model`` without the heads in ``drop`` ((layer, head) pairs): smaller matrices, no masks,
    the same grades as masking them (up to float rounding). The kept heads are recorded in its config."""
    _check_bert(model)
    if kept_heads(model) is not None:
        raise ValueError("this model is already pruned; prune the original model with the union of the heads")
    kept = _kept_from_drop(model, drop)
    pruned = _shrink_layers(copy.deepcopy(model), kept, copy_weights=True)
    setattr(pruned.config, KEPT_HEADS, kept)
    return pruned.eval()


def _shrink_feed_forward(layer, neurons: list[int], copy_weights: bool) -> None:
    """Give ``layer``'s feed-forward block the rows (in) and columns (out) of ``neurons`` only."""
    inner, outer = layer.intermediate.dense, layer.output.dense
    index = torch.as_tensor(neurons, dtype=torch.long, device=inner.weight.device)
    with warnings.catch_warnings():  # a layer that keeps no neuron has matrices with nothing to initialise
        warnings.filterwarnings("ignore", "Initializing zero-element tensors is a no-op")
        new_in = torch.nn.Linear(inner.in_features, len(neurons), device=inner.weight.device, dtype=inner.weight.dtype)
        new_out = torch.nn.Linear(
            len(neurons), outer.out_features, device=outer.weight.device, dtype=outer.weight.dtype
        )
    if copy_weights:
        new_in.weight.data.copy_(inner.weight.data[index])
        new_in.bias.data.copy_(inner.bias.data[index])
        new_out.weight.data.copy_(outer.weight.data[:, index])
        new_out.bias.data.copy_(outer.bias.data)
    layer.intermediate.dense, layer.output.dense = new_in, new_out


def kept_neurons(model) -> list[list[int]] | None:
    """Per layer, the original indices of the feed-forward neurons a compressed model keeps; None if it keeps all."""
    kept = getattr(model.config, KEPT_NEURONS, None)
    return None if kept is None else [list(map(int, layer)) for layer in kept]


def prune_neurons(model: PreTrainedModel, keep) -> PreTrainedModel:
    """``model`` (changed in place, and returned) with each layer's feed-forward block cut to the neurons ``keep``
    names (per layer, neuron indices): the same function as masking the others (a removed neuron adds nothing
    through the output matrix). The kept neurons are recorded in its config (:data:`KEPT_NEURONS`)."""
    _check_bert(model)
    if kept_neurons(model) is not None:
        raise ValueError("this model's feed-forward blocks are already cut; cut the original model")
    size = int(model.config.intermediate_size)
    keep = [sorted({int(n) for n in layer}) for layer in keep]
    if len(keep) != len(encoder_layers(model)) or any(n < 0 or n >= size for layer in keep for n in layer):
        raise ValueError(f"keep must name, for each of {len(encoder_layers(model))} layers, neurons in [0, {size})")
    for layer, neurons in zip(encoder_layers(model), keep):
        if len(neurons) < size:
            _shrink_feed_forward(layer, neurons, copy_weights=True)
    setattr(model.config, KEPT_NEURONS, keep)
    return model


def shape_for_kept_heads(model: PreTrainedModel) -> PreTrainedModel:
    """Give a freshly built BERT the smaller layers its config's :data:`KEPT_HEADS` (and :data:`KEPT_NEURONS`)
    name (weights to be loaded)."""
    _check_bert(model)
    _shrink_layers(model, kept_heads(model) or [], copy_weights=False)
    size = int(model.config.intermediate_size)
    for layer, neurons in zip(encoder_layers(model), kept_neurons(model) or []):
        if len(neurons) < size:
            _shrink_feed_forward(layer, neurons, copy_weights=False)
    return model


_LAYER_KEY = re.compile(
    r"encoder\.layer\.(\d+)\.(attention\.self\.(?:query|key|value)|attention\.output\.dense|"
    r"intermediate\.dense|output\.dense)\.(weight|bias)$"
)


def expanded(model: PreTrainedModel) -> PreTrainedModel:
    """A full-size copy of a pruned or compressed BERT (:func:`prune_heads`, :func:`prune_neurons`): every removed
    head's and neuron's rows and columns put back as zeros, the kept ones in their places, the kept-heads and
    kept-neurons fields gone from its config. The same function (a zero head or neuron adds nothing: its query, key,
    value and bias are zero, so is its column of the output matrix), in the shapes plain ``transformers`` builds from
    a config: ``save_pretrained`` gives a folder any ``AutoModelForSequenceClassification.from_pretrained`` loads,
    which transformers 5 cannot do for layers of different widths (it has no ``pruned_heads`` and one
    ``intermediate_size``). No faster: the speed needs the smaller matrices, which :func:`headlab.load` builds."""
    _check_bert(model)
    config = copy.deepcopy(model.config)
    for field in (KEPT_HEADS, KEPT_NEURONS):
        if hasattr(config, field):
            delattr(config, field)
    full = type(model)(config).to(next(model.parameters()).device).eval()
    layers = len(encoder_layers(full))
    heads = kept_heads(model) or [list(range(config.num_attention_heads))] * layers
    neurons = kept_neurons(model) or [list(range(config.intermediate_size))] * layers
    size = config.hidden_size // config.num_attention_heads
    small, target = model.state_dict(), full.state_dict()
    with torch.no_grad():
        for key, tensor in target.items():
            match = _LAYER_KEY.search(key)
            if match is None:
                tensor.copy_(small[key])
                continue
            layer, part, kind = int(match.group(1)), match.group(2), match.group(3)
            tensor.zero_()
            if part == "intermediate.dense" or part.startswith("attention.self"):  # rows: the kept outputs
                index = neurons[layer] if part == "intermediate.dense" else _head_rows(heads[layer], size)
                if key in small and len(index):
                    tensor[torch.as_tensor(index, dtype=torch.long)] = small[key]
            elif kind == "bias":  # the output matrices' biases keep their full size
                tensor.copy_(small[key])
            else:  # columns: the kept inputs of the output matrices
                index = neurons[layer] if part == "output.dense" else _head_rows(heads[layer], size)
                if len(index):
                    tensor[:, torch.as_tensor(index, dtype=torch.long)] = small[key]
    return full


def _head_rows(heads: list[int], size: int) -> list[int]:
    """The rows of a layer's query, key and value matrices (and columns of its output matrix) that ``heads`` own."""
    return [h * size + i for h in heads for i in range(size)]
