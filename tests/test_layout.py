"""headlab.report.layout: charts are laid out to fit the book's text column before they are shown, at the sizes of the
largest models the book runs (12 x 12 heads, pairs of 32 tokens), panels wrapped, single charts narrowed."""

import altair as alt
import numpy as np
import pandas as pd

from headlab.report import charts
from headlab.report.layout import COLUMN_PX, drawn_width, fit, svg


def _grid(layers=12, heads=12, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {
                "layer": l,
                "head": h,
                "rel_change": rng.normal(0, 0.05),
                "lo": -0.1,
                "hi": 0.1,
                "p_mcnemar": 0.5,
                "p_holm": 1.0,
                "direction": "none",
                "significant": False,
            }
            for l in range(layers)
            for h in range(heads)
        ]
    )


def test_a_chart_that_fits_is_shown_as_it_is():
    chart = charts.head_heatmap(_grid(6, 12), value="rel_change", title="masked alone")
    assert drawn_width(chart) <= COLUMN_PX and fit(chart) is chart


def test_side_by_side_panels_wrap_onto_rows_and_keep_their_params():
    pick = alt.param(name="cutoff", value=0.0, bind=alt.binding_range(min=-1, max=1, name="cutoff "))
    panels = (
        alt.hconcat(*[charts.head_heatmap(_grid(seed=i), value="rel_change", title=f"metric {i}") for i in range(3)])
        .add_params(pick)
        .properties(title="three metrics")
    )
    assert drawn_width(panels) > 2 * COLUMN_PX  # as the fine-tuning page drew it
    fitted = fit(panels)
    assert drawn_width(fitted) <= COLUMN_PX
    spec = fitted.to_dict()
    assert len(spec["concat"]) == 3 and spec["columns"] == 1  # every panel kept, one per row at this size
    assert spec["params"][0]["name"] == "cutoff" and spec["title"] == "three metrics"


def test_a_single_chart_too_wide_gets_narrower():
    chart = charts.head_intervals(_grid())  # 144 heads side by side
    assert drawn_width(chart) > COLUMN_PX
    fitted = fit(chart)
    assert drawn_width(fitted) <= COLUMN_PX and fitted.width < chart.width


def _pair_cells(tokens=32, examples=2):
    rows = []
    for e in range(examples):
        for q in range(tokens):
            for k in range(tokens):
                rows.append(
                    {
                        "example": e,
                        "head_label": "3.9",
                        "query": q,
                        "key": k,
                        "query_token": f"{q} tok{q}",
                        "key_token": f"{k} tok{k}",
                        "identical": q == k,
                        "pretrained": 1 / tokens,
                        "fine-tuned": 1 / tokens,
                        "difference": 0.0,
                    }
                )
    return pd.DataFrame(rows)


def test_the_books_widest_charts_fit_at_the_largest_sizes():
    """The panels of the fine-tuning and [CLS] pages and the [CLS] bars, which were drawn up to 1746 px wide."""
    cells = _pair_cells()
    maps = charts.map_panels(cells, ["pretrained", "fine-tuned", "difference"], title="term-matching heads")
    bars = pd.DataFrame(
        [
            {"example": 0, "token": f"{i} tok{i}", "shared": i % 3 == 0, "pretrained": 0.03, "fine-tuned": 0.04}
            for i in range(32)
        ]
    )
    cls = charts.cls_bars(bars, ["pretrained", "fine-tuned"], title="[CLS] row of head 3.9")
    for chart in (maps, cls):
        assert drawn_width(chart) > COLUMN_PX
        assert drawn_width(fit(chart)) <= COLUMN_PX


def test_the_head_explorer_fits_at_twelve_by_twelve_heads_and_thirty_two_tokens():
    """The explorer of the layer page was cut at the column's edge: a grid beside a map, and a line of text."""
    from headlab.report.explore import attention_table, head_explorer_chart

    grid = _grid()
    layer_table = pd.DataFrame({"layer": range(12), "rel_change": -0.05, "lo": -0.08, "hi": -0.02, "p_mcnemar": 0.01})
    maps = np.random.default_rng(0).dirichlet(np.ones(32), size=(12, 12, 32))
    chart = head_explorer_chart(
        grid,
        layer_table,
        attention_table(maps),
        [f"{i} token{i}" for i in range(32)],
        title="pair 0 (grade 4): a long query | a longer title",
    )
    assert drawn_width(chart) > COLUMN_PX
    assert drawn_width(fit(chart)) <= COLUMN_PX


def test_a_marks_link_in_the_static_svg_stays_relative_to_its_page():
    table = pd.DataFrame({"x": [1], "href": ["executed/01_redundancy.html"]})
    drawn = svg(alt.Chart(table).mark_bar().encode(x="x:Q", href="href:N"))
    assert 'xlink:href="executed/01_redundancy.html"' in drawn and "vega-datasets" not in drawn
