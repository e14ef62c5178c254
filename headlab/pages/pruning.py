"""Heads removed by importance rather than at random: how many can go, and where the study says to keep them.

Michel et al. (2019) remove heads in order of gradient importance and find that many can go before accuracy
falls; the study's redundancy finding reads the same way, and its advice for distillation is to "keep more
low-level heads". The order is computed on pairs the curve is not measured on (the dev split, by
:meth:`headlab.lab.Lab.importance` on a dev-split lab), so no test pair chooses the heads it then measures, and
the safe share is chosen on the dev pairs too. The advice itself is judged on retrained students
(below); pruning without retraining is its zero-budget sub-row.

The students:

The study's distillation advice as advice: students of the same size that keep the low heads, the high heads or the
most important heads, each distilled from the teacher for the same budget (:mod:`headlab.models.distill`).

- :func:`student_drops`: the heads each student lacks, the same count for all three: the least important heads by
  gradient importance on the dev pairs (:func:`headlab.measures.importance.importance_specs`) within the upper half (it
  keeps every low head), within the lower half (it keeps every high head), or anywhere.
- :func:`distilled_students`: every student trained (the build's ``students`` step) or found in the cache (the
  notebook), the temperature chosen on the dev split with the important-heads student (:func:`choose_temperature`),
  then each kind distilled with several seeds at that temperature; :func:`train_students` is the build's step.
- :func:`student_claim`: the scorecard's ``pruning.keep_low_heads`` judged on the students' test grades: the share of
  the teacher's quadratic kappa the high-heads student loses minus the low-heads student's, resampling test pairs and
  seeds; :func:`student_table`: each student beside its zero-budget point (the same heads masked, not retrained).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.pruning import cannot_prune
from headlab.core.stats import N_BOOT, floor_bound, kappa_contrast, kappa_lost_point, relative_change
from headlab.core.sweep import (
    BASELINE,
    MaskSpec,
    baseline_correct,
    baseline_grades,
    baseline_spec,
    heads_key,
    kappa_columns,
    predicted_matrix,
    random_share_specs,
    share_curve,
    share_masks,
    summarize,
)
from headlab.judging.sizes import POLICY
from headlab.judging.units import DISTILL_GAP, STUDENT_GAP
from headlab.judging.verdicts import Claim, Kind, StudyClaim, Tally
from headlab.lab.lab import Lab, load
from headlab.lab.params import REPO
from headlab.measures.halves import HALVES, Half, half_pool
from headlab.measures.importance import ALL_LAYERS, importance_specs
from headlab.models.distill import DistillConfig, distill
from headlab.models.loading import load_classifier

CURVE_KIND = "importance-all"
DISTILL = StudyClaim(
    "pruning.keep_low_heads",
    "10_pruning",
    "For distillation, keep more low-level heads: a student distilled from the teacher that keeps every low head "
    "loses less of the teacher's quadratic κ than a student of the same size that keeps every high head",
    "For distillation: keep more low-level heads.",
    Kind.COMPARE,
    direction=1,
    tally=Tally.OURS,
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
    right/wrong matrix (draws, examples), and ``predicted``, its predicted grades (draws, examples)."""
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
    n_boot: int = N_BOOT,
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
        change = relative_change(test_rows.at[share, "correct"], base_correct, n_boot, seed).columns()
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
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Claim:
    """The study's "for distillation: keep more low-level heads" at a budget of zero, pruning without retraining:
    the sub-row ``pruning.keep_low_heads/pruning`` under the students' row
    (:func:`headlab.pages.pruning.student_claim`).
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


SAFE_MARGIN = POLICY["redundancy.no_loss_below_20"].margin  # the scorecard's margin for "no loss" (sizes.MARGIN_WHY)
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


def pruned_model(lab: Lab, drop, per_example: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
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


def pruned_summary(
    lab: Lab, pruned_lab: Lab, drop, folder, per_example: pd.DataFrame, plan: pd.DataFrame
) -> pd.DataFrame:
    """One row about a pruned model (``pruned_lab``, loaded from ``folder``) beside ``lab``'s unpruned one: heads,
    parameters, safetensors size, accuracy, and the share of test pairs it grades as masking the same heads did in
    the sweep (``per_example``, ``plan``: the mask with exactly ``drop`` removed; the baseline for no head)."""
    dropped = heads_key(sorted((int(l), int(h)) for l, h in drop))
    match = plan[plan["dropped"].fillna("") == dropped]
    if match.empty:
        raise ValueError(f"no mask of the sweep removes exactly the {len(drop)} heads to compare with")
    masked = per_example[per_example["mask_id"] == match["mask_id"].iloc[0]].sort_values("example")
    predicted = pruned_lab.scale.predicted(pruned_lab.base_probs)
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


KINDS = ("low heads kept", "high heads kept", "important heads kept")
STUDENT_COLUMNS = ["kind", "seed", "temperature", "heads_removed", "folder", "predicted"]
TEMPERATURE_COLUMNS = ["temperature", "dev_accuracy", "n_dev", "chosen"]
TABLE_COLUMNS = [
    "kind",
    "heads_removed",
    "seeds",
    "temperature",
    "teacher_accuracy",
    "accuracy",
    "rel_change",
    "lo",
    "hi",
    "kappa_lost",
    "kappa_lost_lo",
    "kappa_lost_hi",
    "at_floor",
    "zero_budget_accuracy",
    "zero_budget_kappa_lost",
    "n_examples",
]
LOW, HIGH, IMPORTANT = KINDS
STUDENT_KIND = "student"  # the sweep's mask kind for a student's heads masked on the teacher (its zero-budget point)


@dataclass(frozen=True)
class StudentSettings:
    """Page 10's student parameters (defaults: the registry's, :mod:`headlab.lab.pages`): the share of all heads each
    student lacks, the seeds per kind, the budget (epochs over at most ``train_limit`` training pairs), the
    temperatures tried (each scored on the dev split), and the split the head order comes from."""

    share: float = 0.3
    seeds: int = 3
    epochs: int = 1
    train_limit: int | None = 2000
    temperatures: tuple[float, ...] = (1.0, 4.0)
    order_split: str = "dev"

    def __post_init__(self):
        if not 0.0 < self.share <= 0.5:
            raise ValueError(f"STUDENT_SHARE must lie in (0, 0.5] (within one half), got {self.share}")
        if int(self.seeds) < 1:
            raise ValueError(f"STUDENT_SEEDS must be a positive integer, got {self.seeds}")
        if not self.temperatures or any(not float(t) > 0 for t in self.temperatures):
            raise ValueError(f"STUDENT_TEMPERATURES must be positive numbers, got {list(self.temperatures)}")
        object.__setattr__(self, "temperatures", tuple(sorted({float(t) for t in self.temperatures})))

    @classmethod
    def from_globals(cls, names: dict) -> StudentSettings:
        """From a notebook's parameters (STUDENT_SHARE, STUDENT_SEEDS, ...; ORDER_SPLIT), defaults where missing."""
        keys = {
            "share": "STUDENT_SHARE",
            "seeds": "STUDENT_SEEDS",
            "epochs": "STUDENT_EPOCHS",
            "train_limit": "STUDENT_TRAIN_LIMIT",
            "temperatures": "STUDENT_TEMPERATURES",
            "order_split": "ORDER_SPLIT",
        }
        return cls(**{field: names[key] for field, key in keys.items() if key in names})


