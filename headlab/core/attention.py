"""Attention maps, per example (a pair's tokens and words: :func:`headlab.inputs.pair.read_pair`).

sdpa (the default, and fastest) returns no attention weights, so maps are taken with eager attention
inside :func:`eager_attention`, which switches back on exit. Maps are yielded one example at a time,
trimmed to the real tokens, so a whole test split never has to sit in memory at once.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import numpy as np
import torch

from headlab.core.arch import architecture
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import encoder_layers, mask_heads, output_projections, query_key_value


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


def _chosen(encoded: Encoded, indices) -> tuple[Encoded, np.ndarray]:
    """The examples ``indices`` names (all when None) and their positions in ``encoded``."""
    if indices is None:
        return encoded, np.arange(len(encoded))
    return encoded.subset(list(indices)), np.asarray(list(indices))


def attention_maps(
    model, encoded: Encoded, indices=None, mask=None, batch_size: int = 32, device="cpu", pad_id: int = 0
):
    """Yield ``(example, maps)`` with maps of shape (layers, heads, tokens, tokens), rows attending to columns.

    ``mask`` removes heads first (so later layers' maps show the effect of the removal).
    """
    subset, positions = _chosen(encoded, indices)
    model.eval()
    with torch.inference_mode(), eager_attention(model), mask_heads(model, mask) if mask is not None else nullcontext():
        for idx, batch in length_batches(subset, batch_size, pad_id):
            out = model(**model_inputs(model, batch, device), output_attentions=True)
            stacked = torch.stack(out.attentions, dim=1).float().cpu().numpy()  # batch, layers, heads, T, T
            lengths = batch["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(idx):
                n = lengths[row]
                yield int(positions[i]), stacked[row, :, :, :n, :n]


def cls_value_weighted(model, encoded: Encoded, layer: int, indices=None, batch_size: int = 32, device="cpu", pad_id=0):
    """Yield ``(example, weights, rows)``: for every head of ``layer``, its ``[CLS]`` attention row (``weights``) and
    that row weighted by what each token sends, ``alpha_0j * |f_h(x_j)|`` (``rows``; both heads x tokens), where
    ``f_h(x_j)`` is token j's value through the head's slice of the output projection (Kobayashi et al. 2020,
    "Attention is not only a weight"). A head can put most of its weight on ``[SEP]`` while sending almost nothing
    from it: the norms show what the weights hide."""
    subset, positions = _chosen(encoded, indices)
    _, (_, _, value) = query_key_value(model, layer)
    weight = output_projections(model)[layer].weight  # hidden x (heads * size)
    heads = model.config.num_attention_heads
    per_head = weight.reshape(weight.shape[0], heads, -1)  # hidden x heads x size
    values: list[torch.Tensor] = []
    hook = value.register_forward_hook(lambda module, args, out: values.append(out))
    model.eval()
    try:
        with torch.inference_mode(), eager_attention(model):
            for idx, batch in length_batches(subset, batch_size, pad_id):
                values.clear()
                out = model(**model_inputs(model, batch, device), output_attentions=True)
                alpha = out.attentions[layer][:, :, 0].float()  # batch x heads x tokens
                v = values[0].float().reshape(*values[0].shape[:2], heads, -1)  # batch x tokens x heads x size
                sent = torch.einsum("bthd,ohd->bhto", v, per_head.float()).norm(dim=-1)  # batch x heads x tokens
                weights, rows = alpha.cpu().numpy(), (alpha * sent).cpu().numpy()
                lengths = batch["attention_mask"].sum(dim=1).tolist()
                for row, i in enumerate(idx):
                    yield int(positions[i]), weights[row, :, : lengths[row]], rows[row, :, : lengths[row]]
    finally:
        hook.remove()


class _Reached(Exception):
    """Raised by a forward pre-hook to stop a pass at the layer whose input it carries."""

    def __init__(self, hidden_states):
        self.hidden_states = hidden_states


def cls_attention_rows(
    model,
    encoded: Encoded,
    layer: int,
    head: int,
    indices=None,
    mask=None,
    batch_size: int = 32,
    device="cpu",
    pad_id: int = 0,
):
    """Yield ``(example, row)``: the ``[CLS]`` row of one head's attention (over the example's tokens), heads in
    ``mask`` removed; what :func:`attention_maps` gives as ``maps[layer, head, 0]`` up to float rounding.

    A head's map depends only on the layers below it, so the pass stops at the head's layer (its input is caught
    by a pre-hook) and computes that one head's scores: a fraction of a full pass, and no (layers, heads, tokens,
    tokens) array per example, where a score needs one row of one head (e.g. many random masks, one head read).
    """
    adapter = architecture(model)
    if adapter.score_bias or not adapter.bert_layers:  # scores are not q.k alone (MPNet's bias): read the full maps
        for example, maps in attention_maps(model, encoded, indices, mask, batch_size, device, pad_id):
            yield example, maps[layer, head, 0]
        return
    target = encoder_layers(model)[layer]
    attention = target.attention.self
    size = attention.attention_head_size
    cols = slice(head * size, (head + 1) * size)
    subset, positions = _chosen(encoded, indices)

    def stop(module, args, kwargs):
        raise _Reached(args[0] if args else kwargs["hidden_states"])

    model.eval()
    hook = target.register_forward_pre_hook(stop, with_kwargs=True)
    try:
        with torch.inference_mode(), mask_heads(model, mask) if mask is not None else nullcontext():
            for idx, batch in length_batches(subset, batch_size, pad_id):
                inputs = model_inputs(model, batch, device)
                try:
                    model(**inputs)
                    raise RuntimeError(f"the pass never reached layer {layer}")
                except _Reached as reached:
                    hidden = reached.hidden_states
                query = torch.nn.functional.linear(
                    hidden[:, :1], attention.query.weight[cols], attention.query.bias[cols]
                )
                key = torch.nn.functional.linear(hidden, attention.key.weight[cols], attention.key.bias[cols])
                scores = (query @ key.transpose(1, 2))[:, 0] * attention.scaling
                scores = scores.masked_fill(inputs["attention_mask"] == 0, float("-inf"))
                rows = torch.softmax(scores.float(), dim=-1).cpu().numpy()
                lengths = inputs["attention_mask"].sum(dim=1).tolist()
                for row, i in enumerate(idx):
                    yield int(positions[i]), rows[row, : lengths[row]]
    finally:
        hook.remove()


class AttentionCache:
    """The attention maps of some examples, kept once, so every per-head score reads them instead of re-running
    the model (role scores, ``[CLS]`` profiles, order scores and word-boundary features are functions of maps).

    Maps are ragged (each example has its own length) and kept in a compact dtype (float16 by default: 3 decimal
    digits, where scores are means over many tokens); iterating yields ``(example, maps)`` in float32, exactly what
    :func:`attention_maps` yields, so a cache stands in wherever the live generator did. ``save`` and ``load`` keep
    it on disk as one ``.npz``.
    """

    def __init__(self, examples, maps, dropped=()):
        self.examples = np.asarray(list(examples), dtype=np.int64)
        self.maps = list(maps)
        self.dropped = tuple(tuple(int(x) for x in head) for head in dropped)
        if len(self.examples) != len(self.maps):
            raise ValueError(f"{len(self.examples)} examples but {len(self.maps)} maps")
        self._position = {int(e): i for i, e in enumerate(self.examples)}

    def __len__(self) -> int:
        return len(self.maps)

    def __iter__(self):
        for example, maps in zip(self.examples, self.maps):
            yield int(example), maps.astype(np.float32)

    def __getitem__(self, example: int) -> np.ndarray:
        if int(example) not in self._position:
            raise KeyError(f"example {example} is not in this attention cache ({len(self)} examples)")
        return self.maps[self._position[int(example)]].astype(np.float32)

    def subset(self, examples) -> AttentionCache:
        """The cache of some of its examples, in the order given."""
        return AttentionCache(examples, [self.maps[self._position[int(e)]] for e in examples], self.dropped)

    def save(self, path) -> None:
        """One ``.npz``: the flat maps, each example's token count, the examples and the removed heads."""
        lengths = np.array([m.shape[-1] for m in self.maps], dtype=np.int64)
        grid = np.array(self.maps[0].shape[:2] if self.maps else (0, 0), dtype=np.int64)
        flat = np.concatenate([m.ravel() for m in self.maps]) if self.maps else np.zeros(0, np.float16)
        with open(path, "wb") as handle:  # np.savez adds ".npz" to a name without it; a handle keeps the name
            np.savez(
                handle,
                flat=flat,
                lengths=lengths,
                grid=grid,
                examples=self.examples,
                dropped=np.array(self.dropped, dtype=np.int64).reshape(-1, 2),
            )

    @classmethod
    def from_pass(cls, attention, dtype=np.float16, dropped=()) -> AttentionCache:
        """Keep what ``attention`` yields (e.g. one pass of :func:`attention_maps`, which goes in order of length) in
        ``dtype``, in order of example."""
        kept = sorted((int(example), np.asarray(m).astype(dtype)) for example, m in attention)
        return cls([e for e, _ in kept], [m for _, m in kept], dropped)

    @classmethod
    def load(cls, path) -> AttentionCache:
        """The cache :meth:`save` wrote to ``path``."""
        with np.load(path) as data:
            layers, heads = (int(x) for x in data["grid"])
            sizes = layers * heads * data["lengths"] ** 2
            starts = np.concatenate([[0], np.cumsum(sizes)])
            maps = [
                data["flat"][a:b].reshape(layers, heads, n, n) for a, b, n in zip(starts, starts[1:], data["lengths"])
            ]
            return cls(data["examples"], maps, [tuple(h) for h in data["dropped"]])
