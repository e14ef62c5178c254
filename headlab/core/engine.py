"""Evaluate many head masks over one split, fast.

What makes a sweep fast, and what this module does about each:
- tokenize and pad once: batches are built once, sorted by length with dynamic padding;
- no work that a mask cannot change: the unmasked model's output of every layer is computed once per batch,
  and a mask whose first masked head is in layer ``l`` starts from the cached output of layer ``l - 1``
  (layers ``0..l-1`` are replaced by a lookup for that forward pass);
- no work the grade cannot see: a BERT classifier reads the last layer at ``[CLS]`` only, so that layer computes
  its keys and values for every token but its query, head mixing and feed-forward for ``[CLS]`` alone
  (:func:`cls_only_last_layer`; the same numbers up to float rounding);
- sdpa attention, inference mode, and bf16 autocast on a GPU (checked against fp32 by :meth:`precision_check`);
- several masks per forward pass (``masks_per_pass``): the batch is repeated, one mask per copy.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import numpy as np
import torch

from headlab.core.evaluate import NUM_GRADES, Encoded, length_batches, model_inputs
from headlab.core.masking import encoder_layers, head_grid, mask_heads


def first_masked_layer(mask: torch.Tensor) -> int:
    """Index of the lowest layer with a removed head (the number of layers if none is removed)."""
    rows = torch.nonzero((mask != 1).any(dim=-1))
    return int(rows[0]) if len(rows) else mask.shape[0]


def _bert_cls_forward(layer):
    """A ``BertLayer`` forward that returns the layer's output at ``[CLS]`` alone (shape batch x 1 x hidden).

    Keys and values come from every token, as in the full layer; the query, the heads' mixing (through the
    output projection, so head masks still apply), the residual, layer norms and feed-forward run on one row.
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    attention = layer.attention.self
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)

    def forward(hidden_states, attention_mask=None, *args, **kwargs):
        batch, length, _ = hidden_states.shape
        cls = hidden_states[:, :1]
        def heads(x):
            return x.view(batch, x.shape[1], -1, attention.attention_head_size).transpose(1, 2)
        if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[-2] == length:
            attention_mask = attention_mask[:, :, :1]  # the [CLS] query's row
        out, _ = interface(attention, heads(attention.query(cls)), heads(attention.key(hidden_states)),
                           heads(attention.value(hidden_states)), attention_mask, dropout=0.0,
                           scaling=attention.scaling)
        attended = layer.attention.output(out.reshape(batch, 1, -1).contiguous(), cls)
        return layer.output(layer.intermediate(attended), attended)

    return forward


def reads_cls_only(model) -> bool:
    """True for a BERT sequence classifier without cross-attention: its grade reads the last layer at ``[CLS]``."""
    config = model.config
    return (config.model_type == "bert" and type(model).__name__ == "BertForSequenceClassification"
            and not config.is_decoder and not config.add_cross_attention and config.chunk_size_feed_forward == 0)


@contextmanager
def cls_only_last_layer(model):
    """Inside the block the model's last layer computes its output at ``[CLS]`` alone (for a BERT classifier;
    any other model is left as it is). The grades are those of the full model, with a sixth (or twelfth) less
    work per pass."""
    if not reads_cls_only(model):
        yield
        return
    last = encoder_layers(model)[-1]
    last.forward = _bert_cls_forward(last)
    try:
        yield
    finally:
        del last.forward


@contextmanager
def _replay_layers(layers, outputs):
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

    def __init__(self, model, encoded: Encoded, batch_size: int = 64, device="cpu", pad_id: int = 0,
                 masks_per_pass: int = 1, reuse_layers: bool = True, autocast: bool | None = None,
                 cls_only: bool = True):
        self.model = model.eval()
        self.device = torch.device(device)
        self.n = len(encoded)
        self.layers = encoder_layers(model)
        self.shape = head_grid(model)
        self.masks_per_pass = max(1, int(masks_per_pass))
        self.reuse_layers = reuse_layers
        self.cls_only = cls_only
        self.autocast = self.device.type == "cuda" if autocast is None else autocast
        self.batches = [(idx, model_inputs(model, batch, self.device))
                        for idx, batch in length_batches(encoded, batch_size, pad_id)]
        self._layer_outputs: list[list] | None = None

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16) if self.autocast else nullcontext()

    def _record_layer_outputs(self) -> list[list]:
        """One unmasked pass that keeps every layer's output, per batch."""
        recorded = []
        for _, inputs in self.batches:
            outputs = []
            hooks = [layer.register_forward_hook(lambda m, a, out: outputs.append(out)) for layer in self.layers]
            try:
                self.model(**inputs)
            finally:
                for hook in hooks:
                    hook.remove()
            recorded.append(outputs)
        return recorded

    @torch.inference_mode()
    def probabilities(self, masks: list[torch.Tensor]) -> list[np.ndarray]:
        """Probabilities (examples x 5) for each (layers x heads) keep-mask; masks go ``masks_per_pass`` at a time."""
        masks = [torch.as_tensor(m, dtype=torch.float32) for m in masks]
        results = [None] * len(masks)
        order = sorted(range(len(masks)), key=lambda i: first_masked_layer(masks[i]))
        with self._autocast():
            if self.reuse_layers and self._layer_outputs is None:
                self._layer_outputs = self._record_layer_outputs()
            for start in range(0, len(order), self.masks_per_pass):
                chunk = order[start : start + self.masks_per_pass]
                for i, probs in zip(chunk, self._run([masks[i] for i in chunk])):
                    results[i] = probs
        return results

    def _run(self, masks: list[torch.Tensor]) -> list[np.ndarray]:
        m = len(masks)
        skip = min(first_masked_layer(mask) for mask in masks) if self.reuse_layers else 0
        skip = min(skip, len(self.layers))
        out = np.zeros((m, self.n, NUM_GRADES), dtype=np.float32)
        for b, (idx, inputs) in enumerate(self.batches):
            rows = len(idx)
            stacked = {k: v.repeat(m, *([1] * (v.dim() - 1))) for k, v in inputs.items()}
            mask = torch.stack(masks).to(self.device).repeat_interleave(rows, dim=0) if m > 1 else masks[0]
            replay = [_repeat(o, m) for o in self._layer_outputs[b][:skip]] if skip else []
            last = cls_only_last_layer(self.model) if skip < len(self.layers) and self.cls_only else nullcontext()
            with _replay_layers(self.layers, replay), last, mask_heads(self.model, mask):
                logits = self.model(**stacked).logits.float()
            probs = torch.softmax(logits, dim=-1).cpu().numpy().reshape(m, rows, NUM_GRADES)
            out[:, idx] = probs
        return list(out)

    def precision_check(self) -> dict:
        """Unmasked predictions with and without autocast: share of equal grades and largest probability gap."""
        keep = torch.ones(self.shape)
        saved = self.autocast, self._layer_outputs
        try:
            self.autocast, self._layer_outputs = False, None
            exact = self.probabilities([keep])[0]
            self.autocast, self._layer_outputs = True, None
            fast = self.probabilities([keep])[0]
        finally:
            self.autocast, self._layer_outputs = saved
        return {"grade_agreement": float(np.mean(exact.argmax(1) == fast.argmax(1))),
                "max_prob_diff": float(np.abs(exact - fast).max()), "n_examples": self.n}