def student_drops(importance: pd.DataFrame, layers: int, heads: int, share: float) -> dict[str, list[tuple[int, int]]]:
    """Per student kind of :data:`KINDS`, the heads it lacks: ``share`` of all heads (rounded), the least important
    first, taken within the upper half, within the lower half, or anywhere (sorted): the masks
    :func:`headlab.measures.importance.importance_specs` removes at that share."""
    if len(importance) != layers * heads:
        raise ValueError(f"the importance table has {len(importance)} heads, the model {layers * heads}")
    n = int(round(share * layers * heads))
    if not 0 < n <= min(len(half_pool(layers, heads, where)) for where in HALVES):
        raise ValueError(f"a share of {share} is {n} heads: it must be at least one head and at most one half")
    drop = lambda where: list(importance_specs(importance, layers, heads, [share], where)[0].dropped)  # noqa: E731
    return {LOW: drop(Half.UPPER), HIGH: drop(Half.LOWER), IMPORTANT: drop(ALL_LAYERS)}


def student_specs(drops: dict[str, list[tuple[int, int]]]) -> list[MaskSpec]:
    """Each student's heads masked on the teacher, not retrained: its zero-budget point, evaluated in the page's sweep
    (kind :data:`STUDENT_KIND`, the student's kind in ``meta``; a mask another curve has too is evaluated once)."""
    return [
        MaskSpec(f"{STUDENT_KIND}-{kind.split()[0]}", tuple(drop), STUDENT_KIND, {"student": kind})
        for kind, drop in drops.items()
    ]


