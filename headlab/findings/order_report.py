"""Finding 4, word-order heads: our numbers beside the study's case, in words.

The study showed one pair: query "京东小哥", title "京东小哥最近在干什么", grade 4; title shuffled, grade 2;
shuffled with its 7 order heads masked, grade 3; shuffled with 7 random heads masked (100 draws), still 2.
Each verdict here reads the tables of :mod:`headlab.findings.order`, measured over a whole test set; the random heads
there are depth-matched (drawn from the order heads' layers).
"""
from __future__ import annotations

import math

import pandas as pd

from headlab.core.stats import empirical_p_floor, undecidable
from headlab.findings.order import CONDITIONS, PATTERNS

STUDY_K = 7
STUDY_DRAWS = 100
STUDY_CASE_GRADES = dict(zip(CONDITIONS, (4, 2, 3, 2)))
CLEAN = 0.5  # a "clean" shifted diagonal: more than half of a token's attention on one neighbour
ALPHA = 0.05  # the empirical p-value must fall below this


def verdict_order_heads(order_table: pd.DataFrame, k: int, mean_tokens: float | None = None) -> str:
    """Markdown: are there heads with a clean previous/next-token pattern, and how clean are the k selected ones?"""
    ranked = order_table.sort_values("rank")
    top, selected = ranked.iloc[0], ranked.head(k)
    clean = ranked[ranked["score"] > CLEAN]
    uniform = f" (spread evenly, a token would give each neighbour about {1 / mean_tokens:.0%})" if mean_tokens else ""
    lines = [f"- The clearest order head, L{int(top['layer'])}H{int(top['head'])}, puts {top.score:.0%} of each token's "
             f"attention on the {'previous' if top.direction == 'prev' else 'next'} token{uniform}; "
             f"{len(clean)} of {len(ranked)} heads put more than {CLEAN:.0%} on one neighbour.",
             f"- The {k} selected heads (the study masked {STUDY_K}) put between {selected['score'].min():.0%} and "
             f"{selected['score'].max():.0%} on a neighbour ({(selected['direction'] == 'prev').sum()} look back, "
             f"{(selected['direction'] == 'next').sum()} ahead), averaged over {int(top.n_examples)} pairs."]
    found = "holds" if len(clean) else "holds only weakly"
    lines.append(f"- **Verdict:** the study's observation, that some heads show a clean shifted diagonal, {found} here "
                 f"({len(clean)} heads above {CLEAN:.0%}). Whether they *carry* word order is the masking test below.")
    return "\n".join(lines)


def verdict_shuffle(by_grade: pd.DataFrame, shares: pd.DataFrame) -> str:
    """Markdown: how far shuffling the title moves the grades, beside the study's 4 -> 2."""
    total = _record(by_grade, "grade", "all")
    high = by_grade[by_grade["grade"].isin(["4", "5"])]
    moved = _grade_change(shares)
    lines = [f"- Over {int(total.n_examples)} pairs whose title changed order, shuffling moves the expected grade by "
             f"{total.shift:+.3g} [{total.lo:+.3g}, {total.hi:+.3g}] on average (grades run 1 to 5; the study's case lost "
             f"2 grades), and the grade distributions differ by a total variation of {total.tv:.3g} per pair."]
    for r in high.itertuples():
        lines.append(f"- Pairs of gold grade {r.grade} ({r.n_examples}): expected grade {r.expected:.2f} -> "
                     f"{r.expected_shuffled:.2f}, a shift of {r.shift:+.3g} [{r.lo:+.3g}, {r.hi:+.3g}].")
    lines.append(f"- The histogram of predicted grades over the set: {moved:.1%} of the pairs change bins on balance "
                 "between the original and the shuffled titles.")
    if total.hi < 0:
        size = "a small" if abs(total.shift) < 0.25 else "a clear"
        lines.append(f"- **Verdict:** shuffling lowers the grade measurably, by {size} amount: the model uses word "
                     "order somewhat, far from the study's case on average.")
    elif total.lo > 0:
        lines.append("- **Verdict:** shuffling *raises* the grade on average here, unlike the study's case.")
    else:
        lines.append("- **Verdict:** no average effect of shuffling distinguishable from zero: the model grades the "
                     "shuffled titles as it grades the originals.")
    return "\n".join(lines)


def _record(table: pd.DataFrame, column: str, value):
    """The row where ``column == value``, as a named tuple (a Series would hide fields like ``shift`` behind methods)."""
    return next(table[table[column] == value].itertuples(index=False))


def _grade_change(shares: pd.DataFrame) -> float:
    wide = shares.pivot(index="grade", columns="condition", values="share")
    return float(0.5 * (wide["original"] - wide["shuffled"]).abs().sum())


