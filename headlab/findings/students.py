"""The study's distillation advice as advice: students of the same size that keep the low heads, the high heads or the
most important heads, each distilled from the teacher for the same budget (:mod:`headlab.models.distill`).

- :func:`student_drops`: the heads each student lacks, the same count for all three: the least important heads by
  gradient importance on the dev pairs (:func:`headlab.findings.pruning.importance_specs`) within the upper half (it
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.evaluate import predicted_grades
from headlab.core.pruning import cannot_prune
from headlab.core.stats import floor_bound, kappa_contrast, relative_change
from headlab.core.sweep import BASELINE, MaskSpec, baseline_grades, kappa_columns, summarize
from headlab.findings.importance import half_pool
from headlab.findings.pruning import DISTILL, importance_specs
from headlab.findings.units import STUDENT_GAP
from headlab.findings.verdicts import Claim
from headlab.lab.lab import Lab
from headlab.lab.pages import page
from headlab.models.distill import DistillConfig, distill
from headlab.models.loading import load_classifier
from headlab.models.training import one_thread

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
    :func:`headlab.findings.pruning.importance_specs` removes at that share."""
    if len(importance) != layers * heads:
        raise ValueError(f"the importance table has {len(importance)} heads, the model {layers * heads}")
    n = int(round(share * layers * heads))
    if not 0 < n <= min(len(half_pool(layers, heads, where)) for where in ("upper", "lower")):
        raise ValueError(f"a share of {share} is {n} heads: it must be at least one head and at most one half")
    drop = lambda where: list(importance_specs(importance, layers, heads, [share], where)[0].dropped)  # noqa: E731
    return {LOW: drop("upper"), HIGH: drop("lower"), IMPORTANT: drop("all")}


def student_specs(drops: dict[str, list[tuple[int, int]]]) -> list[MaskSpec]:
    """Each student's heads masked on the teacher, not retrained: its zero-budget point, evaluated in the page's sweep
    (kind :data:`STUDENT_KIND`, the student's kind in ``meta``; a mask another curve has too is evaluated once)."""
    return [
        MaskSpec(f"{STUDENT_KIND}-{kind.split()[0]}", tuple(drop), STUDENT_KIND, {"student": kind})
        for kind, drop in drops.items()
    ]


def choose_temperature(dev_accuracy: dict[float, float]) -> float:
    """The temperature whose student graded the dev pairs best (``{temperature: dev accuracy}``); a tie goes to the
    lower temperature, the smaller change from plain training."""
    if not dev_accuracy:
        raise ValueError("no temperature was tried")
    return min(dev_accuracy, key=lambda t: (-dev_accuracy[t], t))


def distilled_students(lab, drops: dict, settings: StudentSettings, progress: bool = False):
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


def student_grades(lab, folder: Path) -> np.ndarray:
    """The grades the student in ``folder`` gives ``lab``'s pairs (its unmasked pass through the sweep engine, as the
    teacher's baseline is), computed once and kept (:meth:`headlab.lab.Lab.stored`, keyed by the student's folder and
    its weights file's time, as the teacher's logits are in :mod:`headlab.models.distill`): the build's students step
    grades them and page 10 reads them, so no student grades the test pairs twice, and a kept grading loads no model."""

    def grade() -> pd.DataFrame:
        model = load_classifier(str(folder))
        return pd.DataFrame({"predicted": predicted_grades(lab.with_model(model).base_probs)})

    weights = (folder / "model.safetensors").stat().st_mtime_ns
    return lab.stored("student_grades", {"student": folder.name, "weights": weights}, grade)["predicted"].to_numpy()


def student_note(lab) -> str:
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


def train_students(settings: dict) -> None:
    """The build's ``students`` step: page 10's students of the preset's model trained into the cache (the teacher is
    fine-tuned in the step before), so the page and any rerun only load them. ``settings``: the preset's notebook
    parameters; page 10's defaults fill the rest."""
    names = {**page("10_pruning").defaults(), **settings}
    student_settings = StudentSettings.from_globals(names)
    with one_thread():  # the dev importance as the build's notebooks compute it (one thread each), beside a lane
        lab = Lab.from_globals(names)
        importance = lab.on_split(student_settings.order_split, names.get("EVAL_LIMIT")).importance()
        drops = student_drops(importance, *lab.shape, student_settings.share)
        distilled_students(lab, drops, student_settings, progress=True)


def _by_kind(students: pd.DataFrame, kind: str) -> np.ndarray:
    rows = students[students["kind"] == kind].sort_values("seed")
    if rows.empty:
        raise ValueError(f"no student of kind {kind!r}")
    return np.stack(rows["predicted"].to_list())  # (seeds, pairs)


def zero_budget(per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The sweep's summary (:func:`headlab.core.sweep.summarize`) of the students' heads masked on the teacher (kind
    :data:`STUDENT_KIND`), one row per student kind (its ``student`` column): where each student starts."""
    mine = plan[plan["kind"] == STUDENT_KIND]
    if mine.empty:
        raise ValueError(f"the sweep has no {STUDENT_KIND!r} masks: add student_specs(drops) to its specs")
    rows = per_example[per_example["mask_id"].isin([*mine["mask_id"], BASELINE])]
    return summarize(rows, mine, n_boot, seed).dropna(subset=["kind"])


def student_table(
    students: pd.DataFrame, per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = 2000, seed: int = 0
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
                "rel_change": change["rel_change"],
                "lo": change["lo"],
                "hi": change["hi"],
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
    students: pd.DataFrame, per_example: pd.DataFrame, settings: StudentSettings, n_boot: int = 2000, seed: int = 0
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
