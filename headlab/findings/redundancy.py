"""Finding 1, redundancy: mask a random share of all heads and watch accuracy.

The study: below 20% of heads masked there is no loss; at 10% accuracy is about +1% above baseline; past
some share accuracy falls steadily. :func:`claims` measures both claims on our share curve (one row each, the +1% at
10% is the study's number beside the first), and :func:`headlab.findings.claims.judge` gives the verdicts.

The curve (:func:`headlab.core.sweep.share_curve`) gives, per share, the relative change of the accuracy averaged
over the draws with its 95% two-stage bootstrap interval (draws, then test pairs).

- **No loss below 20%** (``no_effect``): every share masked below 20% must lie within the registered margin. Each share
  is judged, and the row shows the weakest: a share the rule rejects before one it cannot decide, and among equals
  the one whose interval reaches furthest from no change; so the row holds only when every share does.
- **Falls steadily** (``effect``, direction +1): the number is how much more of the accuracy above the majority grade
  (the floor scale, :class:`headlab.core.stats.Floor`) is lost at the largest share than at the first share with a
  loss (its 95% interval below 0): the fall goes on past the share where it starts. A share at the model's floor
  (always about one grade) has fallen as far as it can, so a curve that reaches the floor and stays flat there
  counts as falling all the way; when the first share with a loss is already at the floor, or is the largest share,
  nothing can follow it, and the rise is measured from the share before it (the fall happened within one step).
  The interval combines the two shares' bootstrap intervals as if they were independent (square root of the sum of
  the squared half-widths on each side, MOVER): conservative, since both shares resample the same test pairs and so
  err together. Without a floor (a model not above its majority grade) the same rise is measured as the drop of the
  relative change, in points.
"""

from __future__ import annotations

import math

import pandas as pd

from headlab.core.stats import Floor
from headlab.findings.claims import Claim, draws_df_default, judge, registered, render

STUDY_REFERENCE = pd.DataFrame(
    [
        {"share": 0.1, "rel_change": 0.01, "label": "study: about +1% at 10%"},
    ]
)

NO_LOSS = "redundancy.no_loss_below_20"
FALLS = "redundancy.falls_steadily"
CHANGE = "relative change of accuracy"
STUDY_GAIN_AT_10 = 0.01
TWO_STAGE = "two-stage bootstrap over draws and test pairs"
LOST = "share of the above-chance accuracy lost (0: unmasked, 100%: always the majority grade)"
RISE_UNIT = "share of the above-chance accuracy lost, largest share minus first share with a loss, in points"
DROP_UNIT = f"{CHANGE}, first share with a loss minus largest share"
_ORDER = {"does not hold": 0, "opposite": 0, "cannot tell": 1, "holds": 2, "not comparable": 3}


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _interval(r) -> str:
    return f"{_pct(r.rel_change)} [{_pct(r.lo)}, {_pct(r.hi)}]"


def _method(r) -> str:
    return TWO_STAGE if int(r.n_draws) > 1 else "paired bootstrap over test pairs"


def _accuracy(floor: Floor | None, r) -> float:
    return math.nan if floor is None else floor.base * (1 + float(r.rel_change))


def _at_floor(floor: Floor | None, r) -> bool:
    return floor is not None and floor.at_floor(_accuracy(floor, r))


def _usable(floor: Floor | None) -> bool:
    return floor is not None and floor.base > floor.majority


def _df(row) -> float:
    """A share's degrees of freedom: the curve's own (Welch–Satterthwaite over its draws), else the most cautious
    reading of its draws (``n_draws - 1``; infinite for one mask)."""
    df = getattr(row, "df", None)
    return draws_df_default(row.n_draws) if df is None or pd.isna(df) else float(df)


def _no_loss(masked: pd.DataFrame, floor: Floor | None) -> Claim:
    below = masked[masked["share"] < 0.2]
    if below.empty:
        return Claim.not_measured(
            NO_LOSS, reason="Not tested: no share between 0 and 20% in SHARES", unit=CHANGE, study=STUDY_GAIN_AT_10
        )
    spec = registered(NO_LOSS)

    def weakness(r):
        j = judge(spec, float(r.rel_change), float(r.lo), float(r.hi), df=_df(r))
        return _ORDER[j.verdict], -max(abs(j.lo_adj), abs(j.hi_adj))

    shown = min(below.itertuples(), key=weakness)
    parts = "; ".join(f"{r.share:.0%}: {_interval(r)}" for r in below.itertuples())
    ten = below[(below["share"] - 0.1).abs() < 1e-9]
    study_ten = ""
    if len(ten):
        t = ten.iloc[0]
        inside = "contains" if t.lo <= STUDY_GAIN_AT_10 <= t.hi else "excludes"
        study_ten = f" The study saw about +1% at 10%; our 95% interval there {inside} +1%."
    return Claim.measured(
        NO_LOSS,
        ours=shown.rel_change,
        lo=shown.lo,
        hi=shown.hi,
        unit=CHANGE,
        method=_method(shown),
        n_examples=shown.n_examples,
        n_draws=shown.n_draws,
        df=_df(shown),
        floor=floor,
        accuracies=(_accuracy(floor, shown),) if floor else (),
        study=STUDY_GAIN_AT_10 if abs(shown.share - 0.1) < 1e-9 else None,
        reason=f"Every share masked below 20% is judged on its own and the row shows the weakest, {shown.share:.0%} of "
        f"the heads; the shares: {parts}.{study_ten}",
    )


