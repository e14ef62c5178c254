"""headlab.report.bookjs: the pinned JavaScript the static book ships, and how a page loads it."""

import dataclasses
import re

import altair as alt
import pytest

from headlab.report import bookjs
from headlab.report.bookjs import VEGA_LITE, VEGA_PATH, after_loading, inline_scripts, vega_bundle, write_scripts


def test_after_loading_runs_code_once_the_files_are_there():
    html = after_loading(["headlab-js/a.js", "headlab-js/b.js"], "draw();")
    assert html.startswith("<script>") and html.endswith("</script>")
    assert 'window.headlabLoad(["headlab-js/a.js", "headlab-js/b.js"]).then(function () {\ndraw();' in html
    assert "data-content_root" in html and "console.error" in html


def test_altair_writes_the_vega_lite_the_bundle_carries():
    assert alt.SCHEMA_VERSION.startswith(f"v{VEGA_LITE}."), (
        "update VEGA_LITE and the bundle pin in headlab/report/bookjs.py"
    )


@pytest.mark.slow  # vl-convert builds the book's 1 MB Vega bundle (seconds of CPU), as the book build does
def test_the_vega_bundle_matches_its_pin_and_keeps_its_names_private():
    bundle = vega_bundle()
    assert bundle.startswith("(function () {\n") and bundle.rstrip().endswith("})();")
    assert "window.vegaEmbed=" in bundle


@pytest.mark.slow  # fetches the js-d3, js-jquery and js-mathjax assets
def test_write_scripts_writes_every_pinned_file(tmp_path):
    written = write_scripts(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(
        [bookjs.D3.path, bookjs.JQUERY.path, bookjs.MATHJAX.path, VEGA_PATH]
    )
    assert (tmp_path / bookjs.D3.path).read_text().startswith("// https://d3js.org v5.")
    assert "jQuery v3." in (tmp_path / bookjs.JQUERY.path).read_text()[:100]


@pytest.mark.slow  # fetches the js-d3, js-jquery and js-mathjax assets
def test_a_file_that_does_not_match_its_pin_stops_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(bookjs, "D3", dataclasses.replace(bookjs.D3, sha256="0" * 64))
    with pytest.raises(bookjs.ScriptError, match="expected 0000"):
        write_scripts(tmp_path)


def test_the_book_config_loads_no_script_from_a_cdn():
    import yaml

    from headlab.lab.params import REPO

    config = yaml.safe_load((REPO / "_config.yml").read_text())["sphinx"]["config"]
    assert config["mathjax_path"] == "../" + bookjs.MATHJAX.path  # relative to _static/
    assert config["nb_ipywidgets_js"] == {}
    assert "sphinx_thebe" not in config["extensions"] and "myst_nb" in config["extensions"]


@pytest.mark.slow  # the pinned jQuery and d3 are assets
def test_inline_scripts_carry_the_pinned_files_then_run_the_code():
    html = inline_scripts([bookjs.JQUERY, bookjs.D3], "draw();")
    scripts = re.findall(r"<script>\n(.*?)\n</script>", html, re.S)
    assert len(scripts) == 3 == html.count("</script>")  # no file closes its script early
    assert "jQuery v3." in scripts[0][:100] and scripts[1].startswith("// https://d3js.org v5.")
    assert scripts[2] == "(function () {\ndraw();\n})();"
