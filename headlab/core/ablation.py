"""Mean and resample ablation per token class: a head's output replaced, at every position, by its mean at positions of
the same class (``[CLS]``, query, title, separator) over reference pairs, or by what it output on one real reference
pair at the position of the same class and rank.

Wang et al. 2023 (IOI, "Interpretability in the wild") remove a head by its mean over a reference distribution, not
by zero: the layers above still see what the head says on average, and only what it says about this input is gone.
The means are kept per token class, as IOI keeps them per position of one role, because a head says different things
at ``[CLS]``, in the query, in the title and at the separators. A mean is an input no real pair gives (it has none of
the spread of real outputs); resample ablation (causal scrubbing's, Chan et al. 2022) puts in what the head output on
another real pair, so a circuit judged under both is not judged on an artefact of the mean. A head's output is, as in
:mod:`headlab.core.masking` and :mod:`headlab.core.patching`, its slice of the input of the layer's attention output
projection; a forward pre-hook replaces it inside :func:`mean_ablated` or :func:`resample_ablated`, so the ablation
undoes itself."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch

from headlab.core.device import autocast
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import output_projections
from headlab.core.patching import head_columns, projection_pre_hooks, recording_head_outputs


class TokenClass(Enum):
    """What a position of ``[CLS] query [SEP] title [SEP]`` holds; its value is its row in :func:`class_outputs`'
    means."""

    CLS = 0
    QUERY = 1
    TITLE = 2
    SEPARATOR = 3


PADDING = -1  # the class id of padding: no class, never averaged, and never read where it is ablated


def token_classes(pair) -> np.ndarray:
    """The :class:`TokenClass` value of each position of one pair as :func:`headlab.inputs.pair.read_pair` reads it
    (its ``ids``, ``cls``, ``seps``, ``query`` and ``title``: the pair comes read, as core sits below ``inputs``); a
    separator inside the query's or the title's range counts as a separator."""
    classes = np.full(len(pair.ids), TokenClass.SEPARATOR.value, dtype=np.int64)
    classes[list(pair.query)] = TokenClass.QUERY.value
    classes[list(pair.title)] = TokenClass.TITLE.value
    classes[pair.seps] = TokenClass.SEPARATOR.value
    classes[pair.cls] = TokenClass.CLS.value
    return classes


def padded_classes(classes: list[np.ndarray], idx) -> torch.Tensor:
    """(batch, tokens) the token classes of the pairs at ``idx`` (``classes``: one array per pair, from
    :func:`token_classes`), padded as :func:`headlab.core.evaluate.padded` pads their ids, with :data:`PADDING`."""
    rows = [classes[i] for i in idx]
    out = torch.full((len(rows), max(len(r) for r in rows)), PADDING, dtype=torch.long)
    for row, pair in enumerate(rows):
        out[row, : len(pair)] = torch.as_tensor(pair)
    return out


DONORS = 32  # reference pairs a resample-ablated head reads its outputs from (a fixed bank, as the means' pairs are)


@dataclass(frozen=True)
class Donors:
    """Reference pairs whose head outputs a resample-ablated head puts in place of its own: ``outputs`` (layers x
    donors x tokens x hidden, each donor's positions first, then zeros), each donor's token classes and its index
    among the reference pairs (``pairs``)."""

    outputs: torch.Tensor
    classes: list[np.ndarray]
    pairs: np.ndarray

    def to(self, device) -> Donors:
        """The same donors with their outputs on ``device``."""
        return Donors(self.outputs.to(device), self.classes, self.pairs)

    def positions(self, classes: np.ndarray, donor: int) -> np.ndarray:
        """For one pair's token classes, the position of donor ``donor`` each of its positions reads: the one of the
        same class and the same rank within it (the third title token reads the donor's third title token), wrapping
        round where the donor has fewer; padding reads ``[CLS]``."""
        out = np.zeros(len(classes), dtype=np.int64)
        for c in TokenClass:
            mine, theirs = np.flatnonzero(classes == c.value), np.flatnonzero(self.classes[donor] == c.value)
            if len(mine):
                out[mine] = theirs[np.arange(len(mine)) % len(theirs)]
        return out


@torch.inference_mode()
def class_outputs(
    model,
    encoded: Encoded,
    classes: list[np.ndarray],
    donors: int = 0,
    seed: int = 0,
    batch_size: int = 64,
    device="cpu",
    pad_id: int = 0,
) -> tuple[torch.Tensor, Donors]:
    """One fp32 pass of the plain model over the ``encoded`` reference pairs (training ones; ``classes``: one
    :func:`token_classes` array per pair), every position of every layer: (layers, classes, hidden) each layer's
    head outputs averaged per :class:`TokenClass` over every non-padding position (what :func:`mean_ablated` reads),
    and the head outputs of ``donors`` of the pairs that hold every class, drawn at random (seeded; what
    :func:`resample_ablated` reads)."""
    projections = output_projections(model)
    n_classes, width = len(TokenClass), projections[0].in_features
    sums = torch.zeros(len(projections), n_classes, width, dtype=torch.float64)
    counts = torch.zeros(n_classes, dtype=torch.float64)
    whole = [i for i, row in enumerate(classes) if all((row == c.value).any() for c in TokenClass)]
    rng = np.random.default_rng([seed, 0xD0])
    drawn = np.sort(rng.choice(whole, min(donors, len(whole)), replace=False)) if whole else np.zeros(0, int)
    bank = torch.zeros(len(projections), len(drawn), max((len(classes[i]) for i in drawn), default=0), width)
    model.eval()
    with torch.autocast(torch.device(device).type, enabled=False):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            one_hot = (
                padded_classes(classes, idx)[..., None] == torch.arange(n_classes)
            ).double()  # batch x tokens x classes
            with recording_head_outputs(model) as passes:
                model(**model_inputs(model, batch, device))
            rows = [(d, r) for r, i in enumerate(idx) for d in np.flatnonzero(drawn == i)]
            for layer, hidden in enumerate(passes[0]):
                sums[layer] += torch.einsum("btc,bth->ch", one_hot, hidden.double().cpu())
                for d, r in rows:
                    bank[layer, d, : len(classes[drawn[d]])] = hidden[r, : len(classes[drawn[d]])].float().cpu()
            counts += one_hot.sum(dim=(0, 1))
    if bool((counts == 0).any()):
        missing = [c.name for c in TokenClass if counts[c.value] == 0]
        raise ValueError(f"the reference pairs have no position of class {missing}: no mean to ablate to")
    return (sums / counts[None, :, None]).float(), Donors(bank, [classes[i] for i in drawn], drawn)


@contextmanager
def _replaced(model, heads, values):
    """Inside the block, each head ``(layer, head)`` of ``heads`` outputs ``values(layer, columns, width)`` (batch x
    width x the heads' columns) in place of its own; a layer that computes ``[CLS]`` alone asks for width 1, the
    first position, as :func:`headlab.core.patching.patch_heads` reads the source's first row."""
    hooks = {}
    for layer, columns in head_columns(model, heads).items():

        def replace(module, args, layer=layer, columns=columns):
            hidden, *rest = args
            replaced = hidden.clone()
            new = values(layer, columns.to(hidden.device), hidden.shape[1])
            replaced[..., columns] = new.to(device=hidden.device, dtype=hidden.dtype)
            return (replaced, *rest)

        hooks[layer] = replace
    with projection_pre_hooks(model, hooks):
        yield model


def mean_ablated(model, heads, means: torch.Tensor, classes: torch.Tensor):
    """Inside the block, each head ``(layer, head)`` of ``heads`` outputs, at every position, its mean for that
    position's class (``means``: :func:`class_outputs`' means; ``classes``: batch x tokens class ids, padding any
    value); every other head computes as usual."""
    rows = classes.clamp(0, len(TokenClass) - 1)  # padding reads some class: no real token attends to it
    return _replaced(
        model, heads, lambda layer, columns, width: means[layer][:, columns].to(rows.device)[rows[:, :width]]
    )


def resample_ablated(model, heads, donors: Donors, chosen: torch.Tensor, positions: torch.Tensor):
    """Inside the block, each head ``(layer, head)`` of ``heads`` outputs what it output on a real reference pair:
    row ``b`` reads donor ``chosen[b]`` (:class:`Donors`) at ``positions[b]`` ((batch, tokens):
    :meth:`Donors.positions`: same class, same rank). One donor a pair, so a layer above reads one real pair's
    outputs, not a patchwork of positions from many (causal scrubbing resamples one other input whole); every other head
    computes as usual."""
    outputs = donors.outputs
    return _replaced(
        model,
        heads,
        lambda layer, columns, width: outputs[layer][chosen[:, None], positions[:, :width]][..., columns],
    )


@torch.inference_mode()
def mean_ablated_logits(
    model,
    encoded: Encoded,
    classes: list[np.ndarray],
    means: torch.Tensor,
    head_sets,
    batch_size: int = 64,
    device="cpu",
    pad_id: int = 0,
    chosen_precision: str | None = None,
) -> np.ndarray:
    """(sets, pairs, grades): the classifier's logits on the ``encoded`` pairs with each set of ``head_sets``
    mean-ablated in turn (:func:`mean_ablated`; an empty set: the model as it is), every batch built once for all
    the sets. ``classes``: one :func:`token_classes` array per pair; ``chosen_precision``: as
    :func:`headlab.core.device.autocast`."""
    out: np.ndarray | None = None
    model.eval()
    with autocast(device, chosen_precision):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            inputs, rows = model_inputs(model, batch, device), padded_classes(classes, idx).to(device)
            for s, heads in enumerate(head_sets):
                with mean_ablated(model, heads, means, rows):
                    logits = model(**inputs).logits.float().cpu().numpy()
                if out is None:
                    out = np.zeros((len(head_sets), len(encoded), logits.shape[1]))
                out[s, idx] = logits
    return np.zeros((len(head_sets), len(encoded), 0)) if out is None else out
