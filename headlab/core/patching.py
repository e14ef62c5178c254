"""Activation patching: run one input with some heads' outputs taken from a run of another input.

The causal test of what a head carries (Meng et al. 2022; Wang et al. 2023; MechIR, ECIR 2025, for relevance models):
take a *source* pair (the original) and a *target* pair of the same length that differs in what the head is said to
compute (its shared terms replaced, :mod:`headlab.measures.contrast`). Run the target with one head's output taken
from the source run: the share of the source-target difference in grade it restores is what that head carries of
the difference. A head's output is, as in :mod:`headlab.core.masking`, its slice of the input of the layer's
attention output projection; a forward pre-hook replaces the slice inside :func:`patch_heads`, so every patch
undoes itself.

:class:`PatchEngine` does it for many patches over one set of pairs: batches built once (source and target pairs
have the same lengths, so their batches line up position by position), the source's head outputs and the target's
layer outputs recorded once, and a patch whose lowest head is in layer ``l`` starts from the target's recorded
output of layer ``l - 1``, as the sweep engine does; a BERT classifier's last layer is computed at ``[CLS]`` alone,
the one row its grade reads (keys and values from every token, as in the sweep engine). The unpatched source and
target go through the same function and precision, so a patch's effect is never a difference of computation.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from enum import Enum
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from headlab.core.arch import architecture
from headlab.core.device import autocast, precision
from headlab.core.engine import appending_hook, computed_heads, reads_cls_only, replayed_layers
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.grades import GradeScale
from headlab.core.masking import encoder_layers, head_grid, output_projections, query_key_value
from headlab.core.worklog import note_work


@contextmanager
def recording_head_outputs(model):
    """Inside the block, every forward pass appends its per-layer head outputs (the output projections' inputs,
    batch x tokens x hidden) to the list this yields, one list of layers per pass."""
    passes: list[list] = []
    current: dict[int, torch.Tensor] = {}
    projections = output_projections(model)

    def record(layer):
        def hook(module, args):
            current[layer] = args[0].detach().clone()
            if layer == len(projections) - 1:
                passes.append([current.pop(i) for i in range(len(projections))])

        return hook

    handles = [p.register_forward_pre_hook(record(i)) for i, p in enumerate(projections)]
    try:
        yield passes
    finally:
        for handle in handles:
            handle.remove()


def head_columns(model, heads) -> dict[int, torch.Tensor]:
    """Per layer among ``heads`` ((layer, head) pairs), the columns of its output projection's input those heads own:
    what an intervention on a head's output replaces."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))
    size = output_projections(model)[0].in_features // model.config.num_attention_heads
    return {
        layer: torch.cat([torch.arange(h * size, (h + 1) * size) for h in sorted(chosen)])
        for layer, chosen in by_layer.items()
    }


@contextmanager
def projection_pre_hooks(model, hooks: dict):
    """Inside the block, each layer's output projection of ``hooks`` (layer -> forward pre-hook) runs its hook, and
    the hooks are removed on the way out, whatever happens inside."""
    projections = output_projections(model)
    handles = [projections[layer].register_forward_pre_hook(hook) for layer, hook in hooks.items()]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def patch_heads(model, heads, source: list[torch.Tensor | None], where: torch.Tensor | None = None):
    """Inside the block, each head ``(layer, head)`` of ``heads`` outputs what it output in the source run
    (``source[layer]``: that layer's head outputs, batch x tokens x hidden, from :func:`recording_head_outputs`);
    every other head computes as usual. ``where`` ((batch, tokens), 1 or 0) limits the patch to those positions of
    each pair (MechIR's head-by-position view). A layer that computes ``[CLS]`` alone reads the source's first row."""
    hooks = {}
    for layer, columns in head_columns(model, heads).items():
        if source[layer] is None:
            raise ValueError(f"no source head outputs recorded for layer {layer}")

        def swap(module, args, layer=layer, columns=columns):
            hidden, *rest = args
            patched = hidden.clone()
            from_source = source[layer][:, : hidden.shape[1]].to(device=hidden.device, dtype=hidden.dtype)
            if where is None:
                patched[..., columns] = from_source[..., columns]
            else:
                keep = where[:, : hidden.shape[1], None].to(device=hidden.device, dtype=torch.bool)
                patched[..., columns] = torch.where(keep, from_source[..., columns], hidden[..., columns])
            return (patched, *rest)

        hooks[layer] = swap
    with projection_pre_hooks(model, hooks):
        yield model


