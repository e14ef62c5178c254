"""headlab.report.render: charts and widgets in the static book (the browser test draws them)."""

import re

import altair as alt
import nbformat
import pandas as pd

from headlab.report.bookjs import VEGA_PATH
from headlab.report.render import (
    LIVE_ONLY_NOTE,
    WIDGET_STATE,
    WIDGET_VIEW,
    BookChart,
    Figures,
    live_panel,
    show,
    static_tables,
    static_widgets,
)


def _chart(title="t"):
    table = pd.DataFrame({"x": [1, 2], "y": [3, 4]})
    return alt.Chart(table).mark_bar().encode(x="x:O", y="y:Q").properties(title=title)


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
    nb.cells = [
        nbformat.v4.new_code_cell("run()", outputs=[view("bar"), done]),
        nbformat.v4.new_code_cell("interact()", outputs=[view("slider")]),
        nbformat.v4.new_markdown_cell("text"),
    ]
    return nb


def test_static_widgets_drops_progress_bars_notes_live_only_controls_and_the_saved_state():
    nb = _widget_notebook()
    assert static_widgets(nb) == 2
    assert "widgets" not in nb.metadata
    assert [o.output_type for o in nb.cells[0].outputs] == ["stream"]
    assert nb.cells[1].outputs[0].data["text/html"] == LIVE_ONLY_NOTE
    assert WIDGET_VIEW not in nb.cells[1].outputs[0].data
    nbformat.validate(nb)


def test_show_is_an_offline_chart_widget_live_and_a_book_chart_in_the_book(monkeypatch):
    chart = _chart()
    monkeypatch.delenv("HEADLAB_BOOK", raising=False)
    live = show(chart)
    assert isinstance(live, alt.JupyterChart) and live.chart is chart and live.spec == chart.to_dict()
    assert WIDGET_VIEW in live._repr_mimebundle_()[0]
    # its JavaScript is vl-convert's bundle, not imports from a CDN (Altair's online mode: esm.sh)
    assert "esm.sh" not in live._esm and not re.search(r"""(import|from)\s*["']https?:""", live._esm)
    assert len(live._esm) > 500_000  # Vega, Vega-Lite and vega-embed inside
    assert live.embed_options["renderer"] == "svg" and live.embed_options["actions"]["editor"] is False
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    assert isinstance(show(chart), BookChart)


def test_a_live_panel_redraws_its_text_and_charts_in_place_when_a_control_changes():
    import ipywidgets as widgets
    from IPython.display import Markdown

    slider = widgets.IntSlider(value=1, min=1, max=3)
    panel = live_panel(
        [slider],
        lambda: (Markdown(f"n = {slider.value}"), _chart(f"first {slider.value}"), _chart(f"second {slider.value}")),
    )
    controls, out, *views = panel.children
    assert controls.children == (slider,) and len(views) == 2
    assert out.outputs[0]["data"]["text/markdown"] == "n = 1" and views[1].spec["title"] == "second 1"
    slider.value = 3
    assert len(out.outputs) == 1 and out.outputs[0]["data"]["text/markdown"] == "n = 3"
    assert [v.spec["title"] for v in views] == ["first 3", "second 3"]
    assert panel.children[2:] == tuple(views)  # the same widgets, redrawn


def test_static_tables_show_a_missing_number_as_a_dash_and_no_negative_zero():
    frame = pd.DataFrame({"share": [float("nan"), -0.0001, -0.25], "text": [None, "a", "b"]}).round(3)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            outputs=[nbformat.v4.new_output("execute_result", {"text/html": frame._repr_html_()}, execution_count=1)]
        )
    ]
    before = frame._repr_html_()
    assert "<td>NaN</td>" in before and re.search(r"<td>-0\.0+</td>", before)  # what pandas prints
    assert static_tables(nb) == 1
    html = nb.cells[0].outputs[0]["data"]["text/html"]
    assert "NaN" not in html and "None" not in html and html.count("<td>—</td>") == 2
    assert not re.search(r"<td>-0\.0+</td>", html) and re.search(r"<td>0\.0+</td>", html) and "<td>-0.25</td>" in html
    assert static_tables(nb) == 0  # nothing left to change


def test_a_page_numbers_its_figures_in_order_and_each_caption_states_its_takeaway(monkeypatch):
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    figures = Figures(2)
    first, second = figures.show(_chart(), "Layer 0 costs most."), figures.show(_chart(), " The rest cost less. ")
    assert isinstance(first.chart, BookChart) and first.caption == "**Figure 2.1.** Layer 0 costs most."
    assert second.caption == "**Figure 2.2.** The rest cost less."
    try:
        figures.show(_chart(), " ")
    except ValueError as err:
        assert "figure 2.3 needs a takeaway" in str(err)
    else:
        raise AssertionError("a figure without a takeaway was drawn")
    assert figures.count == 2  # the refused figure takes no number
