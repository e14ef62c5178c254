"""The book's Altair charts. Each takes a tidy table that a notebook saved, so the figure and the file agree."""

from __future__ import annotations

import json
import textwrap

import altair as alt
import numpy as np
import pandas as pd

GRADE_SCALE = alt.Scale(domain=[1, 2, 3, 4, 5])


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


# --- layer dependence and the single-head grid (notebook 02) -------------------------------------------


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
    import json

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
    """One head's attention map (tokens x tokens array, rows attending) as a heatmap."""
    cells = pd.DataFrame(weights).rename_axis(index="query", columns="key").stack().rename("weight").reset_index()
    return attention_cells(cells, tokens, title)


# --- term matching, fine-tuning deltas and the [CLS] head (notebooks 05-07) ------------------------------


def map_panels(cells: pd.DataFrame, columns: list[str], select: bool = True, title: str = "") -> alt.HConcatChart:
    """One head's attention on one pair, a panel per column of ``cells`` (runs, and their ``difference``).

    ``cells`` comes from ``attention_compare.compare_maps``. With ``select``, menus pick the example and the
    head among those in ``cells`` (so the static book needs no kernel); without, ``cells`` should hold one of
    each. Identical query/title terms are framed; ``difference`` uses a diverging scale centred at 0. The
    data go to the page with short field names and the token labels as one lookup, to keep pages small.
    """
    import json

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
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(x="zero:Q"),
        base.mark_rule(strokeWidth=2).encode(
            y=y, x=alt.X("lo:Q", title="relative change of accuracy", axis=x_axis), x2="hi:Q"
        ),
        base.mark_point(filled=True, size=70).encode(
            y=y,
            x="rel_change:Q",
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

    ``claims``: ``sharpening.scope_changes(...)`` (claim, scope, before, after, delta, lo, hi).
    """
    order = list(dict.fromkeys(claims["claim"]))
    y = alt.Y("claim:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    base = alt.Chart(claims)
    return alt.layer(
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(x="zero:Q"),
        base.mark_rule(strokeWidth=2).encode(
            y=y,
            yOffset="scope:N",
            color="scope:N",
            x=alt.X("lo:Q", title="after minus before (attention share)"),
            x2="hi:Q",
        ),
        base.mark_point(filled=True, size=60).encode(
            y=y,
            yOffset="scope:N",
            x="delta:Q",
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


# --- word segmentation and word order (notebooks 03 and 04) ----------------------------------------------


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
    import json

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
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(x="zero:Q"),
        base.mark_rule(strokeWidth=2).encode(
            y=y, x=alt.X("lo:Q", title="expected grade, shuffled minus original"), x2="hi:Q"
        ),
        base.mark_point(filled=True, size=60).encode(
            y=y,
            x="shift:Q",
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


# --- the README's pictures, drawn by tools.readme from results/ ----------------------------------------------

VERDICT_COLOURS = {
    "holds": "#54a24b",
    "does not hold": "#e45756",
    "opposite": "#8e1b3b",  # darker than "does not hold": the stronger contradiction
    "cannot tell": "#bab0ac",
    "underpowered": "#d8cfa8",
    "not comparable": "#eeeeee",
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
            color=alt.condition(alt.datum.verdict == "opposite", alt.value("white"), alt.value("black")),
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
                base.mark_rule(strokeWidth=2).encode(y=y, x=x, x2="acc_hi:Q"),
                base.mark_point(filled=True, size=60).encode(y=y, x="accuracy:Q"),
            ).properties(
                width=320, height=alt.Step(18), title=alt.TitleParams(str(preset), anchor="start", fontSize=12)
            )
        )
    return alt.vconcat(*panels, spacing=12, title=alt.TitleParams(title, anchor="start")).resolve_scale(x="shared")


def circuit_graph(
    edges: pd.DataFrame,
    ranking: pd.DataFrame,
    matching,
    title: str = "",
    minimality: pd.DataFrame | None = None,
    faithfulness: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """The circuit page 09 finds (:func:`headlab.measures.circuit.found_circuit`): the matching heads (senders, at
    their layer and head) and the receivers above them that read most of their change, an edge from each sender to
    each receiver, its width the share of the grade-logit drop that comes back when that receiver alone reads that
    sender alone (grey where it restores, red where it pushes the other way), its tooltip the share with its
    interval; a receiver's tooltip gives what it reads of every sender at once (``ranking``). IOI's measures
    (:mod:`headlab.measures.faithfulness`), where given: each head's tooltip what it adds inside the circuit
    (``minimality``), and the subtitle what the circuit keeps beside random circuits (``faithfulness``)."""
    senders = pd.DataFrame([{"layer": int(l), "head": int(h), "role": "matching head"} for l, h in matching])
    found = edges[["layer", "head"]].drop_duplicates().merge(ranking, on=["layer", "head"], how="left")
    receivers = found.assign(role="receiver")[["layer", "head", "role", "restored", "lo", "hi"]]
    nodes = pd.concat([senders, receivers], ignore_index=True).assign(
        name=lambda t: t["layer"].astype(str) + "." + t["head"].astype(str)
    )
    adds = []
    if minimality is not None and not minimality.empty:
        added = minimality[["layer", "head", "value", "lo", "hi"]].rename(
            columns={"value": "adds", "lo": "adds_lo", "hi": "adds_hi"}
        )
        nodes = nodes.merge(added, on=["layer", "head"], how="left")
        adds = [alt.Tooltip(c, format=".2%") for c in ("adds:Q", "adds_lo:Q", "adds_hi:Q")]
    subtitle = ""
    if faithfulness is not None and not faithfulness.empty:
        kept = faithfulness.set_index("what")
        f = kept.loc["faithfulness"]
        subtitle = f"the circuit keeps {f['value']:.1%} [{f['lo']:.1%}, {f['hi']:.1%}] of the full model's difference"
        if "random circuits" in kept.index:
            r = kept.loc["random circuits"]
            subtitle += f"; {int(r['n_draws'])} random circuits of its size and layers {r['value']:.1%}"
    lines_data = edges.assign(
        head2=edges["head"],
        layer2=edges["layer"],
        head=edges["sender_head"],
        layer=edges["sender_layer"],
        edge=lambda t: (
            t["sender_layer"].astype(str)
            + "."
            + t["sender_head"].astype(str)
            + " → "
            + t["layer2"].astype(str)
            + "."
            + t["head2"].astype(str)
        ),
        size=edges["restored"].abs(),
        direction=np.where(edges["restored"] >= 0, "restores", "pushes the other way"),
    )
    x = alt.X("head:Q", title="head", scale=alt.Scale(padding=12))
    y = alt.Y("layer:Q", title="layer", scale=alt.Scale(padding=12))
    share = [alt.Tooltip(c, format=".1%") for c in ("restored:Q", "lo:Q", "hi:Q")]
    lines = (
        alt.Chart(lines_data)
        .mark_rule(opacity=0.6)
        .encode(
            x=x,
            y=y,
            x2="head2:Q",
            y2="layer2:Q",
            strokeWidth=alt.StrokeWidth("size:Q", title="share restored (size)", legend=alt.Legend(format=".0%")),
            color=alt.Color(
                "direction:N",
                title=None,
                scale=alt.Scale(domain=["restores", "pushes the other way"], range=["grey", "#d62728"]),
            ),
            tooltip=["edge:N", *share],
        )
    )
    points = (
        alt.Chart(nodes)
        .mark_circle(size=260, opacity=0.9)
        .encode(
            x=x,
            y=y,
            fill=alt.Fill("role:N", title=None),
            tooltip=["name:N", "role:N", *share, *adds],
        )
    )
    labels = alt.Chart(nodes).mark_text(dy=-14, fontSize=10).encode(x=x, y=y, text="name:N")
    return (
        alt.layer(lines, points, labels)
        .properties(
            width=360,
            height=240,
            # lines a column wide: a title longer than the plot widens the drawn chart past the page's column
            title=alt.TitleParams(textwrap.wrap(title, 70) or "", subtitle=textwrap.wrap(subtitle, 80) or ""),
        )
        .resolve_scale(color="independent")
    )


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
        alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="gray").encode(x="zero:Q"),
        base.mark_rule(strokeWidth=2).encode(
            y=y,
            x=alt.X("kappa_lost_lo:Q", title="share of the teacher's quadratic κ lost", axis=axis),
            x2="kappa_lost_hi:Q",
        ),
        base.mark_point(filled=True, size=70).encode(
            y=y,
            x="kappa_lost:Q",
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
    """Throughput per variant from ``findings.pruning.speed_rows``: pairs per second (median bar, min to max rule),
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
