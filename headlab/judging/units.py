"""The units a claim's number is in, as values: each with its label (what the tables and pages say) and its kind (how
its numbers print: a relative change, points, a share or a number), declared once here with the interval methods
several findings share.

A claim saves its unit's label (``results/scorecard.csv``'s ``unit``); (:func:`unit_of`) turns a label back into its
:class:`Unit`, so the scorecard and the README print a saved row the way the page did. A label no unit has is an
error that names it. ``LEGACY`` holds the units of rows that older rules judged and ``results/`` still carries until
their models are rebuilt.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """How a unit's numbers print."""

    RELATIVE = "relative"  # a relative change: +12.3%
    POINTS = "points"  # a difference of relative changes or of shares: +12.3 points
    SHARE = "share"  # a share: 12.3%
    SIGNED = "signed"  # a change in the unit's own terms: +0.123
    NUMBER = "number"  # 0.123


@dataclass(frozen=True)
class Unit:
    """What a claim's number measures (``label``, as the tables say it) and how it prints (``kind``)."""

    label: str
    kind: Kind

    def number(self, value: float) -> str:
        """A number in this unit as the pages write it (signed where it is a change; a value that rounds to zero is
        written 0, never -0)."""
        return no_negative_zero(self._number(value))

    def _number(self, value: float) -> str:
        if self.kind is Kind.RELATIVE:
            return f"{value:+.1%}"
        if self.kind is Kind.POINTS:
            return f"{100 * value:+.1f} points"
        if self.kind is Kind.SHARE:
            return f"{value:.1%}"
        return f"{value:+.3g}" if self.kind is Kind.SIGNED else f"{value:.3g}"

    def size(self, value: float) -> str:
        """A margin or a smallest effect in this unit (never signed); a percentage to two decimals where one would
        round it (the 1.15% of half the study's +2.3%)."""
        if self.kind in (Kind.RELATIVE, Kind.SHARE):
            return f"{value:.1%}" if abs(value * 1000 - round(value * 1000)) < 1e-6 else f"{value:.2%}"
        if self.kind is Kind.POINTS:
            return f"{100 * value:.1f} points"
        return f"{value:.3g}"

    def __str__(self) -> str:
        return self.label


_ROUNDED_ZERO = re.compile(r"^-(?=0(?:\.0+)?(?:%| points)?$)")


def no_negative_zero(text: str) -> str:
    """A printed number that rounds to zero without a minus sign ("-0.0%" reads "0.0%"; "+0.0%" stays)."""
    return _ROUNDED_ZERO.sub("", text)


# the interval methods several findings use (a claim's ``method``)
PAIRED = "paired bootstrap over test pairs"
TWO_STAGE = "two-stage bootstrap over draws and test pairs"


