"""Layer dependence and the single-head grid (notebook 02), and attention maps drawn as cells."""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd


def layer_bars(table: pd.DataFrame, reference: pd.DataFrame | None = None) -> alt.LayerChart:
    """Relative accuracy change when one whole layer is masked, with 95% intervals and the study's number.

    ``table``: layer, rel_change, lo, hi, distinguishable, p_holm (``importance.layer_effects``); ``reference``:
    layer, rel_change, label. Bars are coloured by whether the change survives the Holm correction over layers.
    """
    effect = (
        "!datum.distinguishable ? 'not distinguishable from 0' : datum.rel_change > 0 ? "
        "'gain (Holm across layers)' : 'loss (Holm across layers)'"
    )
    x = alt.X("layer:O", title="masked layer (all its heads)")
    base = alt.Chart(table).transform_calculate(effect=effect)
    layers = [
        base.mark_bar().encode(
            x=x,
            y=alt.Y("rel_change:Q", title="relative change of accuracy", axis=alt.Axis(format="+%")),
            color=alt.Color(
                "effect:N",
                title=None,
                scale=alt.Scale(
                    domain=["gain (Holm across layers)", "loss (Holm across layers)", "not distinguishable from 0"],
                    range=["#4c78a8", "#e45756", "#bab0ac"],
                ),
            ),
            tooltip=[
                "layer",
                alt.Tooltip("rel_change:Q", format="+.1%"),
                alt.Tooltip("lo:Q", format="+.1%"),
                alt.Tooltip("hi:Q", format="+.1%"),
                alt.Tooltip("accuracy:Q", format=".1%"),
                alt.Tooltip("p_mcnemar:Q", format=".2g"),
                alt.Tooltip("p_holm:Q", format=".2g"),
            ],
        ),
        base.mark_rule().encode(x=x, y="lo:Q", y2="hi:Q"),
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(y="zero:Q"),
    ]
    if reference is not None:
        layers.append(
            alt.Chart(reference)
            .mark_point(shape="diamond", size=110, color="black", filled=True)
            .encode(x=x, y="rel_change:Q", tooltip=["label", alt.Tooltip("rel_change:Q", format="+.1%")])
        )
    return alt.layer(*layers).properties(width=max(240, 40 * len(table)), height=260)


def symmetric_scale(values, scheme: str = "redblue") -> alt.Scale:
    """A diverging colour scale the same distance either side of 0: +1.3% is as pale as -1.3%, never as saturated as
    the largest loss (a scale centred at 0 alone stretches each side to its own extreme)."""
    reach = max(float(np.nanmax(np.abs(np.asarray(values, dtype=np.float64)), initial=0.0)), 1e-3)
    return alt.Scale(scheme=scheme, domain=[-reach, reach])


def head_heatmap(
    table: pd.DataFrame,
    value: str = "rel_change",
    title: str = "relative change of accuracy",
    fmt: str = "+.1%",
    diverging: bool = True,
    mark: str | None = "significant",
) -> alt.LayerChart:
    """A layers x heads grid of one number per head; cells where ``mark`` is true get a black frame.

    Diverging colours (centred at 0) suit signed effects, sequential ones suit scores. The tooltip shows
    the interval and p-values when the table has them.
    """
    base = alt.Chart(table).encode(x=alt.X("head:O"), y=alt.Y("layer:O"))
    scale = symmetric_scale(table[value]) if diverging else alt.Scale(scheme="greens")
    extra = [
        alt.Tooltip(f"{c}:Q", format=fmt if c in ("lo", "hi") else ".2g")
        for c in ("lo", "hi", "p_mcnemar", "p_holm")
        if c in table.columns
    ]
    extra += [c for c in ("direction",) if c in table.columns]
    layers = [
        base.mark_rect().encode(
            color=alt.Color(f"{value}:Q", scale=scale, title=title, legend=alt.Legend(format=fmt.lstrip("+"))),
            tooltip=["layer", "head", alt.Tooltip(f"{value}:Q", format=fmt), *extra],
        ),
        base.mark_text(fontSize=9).encode(text=alt.Text(f"{value}:Q", format=fmt)),
    ]
    if mark is not None:
        layers.append(base.mark_rect(fill=None, stroke="black", strokeWidth=2).transform_filter(f"datum.{mark}"))
    heads, layers_n = table["head"].nunique(), table["layer"].nunique()
    return alt.layer(*layers).properties(width=40 * heads, height=26 * layers_n)


