"""Uncertainty for every reported effect: paired bootstrap intervals and paired tests.

All effects are *relative* changes of accuracy against the unmasked baseline, as in the study, measured on
the same examples; the bootstrap resamples examples, so both accuracies move together (paired).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps


def bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) multinomial counts: each row is one bootstrap resample of n examples (read-only).

    Drawn once per (n, n_boot, seed) in a process and then reused: a sweep's hundreds of effects resample the same
    pairs, and drawing 2000 resamples of a test split costs a tenth of a second each time."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1 resample, got {n_boot}")
    if n * n_boot > CACHED_WEIGHTS:
        return _bootstrap_weights.__wrapped__(int(n), int(n_boot), int(seed))
    return _bootstrap_weights(int(n), int(n_boot), int(seed))


N_BOOT = 2000  # bootstrap resamples behind every interval unless a page says otherwise (its N_BOOT parameter)
CACHED_WEIGHTS = 8_000_000  # largest resample matrix kept for reuse (64 MB); four are kept


@lru_cache(maxsize=4)
def _bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    weights.flags.writeable = False
    return weights


def draw_counts(n_draws: int, n_boot: int, seed) -> np.ndarray:
    """(n_boot, n_draws) counts resampling the random draws with replacement: stage one of the two-stage bootstrap.

    One draw (a fixed mask) is never resampled. The generator is seeded apart from :func:`bootstrap_weights`,
    so adding draws never changes which test pairs a replicate resamples.
    """
    if n_draws == 1:
        return np.ones((n_boot, 1))
    rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), 0xD7A3])
    return rng.multinomial(n_draws, np.full(n_draws, 1.0 / n_draws), size=n_boot).astype(np.float64)


def boot_means(values: np.ndarray, weights: np.ndarray, draw_seed) -> np.ndarray:
    """Bootstrap replicates of the mean over draws and examples of ``values`` ((draws, examples), or (examples,)).

    Two stages, because both are chance: which heads a random mask drew (draws resampled with
    :func:`draw_counts`) and which test pairs were sampled (examples resampled with ``weights``, the same
    rows for every condition, so comparisons stay paired). With one draw it is the paired bootstrap.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    per_draw = weights @ values.T / values.shape[1]  # (n_boot, draws): each draw on each resample of pairs
    counts = draw_counts(values.shape[0], len(weights), draw_seed)
    return (counts * per_draw).sum(axis=1) / values.shape[0]


@dataclass(frozen=True)
class Change:
    """A mask's relative change of accuracy against the unmasked model on the same pairs (:func:`relative_change`):
    the estimate, its ``level`` interval (``lo``, ``hi``) and the 90% one an equivalence test uses (``lo90``,
    ``hi90``), what it is computed over, and the interval's degrees of freedom (infinite for one mask)."""

    rel_change: float
    lo: float
    hi: float
    lo90: float
    hi90: float
    n_examples: int
    n_draws: int
    n_boot: int
    df: float
    interval: str  # "pairs", or "draws and pairs"

    def columns(self) -> dict[str, float | int | str]:
        """The change as a table row's columns, under its field names."""
        return asdict(self)


