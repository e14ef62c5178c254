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


def _no_loss(row, margin: float) -> str:
    """One share against "no loss": a non-inferiority test (the 90% interval's low end above -margin)."""
    if row.hi < 0:
        return "loss"
    return "no loss" if row.lo90 > -margin else "cannot tell"


def verdict(curve: pd.DataFrame, margin: float = 0.02) -> str:
    """Plain-words comparison of our share curve with the study's three claims (markdown).

    Intervals are two-stage (random draws, then test pairs). "No loss" is a claim of equivalence on one side
    (non-inferiority): it holds at a share only when the 90% interval lies above ``-margin``; a loss needs the
    95% interval below zero; anything else cannot be told. "Falls steadily" is a stated monotonicity rule:
    from the first share with a loss on, the mean change is lower at every next share.
    """
    curve = curve.sort_values("share")
    masked = curve[curve["share"] > 0]
    lines = []
    below = masked[masked["share"] < 0.2]
    if below.empty:
        lines.append("- *No loss below 20%*: not tested (no share between 0 and 20% in SHARES).")
    else:
        states = [_no_loss(r, margin) for r in below.itertuples()]
        parts = "; ".join(f"{r.share:.0%}: {_pct(r.rel_change)} [{_pct(r.lo)}, {_pct(r.hi)}], {state}"
                          for r, state in zip(below.itertuples(), states))
        holds = ("does **not** hold" if "loss" in states else "holds" if set(states) == {"no loss"}
                 else "**cannot be told** with these draws and pairs")
        lines.append(f"- *No loss below 20%* {holds} here ({parts}). \"No loss\" at a share means the 90% interval "
                     f"lies above −{margin:.0%} (non-inferiority, margin MARGIN = {margin:.0%}); a loss, that the "
                     f"95% interval lies below 0. Intervals cover both the random draws of heads and the test pairs.")
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
        after = masked[masked["share"] >= first.share]
        rises = after[after["rel_change"].diff() >= 0]
        steady = ("falls steadily" if rises.empty else
                  f"does **not** fall steadily (no lower at {', '.join(f'{s:.0%}' for s in rises['share'])})")
        lines.append(f"- *Accuracy falls steadily past some share*: the first share with a clear loss is {first.share:.0%} "
                     f"({_pct(first.rel_change)} [{_pct(first.lo)}, {_pct(first.hi)}]); from there the mean change "
                     f"{steady}, down to {_pct(masked.iloc[-1].rel_change)} at {masked.iloc[-1].share:.0%}. "
                     f"(The rule: lower at every next share.)")
    return "\n".join(lines)
