"""Finding 1's verdict: "no loss" as non-inferiority within a stated margin, "falls steadily" as a stated rule."""
import pandas as pd

from headlab.findings.redundancy import verdict


def _curve(rows):
    return pd.DataFrame(rows, columns=["share", "rel_change", "lo", "hi", "lo90", "hi90"])


def test_no_loss_is_claimed_only_when_the_interval_excludes_a_loss_beyond_the_margin():
    wide = _curve([(0.0, 0, 0, 0, 0, 0), (0.1, -0.01, -0.09, 0.02, -0.07, 0.01), (0.2, -0.05, -0.08, -0.02, -0.07, -0.03)])
    text = verdict(wide, margin=0.02)
    # the interval contains zero, but a 7% loss is not excluded: that is not "no loss"
    assert "*No loss below 20%* **cannot be told** with these draws and pairs" in text and "10%: -1.0% [-9.0%, +2.0%], cannot tell" in text
    narrow = wide.assign(lo=[0, -0.02, -0.08], lo90=[0, -0.015, -0.07])
    assert "*No loss below 20%* holds here" in verdict(narrow, margin=0.02)
    loss = wide.assign(hi=[0, -0.001, -0.02])
    assert "*No loss below 20%* does **not** hold" in verdict(loss, margin=0.02)


def test_falls_steadily_means_lower_at_every_next_share():
    rows = [(0.0, 0, 0, 0, 0, 0), (0.3, -0.1, -0.2, -0.05, -0.18, -0.06), (0.6, -0.3, -0.4, -0.2, -0.38, -0.22),
            (0.9, -0.5, -0.6, -0.4, -0.58, -0.42)]
    assert "from there the mean change falls steadily" in verdict(_curve(rows))
    rows[2] = (0.6, -0.05, -0.1, -0.01, -0.09, -0.02)  # a rise from 30% to 60%
    assert "does **not** fall steadily (no lower at 60%)" in verdict(_curve(rows))
