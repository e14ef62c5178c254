"""Where in the pair the matching signal lives, and which heads carry it: page 09's circuit view.

- :func:`position_groups`: a contrast pair's positions in four groups: ``[CLS]``, the query's pieces of the terms
  it shares with the title, the title's replaced pieces, and every other position (MechIR's head-by-position view).
- :func:`restored_by_position`: the term-matching heads patched back at one group at a time, as shares of the grade
  gap on :func:`headlab.core.patching.grade_logit` (linear in the logits, so shares above 100% mean overshoot, not
  saturation), with paired bootstrap intervals over the pairs.
- :func:`attribution_scores`: attribution patching (one backward pass per batch) per head, in the same share,
  whole and per group; :func:`headlab.findings.patching.rank_agreement` checks it against exact patching.
- :func:`receiver_ranking`: path patching from the matching heads to every head above them, one at a time, whole and
  through its output at ``[CLS]`` alone: which heads read what the matching heads carry, found rather than assumed, each
  set against the other receivers.
- :func:`found_circuit`: the matching heads and the receivers that read most, per sender and receiver (the edges),
  and the share of the matching heads' whole effect that comes back through the found receivers alone (a mediated
  share; not IOI's faithfulness, Wang et al. 2023, which runs the circuit with everything else ablated).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from headlab.core.patching import PatchEngine, grade_logit
from headlab.core.stats import bootstrap_weights
from headlab.findings.contrast import Contrast
from headlab.inputs.pair import read_pair

GROUPS = ("[CLS]", "query terms", "title terms", "other")


def position_groups(contrast: Contrast, tokenizer, stopwords=None) -> dict[str, list[list[int]]]:
    """Per group of :data:`GROUPS`, per contrast pair in order, its positions: ``[CLS]``; the query's pieces of the
    terms the query shares with the title in either pair (the original for a corrupted title, the changed one for
    an injected term); the title's pieces the contrast replaced; every other position (separators, the rest)."""
    groups: dict[str, list[list[int]]] = {g: [] for g in GROUPS}
    for original, changed, replaced in zip(
        contrast.original.input_ids, contrast.changed.input_ids, contrast.changed_positions()
    ):
        pairs = [read_pair(tokenizer, ids, stopwords) for ids in (original, changed)]
        query = sorted({q for pair in pairs for q, _ in pair.shared})
        title = sorted(replaced)
        cls = [pairs[0].cls]
        taken = set(query) | set(title) | set(cls)
        groups["[CLS]"].append(cls)
        groups["query terms"].append(query)
        groups["title terms"].append(title)
        groups["other"].append([i for i in range(len(original)) if i not in taken])
    return groups


