"""The sizes policy: every claim's smallest effect of interest (or no-change margin) and the scale it is judged on,
computed by one written rule from the study's numbers and words alone (``docs/study.md``), fixed before the rebuild
that judges by it, versioned and dated. Nothing here reads ``results/``: a size chosen after seeing the data could
be chosen to give the verdict wanted (a test imports this module with ``results/`` unreadable).

The rule (:data:`RULES`, printed in ``docs/judging.md``, which is generated from this file):

- **study**: half the study's own number for the claim, in the claim's unit, where it gives one.
- **study scale**: a claim the study gives no number for, on accuracy: half the smallest change of accuracy the
  study reports as an effect (masking layer 8: +2.3%).
- **words**: the study's words set the size ("collapse": more than half of κ; "far less": 20 points; "most": 10
  points above half; "clean": three quarters; "many more terms": a factor 1.5).
- **precision**: a measure the study gives no number or word for: the least change the measure resolves, stated.
- **direction only**: a claim whose only number is one example (a single pair's argmax grade): the example gives a
  direction, not a size; the size is a stated precision.

Provenance, stated because no test can prove it: v1 was written on 2026-12-06, after the rule-4 rows of every column
had been read. Most literal sizes (the 0.1, 0.2, 0.05, 0.02 and 0.005 of the words and precision rules) are carried
over from 0139d86, which set them after rule-2 rows existed; what v1 changed (the no-change margin, the shuffled
title's size, the lower half's scale, the κ criterion, censoring) follows the rule written in issue #64 and is listed
with every verdict it moved in that issue's closing note. v2 (2026-12-06, before any run of patching v3, issue #65)
adds the sizes of page 09's new claims (term matching beyond a word's identity, the `[CLS]` route, the head's reading
against random senders, the circuit's faithfulness, completeness and minimality) and renames the carry claim; it
changes no size of v1, so it moves no verdict. v3 (2026-12-07, before any run of it) moves the masking
specificity from right-or-wrong under zero ablation, where the masked model sat at its floor, to the grade logit under
mean ablation per token class, at the same grade and unablated grade logit, in within-group standard deviations of
the move, against random heads: a new unit, so a new size; it changes no other.

No-change margins sit at the smallest change of their unit (:data:`NO_CHANGE_MARGIN`), so a loss size never lies
inside the margin of the same unit; the margin moved (from ±2%, which held the 1.15% size inside it), and a no-effect
claim whose design cannot show a margin that narrow stays underpowered, saying so.

Scale: a claim about masks is judged on the share of the unmasked quadratic κ lost where its words describe a
collapse or where the condition it is judged at removes 40% of all heads or more (:data:`KAPPA_CRITERION`), and on
the study's own relative change of accuracy otherwise. The two scales share no size (a relative change of accuracy and
a share of κ swing apart from model to model), so the other scale is asked only for the effect's sign, and a row whose
sign differs there is marked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import headlab.judging.units as u
from headlab.judging.units import KAPPA_START, Unit

POLICY_VERSION = 3
POLICY_DATE = "2026-12-07"  # fixed before the five columns are rebuilt by it (issue #64, item 8)


class Source(Enum):
    """Where a size comes from (the module's rule, in order of preference)."""

    STUDY = "study"
    STUDY_SCALE = "study scale"
    WORDS = "words"
    PRECISION = "precision"
    DIRECTION = "direction only"


class Scale(Enum):
    """What a claim's number is on: the study's unit, the chance-corrected one, or a measure of its own."""

    ACCURACY = "relative change of accuracy (the study's unit)"
    KAPPA = "share of the unmasked quadratic κ lost"
    OWN = "the measure's own unit (attention, tokens, grades, nats, heads)"


RULES = {
    Source.STUDY: "half the study's own number for the claim, in the claim's unit",
    Source.STUDY_SCALE: "half the smallest change of accuracy the study reports as an effect (masking layer 8: "
    "+2.3%), for a claim it gives no number",
    Source.WORDS: "the study's words for the claim (collapse, far less, most, clean, many more)",
    Source.PRECISION: "a measure the study gives no number or word for: the least change it resolves, stated",
    Source.DIRECTION: "the study's only number is one example pair: a direction, with a stated precision size",
}
COLLAPSE_POINT = 0.4  # the study: masking 80% of the low heads, 40% of all heads on its axis, "makes accuracy collapse"
KAPPA_CRITERION = (
    "a claim about masks reads κ where its words describe a collapse or where the condition it is judged at removes "
    f"{COLLAPSE_POINT:.0%} of all heads or more (the share at which the study saw accuracy collapse: 80% of the low "
    "heads): there a model can fall to one constant answer, whose accuracy is the commonest "
    "grade's share of the test pairs, different on every data set, so accuracy caps the loss below the study's "
    "numbers, while κ puts every constant answer at 100% lost on every data set. Every other claim about masks reads "
    "the study's own unit, relative accuracy, so its number stands beside the study's"
)


@dataclass(frozen=True)
class StudyNumber:
    """A number the study reports, as printed (``printed``) within words of ``docs/study.md`` (``quote``)."""

    value: float
    printed: str
    quote: str


_TABLE = "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |"
# the caption and head of that table (finding 5), as printed: a quote of its row is said with them
STUDY_TABLE_HEADS = {
    _TABLE: (
        "Relative change of test accuracy",
        "| mask | none | 5 random heads | the 5 matching heads | all heads of layers 0-5 | layers 0-5 but the 5 "
        "matching heads |",
    )
}


def readable_quote(quote: str) -> str:
    """How a page gives the study's words: a sentence in quotation marks, word for word; a row of one of the study's
    tables (:data:`STUDY_TABLE_HEADS`) as the table's caption and its cells named by the table's head, outside
    quotation marks (``its table, relative change of test accuracy by mask: none +0%, ...``), since a row is no
    sentence."""
    if quote not in STUDY_TABLE_HEADS:
        return f"“{quote}”"
    caption, head = STUDY_TABLE_HEADS[quote]
    (_, *values), (by, *names) = ([c.strip() for c in line.strip().strip("|").split("|")] for line in (quote, head))
    cells = ", ".join(f"{name} {value}" for name, value in zip(names, values))
    return f"its table, {caption[0].lower()}{caption[1:]} by {by}: {cells}"


STUDY_NUMBERS = {
    "layer_8": StudyNumber(0.023, "+2.3%", "masking all of layer 8 gives +2.3%"),
    "matching": StudyNumber(-0.524, "-52.4%", _TABLE),
    "random": StudyNumber(0.0, "+0%", _TABLE),
    "lower_half": StudyNumber(-0.865, "-86.5%", _TABLE),
    "shuffle_example": StudyNumber(-2.0, "grade 2", "grade 4. With the title's words shuffled: grade 2"),
}


def half(*keys: str) -> float:
    """Half the size of a study number, or of the difference of two (``half("matching", "random")``)."""
    value = STUDY_NUMBERS[keys[0]].value - (STUDY_NUMBERS[keys[1]].value if len(keys) > 1 else 0.0)
    return abs(value) / 2


SMALLEST_CHANGE = half("layer_8")  # 1.15% of accuracy: the smallest change the study calls an effect, halved
NO_CHANGE_MARGIN = SMALLEST_CHANGE  # ± this much of accuracy is "no change": never wider than a loss size
SMALLEST_CHANGE_WHY = (
    "half the smallest change of accuracy the study reports as an effect (masking layer 8: +2.3%): the study gives "
    "no number for this claim"
)
MARGIN_WHY = (
    f"±{NO_CHANGE_MARGIN:.2%} relative: the smallest change of accuracy the book calls an effect (half the study's "
    "+2.3% of layer 8), so no size of a loss or gain lies inside it; the study reports to the nearest 0.1% and calls "
    "+0% no change"
)
SHUFFLE_PRECISION = 0.001  # grades of the mean: less than one pair of a ~1400-pair test split moved by one grade


@dataclass(frozen=True)
class Size:
    """One claim's size under the policy: its unit, scale, the share of all heads its judged condition removes
    (``removes``: None where it is not a mask), where the size comes from and why, and the size or margin."""

    claim_id: str
    unit: Unit
    source: Source
    why: str
    min_size: float = 0.0
    margin: float = 0.0
    removes: float | None = None
    collapse_words: bool = False

    @property
    def scale(self) -> Scale:
        """The scale the unit is on (read from the unit's label)."""
        if self.unit.label.startswith(KAPPA_START):
            return Scale.KAPPA
        return Scale.ACCURACY if "relative change of accuracy" in self.unit.label else Scale.OWN

    @property
    def criterion_scale(self) -> Scale | None:
        """The scale :data:`KAPPA_CRITERION` puts a claim about masks on (None for a claim not about masks)."""
        if self.removes is None:
            return None
        return Scale.KAPPA if self.collapse_words or self.removes >= COLLAPSE_POINT - 1e-9 else Scale.ACCURACY


S, SS, W, P, D = Source.STUDY, Source.STUDY_SCALE, Source.WORDS, Source.PRECISION, Source.DIRECTION
_SIZES = (
    # 01 redundancy: shares below 20%; the fall runs to the largest share masked (the whole model's half and more)
    Size("redundancy.no_loss_below_20", u.ACCURACY_CHANGE, SS, MARGIN_WHY, margin=NO_CHANGE_MARGIN, removes=0.1),
    Size(
        "redundancy.falls_steadily",
        u.RISE,
        P,
        "steadily: at least 10 points more of the unmasked quadratic κ lost at the largest share than at the first "
        "share with a loss, about three times what one share's draws resolve",
        min_size=0.1,
        removes=0.5,
    ),
    # 02 layer dependence: halves at the collapse point, single layers, single heads
    Size(
        "layer_dependence.low_heads_collapse",
        u.KAPPA_LOST,
        W,
        "a collapse: more than half of the unmasked quadratic κ (agreement beyond chance) lost",
        min_size=0.5,
        removes=0.4,
        collapse_words=True,
    ),
    Size(
        "layer_dependence.high_heads_cost_less",
        u.HALF_GAP,
        W,
        "far less: the low half takes at least 20 points more of the unmasked quadratic κ than the high half",
        min_size=0.2,
        removes=0.4,
    ),
    Size(
        "layer_dependence.layers_5_9_gain", u.ACCURACY_CHANGE, SS, SMALLEST_CHANGE_WHY, SMALLEST_CHANGE, removes=1 / 12
    ),
    Size(
        "layer_dependence.layer_8_gain",
        u.ACCURACY_CHANGE,
        S,
        "half the study's own number, +2.3%",
        half("layer_8"),
        removes=1 / 12,
    ),
    Size(
        "layer_dependence.most_heads_change_nothing",
        u.HEADS_NOTHING,
        W,
        f"most: more than half of the heads, each shown within the ±{NO_CHANGE_MARGIN:.2%} margin, by at least 10 "
        "points (three heads in five), so that a bare majority within the interval's noise does not count",
        0.1,
    ),
    Size(
        "layer_dependence.some_heads_improve",
        u.ACCURACY_CHANGE,
        SS,
        SMALLEST_CHANGE_WHY,
        SMALLEST_CHANGE,
        removes=1 / 144,
    ),
    # 03 word segmentation
    Size(
        "word_segmentation.single_head",
        u.SEGMENTATION_GAIN,
        P,
        "segments words: at least 5 points of tokens right above always answering the commonest class; the study's "
        "70% is not on the same scale (its majority class is not given)",
        0.05,
    ),
    Size(
        "word_segmentation.head_union",
        u.SEGMENTATION_GAIN,
        P,
        "as for one head: at least 5 points above the commonest class",
        0.05,
    ),
    # 04 word order
    Size(
        "word_order.clean_diagonal",
        u.DIAGONAL,
        W,
        "clean: at least three quarters of a token's attention on one neighbour",
        0.25,
    ),
    Size(
        "word_order.shuffle_lowers_grade",
        u.GRADE_SHIFT,
        D,
        "direction only: the study's one example pair fell from grade 4 to grade 2, an argmax of one pair, not a "
        f"mean, so it gives a direction, not a size; the size is a stated precision, {SHUFFLE_PRECISION:g} grades of "
        "the mean, less than one pair of a ~1400-pair test split moved by one grade: any shift the test resolves",
        SHUFFLE_PRECISION,
    ),
    Size(
        "word_order.order_heads_carry_order",
        u.TOTAL_VARIATION,
        P,
        "no longer notices: the order heads cut the grade distribution's move under shuffling (total variation) by "
        "at least 2 points more than as many random heads; about the precision ~1400 pairs give",
        0.02,
    ),
    # 05 term matching
    Size("term_matching.random_no_change", u.ACCURACY_CHANGE, SS, MARGIN_WHY, margin=NO_CHANGE_MARGIN, removes=5 / 144),
    Size(
        "term_matching.matching_costs",
        u.VERSUS_RANDOM,
        S,
        "half the study's own number: the 5 matching heads cost 52.4% against +0% for 5 random heads, a difference "
        "of 52.4 points",
        half("matching", "random"),
        removes=5 / 144,
    ),
    Size(
        "term_matching.lower_half_costs",
        u.KAPPA_LOST,
        W,
        "most of the skill: the study's 86.5% of accuracy lost is a collapse, and on κ (the condition removes half of "
        "all heads) a collapse is more than half of the unmasked quadratic κ lost, as for the low heads (page 02); "
        "the study gives no number on κ, and the two scales share no size",
        0.5,
        removes=0.5,
    ),
    Size(
        "term_matching.matching_keep_lower_half",
        u.KEEP_VERSUS_RANDOM_KAPPA,
        P,
        "much more than random heads: at least 5 points of the unmasked quadratic κ less lost than with as many "
        "random heads of the half kept (the study gives no random counterpart); about the precision ~690 pairs give",
        0.05,
        removes=67 / 144,
    ),
    # 06 sharpening
    Size(
        "sharpening.match_rises",
        u.ATTENTION_CHANGE,
        P,
        "half a point of a token's attention: the smallest change a difference map shows (the study gives no number)",
        0.005,
    ),
    Size("sharpening.self_falls", u.ATTENTION_CHANGE, P, "half a point of a token's attention, as for the rise", 0.005),
    Size("sharpening.sep_falls", u.ATTENTION_CHANGE, P, "half a point of a token's attention, as for the rise", 0.005),
    # 07 the layer-10 head
    Size("cls_head.masking_hurts", u.ACCURACY_CHANGE, SS, SMALLEST_CHANGE_WHY, SMALLEST_CHANGE, removes=1 / 144),
    Size("cls_head.matching_heads_hurt", u.ACCURACY_CHANGE, SS, SMALLEST_CHANGE_WHY, SMALLEST_CHANGE, removes=1 / 144),
    Size(
        "cls_head.concentrates_on_shared",
        u.CLS_CONCENTRATION,
        P,
        "concentrates: at least 1 point of the row more on the shared terms than a uniform row puts there",
        0.01,
    ),
    Size(
        "cls_head.spreads_without_matching",
        u.CLS_SPREAD,
        W,
        "many more terms: the effectively attended tokens (exp of the entropy) grow by at least a factor 1.5, an "
        "entropy rise of log 1.5 = 0.41 nats",
        math.log(1.5),
    ),
    Size(
        "cls_head.reads_matching_heads",
        u.CLS_SPREAD_VERSUS_RANDOM,
        W,
        "reads them: masking them raises its entropy by at least half the claimed spread (log 1.5 / 2 = 0.20 nats) "
        "more than masking as many random lower heads",
        math.log(1.5) / 2,
    ),
    # 08 two towers: another model, not a mask, on the study's unit
    Size("two_tower.worse", u.ACCURACY_CHANGE, SS, SMALLEST_CHANGE_WHY, SMALLEST_CHANGE),
    Size(
        "two_tower.fails_on_shared_terms",
        u.TWO_TOWER_GAP,
        P,
        "at least 2 points of pairs graded right more lost on pairs that share a term; about what ~1400 pairs resolve",
        0.02,
    ),
    # 09 patching, 10 pruning: our own predictions
    Size(
        "patching.matching_heads_carry_replaced_words",
        u.CARRY,
        P,
        "at least 10 points more of the grade difference restored than by random heads",
        0.1,
    ),
    Size(
        "patching.matching_beyond_identity",
        u.IDENTITY,
        P,
        "at least 10 points more of the grade difference restored for a shared word than for an unshared one: the "
        "size the matching heads are asked to beat random heads by",
        0.1,
    ),
    Size(
        "patching.cost_specific_to_shared_terms",
        u.GRADE_SHIFT_SPECIFICITY,
        P,
        "at least 0.2 within-group standard deviations of the move more taken from pairs that share a term than "
        "random heads take: Cohen's conventional small difference between two groups, a convention stated for a "
        "measure the study gives no number for, on a standardised scale because a grade logit's spread differs from "
        "model to model",
        0.2,
    ),
    Size(
        "patching.cls_route_hands_on",
        u.CLS_ROUTE,
        P,
        "at least 5% of the difference through the head's output at [CLS]: the 5 points of the precision rule, "
        "what one head must carry to be the one that hands the signal on",
        0.05,
    ),
    Size(
        "patching.circuit_faithful",
        u.CIRCUIT_KEPT,
        P,
        "most: at least 10 points above half of the full model's difference kept (the words rule's 'most'), and at "
        "least 10 points more than random circuits of its size (what the matching heads must beat random heads by)",
        0.1,
    ),
    Size(
        "patching.circuit_complete",
        u.CIRCUIT_INCOMPLETE,
        P,
        "±10 points of the full model's difference: without any part of it, a complete circuit keeps what the model "
        "without that part keeps, within the size its other claims are asked for",
        margin=0.1,
    ),
    Size(
        "patching.circuit_minimal",
        u.HEAD_ADDED,
        P,
        "at least 2 points of the full model's difference added by each head inside the circuit: a stated "
        "precision, a fifth of the 10 points the whole circuit is asked to beat random circuits by",
        0.02,
    ),
    Size(
        "patching.cls_head_reads_matching",
        u.READS_SENDERS,
        P,
        "at least 5 points more of the difference read from the matching heads than from random heads of their layers",
        0.05,
    ),
    Size(
        "pruning.keep_low_heads",
        u.STUDENT_GAP,
        P,
        "at least 5 points of the teacher's quadratic κ less lost by the student keeping the low heads",
        0.05,
        removes=0.5,
    ),
    # the pretraining objectives, across two models
    Size(
        "objectives.nsp_made_matching_heads",
        u.OBJECTIVES_MATCHING,
        S,
        "half the study's own number: its model (pretrained with NSP) lost 52.4% with the 5 matching heads masked, "
        "where a model without such heads should lose about what random heads cost (+0%)",
        half("matching", "random"),
        removes=5 / 144,
    ),
    Size(
        "objectives.mlm_made_segmentation_heads",
        u.objectives_gain("all tokens"),
        P,
        "±5 points of tokens right above the commonest class: the smallest gain page 03 calls segmenting words "
        "(word_segmentation.single_head)",
        margin=0.05,
    ),
)
POLICY: dict[str, Size] = {s.claim_id: s for s in _SIZES}


def size_of(claim_id: str) -> Size:
    """A claim's size under the policy; a claim the policy does not list is an error that names it."""
    if claim_id not in POLICY:
        raise KeyError(f"claim {claim_id!r} has no size in headlab.judging.sizes.POLICY: state one there")
    return POLICY[claim_id]


__all__ = [
    "KAPPA_CRITERION",
    "MARGIN_WHY",
    "NO_CHANGE_MARGIN",
    "POLICY",
    "POLICY_DATE",
    "POLICY_VERSION",
    "RULES",
    "SMALLEST_CHANGE",
    "SMALLEST_CHANGE_WHY",
    "STUDY_NUMBERS",
    "Scale",
    "Size",
    "Source",
    "size_of",
]
