"""Finding 1's claims: "no loss" as non-inferiority within a stated margin, "falls steadily" as a stated rule."""
import pandas as pd

from headlab.findings.redundancy import claims, verdict


def _curve(rows):
    return pd.DataFrame(rows, columns=["share", "rel_change", "lo", "hi", "lo90", "hi90"]).assign(n_examples=100,
                                                                                                 n_draws=10)


def _verdicts(curve, margin=0.02):
    return {c.claim_id.split(".")[1]: c.verdict for c in claims(curve, margin)}


def test_no_loss_is_claimed_only_when_the_interval_excludes_a_loss_beyond_the_margin():
    wide = _curve([(0.0, 0, 0, 0, 0, 0), (0.1, -0.01, -0.09, 0.02, -0.07, 0.01), (0.2, -0.05, -0.08, -0.02, -0.07, -0.03)])
    # the interval contains zero, but a 7% loss is not excluded: that is not "no loss"
    assert _verdicts(wide)["no_loss_below_20"] == "cannot tell"
    text = verdict(wide, margin=0.02)
    assert "*Masking fewer than 20% of the heads costs no accuracy* **cannot be told** here" in text
    assert "10%: -1.0% [-9.0%, +2.0%], cannot tell" in text
    narrow = wide.assign(lo=[0, -0.02, -0.08], lo90=[0, -0.015, -0.07])
    assert _verdicts(narrow)["no_loss_below_20"] == "holds"
    loss = wide.assign(hi=[0, -0.001, -0.02])
    assert _verdicts(loss)["no_loss_below_20"] == "does not hold" and _verdicts(loss)["gain_at_10"] == "opposite"
    row = claims(wide)[0]
    assert (row.ours, row.lo, row.hi, row.n_examples, row.n_draws, row.study) == (-0.01, -0.09, 0.02, 100, 10, 0.0)


def test_falls_steadily_means_lower_at_every_next_share():
    rows = [(0.0, 0, 0, 0, 0, 0), (0.3, -0.1, -0.2, -0.05, -0.18, -0.06), (0.6, -0.3, -0.4, -0.2, -0.38, -0.22),
            (0.9, -0.5, -0.6, -0.4, -0.58, -0.42)]
    assert _verdicts(_curve(rows))["falls_steadily"] == "holds"
    assert "from there the mean change falls at every next share" in verdict(_curve(rows))
    rows[2] = (0.6, -0.05, -0.1, -0.01, -0.09, -0.02)  # a rise from 30% to 60%
    assert _verdicts(_curve(rows))["falls_steadily"] == "does not hold"
    assert "the mean change is not lower at 60%" in verdict(_curve(rows))


def test_shares_not_in_the_sweep_are_said_to_be_untested():
    only_high = _curve([(0.0, 0, 0, 0, 0, 0), (0.5, -0.2, -0.3, -0.1, -0.28, -0.12)])
    found = {c.claim_id: c for c in claims(only_high)}
    assert found["redundancy.gain_at_10"].verdict == "cannot tell" and "10% is not in SHARES" in verdict(only_high)
    assert "not measured" in verdict(only_high)
