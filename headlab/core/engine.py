"""Evaluate many head masks over one split, fast.

What makes a sweep fast, and what this module does about each:
- tokenize and pad once: batches are built once, sorted by length with dynamic padding;
- no work that a mask cannot change: the unmasked model's output of every layer is computed once per batch,
  and a mask whose first masked head is in layer ``l`` starts from the cached output of layer ``l - 1``
  (layers ``0..l-1`` are replaced by a lookup for that forward pass);
- no work the grade cannot see: a BERT classifier reads the last layer at ``[CLS]`` only, so that layer computes
  its keys and values for every token but its query, head mixing and feed-forward for ``[CLS]`` alone;
- no work for a removed head: its output is zero, so a BERT layer leaves its query, key, value, attention and
  output-projection columns out (:func:`computed_heads`; both the same numbers up to float rounding);
- sdpa attention, inference mode, and bf16 autocast where the hardware computes bf16 natively (a GPU, a CPU with
  AVX512-BF16 or AMX: :func:`headlab.core.device.precision`), checked against fp32 by :meth:`precision_check`; its
  layers' weights are cast to bf16 once (autocast keeps its cast of a parameter, but casts the kept heads' sliced
  weights again at every call), the unmasked recording included;
- on a CPU with AVX-512 in fp32, every layer's products go through oneDNN (:mod:`headlab.core.onednn`: twice MKL's
  speed on an AMD EPYC Zen 5; on an AVX2 Zen 3 MKL was faster, and is used), the unmasked recording included, so a
  mask and its baseline are computed by the same function;
- several masks per forward pass (``masks_per_pass``): the batch is repeated, one mask per copy.
"""

from __future__ import annotations

import hashlib
from contextlib import ExitStack, contextmanager, nullcontext

import numpy as np
import torch

from headlab.core.arch import architecture
from headlab.core.device import autocast, precision
from headlab.core.evaluate import Encoded, length_batches, model_inputs, weights_digest
from headlab.core.masking import KEPT_HEADS, encoder_layers, head_grid, mask_heads
from headlab.core.onednn import dense, keep_freed_memory, onednn_pays


def first_masked_layer(mask: torch.Tensor) -> int:
    """Index of the lowest layer with a removed head (the number of layers if none is removed)."""
    rows = torch.nonzero((mask != 1).any(dim=-1))
    return int(rows[0]) if len(rows) else mask.shape[0]


