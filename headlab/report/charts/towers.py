"""The two towers against the cross-encoder (notebook 08): accuracy per condition."""

from __future__ import annotations

import altair as alt
import pandas as pd

from headlab.report.charts.forest import interval_rows


def condition_accuracy(table: pd.DataFrame, title: str = "") -> alt.VConcatChart:
    """Test accuracy of each condition with its 95% interval, one panel per model, a dashed rule at the
    cross-encoder's accuracy (the conditions of notebook 08).

    ``table``: ``results/two_tower.csv`` (preset, label, accuracy, acc_lo, acc_hi; the cross-encoder labelled
    ``cross-encoder``)."""
    presets = list(dict.fromkeys(table["preset"]))
    panels = []
    for preset, rows in table.groupby("preset", sort=False):
        last = preset == presets[-1]  # the only panel with the axis's labels and title
        x = alt.X(
            "acc_lo:Q",
            title="test accuracy (95% interval)" if last else None,
            scale=alt.Scale(domain=[0, 1]),
            axis=alt.Axis(format="%", labels=last, ticks=last),
        )
        y = alt.Y("label:N", sort=list(rows["label"]), title=None, axis=alt.Axis(labelLimit=260))
        base = alt.Chart(rows)
        panels.append(
            alt.layer(
                base.transform_filter("datum.label == 'cross-encoder'")
                .mark_rule(strokeDash=[4, 3], color="gray")
                .encode(x="accuracy:Q"),
                *interval_rows(base, y, x, "acc_hi", "accuracy"),
            ).properties(
                width=320, height=alt.Step(18), title=alt.TitleParams(str(preset), anchor="start", fontSize=12)
            )
        )
    return alt.vconcat(*panels, spacing=12, title=alt.TitleParams(title, anchor="start")).resolve_scale(x="shared")
