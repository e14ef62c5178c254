"""Finding 6, fine-tuning sharpens term matching: the same heads' attention before and after fine-tuning.

The study read three changes off difference maps (after minus before fine-tuning) of one pair: attention
between identical query/title terms rises, a term's attention to itself falls, attention to ``[SEP]`` (read
as "no-op") falls. Here each change is a mean over the test pairs, per head, paired by pair, with a 95% bootstrap
interval (pairs resampled), for the term-matching heads and for all heads. ``[CLS]`` is reported too: many heads of
small BERTs park attention on ``[CLS]`` rather than ``[SEP]``, so either token can be the no-op.

*Choose on one part, measure on the other.* The term-matching heads are the heads that score highest on
``match_excess`` on the fine-tuned model: ranked on the same pairs their rise is measured on, a head that matches
well on those pairs by chance would be both chosen and credited. So the pairs are split in two seeded halves
(:func:`split_pairs`): the heads are chosen on one (:func:`choose_heads`, notebook 05's rule: the ``k`` lower-half
heads with the highest score), and every change is measured on the other (:func:`deltas` with ``measure``).

Each claimed change becomes a :class:`headlab.findings.claims.Claim` row (:func:`claims`), judged by
:func:`headlab.findings.claims.judge`: the term-matching heads' row carries the registered id, the all-heads row
and the ``match_excess`` rows are sub-rows of it (``<id>/all_heads``, ``<id>/excess``, ``<id>/excess_all_heads``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from headlab.findings.claims import Claim, render
from headlab.findings.roles import paired_delta, rank_heads
from headlab.findings.segmentation import group_split


@dataclass(frozen=True)
class Change:
    """An attention share whose change with fine-tuning the page measures, and the claim row it answers."""

    claim_id: str  # the row of the term-matching heads ("" for a share the study did not claim)
    text: str
    metric: str  # a role column of headlab.findings.roles
    expected: int  # +1 rises, -1 falls, 0 not claimed by the study (reported for context)
    main: bool = True  # the registered claim's own row (else a sub-row, with ``text`` as its claim)


CHANGES = [
    Change(
        "sharpening.match_rises", "Attention between identical query/title terms rises with fine-tuning", "match", +1
    ),
    Change(
        "sharpening.match_rises/excess",
        "Attention between identical query/title terms rises with fine-tuning "
        "beyond what identity-blind attention on the other sentence gives",
        "match_excess",
        +1,
        main=False,
    ),
    Change("sharpening.self_falls", "Attention of a term to itself falls with fine-tuning", "self", -1),
    Change("sharpening.sep_falls", "Attention to [SEP] (the study's no-op) falls with fine-tuning", "sep", -1),
    Change("", "Attention to [CLS] (not in the study)", "cls", 0),
]
SCOPES = {"subset": "term-matching heads", "all": "all heads"}
UNIT = "change of attention share, after minus before"
METHOD = "paired bootstrap over the measuring half's test pairs"


def split_pairs(examples, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(choose, measure)``: the pairs ``examples`` (example ids) split in two seeded halves, sorted and disjoint.

    The heads are chosen on ``choose`` (:func:`choose_heads`) and every change is measured on ``measure`` only.
    """
    examples = np.unique(np.asarray(examples))
    if len(examples) < 2:
        raise ValueError(f"two halves need at least 2 pairs, got {len(examples)}")
    measure = group_split(examples, 0.5, seed)
    return examples[~measure], examples[measure]


def choose_heads(after: pd.DataFrame, choose, k: int, among_layers=None, by: str = "match_excess"):
    """The ``k`` heads (of ``among_layers``) with the highest mean ``by`` on the fine-tuned model over the pairs
    ``choose`` only (notebook 05's rule, :func:`headlab.findings.roles.rank_heads`): ``(heads, rows)``."""
    rows = after[after["example"].isin(np.asarray(choose))]
    if rows.empty:
        raise ValueError("no pair to choose the heads on")
    scores = rows.groupby(["layer", "head"])[by].mean().reset_index()  # pandas means skip NaN, as summarize_roles
    return rank_heads(scores, by, among_layers=among_layers, k=k)


