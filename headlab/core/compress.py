"""Structured compression for serving, after Kwon et al. (2022, "A Fast Post-Training Pruning Framework for
Transformers"): which heads *and* feed-forward neurons to keep under a budget of work, with no retraining.

Heads alone cannot make a BERT much faster: their projections are about a third of a layer's matrix work, the
feed-forward block most of the rest. So every head and every intermediate neuron gets a mask variable at 1, and
:func:`fisher_importance` sums each one's squared gradient of the loss over sample pairs (the diagonal of the
empirical Fisher information: how much the loss would rise, to second order, without it). :func:`flops_per_token`
counts what each head and each neuron costs a token, and :func:`search_masks` keeps, under a FLOP budget, the heads
and neurons of most Fisher importance (Kwon et al.'s search: for every number of heads kept, the most important
heads, then as many of the most important neurons as the rest of the budget buys; the best total wins).
:func:`mask_neurons` is the neurons' counterpart of :func:`headlab.core.masking.mask_heads`. :func:`tune_masks`
then gives the kept units real-valued scales that make each layer reproduce the original's, by least squares on a
few hundred pairs (their mask tuning), and :func:`compressed_model` removes the rest for real, the scales folded into
the output matrices. :func:`int8_dynamic` is the off-the-shelf baseline a user tries first on a CPU.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager

import numpy as np
import torch
from torch.ao.quantization import quantize_dynamic

from headlab.core.arch import architecture
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.gradients import only_masks_need_grad
from headlab.core.masking import encoder_layers, head_grid, mask_heads
from headlab.core.pruning import prune_heads, prune_neurons


def compressible_layers(model) -> list:
    """The encoder's layers, which compression reads by BERT's module names (``attention.output``, ``intermediate``,
    ``output``): an architecture whose layers are not BERT's (:attr:`headlab.core.arch.Architecture.bert_layers`)
    is refused by name rather than failing inside a hook."""
    adapter = architecture(model)
    if not adapter.bert_layers:
        raise ValueError(f"compression reads BERT's layers; {adapter.name}'s are not")
    return encoder_layers(model)


def intermediate_size(model) -> int:
    """Neurons per layer of the feed-forward block."""
    return int(model.config.intermediate_size)


@contextmanager
def mask_neurons(model, mask):
    """Scale every feed-forward neuron's activation by ``mask[layer, neuron]`` (1 keeps, 0 removes) inside the
    ``with`` block; ``mask`` may be (batch, layers, neurons), one mask per example, and may require grad."""
    mask = torch.as_tensor(mask)
    layers = compressible_layers(model)
    if mask.shape[-2:] != (len(layers), intermediate_size(model)):
        raise ValueError(
            f"neuron mask must have shape ({len(layers)}, {intermediate_size(model)}) or (batch, ...), "
            f"got {tuple(mask.shape)}"
        )
    handles = []
    for l, layer in enumerate(layers):
        layer_mask = mask[..., l, :]

        def scale(module, args, output, layer_mask=layer_mask):
            m = layer_mask.to(device=output.device, dtype=output.dtype)
            return output * (m[:, None, :] if m.dim() == 2 else m)

        handles.append(layer.intermediate.register_forward_hook(scale))
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


def fisher_importance(
    model, encoded: Encoded, batch_size: int = 32, device="cpu", pad_id: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(heads, neurons)``: per head (layers, heads) and per feed-forward neuron (layers, neurons), the sum over
    ``encoded``'s pairs of the squared gradient of the gold grade's cross-entropy with respect to its mask variable
    at 1 (each pair its own mask row, so the square is taken per pair)."""
    layers, heads = head_grid(model)
    neurons = intermediate_size(model)
    head_total = torch.zeros(layers, heads, dtype=torch.float64)
    neuron_total = torch.zeros(layers, neurons, dtype=torch.float64)
    with only_masks_need_grad(model):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            xi = torch.ones(len(idx), layers, heads, device=device, requires_grad=True)
            nu = torch.ones(len(idx), layers, neurons, device=device, requires_grad=True)
            labels = torch.as_tensor(encoded.classes[idx], dtype=torch.long, device=device)
            with mask_heads(model, xi), mask_neurons(model, nu):
                logits = model(**model_inputs(model, batch, device)).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
            head_grad, neuron_grad = torch.autograd.grad(loss, (xi, nu))
            head_total += (head_grad.double() ** 2).sum(dim=0).cpu()
            neuron_total += (neuron_grad.double() ** 2).sum(dim=0).cpu()
    return head_total.numpy(), neuron_total.numpy()


