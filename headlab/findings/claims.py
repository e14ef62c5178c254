"""The study's claims as data: one registered row per claim the book tests, from which a page's verdict, the scorecard
and the README are written (the rule that judges them: :mod:`headlab.findings.verdicts`).

Every claim the book tests is registered once in :data:`STUDY_CLAIMS`: the sentence of the study it tests (``quote``,
word for word), the page that tests it, its *tally* (``study``: a claim of the study; ``ours``: a prediction of our
own that the study's reading implies, such as the patching and two-tower rows) and its *kind*, which fixes how it is
judged:

- ``effect``: an effect in a stated direction, of at least its smallest effect of interest (``min_size``, with why:
  half the study's own number where it gives one, the study's words such as "collapse" or "far less", or the test
  split's precision otherwise).
- ``no_effect``: no effect beyond a stated margin (``margin``), as an equivalence test (two one-sided tests).
- ``compare``: a difference of two effects (e.g. the named heads against the mean of random head sets), in a stated
  direction and of at least its smallest effect of interest.

A tally's claims are one Bonferroni family (:data:`FAMILIES`, stated, and checked against the registry when this
module loads).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from headlab.lab.pages import headings

KINDS = ("effect", "no_effect", "compare")
TALLIES = {
    "study": "the study's claims",
    "ours": "our own predictions",
    "objectives": "the study's credit of its pretraining objectives (two Chinese models compared)",
}  # tally -> its heading; the objectives are judged on two models' results at once (headlab.findings.objectives)
# where a claim's smallest effect of interest comes from: half the claim's own number in the study ("study"); half the
# smallest effect the study reports anywhere, for a claim it gives no number ("study scale"); the study's words
# ("collapse", "far less"); the test split's precision
SIZE_SOURCES = ("study", "study scale", "words", "precision")


@dataclass(frozen=True)
class StudyClaim:
    """One claim of the study as the book tests it: what the study says (``quote``) and how a verdict is reached."""

    claim_id: str
    page: str
    claim: str
    quote: str
    kind: str
    direction: int = 0  # +1 / -1: the sign of the effect the claim expects (0 for no_effect)
    min_size: float = 0.0  # the least effect the claim's words ask for, in the claim's unit, from `null`
    size_why: str = ""  # why min_size (or the margin) has its value
    margin: float = 0.0  # no_effect: the equivalence margin, in the claim's unit
    null: float = 0.0  # the value that means "no effect" in the claim's unit
    size_source: str = "precision"  # where min_size (or the margin) comes from: one of SIZE_SOURCES
    tally: str = "study"  # the study's claim, or a prediction of ours (TALLIES): each tally is its own family

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.claim_id}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind == "no_effect" and not self.margin > 0:
            raise ValueError(f"claim {self.claim_id}: a no_effect claim needs a margin above 0")
        if self.kind != "no_effect" and self.direction not in (-1, 1):
            raise ValueError(f"claim {self.claim_id}: a {self.kind} claim needs a direction of +1 or -1")
        if self.kind != "no_effect" and not self.min_size > 0:
            raise ValueError(f"claim {self.claim_id}: a {self.kind} claim needs a smallest effect of interest above 0")
        if not self.size_why or self.size_source not in SIZE_SOURCES or self.tally not in TALLIES:
            raise ValueError(
                f"claim {self.claim_id}: say why its size is what it is (size_why), from one of {SIZE_SOURCES}, in "
                f"one of the tallies {sorted(TALLIES)}"
            )

    @property
    def family(self) -> int:
        """How many claims this claim's tally holds: the Bonferroni family it is judged in."""
        return FAMILIES[self.tally]

    @property
    def finding(self) -> str:
        """The name of the finding (notebook) the claim belongs to, e.g. ``word_order``."""
        return {**headings(), **OTHER_FINDINGS}[self.page]


OTHER_FINDINGS = {"objectives": "the pretraining objectives: MLM+NSP against MLM alone"}  # claims on no one page


def _study(claim_id, page, claim, quote, kind, **rule) -> StudyClaim:
    return StudyClaim(claim_id, page, claim, quote, kind, **rule)


