"""headlab.pages.pruning: three students of the same size (low heads kept, high heads kept, the most important
kept), the temperature chosen on dev, the claim judged on their test grades over pairs and seeds, and the build's
step that trains them so the notebook only loads them."""

import numpy as np
import pandas as pd
import pytest

from headlab.core.grades import STUDY_SCALE
from headlab.core.stats import quadratic_kappa
from headlab.pages.pruning import (
    HIGH,
    IMPORTANT,
    KINDS,
    LOW,
    StudentSettings,
    choose_temperature,
    student_claim,
    student_drops,
    student_note,
    student_specs,
    student_table,
)


def _importance(layers=4, heads=3):
    rng = np.random.default_rng(0)
    layer, head = np.divmod(np.arange(layers * heads), heads)
    return pd.DataFrame({"layer": layer, "head": head, "importance": rng.permutation(layers * heads) / 10})


def test_every_student_lacks_the_same_heads_count_each_from_its_own_half_least_important_first():
    importance = _importance()
    drops = student_drops(importance, 4, 3, 0.5)  # half of all heads: each half whole
    assert list(drops) == list(KINDS) and {len(d) for d in drops.values()} == {6}
    assert all(l >= 2 for l, _ in drops[LOW]) and all(l < 2 for l, _ in drops[HIGH])
    least = importance.sort_values("importance")
    assert drops[IMPORTANT] == sorted(zip(least["layer"].head(6), least["head"].head(6)))
    quarter = student_drops(importance, 4, 3, 0.25)  # 3 heads: the least important of each half
    upper = least[least["layer"] >= 2].head(3)
    assert quarter[LOW] == sorted(zip(upper["layer"], upper["head"])) and len(quarter[HIGH]) == 3
    with pytest.raises(ValueError, match="importance table has 12 heads, the model 16"):
        student_drops(importance, 4, 4, 0.25)
    with pytest.raises(ValueError, match="at least one head and at most one half"):
        student_drops(importance, 4, 3, 0.01)
    specs = student_specs(quarter)
    assert [s.meta["student"] for s in specs] == list(KINDS) and {s.kind for s in specs} == {"student"}


def test_the_temperature_is_the_best_on_dev_ties_to_the_lower():
    assert choose_temperature({1.0: 0.50, 2.0: 0.55, 4.0: 0.53}) == 2.0
    assert choose_temperature({4.0: 0.55, 1.0: 0.55}) == 1.0
    with pytest.raises(ValueError, match="no temperature"):
        choose_temperature({})


def test_student_settings_come_from_the_pages_parameters_and_refuse_bad_values():
    s = StudentSettings.from_globals({"STUDENT_SHARE": 0.3, "STUDENT_TEMPERATURES": [4, 1, 4], "ORDER_SPLIT": "dev"})
    assert s.share == 0.3 and s.temperatures == (1.0, 4.0) and s.seeds == StudentSettings().seeds
    from headlab.lab.pages import page

    assert StudentSettings() == StudentSettings.from_globals(page("10_pruning").defaults())  # one set of defaults
    with pytest.raises(ValueError, match="STUDENT_SHARE"):
        StudentSettings(share=0.6)
    with pytest.raises(ValueError, match="STUDENT_TEMPERATURES"):
        StudentSettings(temperatures=(0.0,))


N = 500
GOLD = np.arange(N) % 5 + 1  # five grades, equally common: far from any floor


def _spoil(share: float, seed: int) -> np.ndarray:
    """The gold grades with ``share`` of the pairs moved to a neighbouring grade (chosen by ``seed``)."""
    rng = np.random.default_rng(seed)
    out = GOLD.copy()
    hit = rng.random(N) < share
    out[hit] = np.where(out[hit] < 5, out[hit] + 1, 4)
    return out


def _students(spoiled: dict[str, float], seeds: int = 2) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"kind": k, "seed": s, "temperature": 2.0, "heads_removed": 6, "predicted": _spoil(spoiled[k], 10 * i + s)}
            for i, k in enumerate(KINDS)
            for s in range(seeds)
        ]
    )


def _sweep(starts: dict[str, np.ndarray] | None = None):
    """The page's sweep: the teacher (its unmasked row) grades every pair right; ``starts``: each student's heads
    masked on the teacher, its predicted grades."""
    from headlab.core.sweep import baseline_spec, plan_table

    drops = {k: [(i, 0)] for i, k in enumerate(KINDS)}
    specs = [baseline_spec(), *student_specs(drops)]
    grades = {"none": GOLD, **{s.mask_id: (starts or {}).get(s.meta["student"], GOLD) for s in specs[1:]}}
    rows = [
        pd.DataFrame({"mask_id": m, "example": np.arange(N), "grade": GOLD, "predicted": g, "correct": (g == GOLD) * 1})
        for m, g in grades.items()
    ]
    return pd.concat(rows, ignore_index=True), plan_table(specs)


def test_the_claim_holds_when_the_student_keeping_the_low_heads_loses_less_kappa():
    seeds = StudentSettings().seeds  # 3: the verdict reads the seeds' 2 degrees of freedom
    students = _students({LOW: 0.05, HIGH: 0.6, IMPORTANT: 0.05}, seeds=seeds)
    per_example, _ = _sweep()
    claim = student_claim(students, per_example, StudentSettings(), n_boot=300)
    lost = lambda k: np.mean([1 - quadratic_kappa(p, GOLD) for p in students[students.kind == k].predicted])  # noqa: E731
    assert claim.claim_id == "pruning.keep_low_heads" and claim.verdict == "holds"
    assert claim.ours == pytest.approx(lost(HIGH) - lost(LOW)) and claim.lo < claim.ours < claim.hi
    assert claim.n_draws == 3 and np.isfinite(claim.df) and claim.unit.startswith("share of the unmasked quadratic κ")
    assert "Welch" in claim.method and not claim.at_floor
    reverse = student_claim(
        _students({LOW: 0.6, HIGH: 0.05, IMPORTANT: 0.05}, seeds=seeds), per_example, StudentSettings(), 300
    )
    assert reverse.verdict == "opposite"
    # two seeds a kind: read at 1 degree of freedom, whatever its Welch df, the design cannot decide the claim
    two = student_claim(_students({LOW: 0.05, HIGH: 0.6, IMPORTANT: 0.05}), per_example, StudentSettings(), n_boot=300)
    assert two.n_draws == 2 and two.df > 1 and two.verdict == "underpowered" and two.mde > 2 * two.min_size
    one_seed = student_claim(_students({LOW: 0.05, HIGH: 0.6, IMPORTANT: 0.0}, seeds=1), per_example, StudentSettings())
    assert one_seed.n_draws == 1 and "not covered" in one_seed.method


def test_two_students_at_the_floor_are_saturated_not_evidence():
    students = _students({k: 0.0 for k in KINDS})
    students["predicted"] = [np.full(N, 3)] * len(students)  # every student answers one grade
    claim = student_claim(students, _sweep()[0], StudentSettings(), n_boot=300)
    assert claim.at_floor and claim.verdict == "cannot tell" and "Saturated" in claim.reason


def test_the_table_puts_each_student_beside_its_zero_budget_point():
    students = _students({LOW: 0.1, HIGH: 0.3, IMPORTANT: 0.0})
    starts = {LOW: _spoil(0.5, 1), HIGH: np.full(N, 3), IMPORTANT: GOLD}
    table = student_table(students, *_sweep(starts), n_boot=200).set_index("kind")
    assert list(table.index) == list(KINDS) and (table["seeds"] == 2).all() and (table["teacher_accuracy"] == 1).all()
    assert table.at[IMPORTANT, "accuracy"] == 1.0 and table.at[IMPORTANT, "kappa_lost"] == pytest.approx(0.0)
    assert table.at[HIGH, "accuracy"] == pytest.approx(np.mean([(p == GOLD).mean() for p in students.predicted[2:4]]))
    assert table.at[HIGH, "lo"] < table.at[HIGH, "rel_change"] < table.at[HIGH, "hi"] < 0
    assert table.at[HIGH, "zero_budget_kappa_lost"] == pytest.approx(1.0)  # one grade for every pair: all of kappa
    assert table.at[LOW, "zero_budget_accuracy"] == pytest.approx((starts[LOW] == GOLD).mean())
    assert table.at[IMPORTANT, "zero_budget_kappa_lost"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="no 'student' masks"):
        student_table(students, *_sweep_without_students())


def _sweep_without_students():
    from headlab.core.sweep import baseline_spec, plan_table

    frame = pd.DataFrame({"mask_id": "none", "example": np.arange(N), "grade": GOLD, "predicted": GOLD, "correct": 1})
    return frame, plan_table([baseline_spec()])


def test_the_build_trains_the_students_and_the_page_only_loads_them(
    fresh_cache, tiny_model_folder, pairs_file, tmp_path, monkeypatch
):
    from headlab.book.students import train_students
    from headlab.lab.lab import Lab
    from headlab.models.training import NO_TRAINING, TrainingError
    from headlab.pages import pruning as students_module
    from headlab.pages.pruning import distilled_students

    settings = {
        "MODEL": str(tiny_model_folder),
        "DATA": str(pairs_file),
        "EPOCHS": 1,
        "TRAIN_LIMIT": 64,
        "DEVICE": "cpu",
        "RUN_DIR": str(tmp_path / "runs"),
        "STUDENT_SHARE": 0.25,
        "STUDENT_SEEDS": 2,
        "STUDENT_TRAIN_LIMIT": 32,
        "STUDENT_TEMPERATURES": [1.0, 3.0],
    }
    lab = Lab.from_globals(settings)  # the teacher, fine-tuned as the build's step before does
    from headlab.lab.pages import page

    names = {**page("10_pruning").defaults(), **settings}
    student_settings = StudentSettings.from_globals(names)
    importance = lab.on_split("dev").importance()
    drops = student_drops(importance, *lab.shape, student_settings.share)
    monkeypatch.setenv(NO_TRAINING, "1")  # a notebook of the book: nothing trained yet, so nothing to load
    with pytest.raises(TrainingError, match="may not train"):
        distilled_students(lab, drops, student_settings)
    monkeypatch.delenv(NO_TRAINING)
    train_students(settings)
    monkeypatch.setenv(NO_TRAINING, "1")
    graded = lambda self, model: pytest.fail("the page graded a student again")  # noqa: E731
    monkeypatch.setattr(Lab, "with_model", graded)  # the step graded them: the page reads the kept grades
    loaded = lambda folder: pytest.fail("the page loaded a student to read its kept grades")  # noqa: E731
    monkeypatch.setattr(students_module, "load_classifier", loaded)
    students, temperatures = distilled_students(lab, drops, student_settings)
    assert sorted(temperatures["temperature"]) == [1.0, 3.0] and temperatures["chosen"].sum() == 1
    assert len(students) == 3 * 2 and students["folder"].nunique() == 6  # each kind and seed its own student
    chosen = temperatures.loc[temperatures["chosen"], "temperature"].iloc[0]
    assert (students["temperature"] == chosen).all() and (students["heads_removed"] == 2).all()  # 0.25 of 2x4
    assert all(len(p) == len(lab.encoded) and set(p) <= {1, 2, 3, 4, 5} for p in students["predicted"])
    # only the students the temperature is chosen with are scored on the dev pairs (2 of the 7 trained)
    scored = {
        folder.name: bool(pd.read_csv(folder / "history.csv")["dev_accuracy"].notna().all())
        for folder in (fresh_cache / "finetuned").glob("student-*")
        if folder.is_dir()
    }
    assert len(scored) == 7 and sum(scored.values()) == 2
    important = students[students["kind"] == IMPORTANT].set_index("seed")["folder"]
    assert scored[important[0]] and not scored[important[1]]


def test_a_model_whose_heads_cannot_be_removed_has_no_students_and_the_claim_says_so(mpnet_folder):
    from types import SimpleNamespace

    from headlab.models.loading import load_classifier
    from headlab.pages.pruning import STUDENT_COLUMNS, TEMPERATURE_COLUMNS, distilled_students, temperature_text

    lab = SimpleNamespace(
        model=load_classifier(str(mpnet_folder), STUDY_SCALE)
    )  # an MPNet: pruning rebuilds BERT layers only
    students, temperatures = distilled_students(lab, student_drops(_importance(), 4, 3, 0.25), StudentSettings())
    assert students.empty and list(students.columns) == STUDENT_COLUMNS and list(temperatures) == TEMPERATURE_COLUMNS
    assert "MPNet" in student_note(lab) and "No temperature was tried" in temperature_text(temperatures)
    per_example, plan = _sweep()
    assert student_table(students, per_example, plan).empty
    claim = student_claim(students, per_example, StudentSettings())
    assert claim.verdict == "cannot tell" and "no student was distilled" in claim.reason
