"""The study's claims as data: one row per claim, from which a page's verdict is written and a scorecard is built.

A finding turns its measurements into :class:`Claim` rows (the study's number, ours with its interval or test, the
counts behind it, a verdict from a fixed vocabulary and a one-line reason); the page's prose is :func:`render` of
those rows, and the rows are saved as a table (``claims_<finding>.csv``) that the scorecard across models reads.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd

VERDICTS = ("holds", "does not hold", "opposite", "cannot tell")
_WORDS = {"holds": "**holds** here", "does not hold": "does **not** hold here", "opposite": "the **opposite** holds here",
          "cannot tell": "**cannot be told** here"}


@dataclass(frozen=True)
class Claim:
    """One claim of the study on one run: its number and ours, the evidence's size, the verdict and why."""

    claim_id: str
    finding: str
    claim: str
    study: float | None
    ours: float
    lo: float
    hi: float
    unit: str
    n_examples: int
    n_draws: int
    p: float | None
    verdict: str
    reason: str

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim_id}: verdict {self.verdict!r} is not one of {VERDICTS}")


def claims_table(claims: list[Claim]) -> pd.DataFrame:
    """The claims as a tidy table, one row each, in the order given."""
    return pd.DataFrame([asdict(c) for c in claims], columns=list(Claim.__dataclass_fields__))


def number_text(value: float, unit: str) -> str:
    """A claim's number as the page writes it: a signed percentage for a relative change, a percentage for a share,
    signed percentage points for a difference of shares, three digits otherwise (signed for a difference)."""
    difference = unit.startswith("change") or any(word in unit for word in (" minus ", " above ", ", change of"))
    if unit.startswith("relative"):
        return f"{value:+.1%}"
    if unit.startswith("share"):
        return f"{100 * value:+.1f} points" if difference else f"{value:.1%}"
    return f"{value:+.3g}" if difference else f"{value:.3g}"


def _interval(c: Claim) -> str:
    """Our number's interval as the page writes it; empty for a number measured without one (a mean score)."""
    return "" if math.isnan(c.lo) or math.isnan(c.hi) else f" [{number_text(c.lo, c.unit)}, {number_text(c.hi, c.unit)}]"


def render(claims: list[Claim]) -> str:
    """Markdown bullets, one per claim: the claim, the verdict, our number with its interval, the study's, why."""
    lines = []
    for c in claims:
        ours = ("not measured" if math.isnan(c.ours) else
                f"{number_text(c.ours, c.unit)}{_interval(c)} ({c.unit})")
        study = "" if c.study is None or (isinstance(c.study, float) and math.isnan(c.study)) else \
            f"; the study: {number_text(c.study, c.unit)}"
        lines.append(f"- *{c.claim}* {_WORDS[c.verdict]}: {ours}{study}. {c.reason}")
    return "\n".join(lines)
