"""Notebook outputs that show with no network, live in JupyterLab and in the built book: Altair charts and ipywidgets.

Altair's default renderer loads Vega from a CDN, and JupyterLab 4's own Vega-Lite renderers stop at v5 (Altair 6 writes
v6). Live, :func:`show` makes a chart Altair's ``JupyterChart`` (an anywidget) in its offline mode: its JavaScript is
the Vega bundle inside vl-convert-python, sent through the kernel, and selections stay interactive. When the book is
built (``HEADLAB_BOOK=1``, set by ``python -m headlab.book``), :func:`show` turns a chart into HTML that draws it with
the Vega bundle the book ships (:mod:`headlab.report.bookjs`), with a static SVG inside ``<noscript>`` for readers
without JavaScript.

Widgets need a kernel, so the book does not embed them (no widget JavaScript on any page): :func:`static_widgets`
drops finished progress bars and replaces every other widget with a note that its live version needs JupyterLab.
A notebook that keeps a widget shows the same exploration as a chart over its saved results.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass

from headlab.report.bookjs import VEGA_PATH, after_loading
from headlab.report.layout import fit, svg

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LIVE_ONLY_NOTE = (
    '<p class="headlab-live-only"><em>An interactive control was here: it needs a running Python '
    "kernel. Open this notebook in JupyterLab to use it; the static book shows the same results in "
    "the charts.</em></p>"
)


def in_book() -> bool:
    """Whether this runs in the book build (``HEADLAB_BOOK=1``): charts become static HTML, widgets a note."""
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
        spec = self.chart.to_dict()
        chart_id = f"headlab-chart-{uuid.uuid4().hex[:12]}"
        code = _DRAW.format(id=chart_id, spec=json.dumps(spec, separators=(",", ":")).replace("</", "<\\/"))
        return (
            f'<div id="{chart_id}" class="headlab-chart"></div>\n'
            f"<noscript>{svg(self.chart)}</noscript>\n{after_loading([VEGA_PATH], code)}"
        )


LIVE_EMBED = {"renderer": "svg", "actions": {"export": True, "source": False, "compiled": False, "editor": False}}


def live_chart(chart):
    """``chart`` as a widget that needs no network; give its ``chart`` another chart to redraw it in place.

    Drawn as SVG, like the book; its menu saves the chart and has no link to the online Vega editor.
    """
    import altair as alt

    alt.JupyterChart.enable_offline()  # once per kernel: vl-convert bundles the widget's JavaScript (about 1 MB)
    return alt.JupyterChart(chart, embed_options=LIVE_EMBED)


def show(chart):
    """What a notebook cell should end with to display ``chart``: live, a live_chart; in the book, a BookChart.
    Either way laid out to fit the book's text column first (:func:`headlab.report.layout.fit`)."""
    chart = fit(chart)
    return BookChart(chart) if in_book() else live_chart(chart)


@dataclass
class Captioned:
    """A chart (as :func:`show` returns it) with its numbered caption under it, in one cell's output."""

    chart: object
    caption: str

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        display(self.chart)
        display(Markdown(self.caption))


@dataclass
class Figures:
    """A page's figures, numbered in reading order: ``figures.show(chart, takeaway)`` draws the chart with
    "**Figure 2.1.** takeaway" under it. The takeaway is a sentence the page computes from the numbers the figure
    draws (Distill's captions state what a figure shows, not only what it is)."""

    page: int
    count: int = 0

    def show(self, chart, takeaway: str) -> Captioned:
        """The next numbered figure: ``chart`` as :func:`show` draws it, its caption under it (a takeaway is needed)."""
        if not takeaway.strip():
            raise ValueError(f"figure {self.page}.{self.count + 1} needs a takeaway for its caption")
        self.count += 1
        return Captioned(show(chart), f"**Figure {self.page}.{self.count}.** {takeaway.strip()}")


def live_panel(controls: list, draw):
    """Controls above what ``draw()`` returns for their current values, redrawn whenever one of them changes.

    ``draw`` returns a text to display (e.g. Markdown) and then charts, always as many. Each chart stays one widget
    that is given the new chart, so a change sends a spec, not the widget's JavaScript again. The text is written
    into the Output widget's outputs directly rather than captured with ``with out:``: capturing while a notebook
    runs headless (papermill) can hang the run (jupyter/nbconvert#2029).
    """
    import ipywidgets as widgets

    text, *charts = draw()
    out = widgets.Output()
    out.append_display_data(text)
    views = [live_chart(chart) for chart in charts]

    def update(_):
        text, *charts = draw()
        out.outputs = ()
        out.append_display_data(text)
        for view, chart in zip(views, charts):
            view.chart = chart

    for control in controls:
        control.observe(update, names="value")
    return widgets.VBox([widgets.HBox(controls), out, *views])


def _is_progress_bar(model_id: str, state: dict) -> bool:
    """tqdm's notebook bar is an HBox whose children include a FloatProgress (or IntProgress)."""
    model = state.get(model_id, {})
    children = [ref.removeprefix("IPY_MODEL_") for ref in model.get("state", {}).get("children", [])]
    return model.get("model_name") == "HBoxModel" and any(
        state.get(child, {}).get("model_name") in ("FloatProgressModel", "IntProgressModel") for child in children
    )


_MISSING_CELL = re.compile(r"<td>(?:NaN|nan|None|&lt;NA&gt;)</td>")
_NEGATIVE_ZERO = re.compile(r"<td>-(0(?:\.0+)?%?)</td>")


def static_tables(nb) -> int:
    """Make a notebook's displayed tables read as a reader reads them, in place: a missing number is "—" and a zero
    rounded from below is 0, not -0 (pandas prints ``NaN`` and ``-0.000``); return how many outputs changed."""
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html")
            if html is None:
                continue
            text = "".join(html) if isinstance(html, list) else html
            fixed = _NEGATIVE_ZERO.sub(r"<td>\1</td>", _MISSING_CELL.sub("<td>—</td>", text))
            if fixed != text:
                output["data"]["text/html"] = fixed
                changed += 1
    return changed


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
