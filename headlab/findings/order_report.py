"""Finding 4, word-order heads: our numbers beside the study's case, in words.

The study showed one pair: query "京东小哥", title "京东小哥最近在干什么", grade 4; title shuffled, grade 2;
shuffled with its 7 order heads masked, grade 3; shuffled with 7 random heads masked (100 draws), still 2.
Each part of the page judges one claim of the study on the tables of :mod:`headlab.findings.order`, measured over a
whole test set, as :class:`~headlab.findings.claims.Claim` rows (``*_claims``); its verdict is those rows rendered,
then the numbers behind them. The random heads there are depth-matched (drawn from the order heads' layers).
"""
from __future__ import annotations

import math

import pandas as pd

from headlab.core.stats import empirical_p_floor, undecidable
from headlab.findings.claims import Claim, claims_table, render  # noqa: F401  (notebook 04 takes claims_table here)
from headlab.findings.order import CONDITIONS, PATTERNS

STUDY_K = 7
STUDY_DRAWS = 100
STUDY_CASE_GRADES = dict(zip(CONDITIONS, (4, 2, 3, 2)))
STUDY_SHIFT = STUDY_CASE_GRADES[CONDITIONS[1]] - STUDY_CASE_GRADES[CONDITIONS[0]]  # its one pair, shuffled: 4 -> 2
CLEAN = 0.5  # a "clean" shifted diagonal: more than half of a token's attention on one neighbour
ALPHA = 0.05  # the empirical p-value must fall below this
SMALL_SHIFT = 0.25  # a mean shift of the expected grade smaller than this (in grades) is small
COMMON = 0.1  # the study's case is common here when at least this share of the pairs behaves like it
FINDING = "04 word order"
NAN = float("nan")


def order_heads_claims(order_table: pd.DataFrame) -> list[Claim]:
    """The study's observation that some heads show a clean shifted diagonal, judged on every head's order score.

    It holds when at least one head puts more than :data:`CLEAN` of a token's attention on one neighbour, and does
    not hold otherwise. The number is the clearest head's score: a mean over pairs, which has no interval.
    """
    ranked = order_table.sort_values("rank")
    top = ranked.iloc[0]
    clean = int((ranked["score"] > CLEAN).sum())
    return [Claim("word_order.clean_diagonal", FINDING, "Some heads show a clean shifted diagonal (attention on the "
                  "previous or the next token)", None, float(top.score), NAN, NAN,
                  "share of a token's attention on one neighbour, clearest head", int(top.n_examples), 1, None,
                  "holds" if clean else "does not hold",
                  f"{clean} of {len(ranked)} heads put more than {CLEAN:.0%} of a token's attention on one neighbour "
                  f"(the rule for a clean diagonal); shown: the clearest head, "
                  f"L{int(top['layer'])}H{int(top['head'])}, averaged over {int(top.n_examples)} pairs. Whether such "
                  "heads carry word order is the masking test.")]


def verdict_order_heads(order_table: pd.DataFrame, k: int, mean_tokens: float | None = None) -> str:
    """Markdown: are there heads with a clean previous/next-token pattern (:func:`order_heads_claims`), and how clean
    are the k selected ones?"""
    ranked = order_table.sort_values("rank")
    top, selected = ranked.iloc[0], ranked.head(k)
    uniform = f" (spread evenly, a token would give each neighbour about {1 / mean_tokens:.0%})" if mean_tokens else ""
    return "\n".join([
        render(order_heads_claims(order_table)),
        f"- The clearest order head, L{int(top['layer'])}H{int(top['head'])}, puts {top.score:.0%} of each token's "
        f"attention on the {'previous' if top.direction == 'prev' else 'next'} token{uniform}.",
        f"- The {k} selected heads (the study masked {STUDY_K}) put between {selected['score'].min():.0%} and "
        f"{selected['score'].max():.0%} on a neighbour ({(selected['direction'] == 'prev').sum()} look back, "
        f"{(selected['direction'] == 'next').sum()} ahead), averaged over {int(top.n_examples)} pairs."])


