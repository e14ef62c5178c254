"""The interval forest several pages draw: one row per category, its 95% interval as a line and its estimate as a
point, beside a grey line at zero."""

from __future__ import annotations

import altair as alt
import pandas as pd


def zero_line() -> alt.Chart:
    """A grey vertical line at zero on a horizontal value axis."""
    return alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(x="zero:Q")


def interval_rows(
    base: alt.Chart, y: alt.Y, lo: alt.X, hi: str, estimate: str, size: int = 60, tooltip=None, **shared
) -> list[alt.Chart]:
    """The two marks of every row of ``base``'s table: a line from ``lo`` (the channel x, with the axis's title and
    format) to the column ``hi``, and a filled point at the column ``estimate`` (``size``, ``tooltip``);
    ``shared`` encodings (colour, an offset) apply to both."""
    point = {"tooltip": tooltip} if tooltip is not None else {}
    return [
        base.mark_rule(strokeWidth=2).encode(y=y, x=lo, x2=f"{hi}:Q", **shared),
        base.mark_point(filled=True, size=size).encode(y=y, x=f"{estimate}:Q", **point, **shared),
    ]
