"""Word-order heads: shuffle the title's words and see whether the grade notices, with and without them.

The study (finding 4) found heads with a shifted-diagonal pattern (attending to the previous or next
token), shuffled a title's words (grade 4 -> 2), masked the 7 order heads (-> 3) and masked 7 random heads
(-> still 2). Here the same steps run on a whole test set, so the effect comes with intervals and a
permutation-style p-value against random heads, and single striking cases are counted, not picked.
"""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import torch

from headlab.attention import attention_maps
from headlab.evaluate import Encoded, predict, predicted_grades
from headlab.masking import head_grid
from headlab.stats import bootstrap_weights

GRADES = np.arange(1, 6, dtype=np.float64)


# --- shuffling ------------------------------------------------------------------------------------


def shuffle_words_list(words: list[str], seed: int) -> list[str]:
    """The words in a seeded random order that differs from the given one whenever it can.

    The generator is seeded with ``seed`` and a stable hash (CRC-32) of the words, so each title gets its own
    shuffle, identical across runs and processes. With at least two distinct words the order always changes:
    a few permutations are tried, then a rotation by one (which changes any sequence that is not constant).
    """
    words = list(words)
    if len(set(words)) < 2:
        return words
    rng = np.random.default_rng([seed, zlib.crc32("\x1f".join(words).encode("utf-8"))])
    for _ in range(10):
        shuffled = [words[i] for i in rng.permutation(len(words))]
        if shuffled != words:
            return shuffled
    return words[1:] + words[:1]


def shuffle_words(text: str, seed: int) -> str:
    """``text`` with its whitespace-separated words shuffled (see :func:`shuffle_words_list`), joined by single spaces."""
    return " ".join(shuffle_words_list(text.split(), seed))


def shuffled_frame(frame: pd.DataFrame, seed: int, column: str = "title", segment=None) -> pd.DataFrame:
    """A copy of ``frame`` with ``column`` word-shuffled, plus ``changed`` (False where the order could not change).

    ``segment`` splits a text into words for languages without spaces (e.g. a Chinese word segmenter);
    its shuffled words are joined without spaces.
    """
    out = frame.copy()
    if segment is None:
        words = [str(text).split() for text in frame[column]]
        joiner = " "
    else:
        words = [list(segment(str(text))) for text in frame[column]]
        joiner = ""
    shuffled = [shuffle_words_list(w, seed) for w in words]
    out[column] = [joiner.join(w) for w in shuffled]
    out["changed"] = [s != w for s, w in zip(shuffled, words)]
    return out


# --- order heads ----------------------------------------------------------------------------------


def shifted_diagonal_scores(maps: np.ndarray, scored_positions) -> np.ndarray:
    """(L, H, 2): mean attention from each scored token to the token before it (0) and after it (1)."""
    maps = np.asarray(maps)
    t = np.asarray(scored_positions, dtype=np.int64)
    out = np.zeros(maps.shape[:2] + (2,), dtype=np.float64)
    for side, shift in enumerate((-1, 1)):
        rows = t[(t + shift >= 0) & (t + shift < maps.shape[-1])]
        if len(rows):
            out[..., side] = maps[:, :, rows, rows + shift].mean(axis=-1)
    return out


def order_heads(model, encoded: Encoded, tokenizer, k: int = 7, indices=None, batch_size: int = 32,
                device="cpu") -> pd.DataFrame:
    """Heads ranked by shifted-diagonal attention: one row per head with ``prev``, ``next``, ``score``, ``rank``, ``selected``.

    ``prev`` and ``next`` are averaged over the non-special tokens of each example, then over examples;
    ``score = max(prev, next)``; the ``k`` best heads are ``selected`` (the study had 7).
    """
    special = set(tokenizer.all_special_ids)
    total, count = None, 0
    for example, maps in attention_maps(model, encoded, indices=indices, batch_size=batch_size, device=device,
                                        pad_id=tokenizer.pad_token_id or 0):
        scored = [i for i, t in enumerate(encoded.input_ids[example]) if t not in special]
        scores = shifted_diagonal_scores(maps, scored)
        total = scores if total is None else total + scores
        count += 1
    mean = total / count
    layers, heads = mean.shape[:2]
    table = pd.DataFrame({"layer": np.repeat(np.arange(layers), heads), "head": np.tile(np.arange(heads), layers),
                          "prev": mean[..., 0].reshape(-1), "next": mean[..., 1].reshape(-1)})
    table["score"] = table[["prev", "next"]].max(axis=1)
    table["direction"] = np.where(table["prev"] >= table["next"], "prev", "next")
    table = table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    table["rank"] = np.arange(1, len(table) + 1)
    table["selected"] = table["rank"] <= k
    table["n_examples"] = count
    return table


# --- sensitivity to shuffling ---------------------------------------------------------------------


def expected_grade(probs: np.ndarray) -> np.ndarray:
    """E[grade] = sum over g of g * p_g, per example: a smooth grade that moves before the argmax does."""
    return np.asarray(probs, dtype=np.float64) @ GRADES