def _bert_layer_forward(
    layer, kept=None, cls_only: bool = False, onednn: bool = False, mean=None, dtype: torch.dtype | None = None
):
    """A ``BertLayer`` forward that computes only the heads in ``kept`` (all when None), and with ``cls_only`` only
    the output at ``[CLS]`` (shape batch x 1 x hidden); with ``onednn`` its products go through oneDNN
    (:func:`headlab.core.onednn.dense`), with ``dtype`` (bf16 under bf16 autocast) its weights are cast once.

    A removed head's output is zero, so it adds nothing through the output projection: its query, key and value
    rows, its attention and its columns of the output projection are left out (the same numbers as the masking
    hooks up to float rounding, with a removed share of the attention's work saved). With ``cls_only``, keys and
    values come from every token, as in the full layer; the query, the heads' mixing, the residual, layer norms
    and feed-forward run on one row. With ``mean`` (this layer's row of :func:`headlab.core.masking.head_means`) a
    removed head's output is its mean rather than zero: a constant, so its columns of the output projection times
    that mean are folded into the projection's bias (mean-ablation at the cost of zeroing).
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    attention, mixing = layer.attention.self, layer.attention.output
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
    size = attention.attention_head_size
    into, out_of = layer.intermediate.dense, layer.output.dense
    bias = mixing.dense.bias
    if mean is not None and kept is not None:  # the removed heads' means, through their columns, into the bias
        removed = torch.ones(mixing.dense.in_features, dtype=torch.bool, device=bias.device)
        for head in kept:
            removed[head * size : (head + 1) * size] = False
        bias = bias + mixing.dense.weight[:, removed] @ mean.to(bias)[removed]
    packed = onednn or dtype is not None
    if kept is None and not packed:  # the modules themselves, so masking hooks on the output projection still apply
        query, key, value, mix = attention.query, attention.key, attention.value, mixing.dense
    elif kept is None or kept:  # the kept heads' rows (every head's, when packed), sliced and packed once here
        kept_heads = range(attention.num_attention_heads) if kept is None else kept
        rows = (torch.as_tensor(list(kept_heads), dtype=torch.long)[:, None] * size + torch.arange(size)).reshape(-1)
        rows = rows.to(mixing.dense.weight.device)
        query, key, value = (
            dense(p.weight[rows], p.bias[rows], onednn, dtype)
            for p in (attention.query, attention.key, attention.value)
        )
        mix = dense(mixing.dense.weight[:, rows], bias, onednn, dtype)
    if packed:
        into, out_of = dense(into.weight, into.bias, onednn, dtype), dense(out_of.weight, out_of.bias, onednn, dtype)

    def forward(hidden_states, attention_mask=None, *args, **kwargs):
        batch, length, _ = hidden_states.shape
        rows_in = hidden_states[:, :1] if cls_only else hidden_states
        if kept is not None and not kept:  # every head removed: the projection adds its bias alone
            mixed = bias.expand_as(rows_in)
        else:

            def heads(x):
                return x.view(batch, x.shape[1], -1, size).transpose(1, 2)

            if (
                cls_only
                and attention_mask is not None
                and attention_mask.dim() == 4
                and attention_mask.shape[-2] == length
            ):
                attention_mask = attention_mask[:, :, :1]  # the [CLS] query's row
            out, _ = interface(
                attention,
                heads(query(rows_in)),
                heads(key(hidden_states)),
                heads(value(hidden_states)),
                attention_mask,
                dropout=0.0,
                scaling=attention.scaling,
            )
            mixed = mix(out.reshape(batch, rows_in.shape[1], -1).contiguous())
        attended = mixing.LayerNorm(mixing.dropout(mixed) + rows_in)
        inner = layer.intermediate.intermediate_act_fn(into(attended))
        return layer.output.LayerNorm(layer.output.dropout(out_of(inner)) + attended)

    return forward


def prunes_heads(model) -> bool:
    """True for an encoder with BERT's layers (:attr:`headlab.core.arch.Architecture.bert_layers`) that are plain
    self-attention and feed-forward (no cross-attention, no chunking) with every head (not pruned): the engine can
    leave removed heads out of the computation instead of zeroing their outputs."""
    config = model.config
    return (
        architecture(model).bert_layers
        and not config.is_decoder
        and not config.add_cross_attention
        and config.chunk_size_feed_forward == 0
        and getattr(config, KEPT_HEADS, None) is None
    )


def reads_cls_only(model) -> bool:
    """True for a sequence classifier the engine computes itself (:func:`prunes_heads`) whose grade reads the last
    layer at ``[CLS]`` alone (:attr:`headlab.core.arch.Architecture.first_token_head`): not the bare encoder."""
    return (
        type(model).__name__.endswith("ForSequenceClassification")
        and architecture(model).first_token_head
        and prunes_heads(model)
    )


@contextmanager
def computed_heads(
    model,
    mask: torch.Tensor,
    from_layer: int = 0,
    cls_only: bool = False,
    onednn: bool = False,
    means: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
):
    """Inside the block, layers ``from_layer`` and up compute only the heads that the 0/1 ``mask`` keeps, and with
    ``cls_only`` the last layer computes its output at ``[CLS]`` alone (a BERT encoder, :func:`prunes_heads`); with
    ``onednn`` every one of those layers computes its products through oneDNN, and with ``dtype`` with weights cast
    to it once, whether it loses a head or not.

    The grades are those of :func:`headlab.core.masking.mask_heads` on the full model, up to float rounding; a
    random mask of half the heads saves about a sixth of a pass, a removed layer a third of that layer. With
    ``means`` a removed head's output is its mean (:func:`headlab.core.masking.head_means`), not zero.
    """
    layers = encoder_layers(model)
    changed = []
    for index, layer in enumerate(layers[from_layer:], start=from_layer):
        row, last = mask[index], cls_only and index == len(layers) - 1
        keeps_all = bool((row == 1).all())
        if keeps_all and not last and not onednn and dtype is None:
            continue
        kept = None if keeps_all else torch.nonzero(row == 1).flatten().tolist()
        layer.forward = _bert_layer_forward(
            layer, kept, cls_only=last, onednn=onednn, mean=None if means is None else means[index], dtype=dtype
        )
        changed.append(layer)
    try:
        yield
    finally:
        for layer in changed:
            del layer.forward


def appending_hook(outputs: list):
    """A forward hook that appends its module's output to ``outputs`` (to record every layer's output in one pass)."""
    return lambda module, args, out: outputs.append(out)


@contextmanager
def replayed_layers(layers, outputs):
    """Make layers ``0..len(outputs)-1`` return their recorded outputs instead of computing them."""
    for layer, output in zip(layers, outputs):
        layer.forward = lambda *args, _out=output, **kwargs: _out
    try:
        yield
    finally:
        for layer in layers[: len(outputs)]:
            del layer.forward


def _repeat(output, times: int):
    if times == 1:
        return output
    if isinstance(output, tuple):
        return tuple(_repeat(o, times) for o in output)
    return output.repeat(times, *([1] * (output.dim() - 1))) if torch.is_tensor(output) else output


class MaskEngine:
    """Grade probabilities of one model on one split under any head mask."""

    def __init__(
        self,
        model,
        encoded: Encoded,
        batch_size: int = 64,
        device="cpu",
        pad_id: int = 0,
        masks_per_pass: int = 1,
        reuse_layers: bool = True,
        autocast: bool | None = None,
        cls_only: bool = True,
        leave_out_removed: bool = True,
        onednn: bool | None = None,
        means: torch.Tensor | None = None,
    ):
        self.model = model.eval()
        self.means = means  # (layers, hidden) head means: removed heads are mean-ablated instead of zeroed
        self.device = torch.device(device)
        self.n = len(encoded)
        self.layers = encoder_layers(model)
        self.shape = head_grid(model)
        self.masks_per_pass = max(1, int(masks_per_pass))
        self.reuse_layers = reuse_layers
        self.cls_only = cls_only
        self.leave_out_removed = leave_out_removed and prunes_heads(model)
        self.autocast = precision(self.device) == "bf16" if autocast is None else autocast
        # oneDNN products (headlab.core.onednn): by default on a CPU where they are faster than MKL's, for the layers
        # this engine computes itself
        use_onednn = onednn_pays(self.device) if onednn is None else onednn
        self.onednn = bool(use_onednn and self.leave_out_removed and not self.autocast)
        if self.onednn:
            keep_freed_memory()
        self.batches = [
            (idx, model_inputs(model, batch, self.device)) for idx, batch in length_batches(encoded, batch_size, pad_id)
        ]
        self._layer_outputs: list[list] | None = None

    def _autocast(self):
        return autocast(self.device, "bf16" if self.autocast else "fp32")

    @property
    def _packed_dtype(self) -> torch.dtype | None:
        """bf16 when the engine's own layers run under bf16 autocast: their weights are cast once, not per call."""
        return torch.bfloat16 if self.autocast and self.leave_out_removed else None

    def _record_layer_outputs(self) -> list[list]:
        """One unmasked pass that keeps every layer's output, per batch (its layers computed as the masked ones are)."""
        recorded = []
        packed = self.onednn or self._packed_dtype is not None
        layers = (
            computed_heads(self.model, torch.ones(self.shape), onednn=self.onednn, dtype=self._packed_dtype)
            if packed
            else nullcontext()
        )
        with layers:
            for _, inputs in self.batches:
                outputs: list = []
                hooks = [layer.register_forward_hook(appending_hook(outputs)) for layer in self.layers]
                try:
                    self.model(**inputs)
                finally:
                    for hook in hooks:
                        hook.remove()
                recorded.append(outputs)
        return recorded

    @torch.inference_mode()
    def probabilities(self, masks: list[torch.Tensor]) -> list[np.ndarray]:
        """Probabilities (examples, grades) for each (layers, heads) keep-mask; masks go ``masks_per_pass`` at a
        time."""
        masks = [torch.as_tensor(m, dtype=torch.float32) for m in masks]
        results: dict[int, np.ndarray] = {}
        order = sorted(range(len(masks)), key=lambda i: first_masked_layer(masks[i]))
        with self._autocast():
            if self.reuse_layers and self._layer_outputs is None:
                self._layer_outputs = self._record_layer_outputs()
            for start in range(0, len(order), self.masks_per_pass):
                chunk = order[start : start + self.masks_per_pass]
                for i, probs in zip(chunk, self._run([masks[i] for i in chunk])):
                    results[i] = probs
        return [results[i] for i in range(len(masks))]

    def _run(self, masks: list[torch.Tensor]) -> list[np.ndarray]:
        m = len(masks)
        skip = min(first_masked_layer(mask) for mask in masks) if self.reuse_layers else 0
        skip = min(skip, len(self.layers))
        out = np.zeros((m, self.n, self.model.config.num_labels), dtype=np.float32)
        # one mask: its layers are set up once for every batch; several: each copy of a batch gets its own mask
        together = torch.stack(masks).to(self.device) if m > 1 else None
        recorded = self._layer_outputs or []  # recorded by probabilities() whenever layers are reused
        with self._heads(masks[0], skip) if m == 1 else nullcontext():
            for b, (idx, inputs) in enumerate(self.batches):
                rows = len(idx)
                stacked = {k: v.repeat(m, *([1] * (v.dim() - 1))) for k, v in inputs.items()}
                replay = [_repeat(o, m) for o in recorded[b][:skip]] if skip else []
                per_copy = (
                    self._heads(together.repeat_interleave(rows, dim=0), skip)
                    if together is not None
                    else nullcontext()
                )
                with replayed_layers(self.layers, replay), per_copy:
                    logits = self.model(**stacked).logits.float()
                probs = torch.softmax(logits, dim=-1).cpu().numpy().reshape(m, rows, -1)
                out[:, idx] = probs
        return list(out)

    def matmul_flops(self, masks: list[torch.Tensor], recording: bool = True) -> float:
        """Floating-point operations (two per multiply-add) of the matrix products :meth:`probabilities` performs
        for ``masks``: projections, attention scores and sums, feed-forward, pooler and classifier (and ELECTRA's
        projection of its embeddings, on every pass), in the layers it
        computes (from each pass's first masked layer, the kept heads only where it leaves removed heads out, the last
        layer at ``[CLS]`` alone), on its padded batches; with ``recording`` the unmasked pass that records every
        layer's output too. The work done, not a pass's nominal work: the numerator of a roofline."""
        if not prunes_heads(self.model):
            raise ValueError(f"matmul_flops counts the work of BERT's layers, not {architecture(self.model).name}'s")
        config = self.model.config
        d, inner, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
        size, last = d // heads, len(self.layers) - 1
        cls_only = self.cls_only and reads_cls_only(self.model)

        def layer(rows: int, length: int, kept: int, at_cls: bool) -> float:
            queries, width = (1 if at_cls else length), kept * size
            attention = 2 * rows * (queries * d * width + 2 * length * d * width + 2 * queries * length * width)
            return attention + 2 * rows * width * d * queries + 4 * rows * queries * d * inner

        project = getattr(self.model.base_model, "embeddings_project", None)  # ELECTRA: embeddings to hidden size
        projected = 0 if project is None else project.in_features * project.out_features
        grades = self.model.config.num_labels

        def passes(kept_per_layer, skip: int, copies: int, at_cls: bool) -> float:
            total = 0.0
            for _, inputs in self.batches:
                rows, length = inputs["input_ids"].shape
                rows *= copies
                total += 2 * rows * length * projected  # every pass embeds its inputs again, replayed layers or not
                total += sum(
                    layer(rows, length, kept_per_layer[i], at_cls and i == last) for i in range(skip, last + 1)
                )
                total += 2 * rows * d * (d + grades)  # pooler and classifier (or a dense head), at [CLS]
            return total

        masks = [torch.as_tensor(m, dtype=torch.float32) for m in masks]
        every = [heads] * (last + 1)
        total = passes(every, 0, 1, False) if recording and self.reuse_layers else 0.0
        order = sorted(masks, key=first_masked_layer)
        for start in range(0, len(order), self.masks_per_pass):
            chunk = order[start : start + self.masks_per_pass]
            skip = min(first_masked_layer(m) for m in chunk) if self.reuse_layers else 0
            skip = min(skip, last + 1)
            left_out = len(chunk) == 1 and self._leaves_out(chunk[0])  # several masks a pass: the hooks, every head
            kept = [int(chunk[0][i].sum()) for i in range(last + 1)] if left_out else every
            total += passes(kept, skip, len(chunk), cls_only and skip <= last)
        return total

    def _leaves_out(self, mask: torch.Tensor) -> bool:
        """Whether ``mask``'s removed heads are left out of the computation (one 0/1 mask, a BERT encoder) rather
        than zeroed by the masking hooks."""
        return self.leave_out_removed and mask.dim() == 2 and bool(((mask == 0) | (mask == 1)).all())

    def _heads(self, mask: torch.Tensor, skip: int):
        """How the layers from ``skip`` up apply ``mask``: left-out heads (:meth:`_leaves_out`) or hooks."""
        cls_only = self.cls_only and skip < len(self.layers) and reads_cls_only(self.model)
        if self._leaves_out(mask):
            return computed_heads(
                self.model, mask, skip, cls_only, onednn=self.onednn, means=self.means, dtype=self._packed_dtype
            )
        stack = ExitStack()
        if cls_only:
            stack.enter_context(computed_heads(self.model, torch.ones(self.shape), len(self.layers) - 1, cls_only=True))
        stack.enter_context(mask_heads(self.model, mask, self.means))
        return stack

    def precision_check(self) -> dict:
        """Unmasked predictions with and without autocast: share of equal grades and largest probability gap. The
        autocast pass's recorded layers are kept for the masks that follow (when the engine autocasts)."""
        keep = torch.ones(self.shape)
        saved = self.autocast, self._layer_outputs
        try:
            self.autocast, self._layer_outputs = False, None
            exact = self.probabilities([keep])[0]
            self.autocast, self._layer_outputs = True, None
            fast = self.probabilities([keep])[0]
            recorded = self._layer_outputs
        finally:
            self.autocast, self._layer_outputs = saved
        if self.autocast and self._layer_outputs is None:
            self._layer_outputs = recorded
        return {
            "grade_agreement": float(np.mean(exact.argmax(1) == fast.argmax(1))),
            "max_prob_diff": float(np.abs(exact - fast).max()),
            "n_examples": self.n,
        }

    def results_key(self) -> str:
        """What a mask's probabilities depend on besides the mask: :meth:`precision_key`, how removed heads are
        replaced (zero, or the means) and how the passes are laid out. Sweeps whose engines share this key share
        their masks (:func:`headlab.core.sweep.run_sweep` copies a mask another such sweep evaluated)."""
        digest = hashlib.sha256(self.precision_key().encode())
        digest.update(repr((self.onednn, self.masks_per_pass, self.reuse_layers)).encode())
        if self.means is not None:
            digest.update(self.means.detach().cpu().float().numpy().tobytes())
        return digest.hexdigest()[:16]

    def precision_key(self) -> str:
        """What :meth:`precision_check` depends on, hashed: the model's weights, the split's batches, the precision,
        device type and the layers the engine computes itself (not the ablation: an unmasked pass removes no head).
        Engines with one key have one precision check, so a build checks each model and split once."""
        digest = hashlib.sha256(
            repr(
                (self.autocast, self.device.type, self.leave_out_removed, self.cls_only, weights_digest(self.model))
            ).encode()
        )
        for idx, inputs in self.batches:
            digest.update(np.asarray(idx).tobytes())
            for name, tensor in sorted(inputs.items()):
                digest.update(name.encode())
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]
