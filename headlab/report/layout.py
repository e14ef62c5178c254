"""Charts that fit the page: a chart drawn wider than the book's text column is cut at its edge, so :func:`fit`
lays a wide chart out again before it is shown.

A chart's drawn width (axes, labels and legends included) is read off the SVG that vl-convert renders, the same
drawing the book's readers without JavaScript get. Side-by-side panels that do not fit wrap onto rows; a single
chart that does not fit gets narrower (a discrete axis keeps every label, closer together). Altair cannot size a
concatenated chart to its container, and scaling a drawn chart with CSS would put Vega's clicks and tooltips in
the wrong place, so the layout is fixed before drawing.
"""

from __future__ import annotations

import functools
import json
import re

import altair as alt

from headlab.report.bookjs import VEGA_LITE

# The book's text column at a 1280-pixel-wide window (sphinx-book-theme's article: 752 px), less a margin for the
# browser's fonts, which measure text a little differently from vl-convert's.
COLUMN_PX = 720
_SPACING = 20  # Vega-Lite's default space between concatenated panels


# vl-convert resolves a mark's relative link (a scorecard cell's page) against its own loader's base, Vega's datasets
# site; the static SVG keeps the link relative to the page it is drawn on, as the live chart does
_LOADER_BASE = 'xlink:href="https://vega.github.io/vega-datasets/'


@functools.lru_cache(maxsize=64)
def _svg(spec: str) -> str:
    import vl_convert

    drawn = vl_convert.vegalite_to_svg(json.loads(spec), vl_version=f"v{VEGA_LITE}")
    return drawn.replace(_LOADER_BASE, 'xlink:href="')


def svg(chart) -> str:
    """The chart drawn as SVG (cached per spec, so measuring and then showing a chart draws it once)."""
    return _svg(json.dumps(chart.to_dict(), sort_keys=True))


def drawn_width(chart) -> float:
    """How wide the chart is drawn, in pixels, with its axes, labels, legends and title."""
    match = re.search(r'<svg[^>]*?\swidth="([\d.]+)"', svg(chart))
    if match is None:
        raise ValueError("vl-convert drew the chart without a width")
    return float(match.group(1))


def fit(chart, width: int = COLUMN_PX):
    """``chart``, laid out to be drawn at most ``width`` pixels wide where it can be: side-by-side panels wrap onto
    rows (as few as fit), then any chart of a set width that is still too wide gets narrower. A chart that cannot
    be made to fit is returned as laid out at best (the browser test names it)."""
    excess = drawn_width(chart) - width
    if excess <= 0:
        return chart
    widest = _widest_row(chart)
    for columns in range(widest - 1, 0, -1):  # the whole chart is measured: panels may share params and data
        wrapped = _wrapped(chart, columns)
        excess = drawn_width(wrapped) - width
        if excess <= 0:
            return wrapped
        chart = wrapped
    narrower = _narrower(chart, excess)
    return narrower if drawn_width(narrower) < drawn_width(chart) else chart


def _widest_row(chart) -> int:
    """The most panels side by side anywhere in the chart."""
    if isinstance(chart, alt.HConcatChart):
        return max(len(chart.hconcat), *(_widest_row(c) for c in chart.hconcat))
    if isinstance(chart, alt.VConcatChart):
        return max(_widest_row(c) for c in chart.vconcat)
    if isinstance(chart, alt.ConcatChart):
        return max(
            chart.columns if isinstance(chart.columns, int) else len(chart.concat),
            *(_widest_row(c) for c in chart.concat),
        )
    return 1


def _top_level(chart) -> dict:
    """The chart's own settings (title, params, resolve, config, data ...), without its panels."""
    return {
        k: v
        for k, v in chart._kwds.items()
        if v is not alt.Undefined and k not in ("hconcat", "vconcat", "concat", "columns")
    }


def _wrapped(chart, columns: int):
    """The chart with every side-by-side row wrapped to at most ``columns`` panels per row."""
    if isinstance(chart, (alt.HConcatChart, alt.ConcatChart)):
        panels = chart.hconcat if isinstance(chart, alt.HConcatChart) else chart.concat
        panels = [_wrapped(p, columns) for p in panels]
        if len(panels) <= columns and isinstance(chart, alt.HConcatChart):
            return alt.HConcatChart(hconcat=panels, **_top_level(chart))
        return alt.ConcatChart(concat=panels, columns=min(columns, len(panels)), **_top_level(chart))
    if isinstance(chart, alt.VConcatChart):
        return alt.VConcatChart(vconcat=[_wrapped(c, columns) for c in chart.vconcat], **_top_level(chart))
    return chart


def _narrower(chart, excess: float):
    """Every chart of a set width inside ``chart`` made ``excess`` pixels narrower (60 at the least)."""
    if isinstance(chart, alt.ConcatChart):
        return alt.ConcatChart(
            concat=[_narrower(c, excess) for c in chart.concat], columns=chart.columns, **_top_level(chart)
        )
    if isinstance(chart, alt.HConcatChart):
        share = excess / len(chart.hconcat)
        return alt.HConcatChart(hconcat=[_narrower(c, share) for c in chart.hconcat], **_top_level(chart))
    if isinstance(chart, alt.VConcatChart):
        return alt.VConcatChart(vconcat=[_narrower(c, excess) for c in chart.vconcat], **_top_level(chart))
    if isinstance(chart, (alt.Chart, alt.LayerChart)) and isinstance(chart.width, (int, float)):
        return chart.properties(width=max(60, int(chart.width - excess)))
    return chart
