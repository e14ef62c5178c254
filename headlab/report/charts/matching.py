"""Term matching, fine-tuning deltas and the [CLS] head (notebooks 05-07): maps side by side, [CLS] bars,
conditions against their random controls."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd

from headlab.report.charts.forest import interval_rows, zero_line
from headlab.report.charts.heads import symmetric_scale


def map_panels(cells: pd.DataFrame, columns: list[str], select: bool = True, title: str = "") -> alt.HConcatChart:
    """One head's attention on one pair, a panel per column of ``cells`` (runs, and their ``difference``).

    ``cells`` comes from ``attention_compare.compare_maps``. With ``select``, menus pick the example and the
    head among those in ``cells`` (so the static book needs no kernel); without, ``cells`` should hold one of
    each. Identical query/title terms are framed; ``difference`` uses a diverging scale centred at 0. The
    data go to the page with short field names and the token labels as one lookup, to keep pages small.
    """

    positions = cells.drop_duplicates(["example", "query"]).sort_values(["example", "query"])
    lookup = json.dumps({str(e): list(g["query_token"]) for e, g in positions.groupby("example")})
    values = {column: f"v{i}" for i, column in enumerate(columns)}
    data = pd.DataFrame(
        {
            "e": cells["example"],
            "h": cells["head_label"],
            "q": cells["query"],
            "k": cells["key"],
            "i": cells["identical"].astype(int),
            **{v: cells[c].round(3) for c, v in values.items()},
        }
    )
    # inline values: a DataFrame over Altair's 5000-row limit (a few pairs x heads) would be refused
    base = alt.Chart({"values": data.to_dict("records")}).transform_calculate(
        query_token=f"{lookup}[datum.e][datum.q]", key_token=f"{lookup}[datum.e][datum.k]"
    )
    params = []
    if select:
        examples = list(dict.fromkeys(int(e) for e in cells["example"]))
        heads = list(dict.fromkeys(cells["head_label"]))
        example = alt.param(
            name="example", value=examples[0], bind=alt.binding_select(options=examples, name="example ")
        )
        head = alt.param(name="head", value=heads[0], bind=alt.binding_select(options=heads, name="head (layer.head) "))
        params = [example, head]
        base = base.transform_filter((alt.datum.e == example) & (alt.datum.h == head))
    size = 13 * int(cells.groupby("example")["query"].max().max() + 1)
    tooltip = [
        alt.Tooltip("h:N", title="head"),
        alt.Tooltip("query_token:O", title="attending"),
        alt.Tooltip("key_token:O", title="attended"),
        *[alt.Tooltip(f"{v}:Q", title=c, format=".3f") for c, v in values.items()],
    ]
    x = alt.X("key_token:O", title="attended token", axis=alt.Axis(labelAngle=-60))
    y = alt.Y("query_token:O", title="attending token")
    frames = base.mark_rect(fill=None, stroke="black", strokeWidth=1).encode(x=x, y=y).transform_filter("datum.i == 1")
    panels = []
    for column, v in values.items():
        if column == "difference":
            scale = symmetric_scale(cells[column])
        else:
            scale = alt.Scale(scheme="blues", domain=[0, 1])
        cells_layer = base.mark_rect().encode(
            x=x, y=y, tooltip=tooltip, color=alt.Color(f"{v}:Q", scale=scale, title=column)
        )
        panels.append(alt.layer(cells_layer, frames).properties(width=size, height=size, title=column))
    chart = alt.hconcat(*panels).resolve_scale(color="independent")
    if params:
        chart = chart.add_params(*params)
    return chart.properties(title=title)


def cls_bars(rows: pd.DataFrame, columns: list[str], select: bool = True, title: str = "") -> alt.Chart:
    """One head's [CLS] row over the non-special tokens of a pair, per run; shared terms drawn solid.

    ``rows`` comes from ``cls_head.cls_rows`` (example, token, shared, one column per run); with ``select``
    a menu picks the example.
    """
    base = alt.Chart(rows)
    params = []
    if select:
        examples = list(dict.fromkeys(int(e) for e in rows["example"]))
        example = alt.param(
            name="cls_example", value=examples[0], bind=alt.binding_select(options=examples, name="example ")
        )
        params = [example]
        base = base.transform_filter(alt.datum.example == example)
    chart = (
        base.transform_fold(columns, as_=["run", "weight"])
        .transform_calculate(term="datum.shared ? 'shared term' : 'other token'")
        .mark_bar()
        .encode(
            x=alt.X("token:O", title="attended token", axis=alt.Axis(labelAngle=-60)),
            xOffset=alt.XOffset("run:N", sort=columns),
            y=alt.Y("weight:Q", title="share of the [CLS] row on non-special tokens"),
            color=alt.Color("run:N", sort=columns),
            opacity=alt.Opacity(
                "term:N", scale=alt.Scale(domain=["shared term", "other token"], range=[1.0, 0.3]), title=None
            ),
            tooltip=["token", "run:N", alt.Tooltip("weight:Q", format=".3f"), "term:N"],
        )
        .properties(width=22 * int(rows.groupby("example").size().max()), height=220, title=title)
    )
    return chart.add_params(*params) if params else chart


def condition_effects(table: pd.DataFrame, draws: pd.DataFrame | None = None, title: str = "") -> alt.LayerChart:
    """Relative accuracy change per masking condition: ours with its 95% interval, each random draw, the study's.

    ``table``: label, rel_change, lo, hi, study (``term_matching.condition_table``); ``draws``: label,
    rel_change per mask (``term_matching.draw_table``).
    """
    order = list(table["label"])
    y = alt.Y("label:N", sort=order, title=None)
    x_axis = alt.Axis(format="+%")
    base = alt.Chart(table)
    layers = [
        zero_line(),
        *interval_rows(
            base,
            y,
            alt.X("lo:Q", title="relative change of accuracy", axis=x_axis),
            "hi",
            "rel_change",
            size=70,
            tooltip=[
                "label",
                alt.Tooltip("rel_change:Q", format="+.1%"),
                alt.Tooltip("lo:Q", format="+.1%"),
                alt.Tooltip("hi:Q", format="+.1%"),
                "n_draws",
                "n_examples",
            ],
        ),
        base.transform_filter("isValid(datum.study)")
        .mark_point(shape="diamond", size=90, color="black")
        .encode(y=y, x="study:Q", tooltip=["label", alt.Tooltip("study:Q", format="+.1%", title="study")]),
    ]
    if draws is not None:
        layers.insert(
            1,
            alt.Chart(draws)
            .mark_tick(opacity=0.5, color="#e45756")
            .encode(y=y, x="rel_change:Q", tooltip=["mask_id", alt.Tooltip("rel_change:Q", format="+.1%")]),
        )
    return alt.layer(*layers).properties(width=420, height=32 * len(order), title=title)


def claim_intervals(claims: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """Change of each attention share after fine-tuning, with 95% intervals, per claim and scope of heads.

    ``claims``: ``finetune_delta.scope_changes(...)`` (claim, scope, before, after, delta, lo, hi).
    """
    order = list(dict.fromkeys(claims["claim"]))
    y = alt.Y("claim:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    base = alt.Chart(claims)
    return alt.layer(
        zero_line(),
        *interval_rows(
            base,
            y,
            alt.X("lo:Q", title="after minus before (attention share)"),
            "hi",
            "delta",
            yOffset="scope:N",
            color="scope:N",
            tooltip=[
                "claim",
                "scope",
                alt.Tooltip("before:Q", format=".3f"),
                alt.Tooltip("after:Q", format=".3f"),
                alt.Tooltip("delta:Q", format="+.3f"),
                alt.Tooltip("lo:Q", format="+.3f"),
                alt.Tooltip("hi:Q", format="+.3f"),
            ],
        ),
    ).properties(width=380, height=40 * len(order), title=title)


def draws_against(
    draws: pd.DataFrame, value: str, tested: float, tested_label: str, x_title: str, title: str = ""
) -> alt.LayerChart:
    """Each random draw's ``value`` as a dot, and the tested mask's value as a red rule."""
    return alt.layer(
        alt.Chart(draws)
        .mark_circle(size=60, opacity=0.6, color="gray")
        .encode(x=alt.X(f"{value}:Q", title=x_title), y=alt.value(20), tooltip=[c for c in draws.columns]),
        alt.Chart(pd.DataFrame({value: [tested], "what": [tested_label]}))
        .mark_rule(color="#e45756", strokeWidth=3)
        .encode(x=f"{value}:Q", tooltip=["what", alt.Tooltip(f"{value}:Q", format="+.3f")]),
    ).properties(width=420, height=40, title=title)
