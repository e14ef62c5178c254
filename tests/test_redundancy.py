"""Finding 1's claims: measured on the share curve, judged by the one rule (headlab.judging.verdicts.judge); "falls
steadily" as the rise of the share of kappa lost, a share at the floor counting as fallen."""

import math

import pandas as pd

from headlab.judging.verdicts import render
from headlab.pages.redundancy import claims, verdict

KAPPA = 2.0  # in these curves a relative change of accuracy r loses a share -2r of kappa; -50% is the floor


def _curve(rows):
    """A share curve with its kappa columns (as headlab.core.sweep.share_curve): the share of kappa lost is -2 x the
    relative change, with the interval mapped the same way, and a share that loses all of it sits at the floor."""
    curve = pd.DataFrame(rows, columns=["share", "rel_change", "lo", "hi", "lo90", "hi90"]).assign(
        n_examples=100, n_draws=10
    )
    return curve.assign(
        kappa_lost=-KAPPA * curve["rel_change"],
        kappa_lost_lo=-KAPPA * curve["hi"],
        kappa_lost_hi=-KAPPA * curve["lo"],
        kappa_df=30.0,
        kappa_reason="",
        at_floor=curve["rel_change"] <= -0.49,
        floor_reason=["κ interval reaches 0" if r <= -0.49 else "κ interval above 0" for r in curve["rel_change"]],
    )


def _by_slug(rows):
    return {c.claim_id.split(".")[1]: c for c in rows}


def _verdicts(curve):
    return {slug: c.verdict for slug, c in _by_slug(claims(curve)).items()}


def test_one_row_per_claim_and_gain_at_10_is_merged_into_no_loss():
    curve = _curve(
        [(0.0, 0, 0, 0, 0, 0), (0.1, 0.005, -0.005, 0.015, -0.003, 0.013), (0.5, -0.3, -0.35, -0.25, -0.34, -0.26)]
    )
    rows = claims(curve)
    assert [c.claim_id for c in rows] == ["redundancy.no_loss_below_20", "redundancy.falls_steadily"]
    no_loss = rows[0]
    assert (
        no_loss.study == 0.01
        and "The study saw about +1% at 10%; our 95% interval there contains +1%" in no_loss.reason
    )
    assert {c.page for c in rows} == {"01_redundancy"} and all(c.method for c in rows)


def test_no_loss_is_an_equivalence_judged_at_the_weakest_share_below_20():
    wide = _curve(
        [
            (0.0, 0, 0, 0, 0, 0),
            (0.05, 0.0, -0.004, 0.004, -0.003, 0.003),
            (0.1, -0.01, -0.09, 0.02, -0.07, 0.01),
            (0.2, -0.05, -0.08, -0.02, -0.07, -0.03),
        ]
    )
    row = _by_slug(claims(wide))["no_loss_below_20"]
    # the interval contains zero, but a 9% loss is not excluded: that is not "no loss"; 10% is the weaker share, and
    # over 10 draws (read at 9 degrees of freedom) it is too wide to show a true null within ±1.15%
    assert row.verdict == "underpowered" and row.weakest_of == 2 and row.mde > row.margin
    assert "times the evidence (random draws and pairs alike; df 9) would bring it to 1.15%." in row.reason
    assert (row.ours, row.lo, row.hi, row.n_examples, row.n_draws, row.study) == (-0.01, -0.09, 0.02, 100, 10, 0.01)
    assert row.method == "two-stage bootstrap over draws and test pairs"
    assert "5%: +0.0% [-0.4%, +0.4%]; 10%: -1.0% [-9.0%, +2.0%]" in row.reason
    assert row.kappa_lost == 0.02 and not row.at_floor  # an accuracy effect carries the share of kappa lost beside
    assert "(2% [-4%, 18%] of the unmasked quadratic κ lost)" in render([row])
    narrow = wide.assign(lo=[0, -0.004, -0.006, -0.08], hi=[0, 0.004, 0.0, -0.02], rel_change=[0, 0, -0.003, -0.05])
    assert _verdicts(narrow)["no_loss_below_20"] == "holds"
    # -1.0% [-1.5%, -0.5%] at 10% lay within the old ±2%; widened, it reaches past ±1.15%
    old_narrow = wide.assign(lo=[0, -0.004, -0.015, -0.08], hi=[0, 0.004, -0.005, -0.02])
    assert _verdicts(old_narrow)["no_loss_below_20"] == "underpowered"
    # a loss of 5% [4%, 6%] at 10%: its far end, widened for the 2 shares below 20%, lies past the margin
    loss = wide.assign(lo=[0, -0.004, -0.06, -0.08], hi=[0, 0.004, -0.04, -0.02], rel_change=[0, 0, -0.05, -0.05])
    assert _verdicts(loss)["no_loss_below_20"] == "does not hold"
    assert (
        "**underpowered** · *Masking fewer than 20% of the heads costs no accuracy (about +1% at 10% in the study).*"
        in verdict(wide)
    )
    # a loss of 0.9% [0.6%, 1.2%] at 10%, precise enough to show a true null within ±1.15%: not excluded, not shown
    open_ = _curve(
        [
            (0.0, 0, 0, 0, 0, 0),
            (0.05, 0.0, -0.004, 0.004, -0.003, 0.003),
            (0.1, -0.009, -0.012, -0.006, -0.0114, -0.0066),
            (0.2, -0.05, -0.08, -0.02, -0.07, -0.03),
        ]
    )
    undecided = _by_slug(claims(open_))["no_loss_below_20"]
    assert undecided.verdict == "cannot tell" and undecided.ours == -0.009 and undecided.mde <= undecided.margin
    assert "**cannot tell** ·" in verdict(open_)