def deltas(
    before: pd.DataFrame, after: pd.DataFrame, heads, measure=None, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """:func:`headlab.findings.roles.paired_delta` for every change's metric, stacked: per head, and over ``heads`` and
    all heads, on the pairs ``measure`` only (all pairs of the tables when None).

    ``before`` / ``after`` are per-example role tables of the pretrained encoder and the fine-tuned model
    on the same examples (``role_scores(..., per_example=True)``). ``matching`` marks the per-head rows of
    ``heads``.
    """
    if measure is not None:
        keep = np.asarray(measure)
        before, after = before[before["example"].isin(keep)], after[after["example"].isin(keep)]
    table = pd.concat(
        [paired_delta(before, after, c.metric, n_boot=n_boot, seed=seed, heads=heads) for c in CHANGES],
        ignore_index=True,
    )
    chosen = {(int(l), int(h)) for l, h in heads}
    table["matching"] = [
        scope == "head" and (int(l), int(h)) in chosen
        for scope, l, h in zip(table["scope"], table["layer"], table["head"])
    ]
    return table


def scope_changes(delta_table: pd.DataFrame) -> pd.DataFrame:
    """Each change for the two groups of heads (term-matching heads, all heads): one row per change and scope.

    The rows of :func:`deltas` that the claims and the chart read, with the claim's text, the direction the study
    gave (``expected``) and ``relative`` = delta / before, the change as a share of its level before fine-tuning.
    """
    rows = []
    for change in CHANGES:
        for scope, scope_label in SCOPES.items():
            found = delta_table[(delta_table["metric"] == change.metric) & (delta_table["scope"] == scope)]
            if found.empty:
                continue
            r = found.iloc[0]
            relative = r["delta"] / r["before"] if r["before"] else float("nan")
            rows.append(
                [
                    change.text,
                    change.metric,
                    scope_label,
                    {1: "rises", -1: "falls", 0: "-"}[change.expected],
                    r["before"],
                    r["after"],
                    r["delta"],
                    r["lo"],
                    r["hi"],
                    relative,
                    r["n_examples"],
                ]
            )
    return pd.DataFrame(
        rows,
        columns=[
            "claim",
            "metric",
            "scope",
            "expected",
            "before",
            "after",
            "delta",
            "lo",
            "hi",
            "relative",
            "n_examples",
        ],
    )


def row_id(change: Change, scope: str) -> str:
    """A change's row id for a scope: the term-matching heads' row is ``change.claim_id``; the all-heads row its
    sub-row ``/all_heads`` (``_all_heads`` after a sub-row's part, e.g. ``sharpening.match_rises/excess_all_heads``)."""
    if scope == SCOPES["subset"]:
        return change.claim_id
    return change.claim_id + ("_all_heads" if "/" in change.claim_id else "/all_heads")


def _claim_text(change: Change, scope: str) -> str | None:
    """The row's claim sentence: the registered one for the main row, the change's own naming its scope otherwise."""
    if change.main and scope == SCOPES["subset"]:
        return None
    return f"{change.text} ({scope})"


def _reason(r, chosen_on: int | None) -> str:
    """The evidence of a row, in words: the levels, the change as a share of its level, the pairs, how heads were
    chosen (no verdict: :func:`headlab.findings.claims.judge` gives it)."""
    if r["scope"] == SCOPES["subset"]:
        chosen = (
            f" The heads were chosen by their score on the fine-tuned model over the other {chosen_on} pairs, "
            "none of which is measured here."
            if chosen_on
            else " The heads were chosen on the same pairs (no held-out choice)."
        )
    else:
        chosen = " Every head, so no choice of heads is involved."
    return (
        f"Mean over {int(r['n_examples'])} measuring pairs, {r['scope']}: {r['before']:.3f} → {r['after']:.3f}, "
        f"a change of {r['delta']:+.4f} ({r['relative']:+.1%} of its level before fine-tuning); 95% paired "
        f"bootstrap interval, pairs resampled.{chosen}"
    )


def _claim(change: Change, scope: str, changes: pd.DataFrame, chosen_on: int | None) -> Claim:
    claim_id, claim = row_id(change, scope), _claim_text(change, scope)
    found = changes[(changes["metric"] == change.metric) & (changes["scope"] == scope)]
    if found.empty or not math.isfinite(found.iloc[0]["delta"]):
        return Claim.not_measured(
            claim_id,
            reason=f"Not measured: no change of {change.metric} for the {scope} (no "
            "such heads, or no pair to measure it on)",
            unit=UNIT,
            claim=claim,
        )
    r = found.iloc[0]
    return Claim.measured(
        claim_id,
        ours=float(r["delta"]),
        lo=float(r["lo"]),
        hi=float(r["hi"]),
        unit=UNIT,
        method=METHOD,
        n_examples=int(r["n_examples"]),
        reason=_reason(r, chosen_on),
        claim=claim,
    )


def claims(changes: pd.DataFrame, chosen_on: int | None = None) -> list[Claim]:
    """The study's three changes as rows: per claimed change, the term-matching heads and all heads.

    ``changes`` is :func:`scope_changes` of the measuring pairs; ``chosen_on`` the number of pairs (disjoint from them)
    the heads were chosen on. The study gave no numbers, so ``study`` is empty; the verdict is
    :func:`headlab.findings.claims.judge`'s, an effect in the study's direction.
    """
    return [
        _claim(change, scope, changes, chosen_on) for change in CHANGES if change.expected for scope in SCOPES.values()
    ]


def no_op_table(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Where heads park attention: per model, mean attention of a term on [CLS], on the [SEP]s and on itself.

    Means over examples and heads; ``heads_cls_over_sep`` counts heads whose mean [CLS] attention exceeds
    their mean [SEP] attention (the likelier no-op token of that head).
    """
    rows = []
    for model, table in (("pretrained", before), ("fine-tuned", after)):
        per_head = table.groupby(["layer", "head"])[["cls", "sep", "self"]].mean()
        rows.append(
            {
                "model": model,
                "cls": per_head["cls"].mean(),
                "sep": per_head["sep"].mean(),
                "self": per_head["self"].mean(),
                "heads_cls_over_sep": int((per_head["cls"] > per_head["sep"]).sum()),
                "n_heads": len(per_head),
            }
        )
    return pd.DataFrame(rows)


def _change(r) -> str:
    return (
        f"{r['before']:.3f} → {r['after']:.3f} ({r['delta']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}], "
        f"{r['relative']:+.1%} of its level)"
    )


def _context(changes: pd.DataFrame) -> list[str]:
    """A line per change the study did not claim (computed numbers only, for both scopes)."""
    lines = []
    for change in CHANGES:
        found = changes[changes["metric"] == change.metric]
        if change.expected == 0 and not found.empty:
            lines.append(
                f"- {change.text}: " + "; ".join(f"{r['scope']}: {_change(r)}" for _, r in found.iterrows()) + "."
            )
    return lines


def verdict(rows: list[Claim], changes: pd.DataFrame, no_op: pd.DataFrame) -> str:
    """The page's claim rows (:func:`claims`, rendered as given), then [CLS] and the no-op token as context
    (markdown)."""
    parts = [
        f"{r.model}: [CLS] {r.cls:.3f}, [SEP] {r.sep:.3f}, itself {r.self:.3f}, "
        f"{r.heads_cls_over_sep} of {r.n_heads} heads put more on [CLS] than on [SEP]"
        for r in no_op.itertuples()
    ]
    tuned = no_op.iloc[-1]
    token = "[CLS]" if tuned["cls"] > tuned["sep"] else "[SEP]"
    caveat = "; a fall of [SEP] attention says less here than in the study" if token == "[CLS]" else ""
    no_op_line = (
        f"- *Which token is the no-op here?* Mean attention of a term ({'; '.join(parts)}). "
        f"In the fine-tuned model {token} takes more of it, so {token} plays the no-op role the study gave "
        f"to [SEP]{caveat}."
    )
    return "\n".join([render(rows), *_context(changes), no_op_line])