def _interval(per_example: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    boots = w @ per_example / len(per_example)
    return float(per_example.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def shuffle_sensitivity(probs_original: np.ndarray, probs_shuffled: np.ndarray, n_boot: int = 2000, seed: int = 0) -> dict:
    """How much shuffling moves the grades, with 95% bootstrap intervals over examples.

    ``shift``: mean of E[grade | shuffled] - E[grade | original] (negative: shuffling lowers the grade);
    ``drop_share``: share of examples whose predicted (argmax) grade falls; ``tv``: mean total variation
    distance between the two grade distributions (0 = unchanged, 1 = disjoint).
    """
    p, q = np.asarray(probs_original, dtype=np.float64), np.asarray(probs_shuffled, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"original and shuffled probabilities differ in shape: {p.shape} vs {q.shape}")
    w = bootstrap_weights(len(p), n_boot, seed)
    out = {"n_examples": len(p)}
    for name, values in (("shift", expected_grade(q) - expected_grade(p)),
                         ("drop_share", (predicted_grades(q) < predicted_grades(p)).astype(np.float64)),
                         ("tv", 0.5 * np.abs(q - p).sum(axis=1))):
        out[name], out[f"{name}_lo"], out[f"{name}_hi"] = _interval(values, w)
    return out


def random_head_sets(layers: int, heads: int, k: int, draws: int, seed: int, exclude=()) -> list[list[tuple[int, int]]]:
    """``draws`` seeded sets of ``k`` distinct heads, drawn from all heads but ``exclude``."""
    pool = [(l, h) for l in range(layers) for h in range(heads) if (l, h) not in set(map(tuple, exclude))]
    if k > len(pool):
        raise ValueError(f"cannot draw {k} heads from a pool of {len(pool)}")
    rng = np.random.default_rng(seed)
    return [sorted(pool[i] for i in rng.choice(len(pool), size=k, replace=False)) for _ in range(draws)]


def removal_mask(model, heads) -> torch.Tensor:
    """(L, H) mask removing ``heads``."""
    mask = torch.ones(head_grid(model))
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def shift_under_masks(model, original: Encoded, shuffled: Encoded, head_sets, batch_size: int = 64, device="cpu",
                      pad_id: int = 0) -> np.ndarray:
    """Mean expected-grade shift (shuffled - original) with each set of heads removed from both runs."""
    shifts = []
    for heads in head_sets:
        mask = removal_mask(model, heads)
        p = predict(model, original, mask=mask, batch_size=batch_size, device=device, pad_id=pad_id)
        q = predict(model, shuffled, mask=mask, batch_size=batch_size, device=device, pad_id=pad_id)
        shifts.append(float(np.mean(expected_grade(q) - expected_grade(p))))
    return np.asarray(shifts)


def sensitivity_reduction(order_value: float, random_values, unmasked_value: float | None = None) -> dict:
    """Is the model less sensitive to shuffling with the order heads removed than with random heads removed?

    ``order_value`` is a sensitivity (e.g. the mean shift) with the order heads masked, ``random_values`` the
    same with k random heads masked, one per draw. Insensitivity is a small absolute value. The one-sided
    empirical p-value is (1 + #draws at least as insensitive) / (1 + #draws).
    """
    random_values = np.asarray(random_values, dtype=np.float64)
    as_insensitive = int(np.sum(np.abs(random_values) <= abs(order_value)))
    out = {
        "order_heads": float(order_value),
        "random_mean": float(random_values.mean()),
        "random_lo": float(np.quantile(random_values, 0.025)),
        "random_hi": float(np.quantile(random_values, 0.975)),
        "n_draws": len(random_values),
        "p_value": (1 + as_insensitive) / (1 + len(random_values)),
    }
    if unmasked_value is not None:
        out["unmasked"] = float(unmasked_value)
    return out


def case_candidates(frame: pd.DataFrame, probs_original: np.ndarray, probs_shuffled: np.ndarray, min_grade: int = 4,
                    min_drop: int = 2, shuffled_titles=None) -> tuple[pd.DataFrame, float]:
    """Examples like the study's case, and the share of the evaluation set they are.

    A candidate has gold grade and original predicted grade at least ``min_grade`` and loses at least
    ``min_drop`` predicted grades when its title is shuffled.
    """
    gold = frame["label"].to_numpy()
    before, after = predicted_grades(probs_original), predicted_grades(probs_shuffled)
    hit = (gold >= min_grade) & (before >= min_grade) & (before - after >= min_drop)
    table = frame.loc[hit, ["query", "title", "label"]].copy()
    if shuffled_titles is not None:
        table["shuffled_title"] = np.asarray(list(shuffled_titles), dtype=object)[hit]
    table["example"] = np.flatnonzero(hit)
    table["predicted"], table["predicted_shuffled"] = before[hit], after[hit]
    table["expected"] = expected_grade(probs_original)[hit]
    table["expected_shuffled"] = expected_grade(probs_shuffled)[hit]
    return table.reset_index(drop=True), float(hit.mean())