def head_intervals(grid: pd.DataFrame) -> alt.LayerChart:
    """Every head's relative change when masked alone, with its 95% interval, sorted by the change."""
    table = grid.dropna(subset=["rel_change"]).assign(
        name=lambda t: t["layer"].astype(str) + "." + t["head"].astype(str)
    )
    x = alt.X(
        "name:N",
        sort=alt.EncodingSortField("rel_change", order="ascending"),
        title="head (layer.head), sorted",
        axis=alt.Axis(labelAngle=-90, labelFontSize=8, labelOverlap="greedy"),
    )
    color = alt.Color(
        "direction:N",
        title="after Holm",
        scale=alt.Scale(domain=["hurts", "helps", "none"], range=["#e45756", "#4c78a8", "#bab0ac"]),
    )
    base = alt.Chart(table)
    return alt.layer(
        base.mark_rule().encode(
            x=x,
            y=alt.Y("lo:Q", title="relative change of accuracy", axis=alt.Axis(format="+%")),
            y2="hi:Q",
            color=color,
        ),
        base.mark_point(filled=True, size=25).encode(
            x=x,
            y="rel_change:Q",
            color=color,
            tooltip=[
                "name",
                alt.Tooltip("rel_change:Q", format="+.1%"),
                alt.Tooltip("lo:Q", format="+.1%"),
                alt.Tooltip("hi:Q", format="+.1%"),
                alt.Tooltip("p_mcnemar:Q", format=".2g"),
                alt.Tooltip("p_holm:Q", format=".2g"),
            ],
        ),
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(y="zero:Q"),
    ).properties(width=max(300, 9 * len(table)), height=260)


def importance_scatter(grid: pd.DataFrame, importance: pd.DataFrame, column: str = "importance") -> alt.Chart:
    """Gradient importance of each head against the accuracy lost when it is masked alone."""
    both = grid[["layer", "head", "rel_change", "lo", "hi"]].merge(importance, on=["layer", "head"])
    both = both.assign(loss=-both["rel_change"])
    return (
        alt.Chart(both)
        .mark_circle(size=60, opacity=0.8)
        .encode(
            x=alt.X(f"{column}:Q", title=f"gradient importance ({column})"),
            y=alt.Y("loss:Q", title="accuracy lost when masked (relative)", axis=alt.Axis(format="+%")),
            color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis")),
            tooltip=[
                "layer",
                "head",
                alt.Tooltip(f"{column}:Q", format=".3g"),
                alt.Tooltip("rel_change:Q", format="+.1%"),
                alt.Tooltip("lo:Q", format="+.1%"),
                alt.Tooltip("hi:Q", format="+.1%"),
            ],
        )
        .properties(width=320, height=260)
    )


def attention_cells(cells, tokens: list[str], title: str = "") -> alt.Chart:
    """Attention weights as a token x token heatmap: ``cells`` (a table, or Altair data) has query, key, weight.

    ``query`` and ``key`` are token positions; rows are the attending (query) tokens, columns the attended
    (key) tokens, in sentence order, every token shown even where no weight was kept. The browser looks the
    labels up (position and token, so repeated tokens stay apart), which keeps the data small; other columns
    (layer, head) pass through for filters.
    """

    labels = [f"{i} {t}" for i, t in enumerate(tokens)]
    lookup = json.dumps(labels)
    return (
        alt.Chart(cells)
        .transform_calculate(
            query_token=f"{lookup}[datum.query]",
            key_token=f"{lookup}[datum.key]",
        )
        .mark_rect()
        .encode(
            x=alt.X(
                "key_token:O",
                scale=alt.Scale(domain=labels),
                title="attended token",
                axis=alt.Axis(labelAngle=-60, labelOverlap=False),
            ),
            y=alt.Y(
                "query_token:O",
                scale=alt.Scale(domain=labels),
                title="attending token",
                axis=alt.Axis(labelOverlap=False),
            ),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="attention"),
            tooltip=["query_token:O", "key_token:O", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=16 * len(tokens), height=16 * len(tokens), title=title)
    )


def attention_heatmap(weights, tokens: list[str], title: str = "") -> alt.Chart:
    """One head's attention map (an array (tokens, tokens), rows attending) as a heatmap."""
    cells = pd.DataFrame(weights).rename_axis(index="query", columns="key").stack().rename("weight").reset_index()
    return attention_cells(cells, tokens, title)
