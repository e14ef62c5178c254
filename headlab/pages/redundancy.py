"""Finding 1, redundancy: mask a random share of all heads and watch accuracy.

The study: below 20% of heads masked there is no loss; at 10% accuracy is about +1% above baseline; past
some share accuracy falls steadily. :func:`claims` measures both claims on our share curve (one row each, the +1% at
10% is the study's number beside the first), and :func:`headlab.judging.verdicts.judge` gives the verdicts.

The curve (:func:`headlab.core.sweep.share_curve`) gives, per share, the relative change of the accuracy averaged
over the draws with its 95% two-stage bootstrap interval (draws, then test pairs).

- **No loss below 20%** (``no_effect``): every share masked below 20% must lie within the registered margin. Each share
  is judged, and the row shows the weakest: a share the rule rejects before one it cannot decide, and among equals
  the one whose interval reaches furthest from no change; so the row holds only when every share does.
- **Falls steadily** (``effect``, direction +1): the number is how much more of the unmasked model's quadratic kappa
  (the chance-corrected scale: 0 unmasked, 100% no agreement with the gold grades beyond chance) is lost at the
  largest share than at the first share with a loss (its kappa-lost interval above 0): the fall goes on past the share
  where it starts. A share at the floor (decided from its predictions, :func:`headlab.core.stats.at_floor`) has
  fallen as far as it can, so a curve that reaches the floor and stays there counts as falling all the way; when the
  first share with a loss is already at the floor, or is the largest share, nothing can follow it, and the rise is
  measured from the share before it (the fall happened within one step). The interval combines the two shares'
  intervals as if they were independent (square root of the sum of the squared half-widths on each side, MOVER):
  conservative, since both shares resample the same test pairs and so err together. A model with no agreement
  beyond chance unmasked (kappa <= 0) has nothing to lose, and the claim is not measured.
"""

from __future__ import annotations

import math

import pandas as pd

from headlab.judging.units import ACCURACY_CHANGE, PAIRED, RISE, TWO_STAGE, with_interval
from headlab.judging.verdicts import Claim, Kind, StudyClaim, Verdict, draws_df_default, judge, render

STUDY_REFERENCE = pd.DataFrame(
    [
        {"share": 0.1, "rel_change": 0.01, "label": "study: about +1% at 10%"},
    ]
)

STUDY_GAIN_AT_10 = 0.01
_ORDER: dict[str, int] = {
    Verdict.DOES_NOT_HOLD: 0,
    Verdict.OPPOSITE: 0,
    Verdict.CANNOT_TELL: 1,
    Verdict.UNDERPOWERED: 1,
    Verdict.HOLDS: 2,
    Verdict.NOT_COMPARABLE: 3,
}


def _interval(r) -> str:
    return with_interval(ACCURACY_CHANGE, r.rel_change, r.lo, r.hi)


def _method(r) -> str:
    return TWO_STAGE if int(r.n_draws) > 1 else PAIRED


def _kappa_interval(r) -> str:
    return f"{r.kappa_lost:.0%} [{r.kappa_lost_lo:.0%}, {r.kappa_lost_hi:.0%}] of κ lost"


def _df(row) -> float:
    """A share's degrees of freedom: the curve's own (Welch–Satterthwaite over its draws), else the most cautious
    reading of its draws (``n_draws - 1``; infinite for one mask)."""
    df = getattr(row, "df", None)
    return draws_df_default(row.n_draws) if df is None or pd.isna(df) else float(df)


def _kappa_df(row) -> float:
    df = getattr(row, "kappa_df", None)
    return draws_df_default(row.n_draws) if df is None or pd.isna(df) else float(df)


NO_LOSS = StudyClaim(
    "redundancy.no_loss_below_20",
    "01_redundancy",
    "Masking fewer than 20% of the heads costs no accuracy (about +1% at 10% in the study)",
    "below 20% there is no loss; at 10% accuracy is about +1% above baseline",
    Kind.NO_EFFECT,
)
FALLS = StudyClaim(
    "redundancy.falls_steadily",
    "01_redundancy",
    "Past some share, accuracy falls steadily as more heads go",
    "Past some share, accuracy falls steadily as more heads go",
    Kind.EFFECT,
    direction=1,
)
CLAIMS = (NO_LOSS, FALLS)


def _no_loss(masked: pd.DataFrame) -> Claim:
    below = masked[masked["share"] < 0.2]
    if below.empty:
        return Claim.not_measured(
            NO_LOSS,
            reason="Not tested: no share between 0 and 20% in SHARES",
            unit=ACCURACY_CHANGE,
            study=STUDY_GAIN_AT_10,
        )

    def weakness(r):
        j = judge(
            NO_LOSS,
            float(r.rel_change),
            float(r.lo),
            float(r.hi),
            df=_df(r),
            n_draws=r.n_draws,
            n_examples=int(r.n_examples),
            weakest_of=len(below),
        )
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
        unit=ACCURACY_CHANGE,
        method=_method(shown),
        n_examples=shown.n_examples,
        n_draws=shown.n_draws,
        df=_df(shown),
        weakest_of=len(below),
        kappa=shown._asdict() if "kappa_lost" in masked else None,
        study=STUDY_GAIN_AT_10 if abs(shown.share - 0.1) < 1e-9 else None,
        reason=f"Every share masked below 20% is judged on its own and the row shows the weakest, {shown.share:.0%} of "
        f"the heads; the shares: {parts}.{study_ten}",
    )