@contextmanager
def head_output_gradients(model):
    """Inside the block, a forward pass keeps every layer's head outputs (the output projections' inputs) in the
    graph, and the list this yields gets them, one per layer, so ``.grad`` holds each after a backward pass. The
    parameters need no gradient inside (their flags come back after), so the lowest layer's head outputs become a
    leaf and nothing below them, and no weight, is differentiated."""
    kept: list[torch.Tensor] = []
    needed = [p.requires_grad for p in model.parameters()]
    for parameter in model.parameters():
        parameter.requires_grad_(False)

    def keep(module, args):
        hidden, *rest = args
        if not hidden.requires_grad:
            hidden = hidden.detach().requires_grad_(True)
        hidden.retain_grad()
        kept.append(hidden)
        return (hidden, *rest)

    handles = [p.register_forward_pre_hook(keep) for p in output_projections(model)]
    try:
        yield kept
    finally:
        for handle in handles:
            handle.remove()
        for parameter, flag in zip(model.parameters(), needed):
            parameter.requires_grad_(flag)


def expected_grade(logits: torch.Tensor | np.ndarray, scale: GradeScale) -> np.ndarray:
    """The grade a pair is expected to get under the model's probabilities: bounded by the scale's ends, so a patch
    can only restore up to the source's grade."""
    return scale.expected(torch.softmax(torch.as_tensor(logits).float(), dim=-1).cpu().numpy())


def grade_logit(logits: torch.Tensor | np.ndarray):
    """``sum_i (i - (k - 1) / 2) * logit_i`` over a pair's k logits: its grade read linearly off them (the patching
    literature's metric, Heimersheim & Nanda 2024: unbounded, so a patch's restored share is not squeezed by a
    softmax). The weights are the grades minus their mean, whichever grade the scale starts at (-2 ... 2 on five
    grades), and sum to 0, so adding one constant to every logit leaves it unchanged. A tensor in, a tensor out (for
    gradients)."""
    k = logits.shape[-1]
    weights = np.arange(k, dtype=np.float64) - (k - 1) / 2
    if torch.is_tensor(logits):
        return logits.float() @ torch.as_tensor(weights, dtype=torch.float32, device=logits.device)
    return np.asarray(logits, dtype=np.float64) @ weights


def first_layer(heads) -> int:
    """The lowest layer among ``heads`` ((layer, head) pairs): the first layer a patch changes."""
    return min(int(layer) for layer, _ in heads)


class Route(Enum):
    """How a receiver head reads a change from below: through its query, its key or its value (its value is its row
    of :func:`headlab.core.masking.query_key_value`'s projections)."""

    QUERY = 0
    KEY = 1
    VALUE = 2


