"""Heads removed by importance rather than at random: how many can go, and where the study says to keep them.

Michel et al. (2019) remove heads in order of gradient importance and find that many can go before accuracy
falls; the study's redundancy finding reads the same way, and its advice for distillation is to "keep more
low-level heads". The order is computed on pairs the curve is not measured on (the dev split, by
:meth:`headlab.lab.Lab.importance` on a dev-split lab), so no test pair chooses the heads it then measures, and
the safe share is chosen on the dev pairs too. The advice itself is judged on retrained students
(:mod:`headlab.findings.students`); pruning without retraining is its zero-budget sub-row.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.evaluate import predicted_grades
from headlab.core.pruning import cannot_prune
from headlab.core.stats import floor_bound, kappa_contrast, kappa_lost_point, relative_change
from headlab.core.sweep import (
    MaskSpec,
    baseline_correct,
    baseline_grades,
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
    "For distillation, keep more low-level heads: a student distilled from the teacher that keeps every low head "
    "loses less of the teacher's quadratic κ than a student of the same size that keeps every high head",
    "For distillation: keep more low-level heads.",
    "compare",
    direction=1,
    tally="ours",
)
CLAIMS = (DISTILL,)
DISTILL_SHARES = (0.1, 0.2, 0.3, 0.4)  # shares of all heads, each within one half; 0.5 is the whole half (02)
ZERO_BUDGET = (
    "At a budget of zero (pruned, not retrained): removing the least important heads of the high half costs less "
    "than removing as many of the low half"
)
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


def safe_share(
    dev: tuple[pd.DataFrame, pd.DataFrame],
    test: tuple[pd.DataFrame, pd.DataFrame],
    kind: str,
    margin: float,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
    """The largest share of heads ``kind``'s masks remove, *chosen on the dev pairs* and *measured on the test pairs*.

    Chosen: the largest share whose masks lose at most ``margin`` of the unmasked model's quadratic kappa on the dev
    sweep, at that share and every smaller one (the floor-aware scale of every claim; 0 when the first share loses
    more). Measured: the share of kappa lost at that share on the test sweep and the relative accuracy change, each
    with a 95% paired bootstrap interval over the test pairs; ``within`` says whether the test interval's upper end
    stays within the margin. ``dev`` and ``test``: ``(per_example, plan)`` of each split's sweep.

    Returns ``kind, share, n_heads, margin, dev_kappa_lost, n_dev, kappa_lost, kappa_lost_lo, kappa_lost_hi,
    rel_change, lo, hi, within, n_examples, n_boot``."""
    dev_rows, test_rows = _by_share(*dev, kind), _by_share(*test, kind).set_index("share")
    dev_base, dev_gold = baseline_grades(dev[0])
    share, n_heads, dev_lost = 0.0, 0, 0.0
    for r in dev_rows.itertuples():
        lost = kappa_lost_point(r.predicted, dev_base, dev_gold)  # the choice needs no interval
        if not lost <= margin:  # a NaN (no kappa scale) stops the run as a loss does
            break
        share, n_heads, dev_lost = float(r.share), int(r.n_heads), float(lost)
    base_correct = baseline_correct(test[0]).astype(np.float64)
    base_predicted, gold = baseline_grades(test[0])
    if share > 0 and share not in test_rows.index:
        raise ValueError(f"the test sweep has no {kind} mask at the share {share} chosen on dev")
    if share > 0:
        change = relative_change(test_rows.at[share, "correct"], base_correct, n_boot, seed)
        kappa = kappa_columns(test_rows.at[share, "predicted"], base_predicted, gold, n_boot, seed)
    else:  # nothing removed: nothing lost
        change = dict.fromkeys(("rel_change", "lo", "hi"), 0.0)
        kappa = dict.fromkeys(("kappa_lost", "kappa_lost_lo", "kappa_lost_hi"), 0.0)
    return {
        "kind": kind,
        "share": share,
        "n_heads": n_heads,
        "margin": margin,
        "dev_kappa_lost": dev_lost,
        "n_dev": len(dev_gold),
        "kappa_lost": kappa["kappa_lost"],
        "kappa_lost_lo": kappa["kappa_lost_lo"],
        "kappa_lost_hi": kappa["kappa_lost_hi"],
        "rel_change": change["rel_change"],
        "lo": change["lo"],
        "hi": change["hi"],
        "within": bool(kappa["kappa_lost_hi"] <= margin),
        "n_examples": len(gold),
        "n_boot": int(n_boot),
    }


def distillation_claim(
    per_example: pd.DataFrame,
    plan: pd.DataFrame,
    shares=DISTILL_SHARES,
    n_boot: int = 2000,
    seed: int = 0,
) -> Claim:
    """The study's "for distillation: keep more low-level heads" at a budget of zero, pruning without retraining:
    the sub-row ``pruning.keep_low_heads/pruning`` under the students' row
    (:func:`headlab.findings.students.student_claim`).
    At each share of all heads in ``shares``, the least important heads are removed within the low half only and
    within the high half only (keeping every low head); the number is how much more of the unmasked model's quadratic
    kappa (the chance-corrected scale, as 02's halves) the first loses than the second, averaged over the shares, with
    one paired bootstrap over test pairs for every share and both halves (:func:`headlab.core.stats.kappa_contrast`).
    Positive: keeping the low heads costs less. The head order comes from the dev pairs, so no test pair chooses the
    heads it measures."""
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
        return Claim.not_measured(
            DISTILL,
            reason=f"Not measured: no kappa scale ({lost['reason']})",
            unit=DISTILL_GAP,
            claim=ZERO_BUDGET,
            part="pruning",
        )
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
        censored=floor_bound(any(f["at_floor"] for f in floors[:k]), any(f["at_floor"] for f in floors[k:])),
        floor_reason=floor_reason,
        claim=ZERO_BUDGET,
        part="pruning",
        reason=(
            "The least important heads by gradient importance on the dev pairs removed within one half, measured on "
            f"the test pairs; relative change of accuracy at each share of all heads: {per_share}"
        ),
    )


SAFE_MARGIN = NO_LOSS.margin  # the scorecard's margin for "no loss" (sizes.MARGIN_WHY)
# Michel et al. (2019) prune BERT-base on MNLI alone (their other tasks ablate single heads, not a pruning curve): about
# 40% of the heads go before accuracy falls, read off their figure; shown as a reference, never judged
MICHEL = {"MNLI": 0.4}
SPEED_TABLE = REPO / "results" / "prune_speed.csv"


def safe_share_text(safe: dict, n_heads: int) -> str:
    """The safe share of :func:`safe_share` in a sentence, Michel et al.'s beside it."""
    michel = ", ".join(f"{v:.0%} on {k}" for k, v in MICHEL.items())
    verdict = "stays within" if safe["within"] else "does not stay within"
    return (
        f"Chosen on {safe['n_dev']} dev pairs: the largest share of heads removed by importance with every share up "
        f"to it losing at most {safe['margin']:.0%} of the unmasked quadratic κ is {safe['share']:.0%} "
        f"({safe['n_heads']} of {n_heads} heads; {safe['dev_kappa_lost']:.1%} lost on dev). On the "
        f"{safe['n_examples']} test pairs it loses {safe['kappa_lost']:.1%} [{safe['kappa_lost_lo']:.1%}, "
        f"{safe['kappa_lost_hi']:.1%}] of κ, accuracy {safe['rel_change']:+.1%} [{safe['lo']:+.1%}, {safe['hi']:+.1%}] "
        f"(relative; 95% paired bootstrap intervals): its interval {verdict} the margin. Michel et al.'s BERT-base "
        f"pruning curve, read off their figure: about {michel}."
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


SERVE_TABLE = REPO / "results" / "serve_speed.csv"
SERVE_GOAL = (1.5, 0.01)  # the goal: at least 1.5x pairs/s at batch 64, accuracy within 1 point


def serve_summary(model: str, data: str, path=SERVE_TABLE, goal=SERVE_GOAL) -> pd.DataFrame:
    """``benchmarks/serve_speed.py``'s invocations for one model and data, one row per machine and variant: the
    FLOP ceiling, the speed-up at batch 64 (lowest and highest of the invocations' medians, and the lowest and highest
    ends of their bootstrap intervals), at batch 1 likewise, p50/p95 latency at batch 1 (median over invocations), the
    test accuracy change with its paired interval, and ``reached``: every invocation's batch-64 interval at or above
    ``goal[0]`` and the accuracy interval's lower end within ``goal[1]``. Empty when it has not run."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame()
    table = pd.read_csv(path)
    table = table[(table["model"] == model) & (table["data"] == data)]
    rows = []
    for (machine, variant), runs in table.groupby(["machine", "variant"], sort=False):
        last = runs.iloc[-1]
        rows.append(
            {
                "machine": machine,
                "variant": variant,
                "budget": float(last["budget"]),
                "flop_ceiling": float(last["flop_ceiling"]),
                "invocations": len(runs),
                "speedup_64_min": runs["speedup_64"].min(),
                "speedup_64_max": runs["speedup_64"].max(),
                "speedup_64_lo": runs["speedup_64_lo"].min(),
                "speedup_64_hi": runs["speedup_64_hi"].max(),
                "speedup_1_min": runs["speedup_1"].min(),
                "speedup_1_max": runs["speedup_1"].max(),
                "p50_ms": runs["p50_ms"].median(),
                "p95_ms": runs["p95_ms"].median(),
                "base_p50_ms": runs["base_p50_ms"].median(),
                "base_p95_ms": runs["base_p95_ms"].median(),
                "change": float(last["change"]),
                "change_lo": float(last["change_lo"]),
                "change_hi": float(last["change_hi"]),
                "test_pairs": int(last["test_pairs"]),
                "reached": bool(runs["speedup_64_lo"].min() >= goal[0] and last["change_lo"] >= -goal[1]),
            }
        )
    return pd.DataFrame(rows)


def serve_text(summary: pd.DataFrame, goal=SERVE_GOAL) -> str:
    """:func:`serve_summary` in sentences: per machine, whether any compression reached the goal, and each one's
    speed-up beside its ceiling and its accuracy change."""
    if summary.empty:
        return "No serving speed measured for this model yet: run `python benchmarks/serve_speed.py` three times."
    parts = []
    for machine, rows in summary.groupby("machine", sort=False):
        reached = rows[rows["reached"]]
        each = "; ".join(
            f"{r.variant} x{r.speedup_64_min:.2f}-{r.speedup_64_max:.2f} at batch 64 "
            f"(FLOP ceiling x{r.flop_ceiling:.2f}), accuracy {100 * r.change:+.1f} points "
            f"[{100 * r.change_lo:+.1f}, {100 * r.change_hi:+.1f}]"
            for r in rows.itertuples()
        )
        verdict = f"reached by {', '.join(reached['variant'])}" if len(reached) else "**not reached** by any of them"
        parts.append(
            f"On {machine} ({int(rows['invocations'].max())} invocations, {int(rows['test_pairs'].iloc[0])} test "
            f"pairs): {each}. The goal, at least x{goal[0]:g} at batch 64 with accuracy within {100 * goal[1]:g} "
            f"point, is {verdict}."
        )
    return " ".join(parts)
