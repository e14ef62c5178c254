"""Heads removed by importance rather than at random: how many can go, and where the study says to keep them.

Michel et al. (2019) remove heads in order of gradient importance and find that many can go before accuracy
falls; the study's redundancy finding reads the same way, and its advice for distillation is to "keep more
low-level heads". The order is computed on pairs the curve is not measured on (the dev split, by
:meth:`headlab.lab.Lab.importance` on a dev-split lab), so no test pair chooses the heads it then measures.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.evaluate import predicted_grades
from headlab.core.pruning import cannot_prune
from headlab.core.stats import boot_means, bootstrap_weights, kappa_contrast
from headlab.core.sweep import (
    MaskSpec,
    baseline_correct,
    baseline_grades,
    draw_seed,
    heads_key,
    kappa_columns,
    predicted_matrix,
    share_masks,
)
from headlab.findings.importance import half_pool
from headlab.findings.redundancy import NO_LOSS
from headlab.findings.units import DISTILL_GAP
from headlab.findings.verdicts import Claim, StudyClaim
from headlab.lab.lab import load
from headlab.lab.params import REPO


def importance_order(importance: pd.DataFrame, column: str = "importance") -> list[tuple[int, int]]:
    """Every head, least important first (``column`` of :func:`headlab.core.gradients.gradient_importance`: by
    default normalized per layer, as Michel et al. prune; ties by layer, then head)."""
    order = importance.sort_values([column, "layer", "head"], kind="stable")
    return [(int(l), int(h)) for l, h in zip(order["layer"], order["head"])]


def least_important(importance: pd.DataFrame, share: float, column: str = "importance") -> list[tuple[int, int]]:
    """The ``share`` of all heads (rounded) that :func:`importance_order` puts first."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must lie in [0, 1], got {share}")
    order = importance_order(importance, column)
    return order[: int(round(share * len(order)))]


def importance_specs(
    importance: pd.DataFrame, layers: int, heads: int, shares, where: str = "all", column: str = "importance"
) -> list[MaskSpec]:
    """One mask per share of *all* heads, removing the least important heads among those ``where`` allows
    (``"all"`` layers, or the ``"lower"`` or ``"upper"`` half: the study's distillation advice compares them at the
    same share). Kind ``importance-<where>``; a share larger than the allowed pool is refused."""
    allowed = None if where == "all" else set(half_pool(layers, heads, where))
    order = [h for h in importance_order(importance, column) if allowed is None or h in allowed]
    specs = []
    for share in shares:
        n = int(round(share * layers * heads))
        if not 0.0 <= share <= 1.0 or n > len(order):
            raise ValueError(f"share {share} means {n} heads, but {where!r} allows {len(order)} of {layers * heads}")
        specs.append(
            MaskSpec(
                f"importance-{where}-s{share:.3f}",
                tuple(sorted(order[:n])),
                f"importance-{where}",
                {"share": share, "draw": 0, "where": where},
            )
        )
    return specs


CURVE_KIND = "importance-all"
DISTILL = StudyClaim(
    "pruning.keep_low_heads",
    "10_pruning",
    "For distillation, keep more low-level heads: removing the least important heads of the high half costs "
    "less accuracy than removing as many of the low half",
    "For distillation: keep more low-level heads.",
    "compare",
    direction=1,
    min_size=0.05,
    size_why="at least 5 points of the unmasked quadratic κ less lost by pruning the high half",
    size_source="precision",
    tally="ours",
)
CLAIMS = (DISTILL,)
DISTILL_SHARES = (0.1, 0.2, 0.3, 0.4)  # shares of all heads, each within one half; 0.5 is the whole half (02)
PAIRED = "paired bootstrap over test pairs (one resample for every share, both halves and the baseline)"