def shuffle_claims(by_grade: pd.DataFrame) -> list[Claim]:
    """The study's pair lost grades when its title was shuffled: does shuffling lower the grade over the whole set?

    Ours is the mean shift of the expected grade over the pairs whose title changed order, with its 95% bootstrap
    interval over pairs: it holds when the interval lies below 0, the opposite when above, and cannot be told
    otherwise. A shift smaller than :data:`SMALL_SHIFT` grades is called small.
    """
    total = _record(by_grade, "grade", "all")
    if total.hi < 0:
        size = "a small" if abs(total.shift) < SMALL_SHIFT else "a clear"
        state, why = "holds", (f"Shuffling lowers the grade measurably, by {size} amount: the model uses word order "
                               "somewhat, far from the study's case on average.")
    elif total.lo > 0:
        state, why = "opposite", "Shuffling raises the grade on average here, unlike the study's case."
    else:
        state, why = "cannot tell", "No average effect of shuffling distinguishable from zero: the interval contains 0."
    return [Claim("word_order.shuffle_lowers_grade", FINDING, "Shuffling a title's words lowers its grade",
                  float(STUDY_SHIFT), float(total.shift), float(total.lo), float(total.hi),
                  "grades, change of the expected grade", int(total.n_examples), 1, None, state,
                  f"{why} Ours: the mean change of the expected grade (grades run 1 to 5) over the "
                  f"{int(total.n_examples)} pairs whose title changed order, with its 95% bootstrap interval over "
                  "pairs; the study's: the grades its one pair lost.")]


def verdict_shuffle(by_grade: pd.DataFrame, shares: pd.DataFrame) -> str:
    """Markdown: how far shuffling the title moves the grades (:func:`shuffle_claims`), beside the study's 4 -> 2."""
    total = _record(by_grade, "grade", "all")
    high = by_grade[by_grade["grade"].isin(["4", "5"])]
    moved = _grade_change(shares)
    lines = [render(shuffle_claims(by_grade)),
             f"- The grade distributions with the original and the shuffled title differ by a total variation of "
             f"{total.tv:.3g} per pair on average."]
    for r in high.itertuples():
        lines.append(f"- Pairs of gold grade {r.grade} ({r.n_examples}): expected grade {r.expected:.2f} -> "
                     f"{r.expected_shuffled:.2f}, a shift of {r.shift:+.3g} [{r.lo:+.3g}, {r.hi:+.3g}].")
    lines.append(f"- The histogram of predicted grades over the set: {moved:.1%} of the pairs change bins on balance "
                 "between the original and the shuffled titles.")
    return "\n".join(lines)


