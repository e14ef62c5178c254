"""Show Altair charts so that the built book draws them with no network.

In JupyterLab a chart is shown the usual way (Altair's own renderer). When the book is built
(``HEADLAB_BOOK=1``, set by ``python -m headlab.book``), a chart becomes HTML that loads the Vega bundle
shipped with the book (written by :func:`write_js_assets` from ``vl-convert-python``, a pinned PyPI
package) relative to the page's ``data-content_root``, instead of from a CDN.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path

JS_DIR = "headlab-js"
_COUNTER = itertools.count()
VEGA_FILE = f"{JS_DIR}/vega-embed.js"


def in_book() -> bool:
    return os.environ.get("HEADLAB_BOOK") == "1"


def write_js_assets(extra_dir: Path) -> list[Path]:
    """Write the JavaScript the book's pages load into ``extra_dir`` (copied to the site root by Sphinx)."""
    import vl_convert

    target = Path(extra_dir) / VEGA_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(vl_convert.javascript_bundle(), encoding="utf-8")
    return [target]


_LOADER = """<div id="{id}" class="headlab-chart" style="width:100%"></div>
<script>
(function () {{
  var el = document.getElementById("{id}");
  var spec = {spec};
  function draw() {{
    vegaEmbed(el, spec, {{actions: false, renderer: "svg"}}).catch(function (err) {{
      el.textContent = "chart failed: " + err; console.error(err);
    }});
  }}
  if (!window.headlabVega) {{
    window.headlabVega = new Promise(function (resolve, reject) {{
      var root = document.documentElement.getAttribute("data-content_root") || "";
      var s = document.createElement("script");
      s.src = root + "{vega}"; s.onload = resolve; s.onerror = reject;
      document.head.appendChild(s);
    }});
  }}
  window.headlabVega.then(draw, function () {{ el.textContent = "could not load {vega}"; }});
}})();
</script>"""


class BookChart:
    """Display wrapper: HTML for the book, the chart itself everywhere else."""

    def __init__(self, chart):
        self.chart = chart

    def _repr_html_(self) -> str:
        spec = json.dumps(self.chart.to_dict(), separators=(",", ":")).replace("</", "<\\/")
        chart_id = f"hl-{hashlib.sha1(spec.encode()).hexdigest()[:10]}-{next(_COUNTER)}"
        return _LOADER.format(id=chart_id, spec=spec, vega=VEGA_FILE)


def show(chart):
    """Return what a notebook cell should end with to display ``chart`` (live or in the static book)."""
    return BookChart(chart) if in_book() else chart