class PatchEngine:
    """Expected grades of the ``target`` pairs with chosen heads patched from the ``source`` pairs (the same pairs,
    token for token the same lengths), many patches over one set of batches."""

    def __init__(
        self,
        model,
        source: Encoded,
        target: Encoded,
        batch_size: int = 64,
        device="cpu",
        pad_id: int = 0,
        autocast: bool | None = None,
        last_at_cls: bool = True,
    ):
        if len(source) != len(target):
            raise ValueError(f"source has {len(source)} pairs, target {len(target)}: patching pairs them one to one")
        for i, (a, b) in enumerate(zip(source.input_ids, target.input_ids)):
            if len(a) != len(b):
                raise ValueError(
                    f"pair {i}: source has {len(a)} tokens, target {len(b)}; a patch needs the same positions in both"
                )
        self.model = model.eval()
        self.device = torch.device(device)
        self.n = len(source)
        self.scale = source.scale
        self.layers = encoder_layers(model)
        self.shape = head_grid(model)
        self.autocast = precision(self.device) == "bf16" if autocast is None else autocast
        self.last_at_cls = last_at_cls and reads_cls_only(model)
        # the same lengths, so one order of the pairs (sorted by length, stable) makes both sides' batches
        self.batches = [
            (idx, model_inputs(model, s, self.device), model_inputs(model, t, self.device))
            for (idx, s), (_, t) in zip(
                length_batches(source, batch_size, pad_id), length_batches(target, batch_size, pad_id)
            )
        ]
        self._recorded: list[tuple] | None = None

    def _autocast(self):
        return autocast(self.device, "bf16" if self.autocast else "fp32")

    def _last_layer(self):
        """Inside the block, with :attr:`last_at_cls`, the last layer computes its output at ``[CLS]`` alone (its
        modules, so patching and reading hooks still apply; they see one row there, ``[CLS]``'s): every run of the
        engine, recorded or patched, goes through it, so its head outputs in that layer are ``[CLS]``'s only."""
        if not self.last_at_cls:
            return nullcontext()
        return computed_heads(self.model, torch.ones(self.shape), len(self.layers) - 1, cls_only=True)

    @torch.inference_mode()
    def _record(self):
        """Per batch: the source's head outputs and logits, the target's layer outputs, logits and head outputs."""
        if self._recorded is None:
            recorded = []
            with self._autocast(), self._last_layer():
                for _, source, target in self.batches:
                    with recording_head_outputs(self.model) as passes:
                        source_logits = self.model(**source).logits.float().cpu().numpy()
                    outputs: list = []
                    hooks = [layer.register_forward_hook(appending_hook(outputs)) for layer in self.layers]
                    try:
                        with recording_head_outputs(self.model) as target_passes:
                            target_logits = self.model(**target).logits.float().cpu().numpy()
                    finally:
                        for hook in hooks:
                            hook.remove()
                    recorded.append((passes[0], source_logits, outputs, target_logits, target_passes[0]))
            self._recorded = recorded
        return self._recorded

    def unpatched_logits(self) -> tuple[np.ndarray, np.ndarray]:
        """The logits (pairs, grades) of the source and of the target pairs, as the patched runs compute them."""
        source, target = np.zeros((self.n, self.scale.count)), np.zeros((self.n, self.scale.count))
        for (idx, *_), (_, source_logits, _, target_logits, _) in zip(self.batches, self._record()):
            source[idx], target[idx] = source_logits, target_logits
        return source, target

    def unpatched(self) -> tuple[np.ndarray, np.ndarray]:
        """The expected grades of the source and of the target pairs, as the patched runs compute them."""
        source, target = self.unpatched_logits()
        return expected_grade(source, self.scale), expected_grade(target, self.scale)

    @torch.inference_mode()
    def logits(self, patches: list, where=None, progress: bool = False) -> np.ndarray:
        """(patches, pairs, grades): the target's logits with each patch's heads (a list of ``(layer, head)``)
        taken from the source, at every position or, given ``where`` (per pair in source order, its positions), at
        those alone; layers below a patch's lowest head are replayed from the target's recorded run."""
        recorded = self._record()
        out = np.zeros((len(patches), self.n, self.scale.count))
        with self._autocast(), self._last_layer():
            for p, heads in enumerate(tqdm(patches, desc="patches", disable=not progress)):
                if not heads:
                    out[p] = self.unpatched_logits()[1]
                    continue
                skip = first_layer(heads)
                for (idx, _, target), (source_heads, _, outputs, _, _) in zip(self.batches, recorded):
                    mask = None if where is None else _position_mask(where, idx, target["attention_mask"])
                    with (
                        replayed_layers(self.layers, outputs[:skip]),
                        patch_heads(self.model, heads, source_heads, mask),
                    ):
                        out[p, idx] = self.model(**target).logits.float().cpu().numpy()
        return out

    def expected_grades(self, patches: list, progress: bool = False) -> np.ndarray:
        """(patches, pairs): :meth:`logits` as expected grades."""
        return expected_grade(self.logits(patches, progress=progress), self.scale)

    def attribution(self, progress: bool = False) -> list[np.ndarray]:
        """Attribution patching (Nanda 2023; Kramar et al. 2024, AtP): per pair in source order, a (layers, heads,
        tokens) array of the first-order estimate of what patching that head at that position alone from the source
        changes in the target's :func:`grade_logit`: the gradient at the target run times (source - target) head
        output, every head and position from one backward pass per batch. :meth:`logits` checks it exactly."""
        recorded = self._record()
        layers, heads = self.shape
        out: list[np.ndarray] = [np.zeros(0)] * self.n
        with self._autocast(), self._last_layer():
            for (idx, _, target), (source_heads, _, _, _, target_heads) in tqdm(
                list(zip(self.batches, recorded)), desc="attribution", disable=not progress
            ):
                with torch.enable_grad(), head_output_gradients(self.model) as kept:
                    grade_logit(self.model(**target).logits).sum().backward()
                per_layer = []
                tokens = target["input_ids"].shape[1]
                for layer in range(layers):
                    delta = (source_heads[layer] - target_heads[layer]).float()
                    grad = kept[layer].grad.float()
                    effect = (grad * delta).reshape(*delta.shape[:2], heads, -1).sum(-1)  # batch x tokens x heads
                    # a last layer computed at [CLS] alone: elsewhere its heads reach nothing the grade reads (0)
                    effect = torch.nn.functional.pad(effect, (0, 0, 0, tokens - effect.shape[1]))
                    per_layer.append(effect.permute(0, 2, 1).cpu().numpy())
                stacked = np.stack(per_layer, axis=1)  # batch x layers x heads x tokens
                lengths = target["attention_mask"].sum(-1).tolist()
                for row, example in enumerate(idx):
                    out[example] = stacked[row, :, :, : int(lengths[row])]
        return out

    def _path_input(self, senders, layer: int, target, source_heads, outputs, target_heads) -> torch.Tensor:
        """The input of ``layer`` in the target run with the senders' outputs from the source and every other head
        from the lowest sender's layer up frozen at its target output: the senders' change, by the residual alone."""
        low, chosen = first_layer(senders), {(int(l), int(h)) for l, h in senders}
        frozen = [(l, h) for l in range(low, layer) for h in range(self.shape[1]) if (l, h) not in chosen]
        return _layer_input(
            self.model, self.layers, layer, outputs[:low], target, [(senders, source_heads), (frozen, target_heads)]
        )

    @torch.inference_mode()
    def path_logits(self, senders, receivers, cls_only: bool = False, routes=None) -> np.ndarray:
        """(receivers, pairs, grades): the target's logits with each receiver head (layer, head) alone reading the
        senders' change, the rest of the run the target's. Path patching, one step (Wang et al. 2023): the senders'
        outputs come from the source and every other head from the lowest sender's layer up is frozen at its target
        output, so their change reaches the receiver's layer along the residual stream and through the MLPs alone;
        the receiver computes its query, key and value from that input. The patched input of a layer is computed
        once for all its receivers. ``cls_only``: the receiver's new output is kept at ``[CLS]`` alone (at every other
        position it outputs what it output in the target run), the route by which a head hands a feature to the
        classifier, which reads ``[CLS]``. ``routes``: per receiver, the :class:`Route` s by which it reads the change
        (its query, key or value; the others computed from the target's input, as if the change never reached them):
        all three where not given. A receiver may be listed more than once, with other routes: its layer's patched
        input is still computed once."""
        receivers = [(int(l), int(h)) for l, h in receivers]
        routes = [tuple(Route)] * len(receivers) if routes is None else list(routes)
        if len(routes) != len(receivers):
            raise ValueError(f"{len(routes)} routes for {len(receivers)} receivers: one tuple of routes each")
        if not receivers or min(l for l, _ in receivers) <= max(int(l) for l, _ in senders):
            raise ValueError(f"receivers {receivers} must all sit above the senders {sorted(senders)}")
        out = np.zeros((len(receivers), self.n, self.scale.count))
        recorded = self._record()
        with self._autocast():
            for layer in sorted({l for l, _ in receivers}):
                for (idx, _, target), (source_heads, _, outputs, _, target_heads) in zip(self.batches, recorded):
                    residual = self._path_input(senders, layer, target, source_heads, outputs, target_heads)
                    for r, (l, h) in enumerate(receivers):
                        if l != layer:
                            continue
                        with (
                            replayed_layers(self.layers, outputs[:layer]),
                            self._last_layer(),
                            _reading(_Head(self.model, l, h), residual, routes[r]),
                            patch_heads(self.model, [(l, h)], target_heads, _off_cls(target))
                            if cls_only
                            else nullcontext(),
                        ):
                            out[r, idx] = self.model(**target).logits.float().cpu().numpy()
        return out


