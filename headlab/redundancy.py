"""Finding 1, redundancy: mask a random share of all heads and watch accuracy.

The study: below 20% of heads masked there is no loss; at 10% accuracy is about +1% above baseline; past
some share accuracy falls steadily. :func:`verdict` states, from our curve and its intervals, which of
these hold on our model.
"""
from __future__ import annotations

import pandas as pd

STUDY_REFERENCE = pd.DataFrame([
    {"share": 0.1, "rel_change": 0.01, "label": "study: about +1% at 10%"},
])


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def verdict(curve: pd.DataFrame) -> str:
    """Plain-words comparison of our share curve with the study's three claims (markdown)."""
    curve = curve.sort_values("share")
    masked = curve[curve["share"] > 0]
    lines = []
    below = masked[masked["share"] < 0.2]
    if below.empty:
        lines.append("- *No loss below 20%*: not tested (no share between 0 and 20% in SHARES).")
    else:
        losses = below[below["hi"] < 0]
        parts = ", ".join(f"{r.share:.0%}: {_pct(r.rel_change)} [{_pct(r.lo)}, {_pct(r.hi)}]" for r in below.itertuples())
        holds = "holds" if losses.empty else "does **not** hold"
        lines.append(f"- *No loss below 20%* {holds} here ({parts}; a loss counts when the whole 95% interval is below 0).")
    ten = masked[(masked["share"] - 0.1).abs() < 1e-9]
    if ten.empty:
        lines.append("- *About +1% at 10%*: not tested (10% is not in SHARES).")
    else:
        r = ten.iloc[0]
        gain = "a gain we can distinguish from zero" if r.lo > 0 else "no gain distinguishable from zero"
        contains = "contains" if r.lo <= 0.01 <= r.hi else "excludes"
        lines.append(f"- *About +1% at 10%*: we measure {_pct(r.rel_change)} [{_pct(r.lo)}, {_pct(r.hi)}], {gain}; "
                     f"the interval {contains} the study's +1%.")
    falling = masked[masked["hi"] < 0]
    if falling.empty:
        lines.append("- *Accuracy falls past some share*: no share tested gives a loss distinguishable from zero.")
    else:
        first = falling.iloc[0]
        steady = bool((masked[masked["share"] >= first.share]["rel_change"].diff().dropna() <= 0.02).all())
        lines.append(f"- *Accuracy falls past some share*: the first share with a clear loss is {first.share:.0%} "
                     f"({_pct(first.rel_change)} [{_pct(first.lo)}, {_pct(first.hi)}]); beyond it the mean "
                     f"{'falls steadily' if steady else 'does not fall monotonically'}, down to "
                     f"{_pct(masked.iloc[-1].rel_change)} at {masked.iloc[-1].share:.0%}.")
    return "\n".join(lines)