def verdict_masking(conditions: pd.DataFrame, tests: pd.DataFrame, k: int) -> str:
    """Markdown: is the model markedly less sensitive to the shuffle with the k order heads masked than with k random ones?

    The random heads are depth-matched (one from each order head's layer). With too few draws the empirical
    p-value cannot fall below :data:`ALPHA` whatever the model does, and the verdict says so instead of reading it.
    """
    tv = conditions[conditions["measure"] == "tv"]
    none, order, rand = (_record(tv, "condition", c) for c in ("no mask", "order heads", "random heads"))
    test = _record(tests, "measure", "tv")
    draws = int(rand.n_draws)
    floor = empirical_p_floor(draws)

    def cut(value):
        return f"{1 - value / none.value:.0%}" if none.value > 0 else "n/a"

    lines = [
        f"- Sensitivity to the shuffle, measured as the total variation distance between a pair's grade distributions "
        f"with the original and the shuffled title, averaged over {int(none.n_examples)} pairs: {none.value:.4f} "
        f"[{none.lo:.3g}, {none.hi:.3g}] with no mask; {order.value:.3g} [{order.lo:.3g}, {order.hi:.3g}] with the "
        f"{k} order heads masked (a cut of {cut(order.value)}); {rand.value:.3g} [{rand.lo:.3g}, {rand.hi:.3g}] with {k} "
        f"random other heads of the same layers masked (depth-matched: one from each order head's layer), averaged "
        f"over {draws} draws (a cut of {cut(rand.value)}; 95% of draws between {rand.draw_lo:.3g} and "
        f"{rand.draw_hi:.3g}; its interval resamples the draws as well as the pairs).",
        f"- Order heads minus random heads, pair by pair: {test.difference:+.3g} [{test.difference_lo:+.3g}, "
        f"{test.difference_hi:+.3g}]. {round(test.p_value * (draws + 1)) - 1} of the {draws} random draws leave the model "
        f"at least as insensitive as the order heads do: empirical one-sided p = {test.p_value:.3f} (the smallest "
        f"possible with {draws} draws is {floor:.3f}; the study drew {STUDY_DRAWS}).",
    ]
    if floor >= ALPHA:
        lines.append(f"- **Verdict:** {undecidable(draws, ALPHA)}: even if no random set did as much, p would not be "
                     f"below {ALPHA}. Raise RANDOM_DRAWS to at least {math.floor(1 / ALPHA)}.")
    elif test.p_value < ALPHA and test.difference_hi < 0:
        strength = "markedly " if order.value < 0.5 * rand.value else ""
        lines.append(f"- **Verdict:** masking the order heads makes the model {strength}less sensitive to the shuffled "
                     "title than masking as many random heads of the same layers does, as the study found.")
    elif test.difference_hi < 0:
        lines.append("- **Verdict:** masking the order heads lowers the sensitivity more than random heads of the same "
                     "layers on average over pairs, but some random draws do as much: not the clear separation the "
                     "study's case suggests.")
    else:
        lines.append("- **Verdict:** masking the order heads does **not** make the model less sensitive to the shuffle "
                     "than masking random heads of the same layers: the study's reading is not supported here.")
    return "\n".join(lines)


def case_grades(cases: pd.DataFrame, example: int) -> pd.DataFrame:
    """The study's four grades beside one example's predicted and expected grades."""
    row = cases.set_index("example").loc[example]
    shorts = ("original", "shuffled", "order", "random")
    return pd.DataFrame([{"condition": c, "study_grade": STUDY_CASE_GRADES[c], "predicted_grade": int(row[f"predicted_{s}"]),
                          "expected_grade": float(row[f"expected_{s}"])} for c, s in zip(CONDITIONS, shorts)])


def verdict_case(shares: pd.DataFrame, grades: pd.DataFrame, pattern: str) -> str:
    """Markdown: how common the study's case is here, and how the example shown behaves."""
    counts = shares.set_index("pattern")
    n = int(counts["n_examples"].iloc[0])
    funnel = "; ".join(f"{PATTERNS[p]}: {int(r['count'])} ({r['share']:.1%}, [{r['lo']:.1%}, {r['hi']:.1%}])"
                       for p, r in counts.iterrows())
    ours = " -> ".join(str(g) for g in grades["predicted_grade"])
    study = " -> ".join(str(g) for g in grades["study_grade"])
    full = counts.loc["study_like"]
    if pattern == "study_like":
        shown = "shows the study's whole pattern"
    elif pattern == "none":
        shown = "is the pair whose expected grade falls most (no pair has a high gold and predicted grade)"
    else:
        shown = f"goes as far as \"{PATTERNS[pattern].removeprefix('... ')}\" (no pair goes further)"
    lines = [f"- Of {n} pairs: {funnel}.",
             f"- The pair shown {shown}: original -> shuffled -> shuffled with order heads masked -> shuffled with "
             f"random heads masked is {ours} here, {study} in the study."]
    if full["count"] == 0:
        lines.append("- **Verdict:** no pair behaves like the study's case here; the study's example is not typical of "
                     "this model and data.")
    elif full["share"] < 0.1:
        lines.append(f"- **Verdict:** {full['share']:.1%} of pairs behave like the study's case: such a case can be "
                     "found, but it is the exception, not the rule, and one example says little about the model.")
    else:
        lines.append(f"- **Verdict:** {full['share']:.1%} of pairs behave like the study's case: it is common here.")
    return "\n".join(lines)