CURVE_KINDS = ("random", CURVE_KIND, "importance-lower", "importance-upper")  # the page's curves, random first


def pruning_specs(
    importance: pd.DataFrame,
    layers: int,
    heads: int,
    shares,
    half_shares,
    draws: int,
    seed: int,
    drops: dict[str, list[tuple[int, int]]],
) -> list[MaskSpec]:
    """Every mask of the page's one sweep: no head removed, ``draws`` random sets at each of ``shares`` (the same
    masks as page 01's, so their results are read, not run again), the least important heads at each share anywhere
    and within each half at ``half_shares``, and each student's heads (:func:`student_specs`)."""
    return (
        [baseline_spec()]
        + random_share_specs(layers, heads, shares, draws, seed)
        + importance_specs(importance, layers, heads, [s for s in shares if s > 0])
        + [s for where in HALVES for s in importance_specs(importance, layers, heads, half_shares, where)]
        + student_specs(drops)
    )


def pruning_curves(
    per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(curves, random draws)``: the accuracy change per share removed for each of :data:`CURVE_KINDS`, stacked,
    and the random curve's draws (the chart's dots)."""
    curves, draws = zip(*[share_curve(per_example, plan, kind=k, n_boot=n_boot, seed=seed) for k in CURVE_KINDS])
    return pd.concat(curves, ignore_index=True), draws[0]


def choose_temperature(dev_accuracy: dict[float, float]) -> float:
    """The temperature whose student graded the dev pairs best (``{temperature: dev accuracy}``); a tie goes to the
    lower temperature, the smaller change from plain training."""
    if not dev_accuracy:
        raise ValueError("no temperature was tried")
    return min(dev_accuracy, key=lambda t: (-dev_accuracy[t], t))


def distilled_students(lab: Lab, drops: dict, settings: StudentSettings, progress: bool = False):
    """Every student of ``lab``'s model that lacks the heads ``drops`` names per kind (:func:`student_drops`), trained
    or found in the cache (:func:`headlab.models.distill.distill`: a
    notebook of the book only finds them, the build trains them first), and its grades of ``lab``'s pairs.

    The temperature is chosen first with the important-heads student of seed 0 (:func:`choose_temperature`), by its
    accuracy on the dev split, which distillation scores after its last epoch (the student's ``history.csv``: no pass
    is run twice; no other student is scored on dev); every kind is then distilled with seeds 0 .. seeds-1 at that
    temperature. Returns ``(students, temperatures)``: one row per kind and seed (kind, seed, temperature,
    heads_removed, folder, and ``predicted``: its grades of ``lab``'s pairs, :func:`student_grades`), and one row per
    temperature tried (temperature, dev_accuracy, n_dev, chosen); both empty for a model whose heads cannot be removed
    (:func:`student_note` says why)."""
    if cannot_prune(lab.model):  # no smaller model to start a student from: nothing distilled, the page says why
        return pd.DataFrame(columns=STUDENT_COLUMNS), pd.DataFrame(columns=TEMPERATURE_COLUMNS)

    def student(kind: str, temperature: float, seed: int) -> Path:
        config = DistillConfig(
            lab.params.finetune_config,
            tuple(drops[kind]),
            temperature=temperature,
            epochs=settings.epochs,
            train_limit=settings.train_limit,
            seed=seed,
        )
        scored = kind == IMPORTANT and seed == 0  # the temperature is chosen on its dev score; no other is scored
        return distill(config, device=lab.params.torch_device, progress=progress, score_dev=scored)

    tried = {t: student(IMPORTANT, t, 0) for t in settings.temperatures}
    dev_accuracy = {
        t: float(pd.read_csv(folder / "history.csv")["dev_accuracy"].iloc[-1]) for t, folder in tried.items()
    }
    chosen = choose_temperature(dev_accuracy)
    rows = []
    for kind in KINDS:
        for seed in range(int(settings.seeds)):
            folder = student(kind, chosen, seed)
            rows.append(
                {
                    "kind": kind,
                    "seed": seed,
                    "temperature": chosen,
                    "heads_removed": len(drops[kind]),
                    "folder": folder.name,
                    "predicted": student_grades(lab, folder),
                }
            )
    n_dev = {t: json.loads((folder / "training.json").read_text())["dev_examples"] for t, folder in tried.items()}
    temperatures = pd.DataFrame(
        [
            {"temperature": t, "dev_accuracy": a, "n_dev": n_dev[t], "chosen": t == chosen}
            for t, a in dev_accuracy.items()
        ]
    )
    return pd.DataFrame(rows), temperatures


def student_grades(lab: Lab, folder: Path) -> np.ndarray:
    """The grades the student in ``folder`` gives ``lab``'s pairs (its unmasked pass through the sweep engine, as the
    teacher's baseline is), computed once and kept (:meth:`headlab.lab.Lab.stored`, keyed by the student's folder and
    its weights file's time, as the teacher's logits are in :mod:`headlab.models.distill`): the build's students step
    grades them and page 10 reads them, so no student grades the test pairs twice, and a kept grading loads no model."""

    def grade() -> pd.DataFrame:
        model = load_classifier(str(folder), lab.scale)
        return pd.DataFrame({"predicted": lab.scale.predicted(lab.with_model(model).base_probs)})

    weights = (folder / "model.safetensors").stat().st_mtime_ns
    return lab.stored("student_grades", {"student": folder.name, "weights": weights}, grade)["predicted"].to_numpy()


def student_note(lab: Lab) -> str:
    """Why no student is distilled for ``lab``'s model (its heads cannot be removed for real), or ""."""
    why = cannot_prune(lab.model)
    return f"No student is distilled for this model: {why}." if why else ""


