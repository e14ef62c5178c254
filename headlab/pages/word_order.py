"""Finding 4, word-order heads: our numbers beside the study's case, in words.

The study showed one pair: query "京东小哥", title "京东小哥最近在干什么", grade 4; title shuffled, grade 2;
shuffled with its 7 order heads masked, grade 3; shuffled with 7 random heads masked (100 draws), still 2.
Each part of the page measures one claim of the study on the tables of :mod:`headlab.measures.order`, over a whole
test set, as a :class:`~headlab.judging.verdicts.Claim` row (``*_claims``), judged by the one rule of
:func:`headlab.judging.verdicts.judge`; its verdict is that row rendered, then the numbers behind it. The random heads
there are depth-matched (drawn from the order heads' layers). The study's one pair is counted and shown
(:func:`verdict_case`), but it is no claim row: the study does not claim it is typical.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from headlab.core.evaluate import Encoded, encode
from headlab.core.grades import STUDY_SCALE, GradeScale
from headlab.core.sweep import plan_table
from headlab.inputs.words import word_segmenter
from headlab.judging.units import DIAGONAL, GRADE_SHIFT, STUDY_GRADE_SHIFT, TOTAL_VARIATION

# notebook 04 takes claims_file and claims_table from here
from headlab.judging.verdicts import Claim, Kind, StudyClaim, render
from headlab.lab.lab import Lab
from headlab.measures.order import (
    CONDITIONS,
    PATTERNS,
    order_mask_specs,
    rank_cases,
    shuffle_effects,
    shuffled_frame,
)

STUDY_K = 7
STUDY_DRAWS = 100
STUDY_CASE_GRADES = dict(zip(CONDITIONS, (4, 2, 3, 2)))
STUDY_SHIFT = STUDY_CASE_GRADES[CONDITIONS[1]] - STUDY_CASE_GRADES[CONDITIONS[0]]  # its one pair, shuffled: 4 -> 2
CLEAN_DIAGONAL = StudyClaim(
    "word_order.clean_diagonal",
    "04_word_order",
    "Some heads show a clean shifted diagonal (attention on the previous or the next token)",
    "Some heads show a clean shifted-diagonal (previous / next token) pattern",
    Kind.EFFECT,
    direction=1,
    null=0.5,
)
SHUFFLE_LOWERS_GRADE = StudyClaim(
    "word_order.shuffle_lowers_grade",
    "04_word_order",
    "Shuffling a title's words lowers its grade",
    "With the title's words shuffled: grade 2.",
    Kind.EFFECT,
    direction=-1,
)
ORDER_HEADS_CARRY_ORDER = StudyClaim(
    "word_order.order_heads_carry_order",
    "04_word_order",
    "Masking the order heads makes the model less sensitive to a shuffled title than masking as many random heads",
    "without them BERT no longer notices the scrambled title",
    Kind.COMPARE,
    direction=-1,
)
CLAIMS = (CLEAN_DIAGONAL, SHUFFLE_LOWERS_GRADE, ORDER_HEADS_CARRY_ORDER)


def order_heads_claims(order_table: pd.DataFrame) -> list[Claim]:
    """The study's observation that some heads show a clean shifted diagonal, measured on every head's order score.

    Ours is the clearest head's score: the share of a token's attention on its neighbour (on the head's side),
    averaged over pairs, with the 95% bootstrap interval over pairs of that head's per-pair share (``score_lo``,
    ``score_hi`` of :func:`headlab.measures.order.order_heads`). The registered claim says "clean" means more than
    half of the attention (its ``null``), so the rule asks the adjusted interval to lie above 50%.
    """
    ranked = order_table.sort_values("rank")
    top = ranked.iloc[0]
    clean = int((ranked["score"] > 0.5).sum())
    label = f"L{int(top['layer'])}H{int(top['head'])}"
    side = "previous" if top.direction == "prev" else "next"
    reason = (
        f"The clearest head, {label}, puts {top.score:.1%} of each token's attention on the {side} token, "
        f"averaged over {int(top.n_examples)} pairs; {clean} of {len(ranked)} heads put more than half on one "
        "neighbour on average. The head is picked on the same pairs its share is measured on. Whether such "
        "heads carry word order is the masking test"
    )
    if "score_lo" not in ranked:
        return [
            Claim.not_measured(
                CLEAN_DIAGONAL,
                unit=DIAGONAL,
                reason=f"{reason}; its per-pair shares were not kept, so it has no interval",
            )
        ]
    return [
        Claim.measured(
            CLEAN_DIAGONAL,
            ours=float(top.score),
            lo=float(top.score_lo),
            hi=float(top.score_hi),
            unit=DIAGONAL,
            method="bootstrap over pairs of that head's per-pair share",
            n_examples=int(top.n_examples),
            reason=reason,
        )
    ]


def verdict_order_heads(
    order_table: pd.DataFrame, k: int, mean_tokens: float | None = None, rows: list[Claim] | None = None
) -> str:
    """Markdown: are there heads with a clean previous/next-token pattern (``rows``, default
    :func:`order_heads_claims`), and how clean are the k selected ones?"""
    ranked = order_table.sort_values("rank")
    top, selected = ranked.iloc[0], ranked.head(k)
    uniform = f" (spread evenly, a token would give each neighbour about {1 / mean_tokens:.0%})" if mean_tokens else ""
    return "\n".join(
        [
            render(order_heads_claims(order_table) if rows is None else rows),
            f"- The clearest order head, L{int(top['layer'])}H{int(top['head'])}, puts {top.score:.0%} of each token's "
            f"attention on the {'previous' if top.direction == 'prev' else 'next'} token{uniform}.",
            f"- The {k} selected heads (the study masked {STUDY_K}) put between {selected['score'].min():.0%} and "
            f"{selected['score'].max():.0%} on a neighbour ({(selected['direction'] == 'prev').sum()} look back, "
            f"{(selected['direction'] == 'next').sum()} ahead), averaged over {int(top.n_examples)} pairs.",
        ]
    )


def shuffle_claims(by_grade: pd.DataFrame, scale: GradeScale) -> list[Claim]:
    """The study's pair lost grades when its title was shuffled: does shuffling lower the grade over the whole set?

    Ours is the mean change of the expected grade over the pairs whose title changed order, with its 95% bootstrap
    interval over pairs. The study's −2 is the argmax grade its one pair lost: another unit, so it is kept with its
    own (``study_unit``) and never put beside ours as the same number. The claim asks a direction, not a size
    (:mod:`headlab.judging.sizes`), so it is judged on any ``scale``; the reason names the scale its grades run on.
    """
    total = _record(by_grade, "grade", "all")
    return [
        Claim.measured(
            SHUFFLE_LOWERS_GRADE,
            ours=float(total.shift),
            lo=float(total.lo),
            hi=float(total.hi),
            unit=GRADE_SHIFT,
            method="bootstrap over pairs",
            n_examples=int(total.n_examples),
            study=float(STUDY_SHIFT),
            study_unit=STUDY_GRADE_SHIFT,
            reason=(
                f"Ours: the mean change of the expected grade (grades run {scale.first} to {scale.last}) over the "
                f"{int(total.n_examples)} "
                f"pairs whose title changed order, from {total.expected:.3f} to {total.expected_shuffled:.3f}. The "
                f"study's {STUDY_SHIFT:+d} is the argmax grade its one example pair lost, not a mean over pairs, so "
                "the two are not the same number"
            ),
        )
    ]


def verdict_shuffle(
    by_grade: pd.DataFrame, shares: pd.DataFrame, scale: GradeScale, rows: list[Claim] | None = None
) -> str:
    """Markdown: how far shuffling the title moves the grades (``rows``, default :func:`shuffle_claims`), beside the
    study's 4 -> 2; the pairs of the scale's two highest grades apart."""
    total = _record(by_grade, "grade", "all")
    high = by_grade[by_grade["grade"].isin([str(g) for g in scale.grades[-2:]])]
    moved = _grade_change(shares)
    lines = [
        render(shuffle_claims(by_grade, scale) if rows is None else rows),
        f"- The grade distributions with the original and the shuffled title differ by a total variation of "
        f"{total.tv:.3g} per pair on average.",
    ]
    for r in high.itertuples():
        lines.append(
            f"- Pairs of gold grade {r.grade} ({r.n_examples}): expected grade {r.expected:.2f} -> "
            f"{r.expected_shuffled:.2f}, a shift of {r.shift:+.3g} [{r.lo:+.3g}, {r.hi:+.3g}]."
        )
    lines.append(
        f"- The histogram of predicted grades over the set: {moved:.1%} of the pairs change bins on balance "
        "between the original and the shuffled titles."
    )
    return "\n".join(lines)


def _record(table: pd.DataFrame, column: str, value):
    """The row where ``column == value``, as a named tuple (a Series would hide fields like ``shift`` behind
    methods)."""
    return next(table[table[column] == value].itertuples(index=False))


def _grade_change(shares: pd.DataFrame) -> float:
    wide = shares.pivot(index="grade", columns="condition", values="share")
    return float(0.5 * (wide["original"] - wide["shuffled"]).abs().sum())


def _sensitivity(conditions: pd.DataFrame):
    """The total-variation rows of the three conditions: no mask, order heads, random heads."""
    tv = conditions[conditions["measure"] == "tv"]
    return tuple(_record(tv, "condition", c) for c in ("no mask", "order heads", "random heads"))


def masking_claims(conditions: pd.DataFrame, tests: pd.DataFrame) -> list[Claim]:
    """The study's reading: masking the order heads, unlike masking as many random heads, makes the model stop
    noticing a shuffled title.

    A comparison (direction −1: less sensitive): ours is the pair-by-pair difference of sensitivity (order heads
    masked minus random heads masked, total variation), with its t interval over a two-stage bootstrap of draws and
    pairs (``df`` from the test table); where the order heads sit among the draws is told beside it, not judged.
    """
    _, order, rand = _sensitivity(conditions)
    test = _record(tests, "measure", "tv")
    draws = int(rand.n_draws)
    _, shuffled, order_masked, random_masked = STUDY_CASE_GRADES.values()
    return [
        Claim.measured(
            ORDER_HEADS_CARRY_ORDER,
            ours=float(test.difference),
            lo=float(test.difference_lo),
            hi=float(test.difference_hi),
            unit=TOTAL_VARIATION,
            method=DIFFERENCE_METHOD,
            n_examples=int(order.n_examples),
            n_draws=draws,
            df=float(test.df),
            reason=(
                f"Sensitivity to the shuffle (total variation between a pair's grade distributions with the original "
                f"and the shuffled title): {order.value:.3g} with the order heads masked, {rand.value:.3g} with random "
                f"heads of the same layers masked, averaged over {draws} draws (the study drew {STUDY_DRAWS}); "
                f"{int(test.n_as_insensitive)} of the {draws} draws leave the model at least as insensitive "
                f"(description, not the verdict). The study's shuffled pair went from grade {shuffled} to "
                f"{order_masked} with the order heads masked and stayed at {random_masked} with random heads"
            ),
        )
    ]


DIFFERENCE_METHOD = (
    "order heads minus the mean of the random draws, t interval on a two-stage bootstrap over draws and pairs "
    "(Welch–Satterthwaite degrees of freedom)"
)


def verdict_masking(conditions: pd.DataFrame, tests: pd.DataFrame, k: int, rows: list[Claim] | None = None) -> str:
    """Markdown: is the model less sensitive to the shuffle with the k order heads masked than with k random ones
    (``rows``, default :func:`masking_claims`)? Then the sensitivities behind the verdict.

    The random heads are depth-matched (one from each order head's layer).
    """
    none, order, rand = _sensitivity(conditions)
    draws = int(rand.n_draws)

    def cut(value):
        return f"{1 - value / none.value:.0%}" if none.value > 0 else "n/a"

    return "\n".join(
        [
            render(masking_claims(conditions, tests) if rows is None else rows),
            f"- Sensitivity to the shuffle, measured as the total variation distance between a pair's grade "
            f"distributions with the original and the shuffled title, averaged over {int(none.n_examples)} pairs: "
            f"{none.value:.4f} [{none.lo:.3g}, {none.hi:.3g}] with no mask; {order.value:.3g} "
            f"[{order.lo:.3g}, {order.hi:.3g}] with the {k} order heads masked (a cut of {cut(order.value)}); "
            f"{rand.value:.3g} [{rand.lo:.3g}, {rand.hi:.3g}] with {k} random other heads of the same layers masked "
            f"(depth-matched: one from each order head's layer), averaged over {draws} draws "
            f"(a cut of {cut(rand.value)}; 95% of draws between {rand.draw_lo:.3g} and {rand.draw_hi:.3g}; "
            f"its interval resamples the draws as well as the pairs).",
        ]
    )


def case_grades(cases: pd.DataFrame, example: int) -> pd.DataFrame:
    """The study's four grades beside one example's predicted and expected grades."""
    row = cases.set_index("example").loc[example]
    shorts = ("original", "shuffled", "order", "random")
    return pd.DataFrame(
        [
            {
                "condition": c,
                "study_grade": STUDY_CASE_GRADES[c],
                "predicted_grade": int(row[f"predicted_{s}"]),
                "expected_grade": float(row[f"expected_{s}"]),
            }
            for c, s in zip(CONDITIONS, shorts)
        ]
    )


def case_thresholds(scale: GradeScale, min_grade: int | None, min_drop: int | None) -> tuple[int, int]:
    """The page's MIN_GRADE and MIN_DROP on the data's ``scale``: where not given, the scale's second-highest grade
    (the study's 4 of 1-5) and a fall of 2 grades (the study's 4 -> 2), or the scale's whole span where it has fewer."""
    return (
        scale.last - 1 if min_grade is None else int(min_grade),
        min(2, scale.count - 1) if min_drop is None else int(min_drop),
    )


def verdict_case(shares: pd.DataFrame, grades: pd.DataFrame, pattern: str, scale: GradeScale) -> str:
    """Markdown: how many pairs follow the study's case, and how the example shown behaves. No claim row: the study
    shows its pair as an illustration and does not claim it is typical (and pairs graded below MIN_GRADE could not
    follow it). Its grades are the study's 1-5: on another ``scale`` the case is said to be not comparable."""
    counts = shares.set_index("pattern")
    funnel = "; ".join(
        f"{PATTERNS[p]}: {int(r['count'])} ({r['share']:.1%}, [{r['lo']:.1%}, {r['hi']:.1%}])"
        for p, r in counts.iterrows()
    )
    ours = " -> ".join(str(g) for g in grades["predicted_grade"])
    study = " -> ".join(str(g) for g in grades["study_grade"])
    if pattern == "study_like":
        shown = "shows the study's whole pattern"
    elif pattern == "none":
        shown = "is the pair whose expected grade falls most (no pair has a high gold and predicted grade)"
    else:
        shown = f'goes as far as "{PATTERNS[pattern].removeprefix("... ")}" (no pair goes further)'
    other_scale = (
        []
        if scale.is_study
        else [
            f"- Not comparable: the study's case is told in its {STUDY_SCALE} (4 -> 2 -> 3 -> 2), the data's are "
            f"{scale}; the counts below follow the page's MIN_GRADE and MIN_DROP on them."
        ]
    )
    return "\n".join(
        [
            *other_scale,
            f"- Of {int(counts['n_examples'].iloc[0])} pairs: {funnel}.",
            f"- The pair shown {shown}: original -> shuffled -> shuffled with order heads masked -> "
            f"shuffled with random heads masked is {ours} here, {study} in the study.",
        ]
    )


def shown_case(
    cases: pd.DataFrame, changed, encodings: tuple[Encoded, ...], max_tokens: int, case: int | None = None
) -> tuple[int, str, pd.DataFrame]:
    """``(example, pattern, ranked)``: the pair the page shows, the deepest pattern of the study's case it follows,
    and the ``changed`` pairs short enough to read in every one of ``encodings`` (the original and the shuffled
    titles: at most ``max_tokens`` tokens each) ranked most like the study's case first (:func:`rank_cases`; every
    changed pair when none is that short). ``case`` (the page's CASE) overrides the choice."""
    short = [e for e in changed if all(len(encoded.input_ids[e]) <= max_tokens for encoded in encodings)]
    ranked = rank_cases(cases, short or changed)
    example = int(ranked["example"].iloc[0]) if case is None else int(case)
    return example, str(rank_cases(cases).set_index("example").loc[example, "pattern"]), ranked


def pair_maps(lab: Lab, example: int, encodings: dict[str, Encoded]) -> dict[str, tuple[np.ndarray, list[str]]]:
    """One pair's attention (layers, heads, tokens, tokens) and its tokens, under each named encoding of the
    split (its original and its shuffled titles)."""
    shown = {}
    for name, encoded in encodings.items():
        _, maps = next(iter(lab.attention([example], encoded=encoded)))
        shown[name] = (maps, lab.tokenizer.convert_ids_to_tokens(encoded.input_ids[example]))
    return shown


# --- the shuffle and its sweeps -----------------------------------------------------------------------------


@dataclass
class Shuffle:
    """The pairs with their titles' words shuffled (``frame``: the lab's pairs, ``title`` shuffled and ``changed``
    where the order moved; ``encoded``: tokenized), the pairs that changed, and what the page's masks did on both
    titles (``effects``: :func:`headlab.measures.order.shuffle_effects`, one row per mask and pair)."""

    frame: pd.DataFrame
    encoded: Encoded
    changed: np.ndarray
    effects: pd.DataFrame
    n_masks: int

    def note(self, draws: int) -> str:
        """What ran, in one sentence."""
        return (
            f"{len(self.changed)} of {len(self.frame)} titles changed order; {self.n_masks} masks (none, the order "
            f"heads, {draws} random sets), each on the original and on the shuffled titles."
        )


def shuffle_titles(lab: Lab, ranked: pd.DataFrame, k: int, draws: int, seed: int) -> Shuffle:
    """Shuffle every title's words (seeded; Chinese titles cut into words by the named segmenter), then sweep the
    page's masks (none, the top ``k`` order heads of ``ranked``, ``draws`` random sets of heads of the same layers) on
    the original and on the shuffled titles, each saved mask by mask and resumed."""
    frame = shuffled_frame(lab.frame, seed, segment=word_segmenter(lab.frame["title"]))
    encoded = encode(lab.tokenizer, frame, lab.scale)
    layers, heads = lab.shape
    specs = order_mask_specs(ranked, k, draws, seed, layers, heads)
    original = lab.sweep(specs, "order_original")
    shuffled = lab.sweep(specs, f"order_shuffled_seed{seed}", encoded=encoded)
    effects = shuffle_effects(original, shuffled, plan_table(specs))
    return Shuffle(frame, encoded, np.flatnonzero(frame["changed"].to_numpy()), effects, len(specs))