def _start(masked: pd.DataFrame):
    """The share the fall is measured from (see the module's docstring) and why."""
    falling = masked[masked["kappa_lost_lo"] > 0]
    if falling.empty:
        return (
            masked.iloc[0],
            "no share shows a loss (a κ-lost interval above 0), so the rise is measured from the "
            f"smallest share masked, {masked.iloc[0].share:.0%}",
        )
    first = falling.iloc[0]
    last = masked.iloc[-1]
    if not (bool(first.at_floor) or first.share == last.share):
        return first, f"the first share with a loss is {first.share:.0%} ({_kappa_interval(first)})"
    before = masked[masked["share"] < first.share]
    why = f"already at the floor ({first.floor_reason})" if bool(first.at_floor) else "the largest share"
    zero = {
        "share": 0.0,
        "kappa_lost": 0.0,
        "kappa_lost_lo": 0.0,
        "kappa_lost_hi": 0.0,
        "n_draws": 1,
        "kappa_df": math.inf,
    }
    start = before.iloc[-1] if len(before) else pd.Series(zero)
    return start, (
        f"the first share with a loss, {first.share:.0%} ({_kappa_interval(first)}), is {why}, so the rise is "
        f"measured from the share before it, {start.share:.0%}"
    )


def _steps(after: pd.DataFrame) -> str:
    """Where the share of kappa lost does not rise from one share to the next, a share at the floor counting as
    fallen."""
    flat = [
        f"{b.share:.0%}"
        for a, b in zip(after.iloc[:-1].itertuples(), after.iloc[1:].itertuples())
        if b.kappa_lost <= a.kappa_lost and not bool(b.at_floor)
    ]
    at = [f"{r.share:.0%} ({r.floor_reason})" for r in after.itertuples() if bool(r.at_floor)]
    floor_part = f"; at the floor (counted as fallen, it can fall no further): {', '.join(at)}" if at else ""
    return (
        f"From there the share of κ lost does not rise over the share before at {', '.join(flat)} (point estimates)"
        if flat
        else "From there the share of κ lost rises at every next share (point estimates)"
    ) + floor_part


def _falls(masked: pd.DataFrame) -> Claim:
    if len(masked) < 2:
        return Claim.not_measured(FALLS, reason="Not tested: fewer than two shares masked", unit=RISE)
    undefined = masked["kappa_reason"].fillna("").astype(str).str.len() > 0
    if undefined.any():
        return Claim.not_measured(
            FALLS,
            reason=f"Not measured: no kappa scale ({masked.loc[undefined, 'kappa_reason'].iloc[0]})",
            unit=RISE,
        )
    start, why = _start(masked)
    end = masked.iloc[-1]
    after = masked[masked["share"] >= start.share]
    e, e_lo, e_hi = end.kappa_lost, end.kappa_lost_lo, end.kappa_lost_hi
    s, s_lo, s_hi = start.kappa_lost, start.kappa_lost_lo, start.kappa_lost_hi
    ours = e - s
    lo = ours - math.hypot(e - e_lo, s_hi - s)
    hi = ours + math.hypot(e_hi - e, s - s_lo)
    draws = int(end.get("n_draws", 1)), int(start.get("n_draws", 1))
    return Claim.measured(
        FALLS,
        ours=ours,
        lo=lo,
        hi=hi,
        unit=RISE,
        method=f"difference of two shares' 95% intervals ({TWO_STAGE}) combined as independent (MOVER; conservative, "
        "the shares share test pairs)",
        n_examples=int(end.n_examples),
        n_draws=max(draws),
        df=min(_kappa_df(end), _kappa_df(start)),
        at_floor=bool(end.at_floor),
        floor_reason=str(end.floor_reason),
        reason=f"The rise of the share of κ lost from where it starts to the largest share, {end.share:.0%} "
        f"({_kappa_interval(end)}; accuracy {_interval(end)}): {why}. {_steps(after)}.",
    )


def claims(curve: pd.DataFrame) -> list[Claim]:
    """The study's claims about random masking, measured on our share curve (see the module's docstring): the
    curve's kappa columns (:func:`headlab.core.sweep.share_curve`) give the chance-corrected scale and the floor."""
    masked = curve[curve["share"] > 0].sort_values("share")
    return [_no_loss(masked), _falls(masked)]


def verdict(curve: pd.DataFrame) -> str:
    """The study's claims about random masking in plain words (markdown), rendered from :func:`claims`."""
    return render(claims(curve))


def mean_ablation_specs(specs) -> list:
    """The masks this page checks with mean-ablation (each removed head's output replaced by its mean over training
    pairs): the unmasked model, every draw below 20% of the heads, and the largest share, where the two claims are
    decided; not the whole curve."""
    shares = [float(s.meta["share"]) for s in specs if "share" in s.meta]
    top = max(shares, default=None)
    return [s for s in specs if "share" not in s.meta or float(s.meta["share"]) < 0.2 or float(s.meta["share"]) == top]
