"""The grades a file is labelled on: :class:`GradeScale`, read from the labels, saved with the checkpoint.

STS-B and the study grade 1 to 5; a search team's own file may grade 0-2 (QBQTC, the QQ Browser query–title
corpus) or be binary. Grade ``first + i`` is class ``i`` inside the model; every table headlab writes uses grades.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

FIRST_GRADES = (0, 1)  # a scale is numbered from 0 or from 1
FEWEST, MOST = 2, 10  # grades a scale may have


class GradeError(ValueError):
    """Labels or a checkpoint that do not make a grade scale; the message names where and what was expected."""


@dataclass(frozen=True)
class GradeScale:
    """``count`` ordered grades ``first``, ``first + 1``, ..., ``last``: the classes of the model's head, in order."""

    first: int
    count: int

    def __post_init__(self):
        if self.first not in FIRST_GRADES:
            raise GradeError(f"a grade scale starts at 0 or 1, not {self.first}")
        if not FEWEST <= self.count <= MOST:
            raise GradeError(f"a grade scale has {FEWEST} to {MOST} grades, not {self.count}")

    def __str__(self) -> str:
        return f"grades {self.first}-{self.last}"

    @property
    def last(self) -> int:
        """The highest grade."""
        return self.first + self.count - 1

    @property
    def grades(self) -> tuple[int, ...]:
        """Every grade, lowest first."""
        return tuple(range(self.first, self.first + self.count))

    @property
    def values(self) -> np.ndarray:
        """The grades as floats (count,): a probability row times them is the pair's expected grade."""
        return np.asarray(self.grades, dtype=np.float64)

    @property
    def is_study(self) -> bool:
        """The study's own scale (grades 1-5): claims worded in its grades compare only on it."""
        return self == STUDY_SCALE

    def predicted(self, probs: np.ndarray) -> np.ndarray:
        """The most probable grade of each row of ``probs`` (examples, count)."""
        probs = np.asarray(probs)
        if probs.shape[-1] != self.count:
            raise GradeError(f"probabilities over {probs.shape[-1]} classes cannot be read on {self.count} {self}")
        return probs.argmax(axis=-1) + self.first

    def classes(self, grades: np.ndarray) -> np.ndarray:
        """The model's class index of each grade (what a loss is computed on)."""
        return np.asarray(grades, dtype=np.int64) - self.first

    def expected(self, probs: np.ndarray) -> np.ndarray:
        """The grade each row of ``probs`` (examples, count) expects: bounded by the scale's ends."""
        return np.asarray(probs, dtype=np.float64) @ self.values

    def id2label(self) -> dict[int, str]:
        """The checkpoint's class names: class ``i`` is grade ``first + i``."""
        return {i: str(g) for i, g in enumerate(self.grades)}

    def check(self, grades: np.ndarray, what: str = "grades") -> None:
        """Raise :class:`GradeError` unless every value is a whole grade of this scale."""
        g = np.asarray(grades, dtype=np.float64)
        if not np.all((g >= self.first) & (g <= self.last) & (g == np.round(g))):
            raise GradeError(f"{what} must be whole numbers from {self.first} to {self.last}")

    @classmethod
    def of_labels(cls, labels: Iterable[int], where: str = "the labels") -> GradeScale:
        """The scale of a file's labels (every split, so a grade only the test split uses is still a class): from 0
        when a label is 0, else from 1, up to the largest label; a grade between them that no pair uses stays a
        (then empty) class."""
        values = np.asarray(list(labels))
        if values.size == 0:
            raise GradeError(f"{where}: no labels to read a grade scale from")
        low, high = int(values.min()), int(values.max())
        if low < 0:
            raise GradeError(f"{where}: label {low} is negative; grades are whole numbers from 0 or 1")
        if low == high:
            raise GradeError(f"{where}: every label is {high}; grading needs pairs of at least {FEWEST} grades")
        first = 0 if low == 0 else 1
        if high - first + 1 > MOST:
            raise GradeError(f"{where}: labels {first}-{high} are {high - first + 1} grades; at most {MOST} are read")
        return cls(first, high - first + 1)

    @classmethod
    def of_checkpoint(cls, id2label: Mapping, num_labels: int) -> GradeScale | None:
        """The scale a checkpoint was trained on, when its class names are its grades (headlab saves them so);
        ``None`` for transformers' default names (``LABEL_0`` ...), which say nothing about the grades."""
        names = [str(id2label.get(i, id2label.get(str(i), ""))) for i in range(num_labels)]
        if not all(n.isdigit() for n in names):
            return None
        grades = [int(n) for n in names]
        if grades != list(range(grades[0], grades[0] + num_labels)):
            raise GradeError(f"checkpoint class names {names} are not consecutive grades")
        return cls(grades[0], num_labels)


STUDY_SCALE = GradeScale(1, 5)  # the study's grades, and STS-B's as headlab maps them
