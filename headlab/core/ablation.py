"""Mean ablation per token class: a head's output replaced, at every position, by its mean at positions of the same
class (``[CLS]``, query, title, separator) over reference pairs.

Wang et al. 2023 (IOI, "Interpretability in the wild") remove a head by its mean over a reference distribution, not
by zero: the layers above still see what the head says on average, and only what it says about this input is gone.
The means are kept per token class, as IOI keeps them per position of one role, because a head says different things
at ``[CLS]``, in the query, in the title and at the separators. A head's output is, as in
:mod:`headlab.core.masking` and :mod:`headlab.core.patching`, its slice of the input of the layer's attention output
projection; a forward pre-hook replaces it inside :func:`mean_ablated`, so the ablation undoes itself.
"""

from __future__ import annotations

from contextlib import contextmanager
from enum import Enum

import numpy as np
import torch

from headlab.core.device import autocast
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import output_projections
from headlab.core.patching import head_columns, projection_pre_hooks, recording_head_outputs


class TokenClass(Enum):
    """What a position of ``[CLS] query [SEP] title [SEP]`` holds; its value is its row in :func:`class_means`."""

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
    """(batch x tokens) the token classes of the pairs at ``idx`` (``classes``: one array per pair, from
    :func:`token_classes`), padded as :func:`headlab.core.evaluate.padded` pads their ids, with :data:`PADDING`."""
    rows = [classes[i] for i in idx]
    out = torch.full((len(rows), max(len(r) for r in rows)), PADDING, dtype=torch.long)
    for row, pair in enumerate(rows):
        out[row, : len(pair)] = torch.as_tensor(pair)
    return out


@torch.inference_mode()
def class_means(
    model, encoded: Encoded, classes: list[np.ndarray], batch_size: int = 64, device="cpu", pad_id: int = 0
) -> torch.Tensor:
    """(layers x classes x hidden): each layer's head outputs averaged per :class:`TokenClass` over every
    non-padding position of the ``encoded`` pairs (the reference pairs, training ones; ``classes``: one
    :func:`token_classes` array per pair), computed in fp32 by the plain model, every position of every layer."""
    projections = output_projections(model)
    n_classes = len(TokenClass)
    sums = torch.zeros(len(projections), n_classes, projections[0].in_features, dtype=torch.float64)
    counts = torch.zeros(n_classes, dtype=torch.float64)
    model.eval()
    with torch.autocast(torch.device(device).type, enabled=False):
        for idx, batch in length_batches(encoded, batch_size, pad_id):
            one_hot = (
                padded_classes(classes, idx)[..., None] == torch.arange(n_classes)
            ).double()  # batch x tokens x classes
            with recording_head_outputs(model) as passes:
                model(**model_inputs(model, batch, device))
            for layer, hidden in enumerate(passes[0]):
                sums[layer] += torch.einsum("btc,bth->ch", one_hot, hidden.double().cpu())
            counts += one_hot.sum(dim=(0, 1))
    if bool((counts == 0).any()):
        missing = [c.name for c in TokenClass if counts[c.value] == 0]
        raise ValueError(f"the reference pairs have no position of class {missing}: no mean to ablate to")
    return (sums / counts[None, :, None]).float()


@contextmanager
def mean_ablated(model, heads, means: torch.Tensor, classes: torch.Tensor):
    """Inside the block, each head ``(layer, head)`` of ``heads`` outputs, at every position, its mean for that
    position's class (``means``: :func:`class_means`; ``classes``: batch x tokens class ids, padding any value);
    every other head computes as usual. A layer that computes ``[CLS]`` alone reads the classes' first column, as
    :func:`headlab.core.patching.patch_heads` reads the source's first row."""
    rows = classes.clamp(0, len(TokenClass) - 1)  # padding reads some class: no real token attends to it
    hooks = {}
    for layer, columns in head_columns(model, heads).items():
        table = means[layer][:, columns]  # classes x the heads' columns

        def ablate(module, args, table=table, columns=columns):
            hidden, *rest = args
            ablated = hidden.clone()
            where = rows[:, : hidden.shape[1]].to(hidden.device)
            ablated[..., columns] = table.to(device=hidden.device, dtype=hidden.dtype)[where]
            return (ablated, *rest)

        hooks[layer] = ablate
    with projection_pre_hooks(model, hooks):
        yield model


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
    """(sets x pairs x grades): the classifier's logits on the ``encoded`` pairs with each set of ``head_sets``
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
