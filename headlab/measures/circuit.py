"""Where in the pair the matching signal lives, and which heads carry it: page 09's circuit view.

- :func:`position_groups`: a contrast pair's positions in four groups: ``[CLS]``, the query's pieces of the terms
  it shares with the title, the title's replaced pieces, and every other position (MechIR's head-by-position view).
- :func:`restored_by_position`: the term-matching heads patched back at one group at a time, as shares of the grade
  gap on :func:`headlab.core.patching.grade_logit` (linear in the logits, so shares above 100% mean overshoot, not
  saturation), with paired bootstrap intervals over the pairs.
- :func:`attribution_scores`: attribution patching (one backward pass per batch) per head, in the same share,
  whole and per group; :func:`headlab.pages.patching.rank_correlation` checks it against exact patching.
- :func:`receiver_moves` and :func:`receiver_ranking`: path patching from the matching heads to every head above them,
  one at a time, whole and through its output at ``[CLS]`` alone, kept per pair: which heads read what the matching
  heads carry, found rather than assumed, each set against the other receivers, ranked on any part of the pairs.
- :func:`route_shares`: one receiver reading the change through its query, key or value alone.
- :func:`random_senders` and :func:`sender_control`: the same path from random sets of as many heads in the
  senders' layers instead (the random-sender control): a receiver that reads the matching heads should read them more
  than it reads any heads of theirs, or "top receiver" means only "an important upper head".
- :func:`found_circuit`: the matching heads and the receivers that read most, per sender and receiver (the edges);
  how much of the model the circuit accounts for is :mod:`headlab.measures.faithfulness`'s (IOI's measures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from headlab.core.patching import PatchEngine, Route, grade_logit
from headlab.core.stats import N_BOOT, bootstrap_weights, draw_counts, ratio_of_means
from headlab.inputs.pair import read_pair
from headlab.measures.contrast import Contrast

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
    """(rows, resamples): each row of ``moved`` (rows, pairs) as a share of the gap, per bootstrap resample."""
    return (moved @ weights.T) / (weights @ gap)


def restored_by_position(
    engine: PatchEngine, heads, groups: dict[str, list[list[int]]], n_boot: int = N_BOOT, seed: int = 0
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
        restored, lo, hi = ratio_of_means(values, gap, weights)
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
    engine: PatchEngine, groups: dict[str, list[list[int]]], n_boot: int = N_BOOT, seed: int = 0
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
            estimate, lo, hi = ratio_of_means(whole[:, layer, head], gap, weights)
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


def receiver_moves(engine: PatchEngine, senders, receivers) -> pd.DataFrame:
    """Path patching from the ``senders`` to each receiver head alone (:meth:`headlab.core.patching.PatchEngine.
    path_logits`), per pair: one row per receiver and pair (``pair``: its index in the engine's pairs), ``moved`` (the
    grade logit's move from the target when the receiver reads the senders' change), ``cls_moved`` (the same through
    its output at ``[CLS]`` alone) and ``gap`` (the pair's source-target difference). Kept per pair, so that a ranking
    on any part of the pairs (:func:`receiver_ranking`) reads these passes instead of running its own."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    moved = {
        column: grade_logit(engine.path_logits(senders, receivers, cls_only=cls_only)) - target
        for column, cls_only in (("moved", False), ("cls_moved", True))
    }
    n = len(target)
    return pd.DataFrame(
        {
            "layer": np.repeat([int(l) for l, _ in receivers], n),
            "head": np.repeat([int(h) for _, h in receivers], n),
            "pair": np.tile(np.arange(n), len(receivers)),
            **{column: values.ravel() for column, values in moved.items()},
            "gap": np.tile(source - target, len(receivers)),
        }
    )


