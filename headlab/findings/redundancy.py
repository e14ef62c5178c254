"""Finding 1, redundancy: mask a random share of all heads and watch accuracy.

The study: below 20% of heads masked there is no loss; at 10% accuracy is about +1% above baseline; past
some share accuracy falls steadily. :func:`verdict` states, from our curve and its intervals, which of
these hold on our model.
"""
from __future__ import annotations

import pandas as pd

from headlab.findings.claims import Claim, render

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


FINDING = "01 redundancy"


def _claim(claim_id: str, claim: str, study, row, verdict: str, reason: str) -> Claim:
    """A claim measured at one share of the curve (``row``), or not measured (``row`` None)."""
    if row is None:
        return Claim(claim_id, FINDING, claim, study, float("nan"), float("nan"), float("nan"),
                     "relative change of accuracy", 0, 0, None, verdict, reason)
    return Claim(claim_id, FINDING, claim, study, float(row.rel_change), float(row.lo), float(row.hi),
                 "relative change of accuracy", int(row.n_examples), int(row.n_draws), None, verdict, reason)


def claims(curve: pd.DataFrame, margin: float = 0.02) -> list[Claim]:
    """The study's three claims about random masking, judged on our share curve.

    Intervals are two-stage (random draws, then test pairs). "No loss" is a claim of equivalence on one side
    (non-inferiority): it holds at a share only when the 90% interval lies above ``-margin``; a loss needs the
    95% interval below zero; anything else cannot be told. "Falls steadily" is a stated monotonicity rule:
    from the first share with a loss on, the mean change is lower at every next share.
    """
    curve = curve.sort_values("share")
    masked = curve[curve["share"] > 0]
    rows = []
    below = masked[masked["share"] < 0.2]
    claim = "Masking fewer than 20% of the heads costs no accuracy"
    if below.empty:
        rows.append(_claim("redundancy.no_loss_below_20", claim, 0.0, None, "cannot tell",
                           "Not tested: no share between 0 and 20% in SHARES."))
    else:
        states = [_no_loss(r, margin) for r in below.itertuples()]
        state = "does not hold" if "loss" in states else "holds" if set(states) == {"no loss"} else "cannot tell"
        parts = "; ".join(f"{r.share:.0%}: {_pct(r.rel_change)} [{_pct(r.lo)}, {_pct(r.hi)}], {s}"
                          for r, s in zip(below.itertuples(), states))
        weakest = below.loc[below["lo90"].idxmin()]
        rows.append(_claim("redundancy.no_loss_below_20", claim, 0.0, weakest, state,
                           f"Shown: the share whose interval reaches lowest. Every share below 20%: {parts}. \"No "
                           f"loss\" at a share means its 90% interval lies above −{margin:.0%} (non-inferiority, "
                           f"MARGIN); a loss, that its 95% interval lies below 0."))
    ten = masked[(masked["share"] - 0.1).abs() < 1e-9]
    claim = "Masking 10% of the heads raises accuracy by about 1%"
    if ten.empty:
        rows.append(_claim("redundancy.gain_at_10", claim, 0.01, None, "cannot tell",
                           "Not tested: 10% is not in SHARES."))
    else:
        r = ten.iloc[0]
        state = "holds" if r.lo > 0 else "opposite" if r.hi < 0 else "cannot tell"
        contains = "contains" if r.lo <= 0.01 <= r.hi else "excludes"
        rows.append(_claim("redundancy.gain_at_10", claim, 0.01, r, state,
                           f"A gain needs the interval above 0, a loss below it; the interval {contains} the "
                           f"study's +1%."))
    falling = masked[masked["hi"] < 0]
    claim = "Past some share, accuracy falls steadily as more heads go"
    if falling.empty:
        rows.append(_claim("redundancy.falls_steadily", claim, None, masked.iloc[-1] if len(masked) else None,
                           "does not hold", "No share tested gives a loss distinguishable from zero."))
    else:
        first = falling.iloc[0]
        after = masked[masked["share"] >= first.share]
        rises = after[after["rel_change"].diff() >= 0]
        steady = ("the mean change falls at every next share" if rises.empty else
                  f"the mean change is not lower at {', '.join(f'{s:.0%}' for s in rises['share'])}")
        rows.append(_claim("redundancy.falls_steadily", claim, None, masked.iloc[-1],
                           "holds" if rises.empty else "does not hold",
                           f"Shown: the largest share. The first share with a clear loss is {first.share:.0%} "
                           f"({_pct(first.rel_change)} [{_pct(first.lo)}, {_pct(first.hi)}]); from there {steady} "
                           f"(the rule: lower at every next share)."))
    return rows


def verdict(curve: pd.DataFrame, margin: float = 0.02) -> str:
    """The study's three claims about random masking in plain words (markdown), rendered from :func:`claims`."""
    return render(claims(curve, margin))