def temperature_text(temperatures: pd.DataFrame) -> str:
    """The temperatures tried, each with the important-heads student's dev accuracy, the chosen one marked."""
    if temperatures.empty:
        return "No temperature was tried: no student was distilled."
    return (
        f"Temperatures tried, by the important-heads student's accuracy on the {int(temperatures['n_dev'].iloc[0])} "
        "dev pairs after its last epoch: "
        + ", ".join(
            f"{r.temperature:g}: {r.dev_accuracy:.1%}" + (" (chosen)" if r.chosen else "")
            for r in temperatures.itertuples()
        )
        + "."
    )


def _by_kind(students: pd.DataFrame, kind: str) -> np.ndarray:
    rows = students[students["kind"] == kind].sort_values("seed")
    if rows.empty:
        raise ValueError(f"no student of kind {kind!r}")
    return np.stack(rows["predicted"].to_list())  # (seeds, pairs)


def zero_budget(per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The sweep's summary (:func:`headlab.core.sweep.summarize`) of the students' heads masked on the teacher (kind
    :data:`STUDENT_KIND`), one row per student kind (its ``student`` column): where each student starts."""
    mine = plan[plan["kind"] == STUDENT_KIND]
    if mine.empty:
        raise ValueError(f"the sweep has no {STUDENT_KIND!r} masks: add student_specs(drops) to its specs")
    rows = per_example[per_example["mask_id"].isin([*mine["mask_id"], BASELINE])]
    return summarize(rows, mine, n_boot, seed).dropna(subset=["kind"])


def student_table(
    students: pd.DataFrame, per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """One row per student kind: heads removed; the teacher's test accuracy (the sweep's unmasked row); the distilled
    students' accuracy (mean over seeds) and its relative change from the teacher's, and the share of the teacher's
    quadratic kappa they lose, each with a 95% interval over test pairs and seeds; beside them the same heads masked
    on the teacher without retraining (:func:`zero_budget`, from the sweep ``per_example`` and ``plan``)."""
    if students.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    base_predicted, gold = baseline_grades(per_example)
    base_correct = (base_predicted == gold).astype(float)
    start = zero_budget(per_example, plan, n_boot, seed).set_index("student")
    rows = []
    for i, kind in enumerate(KINDS):
        predicted = _by_kind(students, kind)
        correct = (predicted == gold).astype(float)
        draws = [seed, 17, i]
        change = relative_change(correct, base_correct, n_boot, seed, draw_seed=draws)
        kappa = kappa_columns(predicted, base_predicted, gold, n_boot, seed, draws=draws)
        rows.append(
            {
                "kind": kind,
                "heads_removed": int(students.loc[students["kind"] == kind, "heads_removed"].iloc[0]),
                "seeds": predicted.shape[0],
                "temperature": float(students["temperature"].iloc[0]),
                "teacher_accuracy": base_correct.mean(),
                "accuracy": correct.mean(),
                "rel_change": change.rel_change,
                "lo": change.lo,
                "hi": change.hi,
                "kappa_lost": kappa["kappa_lost"],
                "kappa_lost_lo": kappa["kappa_lost_lo"],
                "kappa_lost_hi": kappa["kappa_lost_hi"],
                "at_floor": kappa["at_floor"],
                "zero_budget_accuracy": float(start.at[kind, "accuracy"]),
                "zero_budget_kappa_lost": float(start.at[kind, "kappa_lost"]),
                "n_examples": len(gold),
            }
        )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def student_claim(
    students: pd.DataFrame, per_example: pd.DataFrame, settings: StudentSettings, n_boot: int = N_BOOT, seed: int = 0
) -> Claim:
    """The study's "for distillation: keep more low-level heads" on retrained students of the same size: the share
    of the teacher's quadratic kappa lost by the student that keeps the high heads (it lacks low ones) minus that of
    the student that keeps the low heads, with one bootstrap over the test pairs for both and over each kind's seeds
    (:func:`headlab.core.stats.kappa_contrast`; a t interval on Welch–Satterthwaite degrees of freedom with several
    seeds). Positive: keeping the low heads costs less. Saturated where both students sit at the kappa floor.
    ``per_example``: the page's sweep, whose unmasked row is the teacher's grades of the same pairs."""
    if students.empty:
        return Claim.not_measured(
            DISTILL,
            reason="Not measured: no student was distilled (this model's heads cannot be removed)",
            unit=STUDENT_GAP,
        )
    high, low = _by_kind(students, HIGH), _by_kind(students, LOW)
    base_predicted, gold = baseline_grades(per_example)  # the teacher: the sweep's unmasked row
    seeds = [[seed, 1], [seed, 2]]
    lost = kappa_contrast([high, low], [1.0, -1.0], base_predicted, gold, n_boot, seed, draw_seeds=seeds)
    if lost["reason"]:
        return Claim.not_measured(DISTILL, reason=f"Not measured: no kappa scale ({lost['reason']})", unit=STUDENT_GAP)
    floors = {kind: kappa_columns(p, base_predicted, gold, n_boot, seed) for kind, p in ((LOW, low), (HIGH, high))}
    accuracy = {kind: float(np.mean(p == gold)) for kind, p in ((LOW, low), (HIGH, high))}
    n_removed = int(students["heads_removed"].iloc[0])
    temperature = float(students["temperature"].iloc[0])
    return Claim.measured(
        DISTILL,
        ours=lost["contrast"],
        lo=lost["lo"],
        hi=lost["hi"],
        unit=STUDENT_GAP,
        method=f"bootstrap over test pairs and the {low.shape[0]} seed(s) of each student"
        + (", t interval on Welch–Satterthwaite df" if low.shape[0] > 1 else ": the seed's chance is not covered"),
        n_examples=len(gold),
        n_draws=int(lost["n_draws"]),
        df=lost["df"],
        at_floor=all(f["at_floor"] for f in floors.values()),
        censored=floor_bound(bool(floors[HIGH]["at_floor"]), bool(floors[LOW]["at_floor"])),  # high minus low
        floor_reason="; ".join(f"{kind}: {f['floor_reason']}" for kind, f in floors.items()),
        reason=(
            f"Two students of the same size, each lacking {n_removed} heads (the least important on the "
            f"{settings.order_split} pairs within the high half, or within the low half), distilled from the "
            f"teacher for {settings.epochs} epoch(s) on at most {settings.train_limit or 'all'} training pairs at "
            f"temperature {temperature:g} (chosen on the dev pairs), {low.shape[0]} seed(s) each; "
            f"test accuracy: the student keeping the low heads {accuracy[LOW]:.1%}, the one keeping the high heads "
            f"{accuracy[HIGH]:.1%}"
        ),
    )
