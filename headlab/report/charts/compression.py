"""Compression (notebook 10): the students beside their zero-budget points, and speed."""

from __future__ import annotations

import altair as alt
import pandas as pd

from headlab.report.charts.forest import interval_rows, zero_line


def students(table: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """Share of the teacher's quadratic κ each distilled student loses, with its 95% interval (over test pairs and
    seeds), and, as a hollow mark, what the same heads masked without retraining lose: where the student started.

    ``table``: kind, kappa_lost, kappa_lost_lo, kappa_lost_hi, zero_budget_kappa_lost, seeds, accuracy
    (:func:`headlab.pages.pruning.student_table`).
    """
    y = alt.Y("kind:N", sort=list(table["kind"]), title=None)
    axis = alt.Axis(format="%")
    base = alt.Chart(table)
    return alt.layer(
        zero_line(),
        *interval_rows(
            base,
            y,
            alt.X("kappa_lost_lo:Q", title="share of the teacher's quadratic κ lost", axis=axis),
            "kappa_lost_hi",
            "kappa_lost",
            size=70,
            tooltip=[
                "kind",
                alt.Tooltip("kappa_lost:Q", format=".1%", title="distilled"),
                alt.Tooltip("kappa_lost_lo:Q", format=".1%"),
                alt.Tooltip("kappa_lost_hi:Q", format=".1%"),
                alt.Tooltip("accuracy:Q", format=".1%"),
                "seeds",
            ],
        ),
        base.mark_point(shape="circle", size=70, color="#e45756").encode(
            y=y,
            x="zero_budget_kappa_lost:Q",
            tooltip=["kind", alt.Tooltip("zero_budget_kappa_lost:Q", format=".1%", title="pruned, not retrained")],
        ),
    ).properties(width=420, height=40 * len(table), title=title)


def speed_bars(speed: pd.DataFrame) -> alt.FacetChart:
    """Throughput per variant from ``pages.pruning.speed_rows``: pairs per second (median bar, min to max rule),
    the speed-up over the unpruned model printed at the bar's end, one row per share removed, batch size and machine
    (its first words; the tooltip names it in full): each row one run of the benchmark, its variants side by side."""
    table = speed.assign(
        setting=lambda t: (
            t["share_removed"].map(lambda x: f"{x:.0%} of heads removed")
            + ", batch "
            + t["batch_size"].astype(str)
            + ", "
            + t["device"].astype(str)
            + " "
            + t["precision"].astype(str)
            + ", "
            + t["machine"].astype(str).str.split(",").str[0]
        ),
        speedup_text=lambda t: t["speedup"].map(lambda x: f"{x:.2f}x"),
    )
    base = alt.Chart().encode(y=alt.Y("variant:N", title=None))
    tooltip = ["variant", "machine", "batch_size", alt.Tooltip("pairs_per_s:Q", format=".1f"), "speedup_text"]
    return (
        alt.layer(
            base.mark_bar(color="#4c78a8").encode(x=alt.X("pairs_per_s:Q", title="pairs per second"), tooltip=tooltip),
            base.mark_rule().encode(x="pairs_per_s_min:Q", x2="pairs_per_s_max:Q"),
            base.mark_text(align="left", dx=4).encode(x="pairs_per_s_max:Q", text="speedup_text:N"),
            data=table,
        )
        .properties(width=480, height=alt.Step(18))
        .facet(  # the labels above each row, not beside it
            row=alt.Row(
                "setting:N", title=None, header=alt.Header(labelOrient="top", labelAnchor="start", labelAngle=0)
            )
        )
    )