def flops_per_token(model, tokens: float) -> tuple[float, float]:
    """``(head, neuron)``: the multiply-adds x 2 one head and one feed-forward neuron cost a token, in a pair of
    ``tokens`` tokens: a head's query, key, value and output columns (4 x hidden x head size) and its scores and
    weighted sum (2 x tokens x head size); a neuron's row in and column out (2 x hidden)."""
    hidden, heads = int(model.config.hidden_size), int(model.config.num_attention_heads)
    size = hidden // heads
    return 2.0 * (4 * hidden * size + 2 * tokens * size), 2.0 * (2 * hidden)


def search_masks(
    head_fisher: np.ndarray, neuron_fisher: np.ndarray, head_flops: float, neuron_flops: float, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """Kwon et al.'s mask search: boolean masks ``(heads kept, neurons kept)`` (shapes of the Fisher arrays) whose
    FLOPs per token (heads x ``head_flops`` + neurons x ``neuron_flops``) stay within ``budget``, keeping for every
    number of heads the most important heads and then the most important neurons the rest buys, and returning the
    split with the largest total Fisher importance kept. Ties keep the earlier unit (layer, then index)."""
    if budget < 0:
        raise ValueError(f"a FLOP budget must not be negative, got {budget}")
    head_order = np.argsort(-head_fisher.ravel(), kind="stable")
    neuron_order = np.argsort(-neuron_fisher.ravel(), kind="stable")
    head_cum = np.concatenate([[0.0], np.cumsum(head_fisher.ravel()[head_order])])
    neuron_cum = np.concatenate([[0.0], np.cumsum(neuron_fisher.ravel()[neuron_order])])
    best, choice = -1.0, (0, 0)
    for n_heads in range(head_fisher.size + 1):
        left = budget - n_heads * head_flops
        if left < 0:
            break
        n_neurons = min(neuron_fisher.size, int(np.floor(left / neuron_flops + 1e-9)))
        kept = head_cum[n_heads] + neuron_cum[n_neurons]
        if kept > best:
            best, choice = kept, (n_heads, n_neurons)
    heads = np.zeros(head_fisher.size, dtype=bool)
    heads[head_order[: choice[0]]] = True
    neurons = np.zeros(neuron_fisher.size, dtype=bool)
    neurons[neuron_order[: choice[1]]] = True
    return heads.reshape(head_fisher.shape), neurons.reshape(neuron_fisher.shape)


class _Stop(Exception):
    """Ends a forward pass once the layer it was run for is captured."""


def _capture(model, layer: int, inputs, head_scale, neuron_scale, which: str):
    """One pass of ``inputs`` through ``model`` with heads and neurons scaled (the compressed model so far), stopped
    after ``layer``; returns, for ``which`` "attention" or "feed-forward" of that layer, the unscaled per-unit input
    of its output matrix (head contexts or neuron activations) and the residual its LayerNorm adds it to."""
    block = compressible_layers(model)[layer]
    module = block.attention.output if which == "attention" else block.output
    got = []

    def keep(mod, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        residual = args[1] if len(args) > 1 else kwargs["input_tensor"]
        got.append((hidden.detach(), residual.detach()))
        if which == "feed-forward":
            raise _Stop

    def stop(mod, args, output):
        raise _Stop

    neurons = neuron_scale.clone()
    neurons[layer] = 1.0  # the layer's own activations unscaled: its scales are what is solved for
    handles = [module.register_forward_pre_hook(keep, with_kwargs=True)]
    if which == "attention":
        handles.append(block.attention.register_forward_hook(stop))
    try:
        with mask_heads(model, head_scale), mask_neurons(model, neurons):
            model(**inputs)
    except _Stop:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return got[0]


def _targets(model, layer: int, inputs) -> dict[str, torch.Tensor]:
    """The inputs of ``layer``'s two LayerNorms in the original model, after its attention and its feed-forward
    block (``{"attention": ..., "feed-forward": ...}``), from one pass stopped at the second."""
    block = compressible_layers(model)[layer]
    got: dict[str, torch.Tensor] = {}

    def keeper(which: str):
        def keep(mod, args):
            got[which] = args[0].detach()
            if which == "feed-forward":
                raise _Stop

        return keep

    handles = [
        block.attention.output.LayerNorm.register_forward_pre_hook(keeper("attention")),
        block.output.LayerNorm.register_forward_pre_hook(keeper("feed-forward")),
    ]
    try:
        model(**inputs)
    except _Stop:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return got


def tune_masks(
    model,
    heads_kept: np.ndarray,
    neurons_kept: np.ndarray,
    encoded: Encoded,
    batch_size: int = 32,
    device="cpu",
    pad_id: int = 0,
    ridge: float = 1e-4,
) -> tuple[np.ndarray, np.ndarray]:
    """Kwon et al.'s mask tuning: ``(head_scale, neuron_scale)``, real values for the kept heads and neurons (0 for
    the others) that make each layer of the compressed model reproduce the original, layer by layer from the
    bottom: the input of each LayerNorm (block output plus residual) in the compressed model, whose earlier layers are
    already tuned, is fitted to the original's by linear least squares over ``encoded``'s tokens (a ridge of
    ``ridge`` times the mean diagonal keeps it stable). A removed unit's scale stays 0; folded into the output
    matrices (:func:`compressed_model`), the scales cost nothing at serving time."""
    layers, heads = head_grid(model)
    head_scale = torch.as_tensor(heads_kept, dtype=torch.float32).clone()
    neuron_scale = torch.as_tensor(neurons_kept, dtype=torch.float32).clone()
    size = int(model.config.hidden_size) // heads
    batches = [model_inputs(model, batch, device) for _, batch in length_batches(encoded, batch_size, pad_id)]
    model.eval()
    with torch.inference_mode():
        for layer in range(layers):
            if not (np.any(heads_kept[layer]) or np.any(neurons_kept[layer])):
                continue  # nothing kept to scale
            block = compressible_layers(model)[layer]
            targets = [_targets(model, layer, inputs) for inputs in batches]  # the original's, once per layer
            for which, kept, weight, bias in (
                (
                    "attention",
                    heads_kept[layer],
                    block.attention.output.dense.weight,
                    block.attention.output.dense.bias,
                ),
                ("feed-forward", neurons_kept[layer], block.output.dense.weight, block.output.dense.bias),
            ):
                units = np.flatnonzero(kept)
                if not len(units):
                    continue
                gram, rhs = (
                    torch.zeros(len(units), len(units), dtype=torch.float64),
                    torch.zeros(len(units), dtype=torch.float64),
                )
                for inputs, target in zip(batches, (t[which] for t in targets)):
                    hidden, residual = _capture(model, layer, inputs, head_scale, neuron_scale, which)
                    valid = inputs["attention_mask"].bool()
                    left = (target - residual - bias)[valid].double()  # tokens x hidden
                    if which == "attention":
                        context = hidden[valid].double().reshape(-1, heads, size)[:, units]  # tokens x k x size
                        out = weight.double().reshape(-1, heads, size)[:, units]  # hidden x k x size
                        columns = torch.einsum("tks,hks->tkh", context, out)  # each head's share of the output
                        gram += torch.einsum("tkh,tjh->kj", columns, columns)
                        rhs += torch.einsum("tkh,th->k", columns, left)
                    else:
                        act = hidden[valid].double()[:, units]  # tokens x k
                        out = weight.double()[:, units]  # hidden x k
                        gram += (act.T @ act) * (out.T @ out)
                        rhs += (act * (left @ out)).sum(dim=0)
                damp = ridge * float(torch.diagonal(gram).mean()) + 1e-12
                solved = torch.linalg.solve(gram + damp * torch.eye(len(units), dtype=torch.float64), rhs).float()
                scale = head_scale if which == "attention" else neuron_scale
                scale[layer, units] = solved
    return head_scale.numpy(), neuron_scale.numpy()


def compressed_model(model, head_scale: np.ndarray, neuron_scale: np.ndarray):
    """A copy of ``model`` with the heads and neurons whose scale is 0 removed for real (:func:`headlab.core.pruning.
    prune_heads`, :func:`headlab.core.pruning.prune_neurons`) and every kept one's scale folded into its columns of
    the output matrix: the function of masking with those scales, in smaller matrices."""
    layers, heads = head_grid(model)
    size = int(model.config.hidden_size) // heads
    drop = [(l, h) for l in range(layers) for h in range(heads) if head_scale[l, h] == 0]
    scaled = copy.deepcopy(model)
    for l, block in enumerate(compressible_layers(scaled)):
        with torch.no_grad():
            block.attention.output.dense.weight.mul_(
                torch.as_tensor(head_scale[l], dtype=torch.float32).repeat_interleave(size)[None, :]
            )
            block.output.dense.weight.mul_(torch.as_tensor(neuron_scale[l], dtype=torch.float32)[None, :])
    compressed = prune_heads(scaled, drop)
    return prune_neurons(compressed, [np.flatnonzero(neuron_scale[l]).tolist() for l in range(layers)])


def int8_dynamic(model):
    """A copy of ``model`` whose Linear layers compute in int8 with weights quantized per tensor and activations
    quantized on the fly (torch's dynamic quantization, the first thing a user tries on a CPU; deprecated in torch
    2.13 in favour of torchao, which this environment does not have). For serving on a CPU only: it is not saved."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        return quantize_dynamic(copy.deepcopy(model).eval(), {torch.nn.Linear}, dtype=torch.qint8)
