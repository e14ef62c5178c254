"""Notebook 00's charts (grades, training, confusion) and the share curve of notebooks 01 and 10."""

from __future__ import annotations

import altair as alt
import pandas as pd


def class_balance(balance: pd.DataFrame) -> alt.Chart:
    """Share of each grade per split."""
    return (
        alt.Chart(balance)
        .mark_bar()
        .encode(
            x=alt.X("label:O", title="grade"),
            y=alt.Y("share:Q", title="share of pairs", axis=alt.Axis(format="%")),
            color=alt.Color("split:N"),
            xOffset="split:N",
            tooltip=["split", "label", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=360, height=220, title="Grade balance per split")
    )


def training_history(history: pd.DataFrame) -> alt.Chart:
    """Training loss and dev accuracy per epoch."""
    long = history.melt("epoch", ["train_loss", "dev_accuracy", "dev_macro_f1"], "metric", "value")
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("epoch:O"),
            y=alt.Y("value:Q"),
            color="metric:N",
            tooltip=["epoch", "metric", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=360, height=220, title="Fine-tuning")
    )


def confusion(conf: pd.DataFrame) -> alt.Chart:
    """Confusion matrix as shares of each true grade, with counts."""
    base = alt.Chart(conf).encode(
        x=alt.X("predicted:O", title="predicted grade"), y=alt.Y("true:O", title="true grade")
    )
    cells = base.mark_rect().encode(
        color=alt.Color("share:Q", scale=alt.Scale(scheme="blues"), title="row share"),
        tooltip=["true", "predicted", "count", alt.Tooltip("share:Q", format=".1%")],
    )
    text = base.mark_text().encode(
        text="count:Q", color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black"))
    )
    return (cells + text).properties(width=260, height=260, title="Confusion matrix (test)")


def share_curve(
    curve: pd.DataFrame,
    draws: pd.DataFrame | None = None,
    reference: pd.DataFrame | None = None,
    x_title: str = "share of all heads masked",
) -> alt.LayerChart:
    """Mean relative accuracy change per masked share, its 95% interval, every draw, and the study's points.

    ``curve``: kind, share, rel_change, lo, hi (from ``sweep.share_curve``); ``draws``: kind, share, rel_change
    per draw; ``reference``: share, rel_change, label (the study's reported numbers).
    """
    x = alt.X("share:Q", title=x_title, axis=alt.Axis(format="%"))
    y_axis = alt.Axis(format="+%")
    base = alt.Chart(curve)
    layers = [
        base.mark_area(opacity=0.2).encode(
            x=x, y=alt.Y("lo:Q", title="relative change of accuracy", axis=y_axis), y2="hi:Q", color="kind:N"
        ),
        base.mark_line(point=True).encode(
            x=x,
            y=alt.Y("rel_change:Q", axis=y_axis),
            color="kind:N",
            tooltip=[
                "kind",
                alt.Tooltip("share:Q", format=".0%"),
                alt.Tooltip("rel_change:Q", format="+.1%"),
                alt.Tooltip("lo:Q", format="+.1%"),
                alt.Tooltip("hi:Q", format="+.1%"),
                "n_draws",
                "n_examples",
            ],
        ),
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="zero:Q"),
    ]
    if draws is not None:
        layers.append(
            alt.Chart(draws)
            .mark_circle(size=18, opacity=0.35)
            .encode(
                x=x, y="rel_change:Q", color="kind:N", tooltip=["mask_id", alt.Tooltip("rel_change:Q", format="+.1%")]
            )
        )
    if reference is not None:
        layers.append(
            alt.Chart(reference)
            .mark_point(shape="diamond", size=90, color="black", filled=True)
            .encode(x=x, y="rel_change:Q", tooltip=["label", alt.Tooltip("rel_change:Q", format="+.1%")])
        )
    return alt.layer(*layers).properties(width=520, height=300)