def _record(table: pd.DataFrame, column: str, value):
    """The row where ``column == value``, as a named tuple (a Series would hide fields like ``shift`` behind methods)."""
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

    Ours is the pair-by-pair difference of sensitivity (total variation) with the order heads masked minus with random
    heads of the same layers masked, its interval resampling draws and pairs. It holds when the empirical one-sided
    p-value against the draws is below :data:`ALPHA` and the difference's interval lies below 0; it cannot be told
    when there are too few draws for p to fall below :data:`ALPHA` at all; it is the opposite when the interval lies
    above 0, and does not hold otherwise (a lower mean that some random draws match, or no lower mean).
    """
    _, order, rand = _sensitivity(conditions)
    test = _record(tests, "measure", "tv")
    draws = int(rand.n_draws)
    _, shuffled, order_masked, random_masked = STUDY_CASE_GRADES.values()
    if empirical_p_floor(draws) >= ALPHA:
        state, why = "cannot tell", (f"{undecidable(draws, ALPHA)}: even if no random set did as much, p would not "
                                     f"be below {ALPHA}. Raise RANDOM_DRAWS to at least {math.floor(1 / ALPHA)}.")
    elif test.p_value < ALPHA and test.difference_hi < 0:
        strength = "markedly " if order.value < 0.5 * rand.value else ""
        state, why = "holds", (f"Masking the order heads makes the model {strength}less sensitive to the shuffled "
                               "title than masking as many random heads of the same layers does, as the study found.")
    elif test.difference_hi < 0:
        state, why = "does not hold", ("Masking the order heads lowers the sensitivity more than random heads of the "
                                       "same layers on average over pairs, but some random draws do as much: not the "
                                       "clear separation the study's case suggests.")
    elif test.difference_lo > 0:
        state, why = "opposite", ("Masking the order heads leaves the model more sensitive to the shuffle than "
                                  "masking random heads of the same layers.")
    else:
        state, why = "does not hold", ("Masking the order heads does not make the model less sensitive to the shuffle "
                                       "than masking random heads of the same layers.")
    return [Claim("word_order.order_heads_carry_order", FINDING, "Masking the order heads makes the model less "
                  "sensitive to a shuffled title than masking as many random heads", None, float(test.difference),
                  float(test.difference_lo), float(test.difference_hi),
                  "total variation, order heads masked minus random heads masked", int(order.n_examples), draws,
                  float(test.p_value), state,
                  f"{why} Empirical one-sided p = {test.p_value:.3f} against {draws} depth-matched random draws "
                  f"(the study drew {STUDY_DRAWS}); the study's shuffled pair went from grade {shuffled} to "
                  f"{order_masked} with the order heads masked and stayed at {random_masked} with random heads.")]


def verdict_masking(conditions: pd.DataFrame, tests: pd.DataFrame, k: int) -> str:
    """Markdown: is the model markedly less sensitive to the shuffle with the k order heads masked than with k random
    ones (:func:`masking_claims`)? Then the sensitivities and the test behind the verdict.

    The random heads are depth-matched (one from each order head's layer). With too few draws the empirical
    p-value cannot fall below :data:`ALPHA` whatever the model does, and the verdict says so instead of reading it.
    """
    none, order, rand = _sensitivity(conditions)
    test = _record(tests, "measure", "tv")
    draws = int(rand.n_draws)

    def cut(value):
        return f"{1 - value / none.value:.0%}" if none.value > 0 else "n/a"

    return "\n".join([
        render(masking_claims(conditions, tests)),
        f"- Sensitivity to the shuffle, measured as the total variation distance between a pair's grade distributions "
        f"with the original and the shuffled title, averaged over {int(none.n_examples)} pairs: {none.value:.4f} "
        f"[{none.lo:.3g}, {none.hi:.3g}] with no mask; {order.value:.3g} [{order.lo:.3g}, {order.hi:.3g}] with the "
        f"{k} order heads masked (a cut of {cut(order.value)}); {rand.value:.3g} [{rand.lo:.3g}, {rand.hi:.3g}] with {k} "
        f"random other heads of the same layers masked (depth-matched: one from each order head's layer), averaged "
        f"over {draws} draws (a cut of {cut(rand.value)}; 95% of draws between {rand.draw_lo:.3g} and "
        f"{rand.draw_hi:.3g}; its interval resamples the draws as well as the pairs).",
        f"- {round(test.p_value * (draws + 1)) - 1} of the {draws} random draws leave the model at least as insensitive "
        f"as the order heads do (the smallest p possible with {draws} draws is {empirical_p_floor(draws):.3f})."])


def case_grades(cases: pd.DataFrame, example: int) -> pd.DataFrame:
    """The study's four grades beside one example's predicted and expected grades."""
    row = cases.set_index("example").loc[example]
    shorts = ("original", "shuffled", "order", "random")
    return pd.DataFrame([{"condition": c, "study_grade": STUDY_CASE_GRADES[c], "predicted_grade": int(row[f"predicted_{s}"]),
                          "expected_grade": float(row[f"expected_{s}"])} for c, s in zip(CONDITIONS, shorts)])


def case_claims(shares: pd.DataFrame) -> list[Claim]:
    """The study's one pair stands for the model: how many pairs follow its whole pattern
    (:func:`headlab.findings.order.case_shares`)?

    Ours is the share of pairs that do, with its exact binomial 95% interval. It holds when at least :data:`COMMON`
    of the pairs do, and does not hold when fewer do (none at all, or the exception, not the rule).
    """
    full = shares.set_index("pattern").loc["study_like"]
    n = int(full["n_examples"])
    if full["count"] == 0:
        state, why = "does not hold", ("No pair behaves like the study's case here; the study's example is not "
                                       "typical of this model and data.")
    elif full["share"] < COMMON:
        state, why = "does not hold", (f"{int(full['count'])} of {n} pairs behave like the study's case: such a case "
                                       "can be found, but it is the exception, not the rule, and one example says "
                                       "little about the model.")
    else:
        state, why = "holds", f"{int(full['count'])} of {n} pairs behave like the study's case: it is common here."
    return [Claim("word_order.case_is_typical", FINDING, "The study's case is typical: a shuffled title loses grades; "
                  "masking the order heads gives some back, masking random heads does not", None, float(full["share"]),
                  float(full["lo"]), float(full["hi"]), "share of pairs like the study's case", n, 1, None, state,
                  f"{why} The rule: common when at least {COMMON:.0%} of the pairs are.")]


def verdict_case(shares: pd.DataFrame, grades: pd.DataFrame, pattern: str) -> str:
    """Markdown: how common the study's case is here (:func:`case_claims`), and how the example shown behaves."""
    counts = shares.set_index("pattern")
    funnel = "; ".join(f"{PATTERNS[p]}: {int(r['count'])} ({r['share']:.1%}, [{r['lo']:.1%}, {r['hi']:.1%}])"
                       for p, r in counts.iterrows())
    ours = " -> ".join(str(g) for g in grades["predicted_grade"])
    study = " -> ".join(str(g) for g in grades["study_grade"])
    if pattern == "study_like":
        shown = "shows the study's whole pattern"
    elif pattern == "none":
        shown = "is the pair whose expected grade falls most (no pair has a high gold and predicted grade)"
    else:
        shown = f"goes as far as \"{PATTERNS[pattern].removeprefix('... ')}\" (no pair goes further)"
    return "\n".join([
        render(case_claims(shares)),
        f"- Of {int(counts['n_examples'].iloc[0])} pairs: {funnel}.",
        f"- The pair shown {shown}: original -> shuffled -> shuffled with order heads masked -> shuffled with random "
        f"heads masked is {ours} here, {study} in the study."])
