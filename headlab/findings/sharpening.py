"""Finding 6, fine-tuning sharpens term matching: the same heads' attention before and after fine-tuning.

The study read three changes off difference maps (after minus before fine-tuning) of one pair: attention
between identical query/title terms rises, a term's attention to itself falls, attention to ``[SEP]`` (read
as "no-op") falls. Here each change is a mean over the whole test set, per head, paired by example, with a
bootstrap interval, for the term-matching heads and for all heads. ``[CLS]`` is reported too: many heads of
small BERTs park attention on ``[CLS]`` rather than ``[SEP]``, so either token can be the no-op. Each claimed
change becomes a :class:`headlab.findings.claims.Claim` row per scope (:func:`claims`), which the verdict renders.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from headlab.findings.claims import Claim, render
from headlab.findings.roles import paired_delta


@dataclass(frozen=True)
class Change:
    """An attention share whose change with fine-tuning the page measures, and the way the study said it moves."""

    slug: str
    text: str
    metric: str  # a role column of headlab.findings.roles
    expected: int  # +1 rises, -1 falls, 0 not claimed by the study (reported for context)


CHANGES = [
    Change("match_rises", "Attention between identical query/title terms rises with fine-tuning", "match", +1),
    Change("match_excess_rises", "Attention between identical query/title terms rises beyond what identity-blind "
           "attention on the other sentence gives", "match_excess", +1),
    Change("self_falls", "A term's attention to itself falls with fine-tuning", "self", -1),
    Change("sep_falls", "Attention to [SEP] (the study's no-op) falls with fine-tuning", "sep", -1),
    Change("cls", "Attention to [CLS] (not in the study)", "cls", 0),
]
SCOPES = {"subset": "term-matching heads", "all": "all heads"}
TINY = 0.05  # a change under 5% of the level before fine-tuning is called tiny, however certain
FINDING = "06 fine-tuning sharpens term matching"
UNIT = "change of attention share, after minus before"


def deltas(before: pd.DataFrame, after: pd.DataFrame, heads, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """:func:`headlab.findings.roles.paired_delta` for every change's metric, stacked: per head, and over ``heads`` and all heads.

    ``before`` / ``after`` are per-example role tables of the pretrained encoder and the fine-tuned model
    on the same examples (``role_scores(..., per_example=True)``). ``matching`` marks the per-head rows of
    ``heads``.
    """
    table = pd.concat([paired_delta(before, after, c.metric, n_boot=n_boot, seed=seed, heads=heads) for c in CHANGES],
                      ignore_index=True)
    chosen = {(int(l), int(h)) for l, h in heads}
    table["matching"] = [scope == "head" and (int(l), int(h)) in chosen
                         for scope, l, h in zip(table["scope"], table["layer"], table["head"])]
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
            rows.append([change.text, change.metric, scope_label, {1: "rises", -1: "falls", 0: "-"}[change.expected],
                         r["before"], r["after"], r["delta"], r["lo"], r["hi"], relative, r["n_examples"]])
    return pd.DataFrame(rows, columns=["claim", "metric", "scope", "expected", "before", "after", "delta", "lo", "hi",
                                       "relative", "n_examples"])


def _verdict(expected: int, lo: float, hi: float) -> str:
    """``holds`` when the 95% interval lies on the claimed side of zero, ``opposite`` on the other side, else
    ``cannot tell`` (no change distinguishable from zero)."""
    if lo > 0 or hi < 0:
        return "holds" if (lo > 0) == (expected > 0) else "opposite"
    return "cannot tell"


def _reason(r, verdict: str) -> str:
    """Why a scope's row got its verdict: the levels, the interval's side, whether the change is tiny, the selection."""
    side = ("contains 0: no change distinguishable from zero" if verdict == "cannot tell" else
            f"lies {'above' if r['lo'] > 0 else 'below'} 0")
    tiny = (f", but the change is tiny: under {TINY:.0%} of its level before"
            if verdict != "cannot tell" and abs(r["relative"]) < TINY else "")
    chosen = (" The heads were chosen on the fine-tuned model, so the score they were ranked by is high after "
              "fine-tuning partly by selection; the all-heads row carries no such bias."
              if r["scope"] == SCOPES["subset"] else "")
    return (f"Mean over {int(r['n_examples'])} pairs, {r['scope']}: {r['before']:.3f} → {r['after']:.3f} "
            f"({r['relative']:+.1%} of its level); the 95% paired bootstrap interval (pairs resampled) {side}{tiny}."
            f"{chosen}")


def _claim(change: Change, scope: str, changes: pd.DataFrame) -> Claim:
    """One change for one scope as a row; the term-matching heads' row carries the bare id (the heads the study's maps
    show), the all-heads row the suffix ``.all_heads``."""
    claim_id = f"sharpening.{change.slug}" + ("" if scope == SCOPES["subset"] else ".all_heads")
    claim = f"{change.text} ({scope})"
    found = changes[(changes["metric"] == change.metric) & (changes["scope"] == scope)]
    if found.empty or not math.isfinite(found.iloc[0]["delta"]):
        nan = float("nan")
        return Claim(claim_id, FINDING, claim, None, nan, nan, nan, UNIT, 0, 0, None, "cannot tell",
                     f"Not measured: no change of {change.metric} for the {scope} (no such heads, or no pair to "
                     "measure it on).")
    r = found.iloc[0]
    verdict = _verdict(change.expected, r["lo"], r["hi"])
    return Claim(claim_id, FINDING, claim, None, float(r["delta"]), float(r["lo"]), float(r["hi"]), UNIT,
                 int(r["n_examples"]), 1, None, verdict, _reason(r, verdict))


def claims(changes: pd.DataFrame) -> list[Claim]:
    """The study's changes with fine-tuning as rows, each for the term-matching heads and for all heads.

    The term-matching heads' rows (``sharpening.<change>``) test the study's claim on the heads its maps show; the
    all-heads rows (``sharpening.<change>.all_heads``) test it free of how those heads were chosen. ``changes`` is
    :func:`scope_changes`. A change holds when its 95% paired bootstrap interval lies on the
    claimed side of zero and is the opposite when it lies on the other; either is called tiny in the reason when the
    change is under 5% of its level before (``TINY``). The study gave no numbers, so ``study`` is empty.
    """
    return [_claim(change, scope, changes) for change in CHANGES if change.expected for scope in SCOPES.values()]


def no_op_table(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Where heads park attention: per model, mean attention of a term on [CLS], on the [SEP]s and on itself.

    Means over examples and heads; ``heads_cls_over_sep`` counts heads whose mean [CLS] attention exceeds
    their mean [SEP] attention (the likelier no-op token of that head).
    """
    rows = []
    for model, table in (("pretrained", before), ("fine-tuned", after)):
        per_head = table.groupby(["layer", "head"])[["cls", "sep", "self"]].mean()
        rows.append({"model": model, "cls": per_head["cls"].mean(), "sep": per_head["sep"].mean(),
                     "self": per_head["self"].mean(),
                     "heads_cls_over_sep": int((per_head["cls"] > per_head["sep"]).sum()), "n_heads": len(per_head)})
    return pd.DataFrame(rows)


