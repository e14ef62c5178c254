"""One head's attention on one pair, side by side across models or masks: tidy cells, and a live explorer.

Findings 6 and 7 are differences between two attention maps of the same head on the same pair: before and
after fine-tuning, or with and without the term-matching heads masked. :func:`compare_maps` takes the maps of
several *runs* (a model and an optional mask each) and returns one tidy table whose columns are the runs and
their difference, which the static book draws with :func:`headlab.report.charts.map_panels` (choices from menus, no
kernel); :func:`headlab.report.compare_explorer.live_explorer` does the same live for any example and head.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from headlab.core.attention import attention_maps
from headlab.inputs.pair import read_pair

DIFFERENCE = "difference"


def token_labels(tokens: list[str]) -> list[str]:
    """Position-prefixed, zero-padded labels ("03 cat"): repeated tokens stay apart and sort in sentence order."""
    width = len(str(max(len(tokens) - 1, 0)))
    return [f"{i:0{width}d} {t}" for i, t in enumerate(tokens)]


def head_label(layer: int, head: int) -> str:
    """``layer.head``, e.g. ``3.9``: how the charts and tables name a head."""
    return f"{int(layer)}.{int(head)}"


def compare_maps(
    lab, runs: dict, examples, heads, stopwords=None, min_weight: float = 0.01, encoded=None
) -> pd.DataFrame:
    """Tidy attention cells of ``heads`` on ``examples``, one column per run, plus their difference.

    ``lab`` (:class:`headlab.lab.Lab`) gives the tokenizer, the encoded pairs (``encoded``: another encoding of the same
    split instead), the batch size, device and pad id. ``runs`` maps a name to ``(model, mask)`` (mask None: no head
    removed); with two runs, ``difference`` is the second minus the first. Columns: example, layer, head, head_label,
    query, key (positions; query attends to key), query_token, key_token (:func:`token_labels`), identical (query and
    key are the same term in the two sentences, :attr:`headlab.inputs.pair.Pair.shared`), key_shared (the key is
    such a term), the runs' weights, and ``difference``. Cells where every run's weight is below ``min_weight`` are left
    out (drawn blank, i.e. about 0) so a page stays small; the diagonal and the identical-term cells are always kept, so
    every token keeps its row and column.
    """
    examples = [int(e) for e in examples]
    heads = [(int(l), int(h)) for l, h in heads]
    tokenizer = lab.tokenizer
    encoded = lab.encoded if encoded is None else encoded
    picked = {}
    for name, (model, mask) in runs.items():
        for example, maps in attention_maps(model, encoded, examples, mask, lab.batch_size, lab.device, lab.pad_id):
            picked[name, example] = np.stack([maps[l, h] for l, h in heads]).astype(np.float64)  # (heads, T, T)
    frames = []
    for example in examples:
        pair = read_pair(tokenizer, encoded.input_ids[example], stopwords)
        labels = token_labels(pair.tokens)
        identical = {*pair.shared, *((t, q) for q, t in pair.shared)}
        shared = pair.shared_positions
        n = len(pair.ids)
        which, query, key = [a.ravel() for a in np.indices((len(heads), n, n))]
        frame = pd.DataFrame(
            {
                "example": example,
                "layer": [heads[i][0] for i in which],
                "head": [heads[i][1] for i in which],
                "head_label": [head_label(*heads[i]) for i in which],
                "query": query,
                "key": key,
                "query_token": [labels[i] for i in query],
                "key_token": [labels[i] for i in key],
                "identical": [(q, k) in identical for q, k in zip(query, key)],
                "key_shared": [i in shared for i in key],
            }
        )
        for name in runs:
            frame[name] = picked[name, example].ravel()
        if len(runs) == 2:
            first, second = runs
            frame[DIFFERENCE] = frame[second] - frame[first]
        faint = (frame[list(runs)].abs() < min_weight).all(axis=1)
        keep = ~faint | (frame["query"] == frame["key"]) | frame["identical"]
        frames.append(frame[keep])
    out = pd.concat(frames, ignore_index=True)
    value_columns = [*runs, *([DIFFERENCE] if len(runs) == 2 else [])]
    out[value_columns] = out[value_columns].round(4)
    return out


def identical_share(cells: pd.DataFrame, run: str, example: int) -> float:
    """On ``example``, the share of a token's attention (in ``run``) that goes to its identical term in the other
    sentence, averaged over the heads and the tokens that have one (a row sums to 1; NaN when none has one)."""
    rows = cells[cells["example"] == example]
    has = rows.groupby(["layer", "head", "query"])["identical"].transform("any")
    weights = rows[has].assign(on=lambda t: t[run].where(t["identical"], 0.0))
    return float(weights.groupby(["layer", "head", "query"])["on"].sum().mean()) if len(weights) else float("nan")


def identical_takeaway(cells: pd.DataFrame, runs, example: int) -> str:
    """The attention maps' caption: per run, how much a token with an identical term in the other sentence gives it."""
    parts = [f"{run}: {identical_share(cells, run, example):.0%}" for run in runs]
    return (
        f"On pair {example}, a token with an identical term in the other sentence (framed) gives it this share of "
        f"its attention, averaged over the heads shown: {'; '.join(parts)}."
    )
