"""Finding 6, fine-tuning sharpens term matching: the same heads' attention before and after fine-tuning.

The study read three changes off difference maps (after minus before fine-tuning) of one pair: attention
between identical query/title terms rises, a term's attention to itself falls, attention to ``[SEP]`` (read
as "no-op") falls. Here each change is a mean over the test pairs, per head, paired by pair, with a 95% bootstrap
interval (pairs resampled), over all heads and over the term-matching heads. ``[CLS]`` is reported too: many heads of
small BERTs park attention on ``[CLS]`` rather than ``[SEP]``, so either token can be the no-op.

*All heads first.* The study's maps show attention changing, not a chosen few heads: the mean over every head
involves no choice, so it is each claim's own row; the term-matching heads' row is a sub-row.

*Choose where the choice cannot help the claim.* Heads ranked by the fine-tuned model's score on the test pairs
would be chosen for how high fine-tuning left them on the very pairs their rise is measured on. So the term-matching
heads are chosen (:func:`choose_heads`, notebook 05's rule: the ``k`` lower-half heads with the highest score) by the
*pretrained* model's score on a seeded sample of *dev* pairs, and every change is measured on the test pairs: no
measured pair chooses a head, and a head is never chosen for how fine-tuning changed it. What selection can still
add is regression to the mean (a head ranked high before fine-tuning tends to score lower later), which works
against a claimed rise.

Each claimed change becomes :class:`headlab.judging.verdicts.Claim` rows (:func:`claims`), judged by
:func:`headlab.judging.verdicts.judge`, with the ids of :data:`CHANGES` (all heads: the registered id; term-matching
heads: ``<id>/matching_heads``; ``match_excess``: ``<id>/excess_all_heads``, ``<id>/excess_matching_heads``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from headlab.core.stats import N_BOOT
from headlab.judging.units import ATTENTION_CHANGE
from headlab.judging.verdicts import Claim, Kind, StudyClaim, render
from headlab.lab.lab import Lab
from headlab.measures.halves import half_split
from headlab.measures.roles import pair_role_scores, paired_delta, rank_heads

CHOICE_SPLIT = "dev"  # the split the term-matching heads are chosen on: never the test pairs they are measured on


@dataclass(frozen=True)
class Change:
    """An attention share whose change with fine-tuning the page measures, and the claim rows it answers."""

    text: str
    metric: str  # a role column of headlab.measures.roles
    expected: int  # +1 rises, -1 falls, 0 not claimed by the study (reported for context)
    rows: dict[str, tuple[StudyClaim, str]] = field(default_factory=dict)  # SCOPES key -> (claim, sub-row part or "")


MATCH_RISES = StudyClaim(
    "sharpening.match_rises",
    "06_finetune_delta",
    "Attention between identical query/title terms rises with fine-tuning",
    "attention between identical query/title terms rises",
    Kind.EFFECT,
    direction=1,
)
SELF_FALLS = StudyClaim(
    "sharpening.self_falls",
    "06_finetune_delta",
    "Attention of a term to itself falls with fine-tuning",
    "attention of a term to itself falls",
    Kind.EFFECT,
    direction=-1,
)
SEP_FALLS = StudyClaim(
    "sharpening.sep_falls",
    "06_finetune_delta",
    "Attention to [SEP] falls with fine-tuning",
    'attention to `[SEP]` (read as "no-op", nothing to attend to) falls',
    Kind.EFFECT,
    direction=-1,
)
CLAIMS = (MATCH_RISES, SELF_FALLS, SEP_FALLS)
CHANGES = [
    Change(
        "Attention between identical query/title terms rises with fine-tuning",
        "match",
        +1,
        {"all": (MATCH_RISES, ""), "subset": (MATCH_RISES, "matching_heads")},
    ),
    Change(
        "Attention between identical query/title terms rises with fine-tuning "
        "beyond what identity-blind attention on the other sentence gives",
        "match_excess",
        +1,
        {"all": (MATCH_RISES, "excess_all_heads"), "subset": (MATCH_RISES, "excess_matching_heads")},
    ),
    Change(
        "Attention of a term to itself falls with fine-tuning",
        "self",
        -1,
        {"all": (SELF_FALLS, ""), "subset": (SELF_FALLS, "matching_heads")},
    ),
    Change(
        "Attention to [SEP] (the study's no-op) falls with fine-tuning",
        "sep",
        -1,
        {"all": (SEP_FALLS, ""), "subset": (SEP_FALLS, "matching_heads")},
    ),
    Change("Attention to [CLS] (not in the study)", "cls", 0),
]
SCOPES = {"all": "all heads", "subset": "term-matching heads"}  # the order rows, tables and charts show them in


@dataclass(frozen=True)
class Choice:
    """The term-matching heads the page measures and what chose them, so that every sentence about the choice is
    generated from it."""

    heads: list[tuple[int, int]]
    ranking: pd.DataFrame  # the chosen heads, best first, with their mean score
    by: str  # the role score that ranked them
    split: str  # the split whose pairs ranked them
    n_pairs: int
    measured_on: str  # the split the changes are measured on, never ``split``

    def how(self) -> str:
        """How the heads were chosen, in words (markdown)."""
        return (
            f"chosen by their mean `{self.by}` on the pretrained model (before fine-tuning) over {self.n_pairs} "
            f"{self.split} pairs, none of them among the {self.measured_on} pairs the changes are measured on"
        )

    def describe(self) -> str:
        """The heads with their scores, and how they were chosen (markdown)."""
        rows = self.ranking[["layer", "head", self.by]].itertuples(index=False)
        listed = ", ".join(f"{int(l)}.{int(h)} ({v:.2f})" for l, h, v in rows)
        return f"The {len(self.heads)} term-matching heads (layer.head, mean `{self.by}`): {listed}; {self.how()}."


def choose_heads(
    lab: Lab, pretrained, k: int, by: str = "match_excess", limit: int | None = None, stopwords=None
) -> Choice:
    """The ``k`` lower-half heads with the highest mean ``by`` (notebook 05's rule) of the model ``pretrained`` over
    a seeded sample of ``limit`` pairs of :data:`CHOICE_SPLIT` (all when None), never the lab's own split.

    The pretrained model and the dev pairs, so that neither the measured pairs nor fine-tuning's own change choose a
    head (see the module's docstring). One attention pass of ``pretrained`` over those pairs, kept once computed
    (:func:`headlab.measures.roles.pair_role_scores`)."""
    if lab.params.eval_split == CHOICE_SPLIT:
        raise ValueError(f"the heads are chosen on the {CHOICE_SPLIT} pairs: measure the changes on another split")
    choosing = lab.on_split(CHOICE_SPLIT, limit)
    scores = pair_role_scores(choosing, model=pretrained, stopwords=stopwords)
    per_head = scores.groupby(["layer", "head"])[by].mean().reset_index()  # pandas means skip NaN, as summarize_roles
    heads, ranking = rank_heads(per_head, by, among_layers=half_split(lab.shape[0])[0], k=k)
    return Choice(heads, ranking, by, CHOICE_SPLIT, len(choosing.encoded), lab.params.eval_split)


def deltas(before: pd.DataFrame, after: pd.DataFrame, heads, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """:func:`headlab.measures.roles.paired_delta` for every change's metric, stacked: per head, and over ``heads`` and
    all heads.

    ``before`` / ``after`` are per-example role tables of the pretrained encoder and the fine-tuned model
    on the same examples (``role_scores(..., per_example=True)``). ``matching`` marks the per-head rows of
    ``heads``.
    """
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
    """Each change for the two groups of heads (all heads, then the term-matching heads): one row per change and scope.

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


def _claim_text(change: Change, key: str) -> str | None:
    """The row's claim sentence: the registered one for a claim's own row, the change's own naming its scope for a
    sub-row."""
    if not change.rows[key][1]:
        return None
    return f"{change.text} ({SCOPES[key]})"


def _reason(r, choice: Choice) -> str:
    """The evidence of a row, in words: the levels, the change as a share of its level, the pairs, how heads were
    chosen (no verdict: :func:`headlab.judging.verdicts.judge` gives it)."""
    if r["scope"] == SCOPES["subset"]:
        chosen = f" The {len(choice.heads)} heads were {choice.how()}."
    else:
        chosen = " Every head, so no choice of heads is involved."
    return (
        f"Mean over {int(r['n_examples'])} {choice.measured_on} pairs, {r['scope']}: {r['before']:.3f} → "
        f"{r['after']:.3f}, a change of {r['delta']:+.4f} ({r['relative']:+.1%} of its level before fine-tuning); "
        f"95% paired bootstrap interval, pairs resampled.{chosen}"
    )


def _claim(change: Change, key: str, changes: pd.DataFrame, choice: Choice) -> Claim:
    (spec, part), claim, scope = change.rows[key], _claim_text(change, key), SCOPES[key]
    found = changes[(changes["metric"] == change.metric) & (changes["scope"] == scope)]
    if found.empty or not math.isfinite(found.iloc[0]["delta"]):
        return Claim.not_measured(
            spec,
            reason=f"Not measured: no change of {change.metric} for the {scope} (no "
            "such heads, or no pair to measure it on)",
            unit=ATTENTION_CHANGE,
            claim=claim,
            part=part,
        )
    r = found.iloc[0]
    return Claim.measured(
        spec,
        part=part,
        ours=float(r["delta"]),
        lo=float(r["lo"]),
        hi=float(r["hi"]),
        unit=ATTENTION_CHANGE,
        method=f"paired bootstrap over {choice.measured_on} pairs",
        n_examples=int(r["n_examples"]),
        reason=_reason(r, choice),
        claim=claim,
    )


def claims(changes: pd.DataFrame, choice: Choice) -> list[Claim]:
    """The study's three changes as rows: per claimed change, all heads (first), then the term-matching heads.

    ``changes`` is :func:`scope_changes` of the test pairs; ``choice`` the heads' :class:`Choice`, which the
    term-matching rows describe. The study gave no numbers, so ``study`` is empty; the verdict is
    :func:`headlab.judging.verdicts.judge`'s, an effect in the study's direction.
    """
    return [_claim(change, key, changes, choice) for change in CHANGES for key in SCOPES if key in change.rows]


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