def _change(r) -> str:
    return (f"{r['before']:.3f} → {r['after']:.3f} ({r['delta']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}], "
            f"{r['relative']:+.1%} of its level)")


def _context(changes: pd.DataFrame) -> list[str]:
    """A line per change the study did not claim (computed numbers only, for both scopes)."""
    lines = []
    for change in CHANGES:
        found = changes[changes["metric"] == change.metric]
        if change.expected == 0 and not found.empty:
            lines.append(f"- {change.text}: " + "; ".join(f"{r['scope']}: {_change(r)}" for _, r in found.iterrows())
                         + ".")
    return lines


def verdict(changes: pd.DataFrame, no_op: pd.DataFrame) -> str:
    """The study's changes in plain words (:func:`claims`), then [CLS] and the no-op token as context (markdown)."""
    parts = [f"{r.model}: [CLS] {r.cls:.3f}, [SEP] {r.sep:.3f}, itself {r.self:.3f}, "
             f"{r.heads_cls_over_sep} of {r.n_heads} heads put more on [CLS] than on [SEP]"
             for r in no_op.itertuples()]
    tuned = no_op.iloc[-1]
    token = "[CLS]" if tuned["cls"] > tuned["sep"] else "[SEP]"
    caveat = "; a fall of [SEP] attention says less here than in the study" if token == "[CLS]" else ""
    no_op_line = (f"- *Which token is the no-op here?* Mean attention of a term ({'; '.join(parts)}). "
                  f"In the fine-tuned model {token} takes more of it, so {token} plays the no-op role the study gave "
                  f"to [SEP]{caveat}.")
    return "\n".join([render(claims(changes)), *_context(changes), no_op_line])