MARGIN_WHY = (
    "±2% relative: the study reports changes to the nearest 0.1% and calls +0% no change; 2% is a fifth of "
    "the smallest effect it calls a loss or gain (the +2.3% of layer 8), and about the precision a test "
    "split of ~1400 pairs gives a single mask (its 95% interval is about ±3%)"
)

SMALLEST_CHANGE = 0.023 / 2
SMALLEST_CHANGE_WHY = (
    "half the smallest change of accuracy the study reports as an effect (masking layer 8: +2.3%): the study gives "
    "no number for this claim"
)

STUDY_CLAIMS: dict[str, StudyClaim] = {
    c.claim_id: c
    for c in [
        # 01 redundancy
        _study(
            "redundancy.no_loss_below_20",
            "01_redundancy",
            "Masking fewer than 20% of the heads costs no accuracy (about +1% at 10% in the study)",
            "below 20% there is no loss; at 10% accuracy is about +1% above baseline",
            "no_effect",
            margin=0.02,
            size_why=MARGIN_WHY,
            size_source="study",
        ),
        _study(
            "redundancy.falls_steadily",
            "01_redundancy",
            "Past some share, accuracy falls steadily as more heads go",
            "Past some share, accuracy falls steadily as more heads go",
            "effect",
            direction=1,
            min_size=0.1,
            size_why="steadily: at least 10 points more of the unmasked quadratic κ lost at the largest share than at "
            "the first share with a loss, about three times what one share's draws resolve",
            size_source="precision",
        ),
        # 02 layer dependence
        _study(
            "layer_dependence.low_heads_collapse",
            "02_layer_dependence",
            "Masking 80% and 100% of the low heads makes accuracy collapse",
            "Masking 80% and 100% of the low heads (40% and 50% on the axis) makes accuracy collapse",
            "effect",
            direction=1,
            min_size=0.5,
            size_why="a collapse: more than half of the unmasked quadratic κ (agreement beyond chance) lost",
            size_source="words",
        ),
        _study(
            "layer_dependence.high_heads_cost_less",
            "02_layer_dependence",
            "Masking most of the high heads costs far less than masking the low heads",
            "masking most of the high heads costs far less",
            "compare",
            direction=1,
            min_size=0.2,
            size_why="far less: the low half takes at least 20 points more of the unmasked quadratic κ than the high "
            "half",
            size_source="words",
        ),
        _study(
            "layer_dependence.layers_5_9_gain",
            "02_layer_dependence",
            "Masking any one of layers 5–9 (of 12) raises accuracy",
            "masking any of layers 5-9 *improves* accuracy",
            "effect",
            direction=1,
            min_size=SMALLEST_CHANGE,
            size_why=SMALLEST_CHANGE_WHY,
            size_source="study scale",
        ),
        _study(
            "layer_dependence.layer_8_gain",
            "02_layer_dependence",
            "Masking all of layer 8 (of 12) raises accuracy by 2.3%",
            "masking all of layer 8 gives +2.3%",
            "effect",
            direction=1,
            min_size=SMALLEST_CHANGE,
            size_why="half the study's own number, +2.3%",
            size_source="study",
        ),
        _study(
            "layer_dependence.most_heads_change_nothing",
            "02_layer_dependence",
            "Most single heads change nothing when masked",
            "most single heads change nothing",
            "effect",
            direction=1,
            null=0.5,
            min_size=0.1,
            size_why="most: more than half of the heads, each shown within the ±2% margin, by at least 10 points "
            "(three heads in five), so that a bare majority within the interval's noise does not count",
            size_source="words",
        ),
        _study(
            "layer_dependence.some_heads_improve",
            "02_layer_dependence",
            "Masking some single heads improves the model (the study's open question)",
            "heads whose removal *improves* the model",
            "effect",
            direction=1,
            min_size=SMALLEST_CHANGE,
            size_why=SMALLEST_CHANGE_WHY,
            size_source="study scale",
        ),
        # 03 word segmentation
        _study(
            "word_segmentation.single_head",
            "03_word_segmentation",
            "One head's attention segments words (70% right in the study)",
            "Reading one head's attention this way segments words with 70% accuracy",
            "effect",
            direction=1,
            min_size=0.05,
            size_why="segments words: at least 5 points of tokens right above always answering the commonest class; "
            "the study's 70% is not on the same scale (its majority class is not given)",
            size_source="precision",
        ),
        _study(
            "word_segmentation.head_union",
            "03_word_segmentation",
            "Several heads together segment words (96% right in the study)",
            "counting a character as right when at least one of them is right gives 96%",
            "effect",
            direction=1,
            min_size=0.05,
            size_why="as for one head: at least 5 points above the commonest class",
            size_source="precision",
        ),
        # 04 word order
        _study(
            "word_order.clean_diagonal",
            "04_word_order",
            "Some heads show a clean shifted diagonal (attention on the previous or the next token)",
            "Some heads show a clean shifted-diagonal (previous / next token) pattern",
            "effect",
            direction=1,
            null=0.5,
            min_size=0.25,
            size_why="clean: at least three quarters of a token's attention on one neighbour",
            size_source="words",
        ),
        _study(
            "word_order.shuffle_lowers_grade",
            "04_word_order",
            "Shuffling a title's words lowers its grade",
            "With the title's words shuffled: grade 2.",
            "effect",
            direction=-1,
            min_size=1.0,
            size_why="half the study's own number: its shuffled title fell from grade 4 to 2, two grades",
            size_source="study",
        ),
        _study(
            "word_order.order_heads_carry_order",
            "04_word_order",
            "Masking the order heads makes the model less sensitive to a shuffled title "
            "than masking as many random heads",
            "without them BERT no longer notices the scrambled title",
            "compare",
            direction=-1,
            min_size=0.02,
            size_why="no longer notices: the order heads cut the grade distribution's move under shuffling (total "
            "variation) by at least 2 points more than as many random heads; about the precision ~1400 pairs give",
            size_source="precision",
        ),
        # 05 term matching
        _study(
            "term_matching.random_no_change",
            "05_term_matching",
            "Masking 5 random heads changes no accuracy",
            "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
            "no_effect",
            margin=0.02,
            size_why=MARGIN_WHY,
            size_source="study",
        ),
        _study(
            "term_matching.matching_costs",
            "05_term_matching",
            "Masking the 5 term-matching heads costs accuracy, far more than masking random heads",
            "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
            "compare",
            direction=-1,
            min_size=0.262,
            size_why="half the study's own number: the 5 matching heads cost 52.4% against +0% for 5 random heads, a "
            "difference of 52.4 points",
            size_source="study",
        ),
        _study(
            "term_matching.lower_half_costs",
            "05_term_matching",
            "Masking all heads of the lower half costs accuracy",
            "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
            "effect",
            direction=-1,
            min_size=0.4325,
            size_why="half the study's own number: all heads of the lower half cost 86.5%",
            size_source="study",
        ),
        _study(
            "term_matching.matching_keep_lower_half",
            "05_term_matching",
            "Keeping only the 5 term-matching heads of the lower half keeps much of its accuracy, more than as many "
            "random heads of it would",
            "Keeping only those 5 heads in layers 0-5 keeps about 82% of baseline performance",
            "compare",
            direction=1,
            min_size=0.05,
            size_why="much more than random heads: at least 5 points of relative accuracy more kept than by as many "
            "random heads of the half (the study gives no random counterpart); about the precision ~690 pairs give",
            size_source="precision",
        ),
        # 06 fine-tuning sharpens term matching
        _study(
            "sharpening.match_rises",
            "06_finetune_delta",
            "Attention between identical query/title terms rises with fine-tuning",
            "attention between identical query/title terms rises",
            "effect",
            direction=1,
            min_size=0.005,
            size_why="half a point of a token's attention: the smallest change a difference map shows (the study gives "
            "no number)",
            size_source="precision",
        ),
        _study(
            "sharpening.self_falls",
            "06_finetune_delta",
            "Attention of a term to itself falls with fine-tuning",
            "attention of a term to itself falls",
            "effect",
            direction=-1,
            min_size=0.005,
            size_why="half a point of a token's attention, as for the rise",
            size_source="precision",
        ),
        _study(
            "sharpening.sep_falls",
            "06_finetune_delta",
            "Attention to [SEP] falls with fine-tuning",
            'attention to `[SEP]` (read as "no-op", nothing to attend to) falls',
            "effect",
            direction=-1,
            min_size=0.005,
            size_why="half a point of a token's attention, as for the rise",
            size_source="precision",
        ),
        # 07 the high [CLS] head
        _study(
            "cls_head.masking_hurts",
            "07_cls_head",
            "One high-layer head (layer 10 of 12) costs accuracy when masked",
            "so does one high head in layer 10",
            "effect",
            direction=-1,
            min_size=SMALLEST_CHANGE,
            size_why=SMALLEST_CHANGE_WHY,
            size_source="study scale",
        ),
        _study(
            "cls_head.matching_heads_hurt",
            "07_cls_head",
            "Each of the term-matching heads (notebook 05's) costs accuracy when masked alone",
            "the term-matching heads hurt when masked",
            "effect",
            direction=-1,
            min_size=SMALLEST_CHANGE,
            size_why=SMALLEST_CHANGE_WHY,
            size_source="study scale",
        ),
        _study(
            "cls_head.concentrates_on_shared",
            "07_cls_head",
            "That head's [CLS] attention concentrates on the terms query and title share",
            "That head's `[CLS]` attention concentrates on the terms that query and title share",
            "effect",
            direction=1,
            min_size=0.01,
            size_why="concentrates: at least 1 point of the row more on the shared terms than a uniform row puts there",
            size_source="precision",
        ),
        _study(
            "cls_head.spreads_without_matching",
            "07_cls_head",
            "With the low-layer term-matching heads masked, its [CLS] attention spreads over many more terms",
            "its `[CLS]` attention spreads out over many more terms",
            "effect",
            direction=1,
            min_size=math.log(1.5),
            size_why="many more terms: the effectively attended tokens (exp of the entropy) grow by at least a factor "
            "1.5, an entropy rise of log 1.5 = 0.41 nats",
            size_source="words",
        ),
        _study(
            "cls_head.reads_matching_heads",
            "07_cls_head",
            "It reads the matching heads: masking them spreads its [CLS] attention "
            "more than masking random lower heads",
            "the high head reads the low heads' matching features",
            "compare",
            direction=1,
            min_size=math.log(1.5) / 2,
            size_why="reads them: masking them raises its entropy by at least half the claimed spread (log 1.5 / 2 = "
            "0.20 nats) more than masking as many random lower heads",
            size_source="words",
        ),
        # 08 two towers
        _study(
            "two_tower.worse",
            "08_two_tower",
            "A two-tower model grades worse than one cross-encoder",
            "a two-tower (siamese) BERT, which encodes query and title apart, did badly here",
            "effect",
            direction=-1,
            min_size=SMALLEST_CHANGE,
            size_why=SMALLEST_CHANGE_WHY,
            size_source="study scale",
        ),
        _study(
            "two_tower.fails_on_shared_terms",
            "08_two_tower",
            "Two towers did badly because they cannot match terms: their loss is larger on pairs that share terms",
            "This is offered as the reason a two-tower (siamese) BERT",
            "compare",
            direction=-1,
            min_size=0.02,
            size_why="at least 2 points of pairs graded right more lost on pairs that share a term; about what ~1400 "
            "pairs resolve",
            size_source="precision",
            tally="ours",
        ),
        # 09 activation patching: causal tests of what the term-matching heads carry
        _study(
            "patching.matching_heads_carry_matching",
            "09_patching",
            "The term-matching heads carry the term-matching signal: patched back into pairs whose shared terms were "
            "replaced, they restore more of the grade than as many random lower-half heads",
            "Some heads put high attention between identical terms in the two sentences, most clearly 5 heads in "
            "layers 2-4",
            "effect",
            direction=1,
            min_size=0.1,
            size_why="at least 10 points more of the grade difference restored than by random heads",
            size_source="precision",
            tally="ours",
        ),
        _study(
            "patching.cost_specific_to_shared_terms",
            "09_patching",
            "Masking the term-matching heads costs more on pairs that share a term than on pairs that share none",
            "Whether query and title share terms is a key feature",
            "effect",
            direction=-1,
            min_size=0.02,
            size_why="at least 2 points of pairs graded right more lost on pairs that share a term",
            size_source="precision",
            tally="ours",
        ),
        _study(
            "patching.cls_head_hands_on",
            "09_patching",
            "The high [CLS] head hands the matching heads' signal to the classifier: their outputs, reaching that head "
            "alone (path patching), bring back part of the grade",
            "hands them to the classifier",
            "effect",
            direction=1,
            min_size=0.05,
            size_why="at least 5% of the difference brought back through the one head",
            size_source="precision",
            tally="ours",
        ),
        # 10 pruning by importance: the study's advice for distillation, at equal cost
        _study(
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
        ),
        # the pretraining objectives: two models (MLM+NSP, MLM alone) compared, headlab.findings.objectives
        _study(
            "objectives.nsp_made_matching_heads",
            "objectives",
            "Next-sentence prediction made the term-matching heads: losing them costs the model pretrained with it "
            "more than the model pretrained without it",
            "(credited to next-sentence-prediction pretraining)",
            "compare",
            direction=-1,
            min_size=0.262,
            size_why="half the study's own number: its model (pretrained with NSP) lost 52.4% with the 5 matching "
            "heads masked, where a model without such heads should lose about what random heads cost (+0%)",
            size_source="study",
            tally="objectives",
        ),
        _study(
            "objectives.mlm_made_segmentation_heads",
            "objectives",
            "Masked-language modelling alone made the word-segmentation heads: they segment as well without "
            "next-sentence prediction",
            "The study credits masked-language-model pretraining for this.",
            "no_effect",
            margin=0.05,
            size_why="±5 points of tokens right above the commonest class: the smallest gain page 03 calls "
            "segmenting words (word_segmentation.single_head)",
            size_source="precision",
            tally="objectives",
        ),
    ]
}
# Each tally's Bonferroni family, stated (rule 3): a claim added or removed changes the level every verdict of its
# tally is judged at, so it is a new rule: state the new family here and raise RULE_VERSION with it.
FAMILIES = {"study": 26, "ours": 5, "objectives": 2}