def _by_share(per_example: pd.DataFrame, plan: pd.DataFrame, kind: str) -> pd.DataFrame:
    """One row per share of ``kind`` (ascending, no-head shares left out): ``share``, ``n_heads``, ``correct``, its
    right/wrong matrix (draws x examples), and ``predicted``, its predicted grades (draws x examples)."""
    specs, matrix = share_masks(per_example, plan, kind, ["n_dropped"])
    grades = predicted_matrix(per_example)
    specs = specs[specs["n_dropped"] > 0]
    if specs.empty:
        raise ValueError(f"no masks of kind {kind!r} remove any head")
    rows = [
        {
            "share": share,
            "n_heads": int(group["n_dropped"].iloc[0]),
            "correct": matrix.loc[group["mask_id"]].to_numpy(dtype=np.float64),
            "predicted": grades.loc[group["mask_id"]].to_numpy(),
        }
        for share, group in specs.groupby("share", sort=True)
    ]
    return pd.DataFrame(rows)


def _largest_safe(changes: np.ndarray, margin: float) -> np.ndarray:
    """Per row of ``changes`` (replicates x shares, shares ascending), how many shares in a row from the first lose
    less than ``margin``: the index of the largest safe share plus one (0: not even the first)."""
    return np.cumprod(changes >= -margin, axis=1).sum(axis=1)


def safe_share(
    per_example: pd.DataFrame, plan: pd.DataFrame, kind: str, margin: float, n_boot: int = 2000, seed: int = 0
) -> dict:
    """The largest share of heads that ``kind``'s masks remove while accuracy stays within ``margin`` of the
    unmasked model (a relative change of at least ``-margin`` at that share and at every smaller one), with a 95%
    bootstrap interval: the test pairs resampled (one resample for every share and the baseline) and, for random
    masks, each share's draws too (:func:`headlab.core.stats.boot_means`), so the interval also covers which heads
    were drawn. A model that loses more than the margin at the smallest share has a safe share of 0.

    Returns ``kind, share, n_heads, lo, hi, n_examples, n_draws, n_boot, margin``."""
    rows = _by_share(per_example, plan, kind)
    shares = np.concatenate([[0.0], rows["share"].to_numpy()])
    heads = np.concatenate([[0], rows["n_heads"].to_numpy()])
    base = baseline_correct(per_example).astype(np.float64)
    weights = bootstrap_weights(len(base), n_boot, seed)
    base_boot = weights @ base / len(base)
    boots = np.column_stack(
        [
            boot_means(c, weights, draw_seed(seed, kind, s)) / base_boot - 1.0
            for s, c in zip(rows["share"], rows["correct"])
        ]
    )
    point = np.array([[c.mean() / base.mean() - 1.0 for c in rows["correct"]]])
    found = int(_largest_safe(point, margin)[0])
    replicates = shares[_largest_safe(boots, margin)]
    return {
        "kind": kind,
        "share": float(shares[found]),
        "n_heads": int(heads[found]),
        "lo": float(np.quantile(replicates, 0.025)),
        "hi": float(np.quantile(replicates, 0.975)),
        "n_examples": len(base),
        "n_draws": int(max(c.shape[0] for c in rows["correct"])),
        "n_boot": int(n_boot),
        "margin": margin,
    }