FALLING = [
    (0.0, 0, 0, 0, 0, 0),
    (0.3, -0.1, -0.2, -0.05, -0.18, -0.06),
    (0.6, -0.3, -0.4, -0.2, -0.38, -0.22),
    (0.9, -0.5, -0.6, -0.4, -0.58, -0.42),
]


def test_falls_steadily_is_the_rise_of_the_share_of_kappa_lost_past_the_first_loss():
    row = _by_slug(claims(_curve(FALLING)))["falls_steadily"]
    assert row.verdict == "holds"
    assert math.isclose(row.ours, KAPPA * (0.5 - 0.1))  # lost at 90% minus lost at 30%
    assert row.lo < row.ours < row.hi and row.unit.startswith("share of the unmasked quadratic κ lost")
    assert math.isclose(row.hi - row.ours, math.hypot(KAPPA * 0.1, KAPPA * 0.05))  # MOVER: the two shares' half-widths
    assert row.df == 30.0
    assert "first share with a loss is 30%" in row.reason and "MOVER" in row.method
    assert "rises at every next share" in row.reason
    # a blip within the noise does not undo a fall of 40 points
    blip = list(FALLING)
    blip[2] = (0.6, -0.05, -0.1, -0.01, -0.09, -0.02)
    row = _by_slug(claims(_curve(blip)))["falls_steadily"]
    assert row.verdict == "holds" and "does not rise over the share before at 60%" in row.reason
    # a curve that recovers: the loss at the largest share is no larger than where it started
    recovers = FALLING[:3] + [(0.9, 0.05, 0.02, 0.08, 0.025, 0.075)]
    assert _verdicts(_curve(recovers))["falls_steadily"] == "opposite"
    # a model with no agreement beyond chance unmasked has no kappa to lose: not measured, and said why
    flat = _curve(FALLING).assign(kappa_reason="unmasked kappa -0.010 <= 0: no agreement beyond chance to lose")
    row = _by_slug(claims(flat))["falls_steadily"]
    assert row.verdict == "cannot tell" and "no agreement beyond chance" in row.reason and math.isnan(row.ours)


def test_a_curve_that_falls_to_the_floor_and_stays_flat_there_falls_steadily():
    at_floor = -0.5  # all of the kappa lost: the floor
    rows = [
        (0.0, 0, 0, 0, 0, 0),
        (0.2, -0.1, -0.15, -0.05, -0.14, -0.06),
        (0.4, -0.4, -0.45, -0.35, -0.44, -0.36),
        (0.6, at_floor, at_floor - 0.02, at_floor + 0.02, at_floor - 0.015, at_floor + 0.015),
        (0.8, at_floor + 0.002, at_floor - 0.018, at_floor + 0.022, at_floor - 0.013, at_floor + 0.017),
        (1.0, at_floor, at_floor - 0.02, at_floor + 0.02, at_floor - 0.015, at_floor + 0.015),
    ]
    row = _by_slug(claims(_curve(rows)))["falls_steadily"]
    assert row.verdict == "holds"  # the old rule (lower at every next share) said "does not hold"
    # flat at the floor counts as fallen
    assert "at the floor (counted as fallen" in row.reason and "60% (κ interval reaches 0), 80%" in row.reason
    assert row.at_floor and "does not rise over the share before" not in row.reason
    # a collapse at once: the first share with a loss is already at the floor, so the rise is measured from before it
    sudden = [rows[0], (0.2, 0.0, -0.03, 0.03, -0.02, 0.02)] + rows[3:]
    row = _by_slug(claims(_curve(sudden)))["falls_steadily"]
    assert row.verdict == "holds" and "measured from the share before it, 20%" in row.reason


def test_shares_not_in_the_sweep_are_said_to_be_untested():
    only_high = _curve([(0.0, 0, 0, 0, 0, 0), (0.5, -0.2, -0.3, -0.1, -0.28, -0.12)])
    found = _by_slug(claims(only_high))
    assert found["no_loss_below_20"].verdict == "cannot tell" and math.isnan(found["no_loss_below_20"].ours)
    text = verdict(only_high)
    assert "no share between 0 and 20% in SHARES" in text and "not measured" in text
    assert text == render(claims(only_high))


def test_the_mean_ablation_check_takes_the_shares_below_20_percent_and_the_largest():
    from headlab.core.sweep import baseline_spec, random_share_specs
    from headlab.pages.redundancy import mean_ablation_specs

    specs = [baseline_spec(), *random_share_specs(4, 4, [0.0, 0.125, 0.25, 0.5, 1.0], 3, 0)]
    shares = sorted({s.meta.get("share") for s in mean_ablation_specs(specs) if "share" in s.meta})
    assert shares == [0.0, 0.125, 1.0] and mean_ablation_specs(specs)[0] == baseline_spec()