class _Stop(Exception):
    """Ends a forward pass once the input it was run for is captured."""


def _layer_input(model, layers, layer: int, replay, inputs, patched) -> torch.Tensor:
    """The input of ``layers[layer]`` in a run of ``inputs`` with each ``(heads, source)`` of ``patched`` patched,
    the layers below the lowest patch replayed; the pass stops there."""
    captured = []

    def capture(module, args, kwargs):
        captured.append(args[0] if args else kwargs["hidden_states"])
        raise _Stop

    handle = layers[layer].register_forward_pre_hook(capture, with_kwargs=True)
    try:
        with replayed_layers(layers, replay), patch_heads(model, *patched[0]), patch_heads(model, *patched[1]):
            model(**inputs)
    except _Stop:
        pass
    finally:
        handle.remove()
    return captured[0]


class _Head:
    """One head of one layer: its rows of the query, key and value projections, and, where the architecture adds
    one (MPNet's relative position bias, passed to its self-attention as ``position_bias``), its score bias."""

    def __init__(self, model, layer: int, head: int):
        self.attention, self.projections = query_key_value(model, layer)
        size = self.attention.attention_head_size
        self.head, self.columns, self.scaling = head, slice(head * size, (head + 1) * size), size**-0.5
        self.relative = architecture(model).score_bias


