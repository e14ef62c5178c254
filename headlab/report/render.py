"""Notebook outputs that show with no network in the built book: Altair charts and ipywidgets.

In JupyterLab a chart is shown the usual way (Altair's own renderer). When the book is built (``HEADLAB_BOOK=1``,
set by ``python -m headlab.book``), :func:`show` turns a chart into HTML that draws it with the Vega bundle the
book ships (:mod:`headlab.report.bookjs`), with a static SVG inside ``<noscript>`` for readers without JavaScript.

Widgets need a kernel, so the book does not embed them (no widget JavaScript on any page): :func:`static_widgets`
drops finished progress bars and replaces every other widget with a note that its live version needs JupyterLab.
A notebook that keeps a widget shows the same exploration as a chart over its saved results.
"""
from __future__ import annotations

import json
import os
import uuid

from headlab.report.bookjs import VEGA_LITE, VEGA_PATH, after_loading

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LIVE_ONLY_NOTE = ('<p class="headlab-live-only"><em>An interactive control was here: it needs a running Python '
                  'kernel. Open this notebook in JupyterLab to use it; the static book shows the same results in '
                  'the charts.</em></p>')


def in_book() -> bool:
    return os.environ.get("HEADLAB_BOOK") == "1"


_DRAW = """var el = document.getElementById("{id}");
return vegaEmbed(el, {spec}, {{actions: false, renderer: "svg"}}).catch(function (err) {{
  el.textContent = "chart failed: " + err; throw err;
}});"""


class BookChart:
    """Display wrapper for the book: a div that vega-embed fills, and the chart as SVG for readers without JS."""

    def __init__(self, chart):
        self.chart = chart

    def _repr_html_(self) -> str:
        import vl_convert

        spec = self.chart.to_dict()
        chart_id = f"headlab-chart-{uuid.uuid4().hex[:12]}"
        code = _DRAW.format(id=chart_id, spec=json.dumps(spec, separators=(",", ":")).replace("</", "<\\/"))
        svg = vl_convert.vegalite_to_svg(spec, vl_version=f"v{VEGA_LITE}")
        return (f'<div id="{chart_id}" class="headlab-chart"></div>\n'
                f"<noscript>{svg}</noscript>\n{after_loading([VEGA_PATH], code)}")


def show(chart):
    """What a notebook cell should end with to display ``chart``: live, the chart; in the book, a BookChart."""
    return BookChart(chart) if in_book() else chart


def _is_progress_bar(model_id: str, state: dict) -> bool:
    """tqdm's notebook bar is an HBox whose children include a FloatProgress (or IntProgress)."""
    model = state.get(model_id, {})
    children = [ref.removeprefix("IPY_MODEL_") for ref in model.get("state", {}).get("children", [])]
    return model.get("model_name") == "HBoxModel" and any(
        state.get(child, {}).get("model_name") in ("FloatProgressModel", "IntProgressModel") for child in children)


def static_widgets(nb) -> int:
    """Make a notebook's widgets static, in place: drop progress bars, note the rest; return how many changed.

    The saved widget state goes too, so the book loads no widget JavaScript (myst-nb would fetch it from a CDN).
    """
    state = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    changed = 0
    for cell in nb.cells:
        kept = []
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                kept.append(output)
                continue
            changed += 1
            if not _is_progress_bar(view.get("model_id", ""), state):
                output["data"] = {"text/html": LIVE_ONLY_NOTE, "text/plain": "(interactive control: live only)"}
                kept.append(output)
        if "outputs" in cell:
            cell["outputs"] = kept
    return changed