def is_missing(value) -> bool:
    """No number: None or NaN (how a table marks what was not measured)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def with_interval(unit: Unit, value: float, lo: float, hi: float) -> str:
    """``value [lo, hi]`` in ``unit``; the value alone where no interval was measured."""
    text = unit.number(value)
    return text if is_missing(lo) or is_missing(hi) else f"{text} [{unit.number(lo)}, {unit.number(hi)}]"


# what a number of each kind means, for the book's glossary (glossary_table prints an example with Unit.number)
MEANINGS = {
    Kind.RELATIVE: "a relative change, as the study reports accuracy: the condition's accuracy against the unmasked "
    "model's, so +1% is 1% higher than the baseline's accuracy (relatively), not one point more",
    Kind.POINTS: "a difference of two relative changes or of two shares, in percentage points (named heads minus "
    "random heads, one half minus the other); on the κ scale, points of the share of κ lost",
    Kind.SHARE: "a part of a whole: of the test pairs, of a row's attention, of the heads, of a grade-logit "
    "difference restored, or of the unmasked model's quadratic-weighted κ lost (0: as unmasked; 100%: no agreement "
    "with the gold grades beyond chance, where every constant answer sits on every data set). A share measured as a "
    "ratio may pass its bounds, and is printed as measured, never clipped: κ lost past 100% is agreement below "
    "chance, a share restored past 100% overshoots the original pair, and an interval past 0 or 100% is the "
    "sampling error of the ratio as the bootstrap finds it",
    Kind.SIGNED: "a change in the measure's own terms: grades of the expected grade, nats of an entropy (exp of it is "
    "the number of tokens a row effectively attends to), standard deviations of a move",
    Kind.NUMBER: "a number in its unit's own terms, unsigned (a rank, a count)",
}


def glossary_table() -> str:
    """The book's glossary of units: per kind, how a number prints (an example, printed by :meth:`Unit.number`) and
    what it means."""
    rows = ["| printed as | what it means |", "|---|---|"]
    rows += [f"| {Unit('example', kind).number(0.123)} | {meaning} |" for kind, meaning in MEANINGS.items()]
    return "\n".join(rows)


KAPPA_START = "share of the unmasked quadratic κ lost"  # every unit on the kappa scale starts so
R, P, S, D, N = Kind.RELATIVE, Kind.POINTS, Kind.SHARE, Kind.SIGNED, Kind.NUMBER

ACCURACY_CHANGE = Unit("relative change of accuracy", R)
KAPPA_LOST = Unit(f"{KAPPA_START} (0: unmasked, 100%: no agreement with the gold grades beyond chance)", S)
# 01, 02, 10: differences of shares of kappa lost
RISE = Unit(f"{KAPPA_START}, largest share minus first share with a loss, in points", P)
HALF_GAP = Unit(f"{KAPPA_START}, lower half minus upper half, in points", P)
STUDENT_GAP = Unit(
    f"{KAPPA_START}, student keeping the high heads minus student keeping the low heads, same size, in points", P
)
DISTILL_GAP = Unit(f"{KAPPA_START}, low-half pruning minus high-half pruning, mean over the shares, in points", P)
HEADS_NOTHING = Unit("share of heads shown to change nothing", S)
# 03
SEGMENTATION_GAIN = Unit("share of tokens right, above the majority class", P)
SINGLE_HEAD_ACCURACY = Unit("share of tokens right, an accuracy with no baseline", S)
UNION_ACCURACY = Unit("share of tokens right when any of several heads is right (an oracle union), with no baseline", S)
# 04
DIAGONAL = Unit("share of a token's attention on one neighbour, clearest head", S)
GRADE_SHIFT = Unit("grades, change of the expected grade", D)
STUDY_GRADE_SHIFT = Unit("grades, change of the argmax grade of the study's one example pair (4 -> 2), not a mean", D)
TOTAL_VARIATION = Unit("total variation, order heads masked minus random heads masked", D)
# 05, 07
KEEP_VERSUS_RANDOM_KAPPA = Unit(
    f"{KAPPA_START}, the lower half masked but the named heads minus but as many random heads of it, in points", P
)
VERSUS_RANDOM = Unit("relative change of accuracy, named heads minus the mean of random heads, in points", P)
CLS_CONCENTRATION = Unit("share of the [CLS] row on shared terms, minus a uniform row's", P)
CLS_SPREAD = Unit("change of the [CLS] row's entropy, in nats", D)
CLS_SPREAD_VERSUS_RANDOM = Unit(
    "change of the [CLS] row's entropy in nats, matching heads masked minus the mean of random lower-head sets", D
)
# 06
ATTENTION_CHANGE = Unit("change of attention share, after minus before", P)
# 08, 09
TWO_TOWER_GAP = Unit(
    "share of pairs graded right, (two towers minus cross-encoder) on pairs that share a term minus on pairs "
    "that share none",
    P,
)
GRADE_SHIFT_SPECIFICITY = Unit(
    "grade logit's move with the heads mean-ablated, on pairs that share a term minus on pairs that share none at the "
    "same gold grade and unablated grade logit, in within-group standard deviations of the move, matching heads minus "
    "random lower-half heads",
    D,
)
CARRY = Unit("share of the grade-logit difference restored, matching heads minus random lower-half heads (points)", P)
IDENTITY = Unit(
    "share of the grade-logit difference the matching heads restore, one shared title word replaced minus one "
    "unshared title word replaced, on the same pairs (points)",
    P,
)
CLS_ROUTE = Unit(
    "share of the grade-logit difference that comes back through the head's output at [CLS] alone (path patching "
    "from the matching heads)",
    S,
)
READS_SENDERS = Unit(
    "share of the grade-logit difference that comes back through the head alone, from the matching heads minus from "
    "random sets of as many heads in their layers (points)",
    P,
)
CIRCUIT_KEPT = Unit(
    "share of the full model's grade-logit difference the circuit keeps with every other head mean-ablated, the "
    "weaker of above half and above random circuits of its size (points)",
    P,
)
CIRCUIT_INCOMPLETE = Unit(
    "share of the full model's grade-logit difference, the circuit without a part K minus the model without K (points)",
    P,
)
HEAD_ADDED = Unit(
    "share of the full model's grade-logit difference a head adds inside the circuit, the least of its heads (points)",
    P,
)
RECEIVER_RANK = Unit("rank among the heads above the matching heads by the share read through it (1: most)", N)
# the pretraining objectives
OBJECTIVES_MATCHING = Unit(
    "relative change of accuracy with the 5 term-matching heads masked, MLM+NSP model minus MLM-only model", P
)
STUDY_OBJECTIVES_MATCHING = Unit(
    "relative change with the 5 heads masked in the study's one model, pretrained with NSP", R
)


def objectives_gain(subset: str) -> Unit:
    """The segmentation gain of MLM+NSP over MLM alone on ``subset`` of the tokens."""
    return Unit(f"share of tokens right above the majority class ({subset}), MLM+NSP model minus MLM-only model", P)


# units of rows that older rules or sizes policies judged, kept in results/ until their models are rebuilt
LEGACY = (
    Unit(
        "share of pairs graded right, change with the mask on pairs that share a term minus on pairs that share none, "
        "within gold grades",
        P,
    ),
    Unit("share of the above-chance accuracy lost (0: unmasked, 100%: always the majority grade)", S),
    Unit("share of the above-chance accuracy lost, largest share minus first share with a loss, in points", P),
    Unit(
        "share of the above-chance accuracy lost, low-half pruning minus high-half pruning, mean over the shares, "
        "in points",
        P,
    ),
    Unit("share of the above-chance accuracy lost, lower half minus upper half, in points", P),
    Unit("share of the grade difference restored, matching heads minus random lower-half heads (points)", P),
    Unit("share of the source-target difference that comes back through the [CLS] head alone", S),
    Unit(
        "share of the grade-logit difference that comes back through the head alone, minus the other heads above the "
        "matching heads on average (points)",
        P,
    ),
    Unit(
        "share of pairs graded right, change with the mask on pairs that share a term minus on pairs that share none",
        P,
    ),
)
UNITS = {
    u.label: u
    for u in (
        *(v for v in dict(globals()).values() if isinstance(v, Unit)),
        *(objectives_gain(subset) for subset in ("all tokens", "multi-token words")),
        *LEGACY,
    )
}


def unit_of(label: str) -> Unit:
    """The unit a saved row's label names; an unknown label is an error that names it."""
    if label not in UNITS:
        raise KeyError(f"no unit is labelled {label!r} (headlab.judging.units)")
    return UNITS[label]


def in_current_units(rows):
    """The rows (a scorecard frame) whose ``unit`` is not :data:`LEGACY`: a row measured in a unit since replaced is
    judged, simulated and planned for only once its column is rebuilt in the new one."""
    legacy = {u.label for u in LEGACY}
    return rows[~rows["unit"].isin(legacy)]