def check_families(claims: dict[str, StudyClaim], families: dict[str, int]) -> None:
    """Refuse a registry whose tallies do not hold the stated families (checked when this module loads)."""
    registered = {tally: sum(c.tally == tally for c in claims.values()) for tally in TALLIES}
    if registered != families:
        raise ValueError(
            f"the tallies hold {registered} claims but FAMILIES states {families}: a changed family is a new verdict "
            "rule (state it in headlab.findings.claims.FAMILIES and raise RULE_VERSION)"
        )


check_families(STUDY_CLAIMS, FAMILIES)
FAMILY = FAMILIES["study"]  # the study's claims on one model's scorecard: the family its correction is over


def study_claim_id(claim_id: str) -> str:
    """The registered claim a row's id belongs to: ``<id>`` itself, or ``<id>`` of a sub-row ``<id>/<part>``."""
    return str(claim_id).split("/")[0]


def registered(claim_id: str) -> StudyClaim:
    """The registered claim of a row's id (``<id>`` or ``<id>/<part>``); an unknown id is refused by name."""
    key = study_claim_id(claim_id)
    if key not in STUDY_CLAIMS:
        raise KeyError(
            f"claim {claim_id!r} is not in headlab.findings.claims.STUDY_CLAIMS; register the study's "
            "sentence it tests there"
        )
    return STUDY_CLAIMS[key]


def quote_in(text: str, quote: str) -> bool:
    """Whether ``quote`` is in ``text`` word for word (line breaks and runs of spaces read as one space)."""
    squash = lambda s: re.sub(r"\s+", " ", s).strip()  # noqa: E731
    return squash(quote) in squash(text)