def relative_change(
    masked_correct: np.ndarray,
    base_correct: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = 0.95,
    draw_seed=None,
) -> Change:
    """Relative accuracy change of masked vs base with a paired bootstrap interval.

    ``masked_correct`` is (examples,) or (draws, examples). With one mask the interval is the paired percentile
    bootstrap over test pairs (``df`` infinite). With draws, the effect is that of the mean accuracy over draws and
    its uncertainty a two-stage bootstrap (:func:`boot_means`) over the random choice of heads and the test pairs;
    since a few draws make a poor normal sample, the interval is then a t interval on the bootstrap's standard
    error with Welch–Satterthwaite degrees of freedom (:func:`draws_df`), never a normal quantile over few draws.
    ``lo90``/``hi90`` is the 90% interval a two one-sided tests (TOST) equivalence check at 5% uses
    (:func:`equivalent`). ``draw_seed`` (default ``seed``) seeds the resampling of draws.
    """
    masked = np.atleast_2d(np.asarray(masked_correct, dtype=np.float64))
    base = np.asarray(base_correct, dtype=np.float64)
    if masked.shape[1] != base.shape[0]:
        raise ValueError(f"masked results cover {masked.shape[1]} examples, baseline {base.shape[0]}")
    n = base.shape[0]
    w = bootstrap_weights(n, n_boot, seed)
    base_acc = w @ base / n
    masked_acc = boot_means(masked, w, seed if draw_seed is None else draw_seed)
    point = float(masked.mean() / base.mean() - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = masked_acc / base_acc - 1.0
        pairs_only = (w @ masked.T / n).mean(axis=1) / base_acc - 1.0
    keep = np.isfinite(boots) & np.isfinite(pairs_only)
    boots, pairs_only = boots[keep], pairs_only[keep]
    alpha = (1.0 - level) / 2.0
    if masked.shape[0] > 1:
        se, df = two_stage(boots, pairs_only, masked.shape[0], n)
        lo, hi = t_interval(point, se, df, level)
        lo90, hi90 = t_interval(point, se, df, 0.90)
    else:
        df = math.inf
        lo, hi = float(np.quantile(boots, alpha)), float(np.quantile(boots, 1.0 - alpha))
        lo90, hi90 = float(np.quantile(boots, 0.05)), float(np.quantile(boots, 0.95))
    return Change(
        rel_change=point,
        lo=lo,
        hi=hi,
        lo90=lo90,
        hi90=hi90,
        n_examples=int(n),
        n_draws=int(masked.shape[0]),
        n_boot=int(n_boot),
        df=df,
        interval="draws and pairs" if masked.shape[0] > 1 else "pairs",
    )


def two_stage(boots: np.ndarray, pairs_only: np.ndarray, n_draws: int, n_examples: int) -> tuple[float, float]:
    """``(se, df)`` of an effect averaged over ``n_draws`` random draws, from its two-stage bootstrap replicates
    ``boots`` and the same replicates with the draws held fixed (``pairs_only``). Resampling D draws with
    replacement gives their variance divided by D, not D - 1, so the draws' part is scaled up by D / (D - 1); the
    degrees of freedom are Welch–Satterthwaite's (:func:`draws_df`)."""
    var_total, var_pairs = float(np.var(boots, ddof=1)), float(np.var(pairs_only, ddof=1))
    var_pairs = min(var_pairs, var_total)
    var_draws = (var_total - var_pairs) * n_draws / max(n_draws - 1, 1)
    return math.sqrt(var_pairs + var_draws), draws_df(var_pairs + var_draws, var_pairs, n_draws, n_examples)


def t_interval(point: float, se: float, df: float, level: float = 0.95) -> tuple[float, float]:
    """``point`` ± the t quantile with ``df`` degrees of freedom (normal for infinite df) times ``se``."""
    q = float(sps.t.ppf(0.5 + level / 2, df)) if math.isfinite(df) else float(sps.norm.ppf(0.5 + level / 2))
    return point - q * se, point + q * se


def draws_df(var_total, var_pairs, n_draws: int, n_examples: int):
    """Welch–Satterthwaite degrees of freedom of an effect averaged over ``n_draws`` random draws on ``n_examples``
    pairs: its bootstrap variance ``var_total`` splits into the pairs' part ``var_pairs`` (draws held fixed; ``n -
    1`` degrees of freedom) and the draws' part (the rest; ``n_draws - 1``). Where the draws barely differ the pairs'
    many degrees of freedom dominate; where they differ a lot, the draws' few do. Arrays welcome (the calibration
    computes it for every simulated row); a float for floats."""
    if n_draws < 2:
        return math.inf
    var_total, var_pairs = np.asarray(var_total, dtype=float), np.asarray(var_pairs, dtype=float)
    var_draws = np.maximum(var_total - var_pairs, 0.0)
    var_pairs = np.minimum(var_pairs, var_total)
    denominator = var_pairs**2 / max(n_examples - 1, 1) + var_draws**2 / (n_draws - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, var_total**2 / denominator, np.inf)
    df = np.where(np.isfinite(df), np.maximum(n_draws - 1, np.minimum(df, max(n_examples - 1, 1))), df)
    return df if df.ndim else float(df)


def pairs_share(df, n_draws: int, n_examples: int):
    """The share f of an effect's variance that its pairs carry, solved from the Welch–Satterthwaite df
    :func:`draws_df` gave it (1 / (f² / (n - 1) + (1 - f)² / (D - 1)), clipped to [D - 1, n - 1]): the root below
    the peak; a df at D - 1 means the draws carry it all, one at n - 1 or beyond (or one draw) the pairs. Arrays
    welcome."""
    df = np.asarray(df, dtype=float)
    if n_draws < 2:
        return np.ones_like(df) if df.ndim else 1.0
    a, b = 1.0 / max(n_examples - 1, 1), 1.0 / (n_draws - 1)
    lo, hi = np.zeros_like(df), np.full_like(df, b / (a + b))  # the df peaks at f = b / (a + b)
    for _ in range(50):
        mid = (lo + hi) / 2
        below = 1.0 / (a * mid**2 + b * (1 - mid) ** 2) < df
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    share = np.where(df <= n_draws - 1, 0.0, np.where(df >= n_examples - 1, 1.0, (lo + hi) / 2))
    return share if share.ndim else float(share)


def versus_random(
    named: np.ndarray,
    random: np.ndarray,
    base: np.ndarray | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    draw_seed=None,
    level: float = 0.95,
) -> dict:
    """The named heads' effect minus the mean effect of random head sets, on the same pairs, with its uncertainty.

    ``named`` is one value per pair (right/wrong, or a per-pair measure) with the named heads removed, ``random``
    (draws, pairs) the same for each random set. With ``base`` (per-pair values of the unmasked model) both effects
    are relative changes against it (``mean / mean(base) - 1``, the study's unit for accuracy), else plain means.
    Uncertainty: a two-stage bootstrap, the pairs resampled once for every condition (paired) and the draws resampled
    (:func:`boot_means`); the interval is a t interval on its standard error with Welch–Satterthwaite degrees of
    freedom (:func:`draws_df`), so a handful of draws is never read with a normal quantile. ``rank``: how many draws
    have an effect at least as far as the named heads' in its direction (description only, never the verdict).
    """
    named = np.asarray(named, dtype=np.float64)
    random = np.atleast_2d(np.asarray(random, dtype=np.float64))
    n = named.shape[0]
    if random.shape[1] != n or (base is not None and len(base) != n):
        raise ValueError(f"named heads cover {n} pairs, random draws {random.shape[1]}")
    w = bootstrap_weights(n, n_boot, seed)
    named_b = w @ named / n
    random_b = boot_means(random, w, seed if draw_seed is None else draw_seed)
    random_fixed = (w @ random.T / n).mean(axis=1)
    per_draw = random.mean(axis=1)
    if base is None:
        scale_b, scale = np.ones(n_boot), 1.0
    else:
        base = np.asarray(base, dtype=np.float64)
        scale_b, scale = w @ base / n, float(base.mean())
    named_effect = float(named.mean() / scale - (0.0 if base is None else 1.0))
    draw_effects = per_draw / scale - (0.0 if base is None else 1.0)
    point = float(named.mean() - per_draw.mean()) / scale
    with np.errstate(divide="ignore", invalid="ignore"):  # a replicate whose baseline got none right has no ratio
        boots = (named_b - random_b) / scale_b
        pairs_only = (named_b - random_fixed) / scale_b
    keep = np.isfinite(boots) & np.isfinite(pairs_only)
    se, df = two_stage(boots[keep], pairs_only[keep], random.shape[0], n)
    lo, hi = t_interval(point, se, df, level)
    side = np.sign(named_effect - float(draw_effects.mean())) or 1.0
    return {
        "difference": point,
        "difference_lo": lo,
        "difference_hi": hi,
        "difference_se": se,
        "df": df,
        "named": named_effect,
        "random_mean": float(draw_effects.mean()),
        "random_min": float(draw_effects.min()),
        "random_max": float(draw_effects.max()),
        "n_draws": int(random.shape[0]),
        "n_examples": int(n),
        "rank": int(np.sum(side * draw_effects >= side * named_effect)),
    }


def equivalent(lo90: float, hi90: float, margin: float) -> bool:
    """ "No effect" as a claim of equivalence: the 90% interval lies inside (-margin, +margin) (TOST at 5%)."""
    return -margin < lo90 and hi90 < margin


def mcnemar(correct_a: np.ndarray, correct_b: np.ndarray) -> float:
    """Exact two-sided McNemar p-value: do a and b differ on the same examples beyond chance?"""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(sps.binomtest(only_a, only_a + only_b, 0.5).pvalue)


def holm(p_values) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values, for testing many heads at once."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p)
    adjusted = np.minimum(1.0, (len(p) - np.arange(len(p))) * p[order])
    adjusted = np.maximum.accumulate(adjusted)
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def ratio_of_means(numerator: np.ndarray, denominator: np.ndarray, weights: np.ndarray) -> tuple[float, float, float]:
    """mean(numerator) / mean(denominator) over the pairs (a share of a mean difference: a per-pair ratio explodes
    where a pair barely moves) and its 95% paired bootstrap interval, each resample's ratio of means (``weights``:
    :func:`bootstrap_weights` rows, the same resamples for both)."""
    lo, hi = np.quantile((weights @ numerator) / (weights @ denominator), [0.025, 0.975])
    return float(numerator.mean() / denominator.mean()), float(lo), float(hi)


def draws_ratio_of_means(numerators: np.ndarray, denominator: np.ndarray, weights: np.ndarray, counts: np.ndarray):
    """The mean over random draws of :func:`ratio_of_means` (``numerators``: draws x pairs, over one ``denominator``)
    and its n_boot bootstrap replicates over both sources of chance: each replicate resamples the pairs (``weights``:
    :func:`bootstrap_weights` rows) and the draws (``counts``: :func:`draw_counts`)."""
    per_draw = (weights @ numerators.T) / (weights @ denominator)[:, None]  # n_boot x draws
    point = float(np.mean(numerators.mean(axis=1) / denominator.mean()))
    return point, (counts * per_draw).sum(axis=1) / numerators.shape[0]


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and t-interval of independent draws (e.g. random masks), for the spread between draws."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return float(v.mean()), float("nan"), float("nan")
    half = sps.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def by_interval(lo: float, hi: float, above: str, below: str, neither: str) -> str:
    """The words for an interval that lies above zero, below zero, or contains it (the three verdicts)."""
    return above if lo > 0 else below if hi < 0 else neither


NEAR_FLOOR = 0.10  # a model less than 10 points of accuracy above its majority grade is near its floor


@dataclass(frozen=True)
class Floor:
    """A model's accuracy unmasked (``base``) and the accuracy of always answering its majority grade (``majority``),
    on ``n`` test pairs: what a page says beside its numbers. Effects are judged on the kappa scale
    (:func:`kappa_lost`), whose floor is decided from predictions (:func:`at_floor`), not on this pair."""

    base: float
    majority: float
    n: int

    def near_floor_warning(self) -> str:
        """A warning when the model is near its floor (less than :data:`NEAR_FLOOR` of accuracy above always
        answering its majority grade), else "": a mask or a smaller model then has little accuracy to take."""
        gap = self.base - self.majority
        if gap >= NEAR_FLOOR:
            return ""
        return (
            f"**This model is near its floor**: {100 * abs(gap):.1f} points of accuracy "
            f"{'above' if gap >= 0 else 'below'} always answering its "
            f"majority grade ({self.base:.1%} against {self.majority:.1%} on {self.n} pairs), so removing heads has "
            'little accuracy to take and "no loss" says little.'
        )

    @classmethod
    def of(cls, correct, grades, split_grades=None) -> Floor:
        """The unmasked model's accuracy on some pairs (``correct``: right/wrong per pair) and that of always answering
        the majority grade of ``split_grades`` (default ``grades``: the pairs' own)."""
        grades = np.asarray(grades)
        majority = np.bincount(np.asarray(grades if split_grades is None else split_grades)).argmax()
        return cls(float(np.mean(correct)), float(np.mean(grades == majority)), len(grades))


def _kappas(predicted: np.ndarray, gold: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(resamples, draws) quadratic-weighted kappas of each row of ``predicted`` (draws, pairs) on each row of
    ``weights`` ((resamples, pairs), counts of each pair).

    Quadratic kappa is Lin's concordance: 2 cov(p, g) / (var p + var g + (mean p - mean g)^2), population moments
    over the weighted pairs (the agreement matrix's weights (i - j)^2 and its chance matrix's marginals reduce to
    these moments), so one matrix product of the weights with the grades' powers replaces a one-hot confusion matrix
    per resample. Scaled by the total weight N squared, every term is an integer when the weights are counts, so a
    constant predictor has exactly zero variance, and its kappa is defined as 0 (no agreement beyond chance), also
    where the gold grades are that same constant and the ratio would be 0/0. The moments do not move when every
    grade moves by one constant, so a scale from 0 and one from 1 give the same kappa.
    """
    for name, grades in (("predicted", predicted), ("gold", gold)):
        if not np.all((grades >= 0) & (grades == np.round(grades))):
            raise ValueError(f"{name} grades must be whole numbers from 0 up")
    sums = weights @ np.column_stack(
        [np.ones_like(gold), gold, gold**2, predicted.T, (predicted**2).T, (predicted * gold).T]
    )
    total, sum_g, sum_gg = sums[:, :1], sums[:, 1:2], sums[:, 2:3]
    sum_p, sum_pp, sum_pg = np.split(sums[:, 3:], 3, axis=1)
    var_p = total * sum_pp - sum_p**2
    covariance = total * sum_pg - sum_p * sum_g
    spread = var_p + (total * sum_gg - sum_g**2) + (sum_p - sum_g) ** 2
    constant = var_p <= 0
    return np.where(constant, 0.0, 2 * covariance / np.where(constant, 1.0, spread))


def quadratic_kappa(predicted, gold, weights=None) -> float:
    """Cohen's kappa with quadratic weights of ``predicted`` against ``gold`` grades: agreement
    beyond chance on the ordinal scale, 1 for perfect agreement, 0 for any constant predictor, below 0 for worse than
    chance. Unlike accuracy above the majority grade, it has a fixed top (1) and a fixed chance level (0).

    ``weights`` (counts per pair, e.g. one bootstrap resample) count each pair that many times. The scale's number
    of grades k does not enter: the weights (i - j)^2 / (k - 1)^2 change by a factor that cancels. Raises ValueError
    for grades that are not whole numbers and for no pairs (zero total weight), where kappa is undefined; it never
    returns NaN.
    """
    p = np.asarray(predicted, dtype=np.float64)
    g = np.asarray(gold, dtype=np.float64)
    if p.shape != g.shape or p.ndim != 1:
        raise ValueError(f"predicted {p.shape} and gold {g.shape} must be the same pairs")
    w = np.ones_like(g) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != g.shape:
        raise ValueError(f"weights {w.shape} must have one count per pair {g.shape}")
    if np.any(w < 0) or not w.sum() > 0:
        raise ValueError("weights must be non-negative with a positive total: kappa of no pairs is undefined")
    return float(_kappas(p[None], g, w[None])[0, 0])


def kappa_lost(
    masked_predicted,
    base_predicted,
    gold,
    n_boot: int = N_BOOT,
    seed: int = 0,
    draw_seed=None,
    level: float = 0.95,
) -> dict:
    """Share of the unmasked model's quadratic kappa (:func:`quadratic_kappa`) that masking takes away:
    1 - kappa_masked / kappa_base, with a bootstrap interval, never clipped: the percentile interval for one mask, a
    t interval with Welch–Satterthwaite degrees of freedom (``kappa_df``, :func:`draws_df`) over random draws.

    ``masked_predicted`` is (pairs,) or (draws, pairs); with draws, kappa_masked is the mean of the draws' kappas.
    Each replicate resamples the pairs with :func:`bootstrap_weights` (``seed``: the same pairs as
    :func:`relative_change`'s accuracy interval) and the draws with :func:`draw_counts` (``draw_seed``, default
    ``seed``), and recomputes *both* kappas on them, so the denominator's own uncertainty is in the interval.
    The scale needs kappa_base > 0: where the point estimate or any replicate has kappa_base <= 0, kappa_lost and its
    interval are NaN and ``kappa_reason`` says why (it is "" otherwise). 2000 replicates x 20 draws x 1400 pairs take
    0.06 s on one core (measured, once :func:`bootstrap_weights` has drawn and kept the resamples, 0.4 s once).

    Returns kappa_base (with kappa_base_lo, kappa_base_hi), kappa_masked (kappa_masked_lo, kappa_masked_hi),
    kappa_lost, kappa_lost_lo, kappa_lost_hi (the ``level`` interval), kappa_lost_se (the replicates' SD), kappa_df,
    kappa_reason.
    """
    masked = np.atleast_2d(np.asarray(masked_predicted, dtype=np.float64))
    base = np.asarray(base_predicted, dtype=np.float64)
    g = np.asarray(gold, dtype=np.float64)
    if not masked.shape[1] == base.shape[0] == g.shape[0]:
        raise ValueError(f"masked predictions cover {masked.shape[1]} pairs, baseline {base.shape[0]}, gold {len(g)}")
    base_point, base_boot, [(masked_point, per_draw, counts)] = _kappa_replicates(
        [masked], base, g, n_boot, seed, [seed if draw_seed is None else draw_seed]
    )
    masked_boot = (counts * per_draw).sum(axis=1) / masked.shape[0]
    alpha = (1.0 - level) / 2.0

    def interval(values: np.ndarray) -> tuple[float, float]:
        return float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha))

    lost = _shares_lost([1.0], base_point, base_boot, [(masked_point, per_draw, counts)], len(g), level)
    return {
        "kappa_base": base_point,
        **dict(zip(("kappa_base_lo", "kappa_base_hi"), interval(base_boot))),
        "kappa_masked": masked_point,
        **dict(zip(("kappa_masked_lo", "kappa_masked_hi"), interval(masked_boot))),
        "kappa_lost": lost["contrast"],
        "kappa_lost_lo": lost["lo"],
        "kappa_lost_hi": lost["hi"],
        "kappa_lost_se": lost["se"],
        "kappa_df": lost["df"],
        "kappa_reason": lost["reason"],
    }


def kappa_lost_point(masked_predicted, base_predicted, gold) -> float:
    """:func:`kappa_lost`'s point alone, 1 - kappa_masked / kappa_base (kappa_masked the mean over the draws of
    ``masked_predicted``, pairs or draws x pairs), with no bootstrap: NaN where kappa_base <= 0. Unlike
    :func:`kappa_lost`, it never reads a replicate, so a base kappa above 0 whose resamples reach 0 still gives a
    number (a choice needs the point, not its interval)."""
    base_kappa = quadratic_kappa(base_predicted, gold)
    masked = np.mean([quadratic_kappa(draw, gold) for draw in np.atleast_2d(masked_predicted)])
    return 1.0 - float(masked) / base_kappa if base_kappa > 0 else math.nan


def _kappa_replicates(conditions, base, g, n_boot, seed, draw_seeds):
    """``(base_point, base_boot, [(kappa, per_draw, counts), ...])``: the baseline's kappa at the point and in every
    replicate, and per condition its kappa (mean over draws), its draws' kappas in every replicate (n_boot, draws)
    and the replicates' draw counts (:func:`draw_counts`). One pass over the resamples for the baseline and every
    draw of every condition."""
    masked = [np.atleast_2d(np.asarray(c, dtype=np.float64)) for c in conditions]
    for m in masked:
        if m.shape[1] != len(g):
            raise ValueError(f"a condition covers {m.shape[1]} pairs, gold {len(g)}")
    both = np.vstack([base, *masked])
    point = _kappas(both, g, np.ones((1, len(g))))[0]
    boots = _kappas(both, g, bootstrap_weights(len(g), n_boot, seed))
    ends = np.cumsum([1, *(m.shape[0] for m in masked)])
    per_condition = [
        (float(point[start:end].mean()), boots[:, start:end], draw_counts(end - start, n_boot, draw_seed))
        for start, end, draw_seed in zip(ends[:-1], ends[1:], draw_seeds)
    ]
    return float(point[0]), boots[:, 0], per_condition


def _shares_lost(signs, base_point, base_boot, per_condition, n_examples, level) -> dict:
    """:func:`kappa_contrast`'s numbers from :func:`_kappa_replicates`."""
    nan = dict.fromkeys(("contrast", "lo", "hi", "se", "df"), math.nan)
    if base_point <= 0:
        return {
            **nan,
            "n_draws": 1,
            "reason": f"unmasked kappa {base_point:.3f} <= 0: no agreement beyond chance to lose",
        }
    if (base_boot <= 0).any():
        return {
            **nan,
            "n_draws": 1,
            "reason": f"unmasked kappa <= 0 in {int((base_boot <= 0).sum())} of {len(base_boot)} bootstrap replicates",
        }
    point, boots, fixed = 0.0, np.zeros(len(base_boot)), np.zeros(len(base_boot))
    for sign, (kappa, per_draw, counts) in zip(signs, per_condition):
        point += sign * (1.0 - kappa / base_point)
        boots += sign * (1.0 - (counts * per_draw).sum(axis=1) / per_draw.shape[1] / base_boot)
        fixed += sign * (1.0 - per_draw.mean(axis=1) / base_boot)
    with_draws = [c[1].shape[1] for c in per_condition if c[1].shape[1] > 1]
    if with_draws:
        se, df = two_stage(boots, fixed, min(with_draws), n_examples)
        lo, hi = t_interval(point, se, df, level)
    else:
        alpha = (1.0 - level) / 2.0
        se, df = float(boots.std(ddof=1)), math.inf
        lo, hi = float(np.quantile(boots, alpha)), float(np.quantile(boots, 1.0 - alpha))
    return {
        "contrast": point,
        "lo": lo,
        "hi": hi,
        "se": se,
        "df": df,
        "n_draws": min(with_draws, default=1),
        "reason": "",
    }


def kappa_contrast(
    conditions,
    signs,
    base_predicted,
    gold,
    n_boot: int = N_BOOT,
    seed: int = 0,
    draw_seeds=None,
    level: float = 0.95,
) -> dict:
    """A signed sum of shares of kappa lost, sum_i sign_i * (1 - kappa_i / kappa_base), with one bootstrap for all:
    e.g. the lower half's share lost minus the upper half's (signs +1, -1), or a mean over shares (signs 1/k).

    ``conditions``: each a (pairs,) or (draws, pairs) array of predicted grades (a condition's kappa is the mean of
    its draws' kappas). Every replicate resamples the pairs once for every condition and the baseline (the
    :func:`bootstrap_weights` of ``seed``, so paired with the accuracy intervals) and each condition's draws on their
    own (:func:`draw_counts` with its ``draw_seeds`` entry, default ``seed``), and recomputes every kappa, the
    baseline's too. With draws the interval is a t interval on the replicates' SD with Welch–Satterthwaite df
    (:func:`two_stage`, at the fewest draws of any condition: the cautious reading); without, the percentile interval.
    Where kappa_base is not above 0 (point or any replicate) there is no agreement beyond chance to lose: the numbers
    are NaN and ``reason`` says why.

    Returns contrast, lo, hi, se, df, n_draws (the fewest of any condition with draws, else 1), reason ("" if defined).
    """
    g = np.asarray(gold, dtype=np.float64)
    base = np.asarray(base_predicted, dtype=np.float64)
    if base.shape != g.shape:
        raise ValueError(f"baseline predictions cover {base.shape[0]} pairs, gold {len(g)}")
    if len(conditions) != len(signs) or not len(conditions):
        raise ValueError(f"{len(conditions)} conditions and {len(signs)} signs: give one sign per condition")
    seeds = [seed] * len(conditions) if draw_seeds is None else list(draw_seeds)
    base_point, base_boot, per_condition = _kappa_replicates(conditions, base, g, n_boot, seed, seeds)
    return _shares_lost(signs, base_point, base_boot, per_condition, len(g), level)


MODAL_FLOOR = 0.95  # a predictor giving this share of pairs one grade is (nearly) constant: at the floor


def modal_share(predicted) -> float:
    """Share of pairs given the commonest predicted grade ((pairs,); for (draws, pairs), the mean over draws): how
    close a condition comes to a constant predictor, whose kappa is 0."""
    rows = np.atleast_2d(np.asarray(predicted)).astype(np.int64)
    return float(np.mean([np.bincount(row).max() / len(row) for row in rows]))


def floor_bound(plus_at_floor: bool, minus_at_floor: bool) -> int:
    """Which way a difference (plus condition minus minus condition) is bounded when one condition, not both, sits at
    the floor, whose loss is at least what is measured: +1 at least as measured, -1 at most, 0 neither
    (:func:`headlab.judging.verdicts.judge`'s ``censored``)."""
    return 0 if plus_at_floor == minus_at_floor else (1 if plus_at_floor else -1)


def at_floor(predicted, kappa_masked_lo: float, modal_limit: float = MODAL_FLOOR) -> tuple[bool, str]:
    """Is a condition at the floor of the kappa scale, decided from its predictions, and the words saying what was
    checked: at the floor when the lower end of its kappa interval reaches 0 (``kappa_masked_lo`` <= 0: no agreement
    beyond chance shown) or when :func:`modal_share` of ``predicted`` is at least ``modal_limit`` (nearly a
    constant predictor). E.g. ``(True, "κ interval reaches 0")``, ``(True, "98% of pairs get one grade")``,
    ``(False, "κ interval above 0; 61% of pairs get the commonest grade")``; percentages are rounded down."""
    if math.isnan(kappa_masked_lo):
        raise ValueError("kappa_masked_lo is NaN: the floor cannot be decided from it")
    share = modal_share(predicted)
    percent = f"{math.floor(share * 100 + 1e-9)}%"
    reasons = []
    if kappa_masked_lo <= 0:
        reasons.append("κ interval reaches 0")
    if share >= modal_limit:
        reasons.append(f"{percent} of pairs get one grade")
    if reasons:
        return True, "; ".join(reasons)
    return False, f"κ interval above 0; {percent} of pairs get the commonest grade"