def _boot_shares(moved: np.ndarray, gap: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(rows x resamples): each row of ``moved`` (rows x pairs) as a share of the gap, per bootstrap resample."""
    return (moved @ weights.T) / (weights @ gap)


def _share(moved: np.ndarray, gap: np.ndarray, weights: np.ndarray) -> tuple[float, float, float]:
    """A ratio of means over the pairs and its 95% paired bootstrap interval."""
    lo, hi = np.quantile(_boot_shares(moved[None, :], gap, weights)[0], [0.025, 0.975])
    return float(moved.mean() / gap.mean()), float(lo), float(hi)


def restored_by_position(
    engine: PatchEngine, heads, groups: dict[str, list[list[int]]], n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """One row per group of :data:`GROUPS`, then ``all`` (every position at once) and ``sum of groups``: the share of
    the source-target gap in :func:`headlab.core.patching.grade_logit` that patching ``heads`` back at those positions
    alone restores, with a 95% paired bootstrap interval over the pairs (the same resamples for every row), and
    n_positions (the group's positions per pair, on average)."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    moved = {name: grade_logit(engine.logits([heads], where=where)[0]) - target for name, where in groups.items()}
    moved["all"] = grade_logit(engine.logits([heads])[0]) - target
    moved["sum of groups"] = sum(moved[g] for g in groups)
    sizes = {g: float(np.mean([len(p) for p in where])) for g, where in groups.items()}
    rows = []
    for name, values in moved.items():
        restored, lo, hi = _share(values, gap, weights)
        rows.append(
            {
                "positions": name,
                "restored": restored,
                "lo": lo,
                "hi": hi,
                "n_positions": sizes.get(name, np.nan),
                "gap": float(gap.mean()),
                "n_examples": len(gap),
            }
        )
    return pd.DataFrame(rows)


def attribution_scores(
    engine: PatchEngine, groups: dict[str, list[list[int]]], n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per head: attribution patching's estimate (:meth:`headlab.core.patching.PatchEngine.attribution`) of the share
    of the grade-logit gap that patching the head alone restores (``estimate``, with a 95% paired bootstrap interval
    over the pairs), and the same per group of positions (one column per group of :data:`GROUPS`)."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    attributed = engine.attribution()
    layers, heads = attributed[0].shape[:2]
    whole = np.stack([a.sum(axis=-1) for a in attributed])  # pairs x layers x heads
    by_group = {g: np.stack([a[:, :, where].sum(axis=-1) for a, where in zip(attributed, groups[g])]) for g in groups}
    rows = []
    for layer in range(layers):
        for head in range(heads):
            estimate, lo, hi = _share(whole[:, layer, head], gap, weights)
            rows.append(
                {
                    "layer": layer,
                    "head": head,
                    "estimate": estimate,
                    "lo": lo,
                    "hi": hi,
                    **{g: float(by_group[g][:, layer, head].mean() / gap.mean()) for g in groups},
                }
            )
    return pd.DataFrame(rows)


def receiver_ranking(engine: PatchEngine, senders, receivers, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per receiver head (layer, head), sorted best first with its ``rank``: the share of the grade-logit gap that
    comes back when it alone reads the ``senders``' change (:meth:`headlab.core.patching.PatchEngine.path_logits`),
    ``restored`` with ``lo``, ``hi`` (95% paired bootstrap over the pairs, the same resamples for every receiver);
    ``over_others`` (``over_lo``, ``over_hi``): that share minus the mean share of every other receiver, the
    baseline a single reader is judged against; and the same through its output at ``[CLS]`` alone (``cls_``
    columns)."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    columns = {}
    for prefix, cls_only in (("", False), ("cls_", True)):
        moved = grade_logit(engine.path_logits(senders, receivers, cls_only=cls_only)) - target
        shares, boot = moved.mean(axis=1) / gap.mean(), _boot_shares(moved, gap, weights)
        n = len(receivers)
        others = (shares.sum() - shares) / max(n - 1, 1)
        boot_over = boot - (boot.sum(axis=0, keepdims=True) - boot) / max(n - 1, 1)
        columns[f"{prefix}restored"] = shares
        columns[f"{prefix}lo"], columns[f"{prefix}hi"] = np.quantile(boot, [0.025, 0.975], axis=1)
        columns[f"{prefix}over_others"] = shares - others if n > 1 else np.full(n, np.nan)
        over_lo, over_hi = np.quantile(boot_over, [0.025, 0.975], axis=1)
        columns[f"{prefix}over_lo"] = over_lo if n > 1 else np.full(n, np.nan)
        columns[f"{prefix}over_hi"] = over_hi if n > 1 else np.full(n, np.nan)
    table = pd.DataFrame(
        {
            "layer": [int(l) for l, _ in receivers],
            "head": [int(h) for _, h in receivers],
            **columns,
            "n_examples": len(gap),
        }
    )
    table = table.sort_values(["restored", "layer", "head"], ascending=[False, True, True])
    return table.assign(rank=np.arange(1, len(table) + 1)).reset_index(drop=True)


def found_circuit(
    engine: PatchEngine, senders, receivers, n_boot: int = 2000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(edges, mediation)`` of the circuit ``senders`` -> ``receivers`` on the engine's pairs, as shares of the
    grade-logit gap with 95% paired bootstrap intervals (the same resamples throughout).

    ``edges``: per sender and receiver, the share that comes back when that receiver alone reads that sender's
    change alone (:meth:`headlab.core.patching.PatchEngine.path_logits`). ``mediation``: three rows, the senders
    patched back everywhere (their whole effect), the same effect through the receivers alone, all reading at once
    (:meth:`headlab.core.patching.PatchEngine.circuit_logits`), and the second as a share of the first (100% where
    the receivers carry all the senders do). Not IOI's faithfulness (Wang et al. 2023): nothing else is ablated."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    rows = []
    for layer, head in senders:
        moved = grade_logit(engine.path_logits([(layer, head)], receivers)) - target
        boot = _boot_shares(moved, gap, weights)
        for r, (receiver_layer, receiver_head) in enumerate(receivers):
            lo, hi = np.quantile(boot[r], [0.025, 0.975])
            rows.append(
                {
                    "sender_layer": int(layer),
                    "sender_head": int(head),
                    "layer": int(receiver_layer),
                    "head": int(receiver_head),
                    "restored": float(moved[r].mean() / gap.mean()),
                    "lo": float(lo),
                    "hi": float(hi),
                    "n_examples": len(gap),
                }
            )
    whole = grade_logit(engine.logits([list(senders)])[0]) - target
    through = grade_logit(engine.circuit_logits(senders, receivers)) - target
    boot_whole, boot_through = _boot_shares(np.stack([whole, through]), gap, weights)
    mediation = []
    for what, value, boot in (
        ("the matching heads patched back everywhere", whole.mean() / gap.mean(), boot_whole),
        ("through the found receivers alone", through.mean() / gap.mean(), boot_through),
        ("mediated share (second / first)", through.mean() / whole.mean(), boot_through / boot_whole),
    ):
        lo, hi = np.quantile(boot, [0.025, 0.975])
        mediation.append(
            {"what": what, "share": float(value), "lo": float(lo), "hi": float(hi), "n_examples": len(gap)}
        )
    return pd.DataFrame(rows), pd.DataFrame(mediation)