def _off_cls(inputs) -> torch.Tensor:
    """(batch, tokens) 1 at every position of each pair but ``[CLS]`` (position 0), 0 there and at padding."""
    where = inputs["attention_mask"].float().clone()
    where[:, 0] = 0.0
    return where


@contextmanager
def _reading(receiver: _Head, residual: torch.Tensor, routes=tuple(Route)):
    """The receiver head's query, key and value (those of ``routes``) computed from ``residual`` (its columns of each
    projection only; a projection that computes ``[CLS]`` alone reads the residual's first row)."""
    columns = receiver.columns

    def from_residual(module, args, output):
        changed = output.clone()
        changed[..., columns] = torch.nn.functional.linear(
            residual[:, : output.shape[1]].to(output.dtype),
            module.weight[columns].to(output.dtype),
            module.bias[columns].to(output.dtype),
        )
        return changed

    handles = [receiver.projections[route.value].register_forward_hook(from_residual) for route in routes]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _position_mask(positions, idx, attention_mask: torch.Tensor) -> torch.Tensor:
    """(batch, tokens) 1 at each pair's ``positions`` (given per pair in source order), 0 elsewhere."""
    where = torch.zeros(attention_mask.shape, dtype=torch.float32)
    for row, example in enumerate(idx):
        where[row, list(positions[example])] = 1.0
    return where


def single_head_patches(layers: int, heads: int) -> dict[str, list[tuple[int, int]]]:
    """Every head alone, named ``"<layer>.<head>"``."""
    return {f"{l}.{h}": [(l, h)] for l in range(layers) for h in range(heads)}


def _plan(patches: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [{"patch": name, "heads": " ".join(f"{l}.{h}" for l, h in sorted(heads))} for name, heads in patches.items()]
    )


def run_patching(
    model,
    source: Encoded,
    target: Encoded,
    patches: dict[str, list],
    out_dir,
    batch_size: int = 64,
    device="cpu",
    pad_id: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Every patch of ``patches`` (name -> heads) on the ``target`` pairs from the ``source`` pairs, saved patch by
    patch in ``out_dir`` (``<patch>.logits.npy``, pairs x grades) and resumed there; the unpatched source and target
    are the rows ``"source"`` and ``"target"``. Returns the tidy table: patch, example (the pair's position in
    ``source``), expected (grade) and grade_logit (:func:`grade_logit`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = _plan(patches)
    saved = out_dir / "plan.csv"
    if saved.exists() and not pd.read_csv(saved, dtype=str, keep_default_na=False).equals(plan):
        raise ValueError(f"{saved} describes other patches; use another folder or delete it to start over")
    plan.to_csv(saved, index=False)
    names = ["source", "target", *patches]
    todo = [name for name in names if not (out_dir / f"{name}.logits.npy").exists()]
    if todo:
        engine = PatchEngine(model, source, target, batch_size, device, pad_id)
        note_work(f"patching {out_dir.name}: {len(todo)} patches")
        clean, corrupted = engine.unpatched_logits()
        for name in tqdm(todo, desc=f"patching {out_dir.name}", disable=not progress):
            logits = {"source": clean, "target": corrupted}.get(name)
            logits = engine.logits([patches[name]])[0] if logits is None else logits
            np.save(out_dir / f"{name}.part.npy", logits)
            os.replace(out_dir / f"{name}.part.npy", out_dir / f"{name}.logits.npy")  # a patch counts once whole
    logits = np.concatenate([np.load(out_dir / f"{name}.logits.npy") for name in names])
    return pd.DataFrame(
        {
            "patch": np.repeat(names, len(source)),
            "example": np.tile(np.arange(len(source)), len(names)),
            "expected": expected_grade(logits, source.scale),
            "grade_logit": grade_logit(logits),
        }
    )