def receiver_ranking(moves: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Per receiver head (layer, head) of :func:`receiver_moves` (on the pairs it holds: a part of them ranks on that
    part), sorted best first with its ``rank``: the share of the grade-logit gap that comes back when it alone reads
    the senders' change, ``restored`` with ``lo``, ``hi`` (95% paired bootstrap over the pairs, the same resamples for
    every receiver); ``over_others`` (``over_lo``, ``over_hi``): that share minus the mean share of every other
    receiver, the baseline a single reader is judged against; ``rank_lo``, ``rank_hi``: the 95% interval of its rank
    over the same resamples (a rank read off one sample is itself a draw); and the same through its output at
    ``[CLS]`` alone (``cls_`` columns). ``gap``, ``gap_lo``, ``gap_hi``: the mean source-target difference every share
    is of, with its 95% interval over the pairs."""
    receivers = list(dict.fromkeys(zip(moves["layer"].astype(int), moves["head"].astype(int))))
    gap = moves.drop_duplicates("pair").sort_values("pair")["gap"].to_numpy()
    weights = bootstrap_weights(len(gap), n_boot, seed)
    n = len(receivers)
    columns = {}
    for prefix, values in (("", "moved"), ("cls_", "cls_moved")):
        moved = moves.pivot(index=["layer", "head"], columns="pair", values=values).loc[receivers].to_numpy()
        shares, boot = moved.mean(axis=1) / gap.mean(), _boot_shares(moved, gap, weights)
        others = (shares.sum() - shares) / max(n - 1, 1)
        boot_over = boot - (boot.sum(axis=0, keepdims=True) - boot) / max(n - 1, 1)
        columns[f"{prefix}restored"] = shares
        columns[f"{prefix}lo"], columns[f"{prefix}hi"] = np.quantile(boot, [0.025, 0.975], axis=1)
        columns[f"{prefix}over_others"] = shares - others if n > 1 else np.full(n, np.nan)
        over_lo, over_hi = np.quantile(boot_over, [0.025, 0.975], axis=1)
        columns[f"{prefix}over_lo"] = over_lo if n > 1 else np.full(n, np.nan)
        columns[f"{prefix}over_hi"] = over_hi if n > 1 else np.full(n, np.nan)
        if not prefix:
            ranks = n - boot.argsort(axis=0).argsort(axis=0)  # per resample, 1 for the receiver that restores most
            columns["rank_lo"], columns["rank_hi"] = np.quantile(ranks, [0.025, 0.975], axis=1, method="nearest")
    gap_lo, gap_hi = np.quantile(weights @ gap / len(gap), [0.025, 0.975])
    table = pd.DataFrame(
        {
            "layer": [l for l, _ in receivers],
            "head": [h for _, h in receivers],
            **columns,
            "gap": float(gap.mean()),
            "gap_lo": float(gap_lo),
            "gap_hi": float(gap_hi),
            "n_examples": len(gap),
        }
    )
    table = table.sort_values(["restored", "layer", "head"], ascending=[False, True, True])
    return table.assign(rank=np.arange(1, len(table) + 1)).reset_index(drop=True)


def route_shares(engine: PatchEngine, senders, receiver, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """How one receiver head reads the ``senders``' change: the share of the grade-logit gap that comes back when it
    reads the change through its query alone, its key alone, its value alone (the other two computed from the target's
    input; :class:`headlab.core.patching.Route`) and through all three (``all``), each with a 95% paired bootstrap
    interval over the pairs (the same resamples); the three need not add up to ``all``, since attention multiplies
    them. Columns: route, restored, lo, hi, n_examples."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    ways = {route.name.lower(): (route,) for route in Route} | {"all": tuple(Route)}
    logits = engine.path_logits(senders, [receiver] * len(ways), routes=list(ways.values()))  # one patched input
    rows = []
    for name, read in zip(ways, logits):
        restored, lo, hi = ratio_of_means(grade_logit(read) - target, gap, weights)
        rows.append({"route": name, "restored": restored, "lo": lo, "hi": hi, "n_examples": len(gap)})
    return pd.DataFrame(rows)


