"""headlab.report.render: charts and widgets in the static book (the browser test draws them)."""
import re

import altair as alt
import nbformat
import pandas as pd

from headlab.report.bookjs import VEGA_PATH
from headlab.report.render import LIVE_ONLY_NOTE, WIDGET_STATE, WIDGET_VIEW, BookChart, show, static_widgets


def _chart(title="t"):
    table = pd.DataFrame({"x": [1, 2], "y": [3, 4]})
    return alt.Chart(table).mark_bar().encode(x="x:O", y="y:Q").properties(title=title)


def test_show_is_the_chart_live_and_a_book_chart_in_the_book(monkeypatch):
    chart = _chart()
    monkeypatch.delenv("HEADLAB_BOOK", raising=False)
    assert show(chart) is chart
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    assert isinstance(show(chart), BookChart)


def test_a_book_chart_loads_the_shipped_vega_and_carries_an_svg_for_readers_without_js():
    html = BookChart(_chart(title="a </script> title"))._repr_html_()
    assert 'class="headlab-chart"' in html and f'["{VEGA_PATH}"]' in html
    assert re.search(r"<noscript><svg .*</svg></noscript>", html, re.S)
    assert html.count("</script>") == 1  # the title cannot close the script early
    assert not re.search(r"""(src|href)=["']https?:""", html)


def test_two_charts_get_different_ids():
    ids = [re.search(r'id="([^"]+)"', BookChart(_chart())._repr_html_()).group(1) for _ in range(2)]
    assert ids[0] != ids[1]


def _widget_notebook():
    """A progress bar (HBox of HTML + FloatProgress, as tqdm makes) and a slider, with their saved state."""
    state = {
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_label", "IPY_MODEL_progress"]}},
        "label": {"model_name": "HTMLModel", "state": {}},
        "progress": {"model_name": "FloatProgressModel", "state": {}},
        "slider": {"model_name": "IntSliderModel", "state": {}},
    }
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}

    def view(model_id):
        return nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": model_id}, "text/plain": "w"})

    done = nbformat.v4.new_output("stream", text="done")
    nb.cells = [nbformat.v4.new_code_cell("run()", outputs=[view("bar"), done]),
                nbformat.v4.new_code_cell("interact()", outputs=[view("slider")]),
                nbformat.v4.new_markdown_cell("text")]
    return nb


def test_static_widgets_drops_progress_bars_notes_live_only_controls_and_the_saved_state():
    nb = _widget_notebook()
    assert static_widgets(nb) == 2
    assert "widgets" not in nb.metadata
    assert [o.output_type for o in nb.cells[0].outputs] == ["stream"]
    assert nb.cells[1].outputs[0].data["text/html"] == LIVE_ONLY_NOTE
    assert WIDGET_VIEW not in nb.cells[1].outputs[0].data
    nbformat.validate(nb)