def distillation_claim(
    per_example: pd.DataFrame,
    plan: pd.DataFrame,
    shares=DISTILL_SHARES,
    n_boot: int = 2000,
    seed: int = 0,
) -> Claim:
    """The study's "for distillation: keep more low-level heads", as a comparison at equal cost: at each share of
    all heads in ``shares``, the least important heads are removed within the low half only and within the high half
    only (keeping every low head); the number is how much more of the unmasked model's quadratic kappa (the
    chance-corrected scale, as 02's halves) the first loses than the second, averaged over the shares, with one paired
    bootstrap over test pairs for every share and both halves (:func:`headlab.core.stats.kappa_contrast`). Positive:
    keeping the low heads costs less. The head order comes from the dev pairs, so no test
    pair chooses the heads it measures."""
    lower = _by_share(per_example, plan, "importance-lower").set_index("share")
    upper = _by_share(per_example, plan, "importance-upper").set_index("share")
    wanted = [s for s in shares if s in lower.index and s in upper.index]
    if not wanted or len(wanted) != len(shares):
        raise ValueError(
            f"distillation_claim needs both halves' masks at shares {list(shares)}; "
            f"have lower {list(lower.index)}, upper {list(upper.index)}"
        )
    base = baseline_correct(per_example).astype(np.float64)
    base_predicted, gold = baseline_grades(per_example)
    k = len(wanted)
    conditions = [lower.at[s, "predicted"] for s in wanted] + [upper.at[s, "predicted"] for s in wanted]
    lost = kappa_contrast(conditions, [1.0 / k] * k + [-1.0 / k] * k, base_predicted, gold, n_boot, seed)
    if lost["reason"]:
        return Claim.not_measured(DISTILL, reason=f"Not measured: no kappa scale ({lost['reason']})", unit=DISTILL_GAP)
    floors = [kappa_columns(c, base_predicted, gold, n_boot, seed) for c in conditions]
    at_floor = all(f["at_floor"] for f in floors)  # every pruned model at the floor: the comparison is saturated
    floor_reason = "; ".join(
        f"{half} half at {s:.0%}: {f['floor_reason']}"
        for (half, s), f in zip([("low", s) for s in wanted] + [("high", s) for s in wanted], floors)
    )
    change = lambda frame, s: frame.at[s, "correct"].mean() / base.mean() - 1.0  # noqa: E731
    per_share = "; ".join(
        f"{s:.0%} ({int(lower.at[s, 'n_heads'])} heads): low half {change(lower, s):+.1%}, high "
        f"half {change(upper, s):+.1%}"
        for s in wanted
    )
    return Claim.measured(
        DISTILL,
        ours=lost["contrast"],
        lo=lost["lo"],
        hi=lost["hi"],
        unit=DISTILL_GAP,
        method=PAIRED,
        n_examples=len(base),
        at_floor=at_floor,
        floor_reason=floor_reason,
        reason=(
            "The least important heads by gradient importance on the dev pairs removed within one half, measured on "
            f"the test pairs; relative change of accuracy at each share of all heads: {per_share}"
        ),
    )


SAFE_MARGIN = NO_LOSS.margin  # the scorecard's margin for "no loss" (MARGIN_WHY)
# Michel et al. (2019) prune BERT-base on MNLI alone (their other tasks ablate single heads, not a pruning curve): about
# 40% of the heads go before accuracy falls, read off their figure; shown as a reference, never judged
MICHEL = {"MNLI": 0.4}
SPEED_TABLE = REPO / "results" / "prune_speed.csv"


def safe_share_text(safe: pd.DataFrame, n_heads: int) -> str:
    """The safe shares of :func:`safe_share` (one row per kind) in a sentence, Michel et al.'s beside them."""
    parts = []
    for r in safe.itertuples():
        how = "by importance" if r.kind == CURVE_KIND else f"at random ({r.n_draws} draws per share)"
        parts.append(f"{how}, {r.share:.0%} of the heads ({r.n_heads} of {n_heads}) [{r.lo:.0%}, {r.hi:.0%}]")
    michel = ", ".join(f"{v:.0%} on {k}" for k, v in MICHEL.items())
    margin = float(safe["margin"].iloc[0])
    return (
        f"Largest share removed with every share up to it within {margin:.0%} of the unmasked accuracy: "
        f"{'; '.join(parts)} (95% bootstrap intervals over {int(safe['n_examples'].iloc[0])} test pairs, and "
        f"over the draws at random). Michel et al.'s BERT-base pruning curve, read off their figure: about {michel}."
    )