def _start(masked: pd.DataFrame, floor: Floor | None):
    """The share the fall is measured from (see the module's docstring) and why."""
    falling = masked[masked["hi"] < 0]
    if falling.empty:
        return (
            masked.iloc[0],
            "no share shows a loss (a 95% interval below 0), so the rise is measured from the "
            f"smallest share masked, {masked.iloc[0].share:.0%}",
        )
    first = falling.iloc[0]
    last = masked.iloc[-1]
    if not (_at_floor(floor, first) or first.share == last.share):
        return first, f"the first share with a loss is {first.share:.0%} ({_interval(first)})"
    before = masked[masked["share"] < first.share]
    why = "already at the model's floor" if _at_floor(floor, first) else "the largest share"
    start = before.iloc[-1] if len(before) else pd.Series({"share": 0.0, "rel_change": 0.0, "lo": 0.0, "hi": 0.0})
    return start, (
        f"the first share with a loss, {first.share:.0%} ({_interval(first)}), is {why}, so the rise is "
        f"measured from the share before it, {start.share:.0%}"
    )


def _steps(after: pd.DataFrame, floor: Floor | None) -> str:
    """Where the mean does not fall from one share to the next, a share at the floor counting as fallen."""
    flat = [
        f"{b.share:.0%}"
        for a, b in zip(after.iloc[:-1].itertuples(), after.iloc[1:].itertuples())
        if b.rel_change >= a.rel_change and not _at_floor(floor, b)
    ]
    at = [f"{r.share:.0%}" for r in after.itertuples() if _at_floor(floor, r)]
    floor_part = (
        (f"; at the model's floor (always about one grade; counted as fallen, it can fall no further): {', '.join(at)}")
        if at
        else ""
    )
    return (
        f"From there the mean change is not lower than at the share before at {', '.join(flat)} (point estimates)"
        if flat
        else "From there the mean change is lower at every next share (point estimates)"
    ) + floor_part


def _falls(masked: pd.DataFrame, floor: Floor | None) -> Claim:
    if len(masked) < 2:
        return Claim.not_measured(FALLS, reason="Not tested: fewer than two shares masked", unit=RISE_UNIT)
    start, why = _start(masked, floor)
    end = masked.iloc[-1]
    after = masked[masked["share"] >= start.share]
    if _usable(floor):
        e, e_lo, e_hi = floor.lost(end.rel_change), floor.lost(end.hi), floor.lost(end.lo)
        s, s_lo, s_hi = floor.lost(start.rel_change), floor.lost(start.hi), floor.lost(start.lo)
        unit, scale = RISE_UNIT, f"on the floor scale ({LOST})"
    else:
        e, e_lo, e_hi = -end.rel_change, -end.hi, -end.lo
        s, s_lo, s_hi = -start.rel_change, -start.hi, -start.lo
        unit, scale = (
            DROP_UNIT,
            "in points of relative change (no floor scale: the model is not above its majority "
            "grade, or none was given)",
        )
    ours = e - s
    lo = ours - math.hypot(e - e_lo, s_hi - s)
    hi = ours + math.hypot(e_hi - e, s - s_lo)
    draws = int(end.get("n_draws", 1)), int(start.get("n_draws", 1))
    return Claim.measured(
        FALLS,
        ours=ours,
        lo=lo,
        hi=hi,
        unit=unit,
        method=f"difference of two shares' 95% intervals ({TWO_STAGE}) combined as independent (MOVER; conservative, "
        "the shares share test pairs)",
        n_examples=int(end.n_examples),
        n_draws=max(draws),
        df=min(_df(end), _df(start)),
        floor=floor,
        accuracies=(_accuracy(floor, start), _accuracy(floor, end)) if floor else (),
        reason=f"The rise of the loss from where it starts to the largest share, {end.share:.0%} ({_interval(end)}), "
        f"{scale}: {why}. {_steps(after, floor)}.",
    )


def claims(curve: pd.DataFrame, floor: Floor | None = None) -> list[Claim]:
    """The study's claims about random masking, measured on our share curve (see the module's docstring).

    ``floor`` (``Lab.floor``) puts the changes on the floor scale and marks the shares at the model's floor.
    """
    masked = curve[curve["share"] > 0].sort_values("share")
    return [_no_loss(masked, floor), _falls(masked, floor)]


def verdict(curve: pd.DataFrame, floor: Floor | None = None) -> str:
    """The study's claims about random masking in plain words (markdown), rendered from :func:`claims`."""
    return render(claims(curve, floor))


def mean_ablation_specs(specs) -> list:
    """The masks this page checks with mean-ablation (each removed head's output replaced by its mean over training
    pairs): the unmasked model, every draw below 20% of the heads, and the largest share, where the two claims are
    decided; not the whole curve."""
    shares = [float(s.meta["share"]) for s in specs if "share" in s.meta]
    top = max(shares, default=None)
    return [s for s in specs if "share" not in s.meta or float(s.meta["share"]) < 0.2 or float(s.meta["share"]) == top]