def sender_pool(senders, heads: int, avoid=()) -> list[tuple[int, int]]:
    """The heads random senders are drawn from: those of the senders' layers (the lowest's to the highest's, so every
    receiver above the senders lies above them too, at as long a path), or, where those hold too few other heads (a
    toy model, never a real one), every layer up to the highest sender's; never a sender or a head of ``avoid``."""
    named = {(int(l), int(h)) for group in (senders, avoid) for l, h in group}
    low, high = min(int(l) for l, _ in senders), max(int(l) for l, _ in senders)
    pool = [(l, h) for l in range(low, high + 1) for h in range(heads) if (l, h) not in named]
    if len(pool) < len(senders):
        pool = [(l, h) for l in range(high + 1) for h in range(heads) if (l, h) not in named]
    return pool


def random_senders(senders, heads: int, draws: int, seed: int, avoid=()) -> list[list[tuple[int, int]]]:
    """``draws`` seeded sets of as many heads as ``senders`` from :func:`sender_pool`: none holds a sender or a head
    of ``avoid``, since a named head in a control set would blur it."""
    pool = sender_pool(senders, heads, avoid)
    if len(pool) < len(senders):
        raise ValueError(f"{len(pool)} other heads lie up to the senders' layers: too few for sets of {len(senders)}")
    rng = np.random.default_rng([seed, 0x5E4D])
    return [sorted(pool[i] for i in rng.choice(len(pool), len(senders), replace=False)) for _ in range(draws)]


def sender_control(
    engine: PatchEngine, senders, receivers, random_sets, n_boot: int = N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """Per receiver (layer, head): the share of the grade-logit gap that comes back when it alone reads the
    ``senders``' change (``restored``), the mean share when it reads each random set's change instead
    (``random_mean``; :func:`random_senders`), and their difference (``over_random``) with a 95% interval that
    resamples the pairs (the same resamples for both sides) and the random sets (two stages,
    :func:`headlab.core.stats.draw_counts`); ``gap``, ``gap_lo``, ``gap_hi``: the mean source-target difference on
    these pairs, with its 95% interval."""
    source, target = (grade_logit(x) for x in engine.unpatched_logits())
    gap = source - target
    weights = bootstrap_weights(len(gap), n_boot, seed)
    boot_gap = weights @ gap
    named = grade_logit(engine.path_logits(senders, receivers)) - target  # receivers x pairs
    drawn = np.stack([grade_logit(engine.path_logits(s, receivers)) - target for s in random_sets])  # d x r x pairs
    gap_lo, gap_hi = np.quantile(boot_gap / len(gap), [0.025, 0.975])
    counts = draw_counts(len(random_sets), n_boot, [seed, len(random_sets)])
    boot_named = (named @ weights.T) / boot_gap  # r x n_boot
    boot_drawn = np.einsum("drp,bp->drb", drawn, weights) / boot_gap  # d x r x n_boot
    boot_random = np.einsum("bd,drb->rb", counts, boot_drawn) / len(random_sets)
    rows = []
    for r, (layer, head) in enumerate(receivers):
        restored, random_mean = named[r].mean() / gap.mean(), drawn[:, r].mean(axis=1).mean() / gap.mean()
        lo, hi = np.quantile(boot_named[r] - boot_random[r], [0.025, 0.975])
        rows.append(
            {
                "layer": int(layer),
                "head": int(head),
                "restored": float(restored),
                "random_mean": float(random_mean),
                "over_random": float(restored - random_mean),
                "lo": float(lo),
                "hi": float(hi),
                "n_draws": len(random_sets),
                "n_examples": len(gap),
                "gap": float(gap.mean()),
                "gap_lo": float(gap_lo),
                "gap_hi": float(gap_hi),
            }
        )
    return pd.DataFrame(rows)


def found_circuit(engine: PatchEngine, senders, receivers, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The edges of the circuit ``senders`` -> ``receivers`` on the engine's pairs: per sender and receiver, the share
    of the grade-logit gap that comes back when that receiver alone reads that sender's change alone
    (:meth:`headlab.core.patching.PatchEngine.path_logits`), with a 95% paired bootstrap interval (the same
    resamples throughout). How much the circuit accounts for is :mod:`headlab.measures.faithfulness`'s to say."""
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
    return pd.DataFrame(rows)
