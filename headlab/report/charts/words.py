"""Word segmentation and word order (notebooks 03 and 04): boundary heads, the union curve, grade distributions."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd

from headlab.report.charts.forest import interval_rows, zero_line
from headlab.report.charts.heads import head_heatmap


def boundary_heads(heads: pd.DataFrame) -> alt.VConcatChart:
    """The study's rule per head: accuracy minus the majority class's, one grid per token subset (stacked, to fit a
    page); best head framed.

    ``heads``: ``word_segmentation.score_segmentation(...).heads`` (subset, layer, head, accuracy, gain, ...).
    """
    panels = []
    for subset, table in heads.groupby("subset", sort=False):
        table = table.assign(best=table["accuracy"] == table["accuracy"].max())
        panels.append(
            head_heatmap(table, value="gain", title="minus majority", fmt="+.0%", mark="best").properties(
                title=f"{subset}: majority class {table['majority'].iloc[0]:.1%}"
            )
        )
    return alt.vconcat(*panels).resolve_scale(color="independent")


def union_curve(union: pd.DataFrame, study: float = 0.96) -> alt.HConcatChart:
    """Oracle union accuracy against the number of heads, real and with shuffled calls (band: min-max over draws).

    ``union``: ``word_segmentation.score_segmentation(...).union``; the dashed line is the study's 96%.
    """
    panels = []
    for subset, table in union.groupby("subset", sort=False):
        x = alt.X("k:O", title="heads in the union (added greedily)")
        y = alt.Y(
            "union_accuracy:Q", title="oracle union accuracy", scale=alt.Scale(zero=False), axis=alt.Axis(format="%")
        )
        base = alt.Chart(table)
        panels.append(
            alt.layer(
                base.transform_filter("isValid(datum.lo)")
                .mark_area(opacity=0.2)
                .encode(x=x, y="lo:Q", y2="hi:Q", color="kind:N"),
                base.mark_line(point=True).encode(
                    x=x,
                    y=y,
                    color=alt.Color("kind:N", title=None),
                    tooltip=["kind", "k", alt.Tooltip("union_accuracy:Q", format=".2%")],
                ),
                alt.Chart(pd.DataFrame({"study": [study], "what": [f"study: {study:.0%}"]}))
                .mark_rule(strokeDash=[4, 4], color="black")
                .encode(y="study:Q", tooltip=["what"]),
                alt.Chart(pd.DataFrame({"study": [study], "what": [f"study: {study:.0%}"]}))
                .mark_text(align="left", dy=-7, color="black")
                .encode(y="study:Q", x=alt.value(4), text="what:N"),
            ).properties(width=230, height=220, title=subset)
        )
    return alt.hconcat(*panels)


def boundary_rule(table: pd.DataFrame, select: bool = True, title: str = "") -> alt.LayerChart:
    """The study's rule on one example and head: each token's attention to [SEP] and to the next token.

    "word end" is read where the [SEP] bar is the taller; triangles mark the gold word ends. ``table`` comes
    from ``segmentation.boundary_example(...).table`` (several concatenated for the explorer); with ``select``,
    controls pick the example, layer and head (no kernel needed), else it should hold one example and head.
    """

    tokens = table.drop_duplicates(["example", "position"])
    lookup = json.dumps(
        {str(e): {str(p): t for p, t in zip(g["position"], g["token"])} for e, g in tokens.groupby("example")}
    )
    data = pd.DataFrame(
        {
            "e": table["example"],
            "l": table["layer"],
            "h": table["head"],
            "p": table["position"],
            "s": table["to_sep"].round(3),
            "n": table["to_next"].round(3),
            "g": table["gold_end"].astype(int),
        }
    )
    inline = alt.InlineData(
        values=data.to_csv(index=False),  # CSV: every head of a few examples, past Altair's row cap
        format=alt.DataFormat(type="csv", parse={c: "number" for c in data.columns}),
    )
    base = alt.Chart(inline).transform_calculate(token=f"datum.p + ' ' + {lookup}[datum.e][datum.p]")
    params = []
    if select:
        examples = list(dict.fromkeys(int(e) for e in table["example"]))
        first = table.iloc[0]
        example = alt.param(
            name="seg_example", value=examples[0], bind=alt.binding_select(options=examples, name="example ")
        )
        layer = alt.param(
            name="seg_layer",
            value=int(first["layer"]),
            bind=alt.binding_range(min=0, max=int(table["layer"].max()), step=1, name="layer "),
        )
        head = alt.param(
            name="seg_head",
            value=int(first["head"]),
            bind=alt.binding_range(min=0, max=int(table["head"].max()), step=1, name="head "),
        )
        params = [example, layer, head]
        base = base.transform_filter((alt.datum.e == example) & (alt.datum.l == layer) & (alt.datum.h == head))
    x = alt.X(
        "token:N",
        sort=alt.EncodingSortField("p", op="min", order="ascending"),
        title=None,  # min: layers share it
        axis=alt.Axis(labelAngle=-60, labelOverlap=False),
    )
    bars = (
        base.transform_fold(["s", "n"], as_=["to", "weight"])
        .transform_calculate(attention_to="datum.to == 's' ? '[SEP]' : 'next token'")
        .mark_bar()
        .encode(
            x=x,
            xOffset=alt.XOffset("attention_to:N", sort=["[SEP]", "next token"]),
            y=alt.Y("weight:Q", title="attention", scale=alt.Scale(domain=[0, 1.08])),
            color=alt.Color(
                "attention_to:N",
                title="attention to",
                sort=["[SEP]", "next token"],
                scale=alt.Scale(range=["#e45756", "#4c78a8"]),
            ),
            tooltip=["token:N", "attention_to:N", alt.Tooltip("weight:Q", format=".3f")],
        )
    )
    ends = (
        base.transform_filter("datum.g == 1")
        .transform_calculate(top="1.04")
        .mark_point(shape="triangle-down", filled=True, color="black", size=50)
        .encode(x=x, y="top:Q", tooltip=["token:N"])
    )
    chart = alt.layer(bars, ends).properties(
        width=22 * int(table.groupby(["example", "layer", "head"]).size().max()), height=220, title=title
    )
    return chart.add_params(*params) if params else chart


def grade_distributions(
    table: pd.DataFrame, select: bool = False, texts: pd.DataFrame | None = None, title: str = ""
) -> alt.Chart | alt.VConcatChart:
    """Grade distributions side by side, one bar colour per condition (the study's case chart).

    ``table``: condition, grade, probability (``order.case_distributions``), or also example and k
    (``order.case_k_table``) with ``select``: then sliders pick the example and k. ``texts`` (example, line)
    prints the chosen example's query and titles above the bars.
    """
    conditions = list(dict.fromkeys(table["condition"]))
    numbers = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
    base = alt.Chart(
        alt.InlineData(
            values=table.to_csv(index=False),  # CSV: many pairs and k, past Altair's row cap
            format=alt.DataFormat(type="csv", parse={c: "number" for c in numbers}),
        )
    )
    params, filters = [], []
    if select:
        examples = list(dict.fromkeys(int(e) for e in table["example"]))
        example = alt.param(
            name="case_example", value=examples[0], bind=alt.binding_select(options=examples, name="example ")
        )
        ks = sorted(int(k) for k in table["k"].unique())
        k = alt.param(
            name="case_k",
            value=ks[len(ks) // 2],
            bind=alt.binding_range(min=ks[0], max=ks[-1], step=1, name="heads masked (k) "),
        )
        params = [example, k]
        base = base.transform_filter((alt.datum.example == example) & (alt.datum.k == k))
        filters = [alt.datum.example == example]
    chart = (
        base.mark_bar()
        .encode(
            x=alt.X("grade:O"),
            xOffset=alt.XOffset("condition:N", sort=conditions),
            y=alt.Y("probability:Q", title="predicted probability", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("condition:N", sort=conditions, title=None, legend=alt.Legend(orient="bottom", columns=2)),
            tooltip=["condition:N", "grade:O", alt.Tooltip("probability:Q", format=".3f")],
        )
        .properties(width=420, height=220, title=title)
    )
    if texts is None:
        return chart.add_params(*params) if params else chart
    lines = (
        alt.Chart(texts)
        .mark_text(align="left", fontSize=12, limit=420)
        .encode(text="line:N", x=alt.value(0), y=alt.Y("row:O", axis=None))
        .transform_window(row="row_number()", groupby=["example"])
    )
    for f in filters:
        lines = lines.transform_filter(f)
    return alt.vconcat(lines.properties(width=420, height=60), chart).add_params(*params)


def grade_shares(shares: pd.DataFrame, title: str = "") -> alt.Chart:
    """Share of pairs per predicted grade, original against shuffled titles."""
    return (
        alt.Chart(shares)
        .mark_bar()
        .encode(
            x=alt.X("grade:O", title="predicted grade"),
            xOffset="condition:N",
            y=alt.Y("share:Q", title="share of pairs", axis=alt.Axis(format="%")),
            color=alt.Color("condition:N", title=None),
            tooltip=["condition", "grade", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=300, height=200, title=title)
    )


def grade_shift(by_grade: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """Mean change of the expected grade when the title is shuffled, per gold grade, with 95% intervals."""
    y = alt.Y("grade:N", title="gold grade", sort=list(by_grade["grade"]))
    base = alt.Chart(by_grade)
    return alt.layer(
        zero_line(),
        *interval_rows(
            base,
            y,
            alt.X("lo:Q", title="expected grade, shuffled minus original"),
            "hi",
            "shift",
            tooltip=[
                "grade",
                "n_examples",
                alt.Tooltip("expected:Q", format=".3f"),
                alt.Tooltip("expected_shuffled:Q", format=".3f"),
                alt.Tooltip("shift:Q", format="+.4f"),
                alt.Tooltip("lo:Q", format="+.4f"),
                alt.Tooltip("hi:Q", format="+.4f"),
            ],
        ),
    ).properties(width=320, height=28 * len(by_grade), title=title)


def shuffle_sensitivity(
    conditions: pd.DataFrame, draws: pd.DataFrame, measure: str = "tv", title: str = ""
) -> alt.LayerChart:
    """Sensitivity to the shuffle per masking condition (mean with 95% interval over pairs); ticks: each random draw.

    ``conditions`` and ``draws`` come from ``order.masking_comparison`` and ``order.draw_table``.
    """
    rows = conditions[conditions["measure"] == measure]
    order = list(rows["condition"])
    ticks = draws[draws["kind"] == "random"].assign(condition="random heads")
    y = alt.Y("condition:N", sort=order, title=None)
    names = {"tv": "total variation, original vs shuffled title", "shift": "expected grade, shuffled minus original"}
    base = alt.Chart(rows)
    return alt.layer(
        alt.Chart(ticks)
        .mark_tick(color="#e45756", opacity=0.6)
        .encode(y=y, x=f"{measure}:Q", tooltip=["mask_id", alt.Tooltip(f"{measure}:Q", format=".4g")]),
        base.mark_rule(strokeWidth=2).encode(y=y, x=alt.X("lo:Q", title=names.get(measure, measure)), x2="hi:Q"),
        base.mark_point(filled=True, size=70, color="black").encode(
            y=y,
            x="value:Q",
            tooltip=[
                "condition",
                alt.Tooltip("value:Q", format=".4g"),
                alt.Tooltip("lo:Q", format=".4g"),
                alt.Tooltip("hi:Q", format=".4g"),
                "n_examples",
            ],
        ),
    ).properties(width=420, height=40 * len(order), title=title)
