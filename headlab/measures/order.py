"""Word-order heads: shuffle the title's words and see whether the grade notices, with and without them.

The study (finding 4) found heads with a shifted-diagonal pattern (attending to the previous or next
token), shuffled a title's words (grade 4 -> 2), masked the 7 order heads (-> 3) and masked 7 random heads
(-> still 2). Here the same steps run on a whole test set: one sweep of masks (none, the order heads,
random other heads of the same layers) on the original titles and one on the shuffled titles
(:func:`order_mask_specs`, :func:`shuffle_effects`), so the effect comes with intervals and an empirical
p-value against random heads (:func:`masking_comparison`), and single striking cases are counted, not
picked (:func:`case_table`).
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from headlab.core.evaluate import Encoded, predict
from headlab.core.grades import GradeScale
from headlab.core.masking import head_grid
from headlab.core.stats import N_BOOT, boot_means, bootstrap_weights, versus_random
from headlab.core.sweep import MaskSpec, baseline_spec
from headlab.inputs.words import join_words

PROBABILITY = re.compile(r"p(\d+)")  # a sweep table's probability of grade <g>: p<g> (headlab.core.sweep)


def grade_columns(table: pd.DataFrame) -> list[str]:
    """A sweep table's grade probabilities, lowest grade first: one ``p<g>`` per grade of its scale, so the table
    names its own grades (p1 ... p5 on the study's, p0 ... p2 on a 0-2 file)."""
    columns = sorted((c for c in table.columns if PROBABILITY.fullmatch(c)), key=lambda c: int(c[1:]))
    if len(columns) < 2:
        raise ValueError(f"no grade probabilities (p<grade>) among the columns {list(table.columns)}")
    return columns


def shuffled_columns(columns: list[str]) -> list[str]:
    """The same probabilities with the title shuffled (:func:`shuffle_effects`'s columns)."""
    return [f"{c}_shuffled" for c in columns]


def table_scale(table: pd.DataFrame) -> GradeScale:
    """The grade scale a sweep table's probability columns name (:func:`grade_columns`): its expected and most
    probable grades are the scale's own (:meth:`GradeScale.expected`, :meth:`GradeScale.predicted`)."""
    columns = grade_columns(table)
    scale = GradeScale(int(columns[0][1:]), len(columns))
    if columns != [f"p{g}" for g in scale.grades]:
        raise ValueError(f"the grade probabilities {columns} are not one grade scale")
    return scale


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
    """``text`` with its whitespace-separated words shuffled (see :func:`shuffle_words_list`), joined by single
    spaces."""
    return " ".join(shuffle_words_list(text.split(), seed))


def shuffled_frame(frame: pd.DataFrame, seed: int, column: str = "title", segment=None) -> pd.DataFrame:
    """A copy of ``frame`` with ``column`` word-shuffled, plus ``changed`` (False where the order could not change).

    ``segment`` splits a text into words for languages without spaces (e.g. a Chinese word segmenter);
    its shuffled words are joined without spaces but between Latin words (:func:`headlab.inputs.words.join_words`).

    Columns: those of ``frame`` (``column`` shuffled), changed.
    """
    out = frame.copy()
    join: Callable[[list[str]], str]
    if segment is None:
        words = [str(text).split() for text in frame[column]]
        join = " ".join
    else:
        words = [list(segment(str(text))) for text in frame[column]]
        join = join_words
    shuffled = [shuffle_words_list(w, seed) for w in words]
    out[column] = [join(w) for w in shuffled]
    out["changed"] = [s != w for s, w in zip(shuffled, words)]
    return out


# --- order heads ----------------------------------------------------------------------------------


def shifted_diagonal_scores(maps: np.ndarray, special) -> np.ndarray:
    """(layers, heads, 2): mean attention from each ordinary token to the token before it (0) and after it (1).

    ``special`` flags the special tokens ([CLS], [SEP], ...) by position. A pair counts only when both tokens
    are ordinary: a title's first token attending to [SEP] is not word order, and special tokens are not
    scored. A side with no such pair is NaN: the example says nothing about it.
    """
    maps = np.asarray(maps)
    ordinary = ~np.asarray(special, dtype=bool)
    out = np.full(maps.shape[:2] + (2,), np.nan)
    for side, shift in enumerate((-1, 1)):
        t = np.arange(max(0, -shift), len(ordinary) - max(0, shift))
        rows = t[ordinary[t] & ordinary[t + shift]]
        if len(rows):
            out[..., side] = maps[:, :, rows, rows + shift].mean(axis=-1)
    return out


def order_heads(attention, encoded: Encoded, tokenizer, k: int = 7, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Heads ranked by shifted-diagonal attention: one row per head, the best first.

    ``attention`` yields ``(example, maps)`` (:func:`headlab.core.attention.attention_maps` or a cache).
    ``prev`` and ``next`` are averaged over the non-special tokens of each example (neighbours that are special
    tokens do not count, :func:`shifted_diagonal_scores`), then over the examples that have such a neighbour on
    that side; ``score = max(prev, next)``; the ``k`` best heads are ``selected`` (the study had 7). The
    tokenizer's ``all_special_ids`` say which tokens are special, so [CLS]/[SEP] and <s>/</s> alike are left out.
    ``score_lo``/``score_hi``: the 95% bootstrap interval over pairs of the score's side (``direction``), from each
    pair's own share (``n_boot`` resamples of the pairs, seeded with ``seed``).

    Columns: layer, head, prev, next, score, direction ("prev" or "next": the side of the score), score_lo, score_hi,
    rank (1 the best), selected (rank at most ``k``), n_examples.
    """
    special_ids = list(tokenizer.all_special_ids)
    scores = np.stack(
        [shifted_diagonal_scores(maps, np.isin(encoded.input_ids[example], special_ids)) for example, maps in attention]
    )
    count, mean = len(scores), np.nanmean(scores, axis=0)
    layers, heads = mean.shape[:2]
    table = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(layers), heads),
            "head": np.tile(np.arange(heads), layers),
            "prev": mean[..., 0].reshape(-1),
            "next": mean[..., 1].reshape(-1),
        }
    )
    table["score"] = table[["prev", "next"]].max(axis=1)
    table["direction"] = np.where(table["prev"] >= table["next"], "prev", "next")
    side = np.where(table["direction"] == "prev", 0, 1)
    per_pair = scores.reshape(count, layers * heads, 2)[:, np.arange(layers * heads), side]  # pairs x heads
    table["score_lo"], table["score_hi"] = _nan_mean_interval(per_pair, bootstrap_weights(count, n_boot, seed))
    table = table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    table["rank"] = np.arange(1, len(table) + 1)
    table["selected"] = table["rank"] <= k
    table["n_examples"] = count
    return table


def _nan_mean_interval(values: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95% bootstrap interval of each column's mean over the rows (pairs) that are not NaN, resampling rows by ``w``."""
    seen = ~np.isnan(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = (w @ np.where(seen, values, 0.0)) / (w @ seen)
    return np.nanquantile(boots, 0.025, axis=0), np.nanquantile(boots, 0.975, axis=0)


# --- sensitivity to shuffling ---------------------------------------------------------------------


def _interval(per_example: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    return _quantiles(per_example.mean(), w @ per_example / len(per_example))


def _quantiles(value: float, boots: np.ndarray) -> tuple[float, float, float]:
    """The value with the 2.5% and 97.5% quantiles of its bootstrap replicates."""
    return float(value), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def random_head_sets(layers: int, heads: int, like, draws: int, seed: int) -> list[list[tuple[int, int]]]:
    """``draws`` seeded sets of random heads with the layers of ``like``: for each head of ``like``, one other head of
    its layer.

    Depth-matched, as notebook 05's same-half control: masking heads costs more in some layers than in others,
    so heads drawn from the whole model would differ from ``like`` in depth as well as in role. The heads of
    ``like`` are never drawn, nor one head twice in a set. Draw d has its own generator, so it is the same set
    whatever ``draws`` is.
    """
    like = {(int(l), int(h)) for l, h in like}
    needed = Counter(l for l, _ in like)
    pools = {l: [(l, h) for h in range(heads) if (l, h) not in like] for l in sorted(needed)}
    for l, n in needed.items():
        if not 0 <= l < layers:
            raise ValueError(f"layer {l} is outside the model's {layers} layers")
        if n > len(pools[l]):
            raise ValueError(
                f"cannot draw a depth-matched set: layer {l} holds {n} of the heads to match but only "
                f"{len(pools[l])} others"
            )
    sets = []
    for draw in range(draws):
        rng = np.random.default_rng([seed, draw])
        sets.append(
            sorted(
                pools[l][i] for l in sorted(needed) for i in rng.choice(len(pools[l]), size=needed[l], replace=False)
            )
        )
    return sets


def depth_matched_k(order_table: pd.DataFrame, heads: int) -> int:
    """The largest k whose top-k order heads a random set can still match layer by layer: past it some layer holds
    more of the top heads than it has other heads (:func:`random_head_sets` would refuse)."""
    ranked = order_table.sort_values("rank")
    taken: Counter = Counter()
    for k, layer in enumerate(ranked["layer"].astype(int), start=1):
        taken[layer] += 1
        if taken[layer] > heads - taken[layer]:
            return k - 1
    return len(ranked)


def grade_shares(effects: pd.DataFrame, examples=None) -> pd.DataFrame:
    """Predicted-grade distribution over the set, unmasked, with original and shuffled titles.

    Columns: condition ("original" or "shuffled"), grade (every grade of the scale), count, share.
    """
    rows = _unmasked(effects, examples)
    grades = list(table_scale(effects).grades)
    out = []
    for condition, column in (("original", "predicted"), ("shuffled", "predicted_shuffled")):
        counts = rows[column].value_counts().reindex(grades, fill_value=0)
        out += [
            {"condition": condition, "grade": g, "count": int(c), "share": c / len(rows)} for g, c in counts.items()
        ]
    return pd.DataFrame(out)


def shift_by_grade(effects: pd.DataFrame, examples=None, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Per gold grade (and all together), unmasked: mean expected grade before and after shuffling, and the shift.

    The shift comes with its 95% bootstrap interval over examples; ``tv`` is the mean total variation distance.

    Columns: grade (a gold grade, or "all"), n_examples, expected, expected_shuffled, shift, lo, hi, tv.
    """
    rows = _unmasked(effects, examples)
    out = []
    for grade, group in [*rows.groupby("grade"), ("all", rows)]:
        shift, lo, hi = _interval(group["shift"].to_numpy(), bootstrap_weights(len(group), n_boot, seed))
        out.append(
            {
                "grade": str(grade),
                "n_examples": len(group),
                "expected": group["expected"].mean(),
                "expected_shuffled": group["expected_shuffled"].mean(),
                "shift": shift,
                "lo": lo,
                "hi": hi,
                "tv": group["tv"].mean(),
            }
        )
    return pd.DataFrame(out)


def _unmasked(effects: pd.DataFrame, examples) -> pd.DataFrame:
    rows = effects[effects["kind"] == "none"]
    return rows if examples is None else rows[rows["example"].isin(list(examples))]


# --- masking the order heads against masking random heads ------------------------------------------


CONTROL = "random other heads of the order heads' layers (depth-matched)"  # the control, as tables name it


def sensitivity_reduction(order_value: float, random_values, unmasked_value: float | None = None) -> dict:
    """Where the order heads' sensitivity (e.g. the mean shift with them masked) sits among the same with k random
    heads masked, one value per draw: description only (``n_as_insensitive``: draws at least as insensitive, a small
    absolute value), since the verdict reads the difference with its interval (:func:`masking_comparison`)."""
    random_values = np.asarray(random_values, dtype=np.float64)
    out = {
        "order_heads": float(order_value),
        "random_mean": float(random_values.mean()),
        "random_lo": float(np.quantile(random_values, 0.025)),
        "random_hi": float(np.quantile(random_values, 0.975)),
        "n_draws": len(random_values),
        "n_as_insensitive": int(np.sum(np.abs(random_values) <= abs(order_value))),
    }
    if unmasked_value is not None:
        out["unmasked"] = float(unmasked_value)
    return out


def order_mask_specs(
    order_table: pd.DataFrame, k: int, draws: int, seed: int, layers: int, heads: int
) -> list[MaskSpec]:
    """The sweep that tests the order heads: no mask, the ``k`` top-ranked order heads, and ``draws`` sets of k random
    others.

    Each random set has the order heads' layers (:func:`random_head_sets`) but none of them, so the control
    removes as many heads, at the same depths, but none of the ones under test.
    """
    top = order_table.sort_values("rank").head(k)
    order = tuple(sorted(zip(top["layer"].astype(int), top["head"].astype(int))))
    specs = [baseline_spec(), MaskSpec(f"order-k{k}", order, "order", {"k": k})]
    for draw, picked in enumerate(random_head_sets(layers, heads, order, draws, seed)):
        specs.append(MaskSpec(f"random-k{k}-d{draw}", tuple(picked), "random", {"k": k, "draw": draw}))
    return specs


def shuffle_effects(original: pd.DataFrame, shuffled: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """Per mask and example: grades and grade distributions with the original and the shuffled title, and their move.

    ``original`` and ``shuffled`` are the per-example sweep tables (:func:`headlab.core.sweep.run_sweep`) of the same
    masks on the original and on the shuffled titles. ``shift`` is E[grade | shuffled] - E[grade | original];
    ``tv`` the total variation distance between the two grade distributions (0 unchanged, 1 disjoint).

    Columns: mask_id, kind, example, grade, predicted, predicted_shuffled, expected, expected_shuffled, shift, tv,
    the grade probabilities p<g> (:func:`grade_columns`) and the same with the suffix _shuffled.
    """
    probs, scale = grade_columns(original), table_scale(original)
    if grade_columns(shuffled) != probs:
        raise ValueError("the original and shuffled sweeps are on different grade scales")
    merged = original.merge(
        shuffled[["mask_id", "example", "predicted", *probs]],
        on=["mask_id", "example"],
        suffixes=("", "_shuffled"),
        validate="one_to_one",
    )
    if len(merged) != len(original) or len(merged) != len(shuffled):
        raise ValueError("the original and shuffled sweeps cover different masks or examples")
    p, q = merged[probs].to_numpy(np.float64), merged[shuffled_columns(probs)].to_numpy(np.float64)
    merged["expected"], merged["expected_shuffled"] = scale.expected(p), scale.expected(q)
    merged["shift"] = merged["expected_shuffled"] - merged["expected"]
    merged["tv"] = 0.5 * np.abs(q - p).sum(axis=1)
    merged = merged.merge(plan[["mask_id", "kind"]], on="mask_id", how="left")
    return merged[
        [
            "mask_id",
            "kind",
            "example",
            "grade",
            "predicted",
            "predicted_shuffled",
            "expected",
            "expected_shuffled",
            "shift",
            "tv",
            *probs,
            *shuffled_columns(probs),
        ]
    ]


def _per_kind(effects: pd.DataFrame, measure: str, examples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unmasked per example, order-masked per example, random draws x examples) of one measure."""
    wide = effects.pivot(index="mask_id", columns="example", values=measure)
    kinds = effects.drop_duplicates("mask_id").set_index("mask_id")["kind"]
    wide = wide.loc[:, list(examples)] if examples is not None else wide

    def of_kind(kind):
        return wide.loc[kinds[kinds == kind].index].to_numpy(np.float64)

    return of_kind("none")[0], of_kind("order")[0], of_kind("random")


def masking_comparison(
    effects: pd.DataFrame, examples=None, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Is the model less sensitive to the shuffle with the order heads masked than with k random heads masked?

    Returns ``(conditions, tests)``. conditions: one row per measure (tv, shift) and condition (no mask, order
    heads, random heads of the same layers: the mean over draws), the mean over ``examples`` (default all) with
    a 95% bootstrap interval, and for random heads the 2.5-97.5% range of the draws' means. The examples are
    resampled alike for every condition (paired); for random heads the draws are resampled too (a two-stage
    bootstrap, :func:`headlab.core.stats.boot_means`), since which heads were drawn is chance as well. ``interval``
    says what was resampled. tests: per measure, where the order heads' value sits among the random draws
    (:func:`sensitivity_reduction`, description), and the paired difference order - random with its t interval
    over the same two-stage replicates (:func:`headlab.core.stats.versus_random`; ``df`` its degrees of freedom).

    Columns of conditions: measure, condition, value, lo, hi, n_examples, interval; for random heads also draw_lo,
    draw_hi, n_draws.
    Columns of tests: measure, control, order_heads, random_mean, random_lo, random_hi, n_draws, n_as_insensitive,
    unmasked, difference, difference_lo, difference_hi, df, n_examples, interval.
    """
    rows, tests = [], []
    for measure in ("tv", "shift"):
        none, order, random = _per_kind(effects, measure, examples)
        w = bootstrap_weights(len(none), n_boot, seed)
        by_condition = {"no mask": none, "order heads": order, "random heads": random}
        boots = {condition: boot_means(values, w, seed) for condition, values in by_condition.items()}
        draw_means = random.mean(axis=1)
        for condition, values in by_condition.items():
            value, lo, hi = _quantiles(values.mean(), boots[condition])
            extra = (
                {
                    "draw_lo": float(np.quantile(draw_means, 0.025)),
                    "draw_hi": float(np.quantile(draw_means, 0.975)),
                    "n_draws": len(draw_means),
                }
                if condition == "random heads"
                else {}
            )
            rows.append(
                {
                    "measure": measure,
                    "condition": condition,
                    "value": value,
                    "lo": lo,
                    "hi": hi,
                    "n_examples": len(none),
                    "interval": _resampled(values),
                    **extra,
                }
            )
        versus = versus_random(order, random, n_boot=n_boot, seed=seed)
        reduction = sensitivity_reduction(order.mean(), draw_means, unmasked_value=none.mean())
        tests.append(
            {
                "measure": measure,
                "control": CONTROL,
                **reduction,
                "difference": versus["difference"],
                "difference_lo": versus["difference_lo"],
                "difference_hi": versus["difference_hi"],
                "df": versus["df"],
                "n_examples": len(none),
                "interval": _resampled(random),
            }
        )
    return pd.DataFrame(rows), pd.DataFrame(tests)


def _resampled(values: np.ndarray) -> str:
    return "draws and pairs" if np.ndim(values) == 2 and len(values) > 1 else "pairs"


def draw_table(effects: pd.DataFrame, examples=None) -> pd.DataFrame:
    """One row per mask: its kind and mean tv and shift over ``examples`` (the random draws' spread, for a chart).

    Columns: mask_id, kind, tv, shift.
    """
    rows = effects if examples is None else effects[effects["example"].isin(list(examples))]
    return rows.groupby(["mask_id", "kind"], sort=False)[["tv", "shift"]].mean().reset_index()


# --- the study's case ------------------------------------------------------------------------------

CONDITIONS = ("original", "shuffled", "shuffled, order heads masked", "shuffled, random heads masked")


def case_table(effects: pd.DataFrame, min_grade: int = 4, min_drop: int = 2) -> pd.DataFrame:
    """One row per example: predicted and expected grade under the study's four conditions, and which pattern it shows.

    Conditions are :data:`CONDITIONS`; with random heads the grade distribution is the mean over draws.
    Patterns, nested like the study's case: ``relevant`` (gold and predicted grade at least ``min_grade``),
    ``drops`` (and shuffling costs at least ``min_drop`` predicted grades), ``order_restores`` (and masking
    the order heads gives the shuffled title a higher grade than unmasked), ``study_like`` (and random heads
    masked do not).

    Columns: example, grade, then predicted_ and expected_ grade under each condition (original, shuffled, order,
    random: predicted_original, expected_original, ...), then the patterns relevant, drops, order_restores,
    study_like (booleans).
    """

    def by_kind(kind):
        return effects[effects["kind"] == kind].groupby("example")

    probs, scale = grade_columns(effects), table_scale(effects)
    shuffled = shuffled_columns(probs)
    unmasked = by_kind("none").first()
    order = by_kind("order").first()
    random = by_kind("random")[shuffled].mean()
    table = pd.DataFrame({"example": unmasked.index, "grade": unmasked["grade"].to_numpy()})
    distributions = {
        CONDITIONS[0]: unmasked[probs].to_numpy(np.float64),
        CONDITIONS[1]: unmasked[shuffled].to_numpy(np.float64),
        CONDITIONS[2]: order.loc[unmasked.index, shuffled].to_numpy(np.float64),
        CONDITIONS[3]: random.loc[unmasked.index].to_numpy(np.float64),
    }
    for short, condition in zip(("original", "shuffled", "order", "random"), CONDITIONS):
        table[f"predicted_{short}"] = scale.predicted(distributions[condition])
        table[f"expected_{short}"] = scale.expected(distributions[condition])
    table["relevant"] = (table["grade"] >= min_grade) & (table["predicted_original"] >= min_grade)
    table["drops"] = table["relevant"] & (table["predicted_original"] - table["predicted_shuffled"] >= min_drop)
    table["order_restores"] = table["drops"] & (table["predicted_order"] > table["predicted_shuffled"])
    table["study_like"] = table["order_restores"] & (table["predicted_random"] <= table["predicted_shuffled"])
    return table


PATTERNS = {
    "relevant": "gold and predicted grade high",
    "drops": "... and the shuffled title loses grades",
    "order_restores": "... and masking the order heads raises it again",
    "study_like": "... and masking random heads does not",
}


def case_shares(cases: pd.DataFrame, examples=None) -> pd.DataFrame:
    """How many examples show each nested pattern of the study's case, and what share of the set they are.

    ``lo``/``hi``: the exact (Clopper-Pearson) 95% interval of the share.

    Columns: pattern, description, count, share, lo, hi, n_examples.
    """
    rows = cases if examples is None else cases[cases["example"].isin(list(examples))]
    out = []
    for name, text in PATTERNS.items():
        count = int(rows[name].sum())
        interval = sps.binomtest(count, len(rows)).proportion_ci(0.95)
        out.append(
            {
                "pattern": name,
                "description": text,
                "count": count,
                "share": count / len(rows),
                "lo": interval.low,
                "hi": interval.high,
                "n_examples": len(rows),
            }
        )
    return pd.DataFrame(out)


def rank_cases(cases: pd.DataFrame, examples=None) -> pd.DataFrame:
    """The examples ordered by how far they follow the study's case: deepest pattern first, then largest fall.

    Columns: those of ``cases`` (:func:`case_table`), pattern (the deepest of :data:`PATTERNS` it shows, or "none"),
    fall (expected grade, original minus shuffled).
    """
    rows = cases if examples is None else cases[cases["example"].isin(list(examples))]
    depth = sum(rows[p].astype(int) for p in PATTERNS)
    names = np.array(["none", *PATTERNS])
    ranked = rows.assign(
        pattern=names[depth.to_numpy()], depth=depth, fall=rows["expected_original"] - rows["expected_shuffled"]
    )
    return ranked.sort_values(["depth", "fall"], ascending=False, kind="stable").drop(columns="depth")


def pick_case(cases: pd.DataFrame, examples=None) -> tuple[int, str]:
    """``(example, pattern)``: the example most like the study's case (:func:`rank_cases`), the deepest pattern it
    shows."""
    top = rank_cases(cases, examples).iloc[0]
    return int(top["example"]), str(top["pattern"])


def case_distributions(effects: pd.DataFrame, example: int) -> pd.DataFrame:
    """Tidy grade distributions of one example under the four :data:`CONDITIONS`.

    Columns: condition, grade (every grade of the scale), probability.
    """
    probs = grade_columns(effects)
    shuffled = shuffled_columns(probs)
    rows = effects[effects["example"] == example]
    unmasked, order = rows[rows["kind"] == "none"].iloc[0], rows[rows["kind"] == "order"].iloc[0]
    random = rows[rows["kind"] == "random"][shuffled].mean()
    values = [unmasked[probs], unmasked[shuffled], order[shuffled], random]
    by_condition = dict(zip(CONDITIONS, (np.asarray(v, dtype=np.float64) for v in values)))
    return _tidy_distributions(by_condition, table_scale(effects).grades)


def _tidy_distributions(by_condition: dict, grades) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"condition": c, "grade": int(g), "probability": float(p[i])}
            for c, p in by_condition.items()
            for i, g in enumerate(grades)
        ]
    )


def case_k_table(
    lab, shuffled: Encoded, examples, order_table: pd.DataFrame, k_values, draws: int, seed: int
) -> pd.DataFrame:
    """The four conditions' grade distributions of a few examples for each k (top-k order heads, or k random others).

    For the static explorer of the case study. ``lab`` gives the model, the original pairs (its encoded split;
    ``shuffled``: the same pairs with shuffled titles), the batch size, device and pad id. Random heads are ``draws``
    seeded sets per k with the layers of the top k but none of them (:func:`random_head_sets`), averaged; a k past
    :func:`depth_matched_k` has no such sets and is left out.

    Columns: example, k, condition (:data:`CONDITIONS`), grade (every grade of the lab's scale), probability.
    """
    examples = list(examples)
    model = lab.model
    k_values = [k for k in k_values if k <= depth_matched_k(order_table, head_grid(model)[1])]
    orig, shuf = lab.encoded.subset(examples), shuffled.subset(examples)

    def run(enc, heads=()):
        mask = removal_mask(model, heads) if heads else None
        return predict(model, enc, mask=mask, batch_size=lab.batch_size, device=lab.device, pad_id=lab.pad_id)

    base_o, base_s = run(orig), run(shuf)
    ranked = order_table.sort_values("rank")
    layers, heads = head_grid(model)
    tables = []
    for k in k_values:
        top = list(zip(ranked["layer"].astype(int)[:k], ranked["head"].astype(int)[:k]))
        order_s = run(shuf, top)
        random_s = np.mean(
            [run(shuf, picked) for picked in random_head_sets(layers, heads, top, draws, seed)] if k else [base_s],
            axis=0,
        )
        for row, example in enumerate(examples):
            values = (base_o[row], base_s[row], order_s[row], random_s[row])
            by_condition = dict(zip(CONDITIONS, values))
            tables.append(_tidy_distributions(by_condition, lab.scale.grades).assign(example=example, k=k))
    return pd.concat(tables, ignore_index=True)[["example", "k", "condition", "grade", "probability"]]


def removal_mask(model, heads) -> torch.Tensor:
    """(layers, heads) mask removing ``heads``."""
    mask = torch.ones(head_grid(model))
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask
