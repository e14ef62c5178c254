"""headlab.core.grades: a grade scale read from the labels, its classes, and what a checkpoint says of it."""

import numpy as np
import pandas as pd
import pytest

from headlab.core.evaluate import confusion, metrics
from headlab.core.grades import STUDY_SCALE, GradeError, GradeScale
from headlab.core.patching import expected_grade, grade_logit
from headlab.core.stats import quadratic_kappa
from headlab.core.sweep import per_example_table
from headlab.measures.lexical import fit_lexical
from headlab.measures.order import grade_columns, table_scale


@pytest.mark.parametrize(
    "labels, first, count",
    [([1, 2, 3, 4, 5], 1, 5), ([0, 2, 1], 0, 3), ([0, 1, 1], 0, 2), ([2, 3], 1, 3), ([1, 1, 10], 1, 10)],
)
def test_the_scale_is_read_from_every_label(labels, first, count):
    assert GradeScale.of_labels(labels) == GradeScale(first, count)


@pytest.mark.parametrize(
    "labels, message",
    [([], "no labels"), ([-1, 2], "negative"), ([4, 4], "at least 2"), ([0, 10], "11 grades"), ([2, 12], "12 grades")],
)
def test_labels_that_make_no_scale_are_refused(labels, message):
    with pytest.raises(GradeError, match=message):
        GradeScale.of_labels(labels, where="pairs.tsv")


@pytest.mark.parametrize("first, count", [(2, 3), (1, 1), (0, 11)])
def test_a_scale_starts_at_0_or_1_and_has_2_to_10_grades(first, count):
    with pytest.raises(GradeError):
        GradeScale(first, count)


def test_classes_and_grades_are_the_same_order_from_0_and_from_1():
    probs = np.array([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]])
    for first in (0, 1):
        scale = GradeScale(first, 3)
        grades = scale.predicted(probs)
        assert grades.tolist() == [first + 1, first]
        assert scale.classes(grades).tolist() == [1, 0]
        assert scale.expected(probs) == pytest.approx([first + 1.1, first + 0.5])
    with pytest.raises(GradeError, match="3 classes"):
        STUDY_SCALE.predicted(probs)


def test_a_checkpoint_names_its_grades_and_default_names_say_nothing():
    scale = GradeScale(0, 3)
    assert GradeScale.of_checkpoint(scale.id2label(), 3) == scale
    assert GradeScale.of_checkpoint({str(k): v for k, v in STUDY_SCALE.id2label().items()}, 5) == STUDY_SCALE
    assert GradeScale.of_checkpoint({0: "LABEL_0", 1: "LABEL_1"}, 2) is None
    with pytest.raises(GradeError, match="not consecutive"):
        GradeScale.of_checkpoint({0: "1", 1: "3"}, 2)


def test_macro_f1_averages_the_grades_in_play_not_the_study_s_five():
    scale = GradeScale(1, 3)
    gold, predicted = np.array([1, 2, 3, 3]), np.array([1, 2, 3, 2])
    f1 = metrics(gold, predicted, scale)["macro_f1"]
    assert f1 == pytest.approx(np.mean([1.0, 2 / 3, 2 / 3]))
    # on five grades two empty ones would have pulled it 40% low; on the file's own scale they are not there
    assert f1 > np.mean([1.0, 2 / 3, 2 / 3, 0.0, 0.0])
    with pytest.raises(GradeError, match="gold grades"):
        metrics(np.array([0, 1]), np.array([1, 1]), scale)
    table = confusion(gold, predicted, scale)
    assert len(table) == 9 and table["true"].drop_duplicates().tolist() == [1, 2, 3]


def test_kappa_does_not_move_when_the_scale_starts_at_0():
    gold, predicted = np.array([1, 2, 3, 3, 2]), np.array([1, 3, 3, 2, 2])
    assert quadratic_kappa(predicted - 1, gold - 1) == pytest.approx(quadratic_kappa(predicted, gold))


def test_a_sweep_table_names_its_own_grades():
    scale = GradeScale(0, 3)
    probs = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    table = per_example_table("none", probs, np.array([1, 2]), scale)
    assert grade_columns(table) == ["p0", "p1", "p2"] and table_scale(table) == scale
    with pytest.raises(ValueError, match="not one grade scale"):
        table_scale(table.drop(columns="p1"))
    assert table["predicted"].tolist() == [1, 0] and table["correct"].tolist() == [1, 0]


def test_patching_reads_the_grade_off_any_number_of_logits():
    logits = np.array([[0.0, 1.0, 3.0]])
    assert grade_logit(logits) == pytest.approx([3.0])  # weights -1, 0, 1 on three grades
    assert grade_logit(logits + 2) == pytest.approx(grade_logit(logits))
    assert expected_grade(logits, GradeScale(0, 3)) == pytest.approx(expected_grade(logits, GradeScale(1, 3)) - 1)


def test_the_lexical_grader_learns_the_file_s_own_classes():
    train = pd.DataFrame(
        {
            "query": ["red cat", "blue car", "green tree", "red cat", "old road", "blue sea"] * 4,
            "title": ["red cat", "a blue car", "a dog", "red cat sleeps", "new sky", "blue sea now"] * 4,
            "label": [2, 1, 0, 2, 0, 1] * 4,
        }
    )
    grader = fit_lexical(train, GradeScale(0, 3))
    assert grader.probabilities(train).shape == (24, 3)
    assert set(grader.grades(train)) <= {0, 1, 2}
