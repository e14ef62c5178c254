"""The scorecard's pictures (its page, the README): every verdict on a grid, every claim's interval in sizes."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd

from headlab.judging.verdicts import Verdict

VERDICT_COLOURS = {
    Verdict.HOLDS: "#54a24b",
    Verdict.DOES_NOT_HOLD: "#e45756",
    Verdict.OPPOSITE: "#8e1b3b",  # darker than "does not hold": the stronger contradiction
    Verdict.CANNOT_TELL: "#bab0ac",
    Verdict.UNDERPOWERED: "#d8cfa8",
    Verdict.NOT_COMPARABLE: "#eeeeee",
}  # headlab.judging.verdicts.VERDICTS, in their order


def verdict_grid(
    table: pd.DataFrame, title: str = "", tooltip: tuple[str, ...] = (), label_limit: int = 440
) -> alt.LayerChart:
    """The scorecard as a picture: the study's claims (rows, under their finding in bold) against the models
    (columns), each cell coloured and labelled by its verdict.

    ``table``: one row per claim and model, in order (finding, claim, ``model``: the column's name, verdict). Drawn
    live, a cell's tooltip shows its claim, model, verdict and the columns named in ``tooltip``, and a column
    ``href`` makes a click on the cell open that address (the picture in the README has neither)."""
    findings = list(dict.fromkeys(table["finding"]))
    rows = [
        label
        for finding in findings
        for label in [finding, *dict.fromkeys(table.loc[table["finding"] == finding, "claim"])]
    ]
    heading = f"indexof({json.dumps(findings)}, datum.value) >= 0"
    y = alt.Y(
        "claim:N",
        title=None,
        sort=rows,
        scale=alt.Scale(domain=rows),
        axis=alt.Axis(
            labelLimit=label_limit,
            ticks=False,
            domain=False,
            labelFontSize=11,
            labelPadding=6,
            labelFontWeight={"condition": {"test": heading, "value": "bold"}, "value": "normal"},
            labelAlign={"condition": {"test": heading, "value": "left"}, "value": "right"},
        ),
    )
    x = alt.X(
        "model:N",
        sort=list(dict.fromkeys(table["model"])),
        title=None,
        axis=alt.Axis(
            orient="top",
            labelAngle=0,
            labelLimit=170,
            ticks=False,
            domain=False,
            labelFontSize=11,
            labelPadding=16,  # a two-line label grows downward from its baseline: lifted clear of the first row
            # "preset (model, data)" on two lines: the preset, then what it is, so five columns fit side by side
            labelExpr="indexof(datum.label, ' (') > 0 ? [substring(datum.label, 0, indexof(datum.label, ' (')), "
            "substring(datum.label, indexof(datum.label, ' (') + 1)] : datum.label",
        ),
    )
    colour = alt.Color(
        "verdict:N",
        title="verdict",
        legend=alt.Legend(orient="bottom", direction="horizontal"),
        scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
    )
    # on both layers, so that the label over a cell answers the pointer as the cell does
    live = {}
    if tooltip:
        live["tooltip"] = [alt.Tooltip(field=name, type="nominal") for name in ("claim", "model", "verdict", *tooltip)]
    if "href" in table.columns:
        live["href"] = alt.Href(field="href", type="nominal")
    base = alt.Chart(table)
    return alt.layer(
        base.mark_rect(stroke="white", strokeWidth=2).encode(x=x, y=y, color=colour, **live),
        base.mark_text(fontSize=10).encode(
            x=x,
            y=y,
            text=alt.Text("label:N" if "label" in table.columns else "verdict:N"),
            color=alt.condition(alt.datum.verdict == Verdict.OPPOSITE, alt.value("white"), alt.value("black")),
            **live,
        ),
    ).properties(width=alt.Step(130), height=alt.Step(19), title=alt.TitleParams(title, anchor="start"))


SIZES_SHOWN = (-3.0, 5.0)  # the interval plot's axis, in sizes: farther ends are drawn at its edge (clamped)


def claims_in_sizes(table: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """Each claim's estimate on one model at a time (a menu picks the model), in multiples of the claim's smallest
    effect from no effect: 0 is no effect, 1 the size the claim asks for, in the claimed direction; the bar is the
    interval adjusted for the number of claims, the tick the study's own number where it is in our unit, the colour
    the verdict. So claims in different units stand on one axis.

    ``table``: one row per claim and model (finding, claim, ``model``, verdict, estimate, lo, hi, study: in sizes)."""
    models = list(dict.fromkeys(table["model"]))
    pick = alt.param(name="column", value=models[0], bind=alt.binding_select(options=models, name="model "))
    rows = list(dict.fromkeys(table["claim"]))
    x_scale = alt.Scale(domain=list(SIZES_SHOWN), clamp=True)
    y = alt.Y("claim:N", sort=rows, title=None, axis=alt.Axis(labelLimit=260, labelFontSize=10))
    colour = alt.Color(
        "verdict:N",
        scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
        legend=alt.Legend(orient="bottom", columns=3, title=None),
    )
    tips = [alt.Tooltip(c, type="nominal") for c in ("claim", "model", "verdict")] + [
        alt.Tooltip(c, type="quantitative", format=".2f") for c in ("estimate", "lo", "hi", "study")
    ]
    base = alt.Chart(table).transform_filter(alt.datum.model == pick)
    marks = [
        base.mark_rule(strokeWidth=3).encode(
            x=alt.X("lo:Q", scale=x_scale, title="estimate, in multiples of the claim's size (1: its size)"),
            x2="hi:Q",
            y=y,
            color=colour,
            tooltip=tips,
        ),
        base.mark_circle(size=50, opacity=1).encode(x=alt.X("estimate:Q", scale=x_scale), y=y, color=colour),
        base.mark_tick(color="black", thickness=2).encode(x=alt.X("study:Q", scale=x_scale), y=y),
    ]
    lines = alt.Chart(pd.DataFrame({"at": [0.0, 1.0]})).mark_rule(strokeDash=[4, 3], color="grey").encode(x="at:Q")
    return (
        alt.layer(lines, *marks)
        .add_params(pick)
        .properties(width=220, height=alt.Step(14), title=alt.TitleParams(title, anchor="start") if title else "")
    )