def pruned_model(lab, drop, per_example: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """``lab``'s model without the heads in ``drop``, rebuilt (:meth:`headlab.lab.Lab.prune`), saved as safetensors in
    a temporary folder and loaded back with :func:`headlab.load` on the same pairs: the row of :func:`pruned_summary`,
    or, for a model that cannot be pruned, one row whose ``note`` says why."""
    why = cannot_prune(lab.model)
    if why:
        return pd.DataFrame([{"note": f"No pruned model is built for this model: {why}."}])
    params = lab.params
    with tempfile.TemporaryDirectory() as folder:
        lab.prune(drop, folder)
        reloaded = load(
            model=folder,
            data=params.data,
            split=params.eval_split,
            limit=params.eval_limit,
            seed=params.seed,
            device=params.device,
            batch_size=params.batch_size,
            run_dir=params.run_dir,
        )
        return pruned_summary(lab, reloaded, drop, folder, per_example, plan)


def pruned_summary(lab, pruned_lab, drop, folder, per_example: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """One row about a pruned model (``pruned_lab``, loaded from ``folder``) beside ``lab``'s unpruned one: heads,
    parameters, safetensors size, accuracy, and the share of test pairs it grades as masking the same heads did in
    the sweep (``per_example``, ``plan``: the mask with exactly ``drop`` removed; the baseline for no head)."""
    dropped = heads_key(sorted((int(l), int(h)) for l, h in drop))
    match = plan[plan["dropped"].fillna("") == dropped]
    if match.empty:
        raise ValueError(f"no mask of the sweep removes exactly the {len(drop)} heads to compare with")
    masked = per_example[per_example["mask_id"] == match["mask_id"].iloc[0]].sort_values("example")
    predicted = predicted_grades(pruned_lab.base_probs)
    mb = lambda path: sum(f.stat().st_size for f in Path(path).glob("*.safetensors")) / 2**20  # noqa: E731
    with tempfile.TemporaryDirectory() as unpruned:  # the unpruned model saved the same way, for a like size
        lab.model.save_pretrained(unpruned, safe_serialization=True)
        unpruned_mb = mb(unpruned)
    parameters = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    layers, heads = lab.shape
    return pd.DataFrame(
        [
            {
                "heads_removed": len(drop),
                "heads_kept": layers * heads - len(drop),
                "parameters": parameters(pruned_lab.model),
                "parameters_unpruned": parameters(lab.model),
                "file_mb": mb(folder),
                "file_mb_unpruned": unpruned_mb,
                "accuracy": float(np.mean(predicted == pruned_lab.encoded.grades)),
                "accuracy_masked": float(masked["correct"].mean()),
                "accuracy_unpruned": float(np.mean(lab.base_correct)),
                "grades_as_masking": float(np.mean(predicted == masked["predicted"].to_numpy())),
                "n_examples": len(predicted),
            }
        ]
    )


def speed_rows(model: str, data: str, path=SPEED_TABLE) -> pd.DataFrame:
    """``benchmarks/prune_speed.py``'s rows for one model and data (empty when it has not run), each with its
    ``speedup``: pairs per second over the unpruned model's on the same machine, device, batch size and run."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame()
    table = pd.read_csv(path)
    table = table[(table["model"] == model) & (table["data"] == data)].copy()
    if table.empty:
        return table
    key = ["machine", "device", "precision", "share_removed", "batch_size"]
    unpruned = table[table["variant"] == "unpruned"].groupby(key)["pairs_per_s"].last().rename("unpruned_pairs_per_s")
    table = table.join(unpruned, on=key)
    table["speedup"] = table["pairs_per_s"] / table["unpruned_pairs_per_s"]
    return table[
        [
            "machine",
            "device",
            "precision",
            "variant",
            "share_removed",
            "heads_removed",
            "batch_size",
            "repeats",
            "pairs_per_s",
            "pairs_per_s_min",
            "pairs_per_s_max",
            "speedup",
            "parameters",
            "file_mb",
        ]
    ].reset_index(drop=True)
