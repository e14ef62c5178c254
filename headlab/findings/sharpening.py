"""Finding 6, fine-tuning sharpens term matching: the same heads' attention before and after fine-tuning.

The study read three changes off difference maps (after minus before fine-tuning) of one pair: attention
between identical query/title terms rises, a term's attention to itself falls, attention to ``[SEP]`` (read
as "no-op") falls. Here each change is a mean over the whole test set, per head, paired by example, with a
bootstrap interval, for the term-matching heads and for all heads. ``[CLS]`` is reported too: many heads of
small BERTs park attention on ``[CLS]`` rather than ``[SEP]``, so either token can be the no-op.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from headlab.findings.roles import paired_delta


@dataclass(frozen=True)
class Claim:
    text: str
    metric: str  # a role column of headlab.findings.roles
    expected: int  # +1 rises, -1 falls, 0 not claimed by the study (reported for context)


CLAIMS = [
    Claim("attention between identical query/title terms rises", "match", +1),
    Claim("… and beyond what identity-blind attention on the other sentence gives", "match_excess", +1),
    Claim("a term's attention to itself falls", "self", -1),
    Claim("attention to [SEP] (the study's no-op) falls", "sep", -1),
    Claim("attention to [CLS] (not in the study)", "cls", 0),
]
SCOPES = {"subset": "term-matching heads", "all": "all heads"}


def deltas(before: pd.DataFrame, after: pd.DataFrame, heads, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """:func:`headlab.findings.roles.paired_delta` for every claim's metric, stacked: per head, and over ``heads`` and all heads.

    ``before`` / ``after`` are per-example role tables of the pretrained encoder and the fine-tuned model
    on the same examples (``role_scores(..., per_example=True)``). ``matching`` marks the per-head rows of
    ``heads``.
    """
    table = pd.concat([paired_delta(before, after, c.metric, n_boot=n_boot, seed=seed, heads=heads) for c in CLAIMS],
                      ignore_index=True)
    chosen = {(int(l), int(h)) for l, h in heads}
    table["matching"] = [scope == "head" and (int(l), int(h)) in chosen
                         for scope, l, h in zip(table["scope"], table["layer"], table["head"])]
    return table


TINY = 0.05  # a change under 5% of the level before fine-tuning is called tiny, however certain


def _holds(expected: int, lo: float, hi: float, relative: float) -> str:
    if expected == 0:
        return "not claimed"
    if lo > 0 or hi < 0:
        state = "holds" if (lo > 0) == (expected > 0) else "opposite"
        return f"{state}, tiny" if abs(relative) < TINY else state
    return "no change distinguishable from zero"


def claims_table(delta_table: pd.DataFrame) -> pd.DataFrame:
    """The study's claims against our changes: one row per claim and scope (term-matching heads, all heads).

    ``holds`` when the 95% interval lies on the claimed side of zero, ``opposite`` when on the other side;
    either gets ", tiny" when the change is under 5% of the level before (``relative`` = delta / before).
    """
    rows = []
    for claim in CLAIMS:
        for scope, scope_label in SCOPES.items():
            found = delta_table[(delta_table["metric"] == claim.metric) & (delta_table["scope"] == scope)]
            if found.empty:
                continue
            r = found.iloc[0]
            relative = r["delta"] / r["before"] if r["before"] else float("nan")
            rows.append({"claim": claim.text, "metric": claim.metric, "scope": scope_label,
                         "expected": {1: "rises", -1: "falls", 0: "-"}[claim.expected], "before": r["before"],
                         "after": r["after"], "delta": r["delta"], "lo": r["lo"], "hi": r["hi"], "relative": relative,
                         "n_examples": r["n_examples"], "holds": _holds(claim.expected, r["lo"], r["hi"], relative)})
    return pd.DataFrame(rows)


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


def verdict(claims: pd.DataFrame, no_op: pd.DataFrame) -> str:
    """The study's three claims, each for the term-matching heads and for all heads, and the no-op token (markdown)."""
    lines = []
    for claim in CLAIMS:
        found = claims[claims["metric"] == claim.metric]
        if found.empty:
            continue
        parts = "; ".join(f"{r['scope']}: {_change(r)}" for _, r in found.iterrows())
        if claim.expected == 0:
            lines.append(f"- {claim.text}: {parts}.")
            continue
        states = {r["scope"]: r["holds"] for _, r in found.iterrows()}
        state = ", ".join(f"**{s}** for {scope}" for scope, s in states.items())
        lines.append(f"- *{claim.text}* (study): {parts}: {state}.")
    parts = [f"{r.model}: [CLS] {r.cls:.3f}, [SEP] {r.sep:.3f}, itself {r.self:.3f}, "
             f"{r.heads_cls_over_sep} of {r.n_heads} heads put more on [CLS] than on [SEP]"
             for r in no_op.itertuples()]
    tuned = no_op.iloc[-1]
    token = "[CLS]" if tuned["cls"] > tuned["sep"] else "[SEP]"
    caveat = "; a fall of [SEP] attention says less here than in the study" if token == "[CLS]" else ""
    lines.append(f"- *Which token is the no-op here?* Mean attention of a term ({'; '.join(parts)}). "
                 f"In the fine-tuned model {token} takes more of it, so {token} plays the no-op role the study gave "
                 f"to [SEP]{caveat}.")
    return "\n".join(lines)
