"""The built book works with no network: every page, opened in headless Chromium (served from localhost, and as
files), requests nothing from any other host, logs no JavaScript error, draws every chart, attention view and
formula, and shows a reader nothing broken (a Markdown table left as text, NaN, a warning, a traceback). Planted pages
prove that the checks catch a CDN request and a broken page.

Uses Debian's ``chromium`` through Playwright (never ``playwright install``). `make test` installs chromium when it
runs as root; elsewhere, without it, this test is skipped with a loud message, except under CI, where it fails.
A screenshot of each page is saved; a failure names the screenshots of the failing pages.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import altair as alt
import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # the whole tiny book is built, then opened in Chromium

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]  # --headless and a fresh --user-data-dir: see `browser`
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# Every chart and attention view holds an <svg> or <canvas>; every formula has been typeset by MathJax.
_DRAWN = """() => [...document.querySelectorAll('.headlab-chart, .headlab-view, .vega-embed')]
                     .every(el => el.querySelector('svg, canvas'))
               && [...document.querySelectorAll('.math')].every(el => el.querySelector('mjx-container'))"""
_NOT_DRAWN = """() => [...document.querySelectorAll('.headlab-chart, .headlab-view, .vega-embed')]
                        .filter(el => !el.querySelector('svg, canvas')).map(el => el.className + ' ' + el.id)
                  .concat([...document.querySelectorAll('.math')].filter(el => !el.querySelector('mjx-container'))
                          .map(el => 'math ' + el.textContent.slice(0, 40)))"""

# Every chart and attention view fits the page's text column: one drawn wider than the column is cut at its edge
# (or spills over the margin) on the built site.
_TOO_WIDE = """() => [...document.querySelectorAll('.headlab-chart, .headlab-view, .vega-embed')].map(el => {
    const drawn = el.querySelector('svg, canvas');
    const column = el.closest('.bd-article, article, main') || document.body;
    if (!drawn) return null;
    const width = drawn.getBoundingClientRect().width, room = column.getBoundingClientRect().width;
    return width > room + 1 ? `${el.className} ${el.id}: drawn ${Math.round(width)} px wide, the column has `
                              + `${Math.round(room)} px` : null;
  }).filter(x => x)"""


# Every numbered caption ("Figure 2.1.", render.Figures) sits in the cell of a drawn chart: a caption over nothing is a
# figure the page declares and the reader never sees. The numbers are returned, to count against the notebook.
_FIGURES = """() => [...document.querySelectorAll('strong')]
  .filter(s => /^Figure \\d+\\.\\d+\\.$/.test(s.textContent.trim()))
  .map(s => {
    const cell = s.closest('.cell');
    const chart = cell && cell.querySelector('.headlab-chart, .headlab-view, .vega-embed');
    return {number: s.textContent.trim(), drawn: !!(chart && chart.querySelector('svg, canvas'))};
  })"""

# A legend drawn past its chart's edge is cut off; a label Vega shortened ends in an ellipsis ("hur…" for "hurts").
_CLIPPED = """() => [...document.querySelectorAll('.headlab-chart svg, .vega-embed svg')].flatMap(svg => {
    const box = svg.getBoundingClientRect();
    const past = [...svg.querySelectorAll('.role-legend')].map(g => {
      const r = g.getBoundingClientRect();
      const over = Math.max(r.right - box.right, r.bottom - box.bottom, box.left - r.left, box.top - r.top);
      return over > 1 ? `a legend drawn ${Math.round(over)} px past its chart` : null;
    });
    const cut = [...svg.querySelectorAll('.role-legend-label text, .role-legend-title text')]
      .filter(t => t.textContent.endsWith('…')).map(t => `a legend label cut to "${t.textContent}"`);
    return past.concat(cut);
  }).filter(x => x)"""


def declared_charts(notebook: Path) -> tuple[int, int]:
    """What a notebook always draws: its numbered figures (``figures.show(...)``) and all its charts (those and plain
    ``show(...)``), counting the calls outside any ``if`` or loop (a chart under a condition may rightly be absent)."""
    figures = charts = 0
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        conditional = {
            id(n) for node in ast.walk(tree) if isinstance(node, (ast.If, ast.For, ast.While)) for n in ast.walk(node)
        }
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call) or id(n) in conditional:
                continue
            numbered = getattr(n.func, "attr", None) == "show" and getattr(n.func.value, "id", "") == "figures"
            figures += numbered
            charts += numbered or getattr(n.func, "id", None) == "show"
    return figures, charts


# What a reader must never see on a page (its text as drawn): a Markdown table left as text, a missing number printed
# as NaN, a Python warning or traceback.
UNREADABLE = {
    "a Markdown table left as text": r"\|\s*[-—]{1,3}\s*\|",
    # a whole cell or line (a table cell is a tab-separated field of the page's text), not a word in code or prose
    "NaN for a missing number": r"(?:^|\t)[ ]*(?:NaN|nan)[ ]*(?=\t|$)",
    "a Python warning": r"\b\w+Warning\b",
    "a traceback": r"Traceback \(most recent call last\)",
}


def unreadable(text: str) -> list[str]:
    """What a reader would see broken in a page's text as the browser lays it out (:data:`UNREADABLE`: lines, table
    cells apart by tabs), each with where it stands."""

    def around(m: re.Match) -> str:
        return " ".join(text[max(0, m.start() - 40) : m.end() + 20].split())

    return [
        f"{what}: …{around(m)}…"
        for what, pattern in UNREADABLE.items()
        for m in re.finditer(pattern, text, re.MULTILINE)
    ]


def is_external(url: str) -> bool:
    """A request that leaves this machine (file:, data: and blob: URLs do not)."""
    parsed = urlparse(url)
    return parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in LOCAL_HOSTS


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/favicon.ico":  # browsers ask for it by themselves; the book has none
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(root: Path):
    """Serve ``root`` on a free localhost port; yield the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class PageReport:
    page: str
    screenshot: Path
    external: list[str] = field(default_factory=list)  # requests to any host but localhost (blocked)
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, failed local files
    not_drawn: list[str] = field(default_factory=list)  # containers with no svg/canvas, formulas not typeset
    too_wide: list[str] = field(default_factory=list)  # charts and views wider than the page's column
    unreadable: list[str] = field(default_factory=list)  # text a reader would see broken (UNREADABLE)
    figures: list[str] = field(default_factory=list)  # numbered figures not drawn, missing or out of order
    clipped: list[str] = field(default_factory=list)  # legends cut off at a chart's edge, or their labels cut short

    def problems(self) -> list[str]:
        return (
            [f"requests {url}" for url in self.external]
            + [f"error: {e}" for e in self.errors]
            + [f"not drawn: {what}" for what in self.not_drawn]
            + [f"too wide: {w}" for w in self.too_wide]
            + [f"unreadable: {u}" for u in self.unreadable]
            + [f"figure: {f}" for f in self.figures]
            + [f"clipped: {c}" for c in self.clipped]
        )


def check_page(context, base: str, page: str, shots: Path, wait_ms: int = 20_000) -> PageReport:
    """Open ``base + page``, wait until everything is drawn (at most ``wait_ms``), screenshot, report."""
    report = PageReport(page, shots / (page.replace("/", "__") + ".png"))
    tab = context.new_page()
    tab.on("request", lambda r: is_external(r.url) and report.external.append(r.url))
    tab.on("console", lambda m: m.type == "error" and report.errors.append(f"console: {m.text}"))
    tab.on("pageerror", lambda e: report.errors.append(f"uncaught: {e}"))
    tab.on("response", lambda r: r.status >= 400 and report.errors.append(f"HTTP {r.status} {r.url}"))
    tab.goto(base + page, wait_until="load")
    with contextlib.suppress(Exception):  # what is still missing is reported below
        tab.wait_for_function(_DRAWN, timeout=wait_ms)
    with contextlib.suppress(Exception):
        tab.wait_for_load_state("networkidle", timeout=5_000)
    report.not_drawn = tab.evaluate(_NOT_DRAWN)
    report.too_wide = tab.evaluate(_TOO_WIDE)
    report.unreadable = unreadable(tab.evaluate("() => document.body.innerText"))
    report.figures = figure_problems(
        tab.evaluate(_FIGURES), tab.evaluate("() => document.querySelectorAll('.headlab-chart').length"), page
    )
    report.clipped = tab.evaluate(_CLIPPED)
    tab.screenshot(path=str(report.screenshot), full_page=True)
    tab.close()
    return report


def figure_problems(found: list[dict], charts: int, page: str) -> list[str]:
    """A page's numbered figures (:data:`_FIGURES`) and its ``charts`` (every ``.headlab-chart``) against its
    notebook: each figure drawn, numbered page.1, page.2, ... in order, and at least as many figures and charts as
    the notebook always draws (:func:`declared_charts`)."""
    problems = [f"{f['number']} has no chart drawn in its cell" for f in found if not f["drawn"]]
    numbers = [tuple(int(x) for x in f["number"].removeprefix("Figure ").rstrip(".").split(".")) for f in found]
    stem = Path(page).stem
    prefix = int(stem.split("_")[0]) if stem.split("_")[0].isdigit() else None
    expected = [(prefix if prefix is not None else n[0], k + 1) for k, n in enumerate(numbers)]
    if numbers != expected:
        problems.append(
            f"figures numbered {['.'.join(map(str, n)) for n in numbers]}, not {stem}'s 1 to {len(numbers)}"
        )
    notebook = NOTEBOOKS / f"{stem}.ipynb"
    figures, all_charts = declared_charts(notebook) if notebook.exists() and "executed" in page else (0, 0)
    if len(found) < figures:
        problems.append(f"{len(found)} numbered figures shown, {notebook.name} always draws {figures}")
    if charts < all_charts:
        problems.append(f"{charts} charts on the page, {notebook.name} always draws {all_charts}")
    return problems


def assert_offline(reports: list[PageReport]) -> None:
    failing = [r for r in reports if r.problems()]
    assert not failing, "pages that do not work offline:\n" + "\n".join(
        f"{r.page} (screenshot {r.screenshot}):\n    " + "\n    ".join(r.problems()) for r in failing
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A Chromium context with a fresh profile that refuses (and so records) every request off localhost."""
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is missing (Debian: apt-get install chromium; `make test` does it as root)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is missing (pip install -e '.[dev]')"
    if missing:
        message = f"BROWSER TEST NOT RUN: {missing}. The built book's offline rendering is NOT checked."
        if os.environ.get("CI"):
            pytest.fail(message)
        print("\n" + "!" * 100 + f"\n{message}\n" + "!" * 100)
        pytest.skip(message)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        context.route(
            "**/*",
            lambda route: route.abort("blockedbyclient") if is_external(route.request.url) else route.continue_(),
        )
        yield context
        context.close()


def _book_pages(site: Path) -> list[str]:
    return sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")
    )


def _views_page(site: Path) -> str:
    """A test page with two head views, a model view and a chart with a slider and tooltips: several views on one
    page must not clash, and interaction must work from the shipped scripts alone."""
    from headlab.report.render import BookChart
    from headlab.report.views import head_view, model_view

    rng = np.random.default_rng(0)
    maps = rng.random((2, 3, 6, 6))
    maps /= maps.sum(-1, keepdims=True)
    tokens = ["[CLS]", "a", "query", "[SEP]", "title", "[SEP]"]
    cutoff = alt.param(name="cutoff", value=2, bind=alt.binding_range(min=0, max=5, step=1, name="cutoff "))
    chart = (
        alt.Chart(pd.DataFrame({"x": range(6), "y": [3, 1, 4, 1, 5, 9]}))
        .mark_bar()
        .encode(
            x="x:O",
            y="y:Q",
            tooltip=["x", "y"],
            color=alt.condition(alt.datum.x > cutoff, alt.value("steelblue"), alt.value("orange")),
        )
        .add_params(cutoff)
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADLAB_BOOK", "1")
        parts = [
            head_view(maps, tokens, sentence_b_start=4),
            head_view(maps, tokens, layer=1, heads=[0]),
            model_view(maps, tokens),
            BookChart(chart),
        ]
    body = "\n".join(p._repr_html_() for p in parts)
    return _plant(site, "views.html", f'<head><meta charset="utf-8"></head><body>{body}</body>')


def _plant(site: Path, name: str, content: str) -> str:
    """Write a test page into the site's _checks/ folder (not a book page); return its path in the site."""
    (site / "_checks").mkdir(exist_ok=True)
    (site / "_checks" / name).write_text(f'<!DOCTYPE html><html data-content_root="../">{content}</html>')
    return f"_checks/{name}"


@pytest.fixture(scope="module")
def site(tiny_book, tmp_path_factory):
    """A copy of the tiny book's site, to add test pages to (the build stays as built)."""
    copy = tmp_path_factory.mktemp("site") / "html"
    shutil.copytree(tiny_book.html, copy)
    return copy


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where each page's screenshot goes: ``HEADLAB_SCREENSHOTS`` where set (CI keeps that folder as an artifact),
    else a temporary folder."""
    kept = os.environ.get("HEADLAB_SCREENSHOTS")
    path = Path(kept) if kept else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the book's pages: {path}")
    return path


@pytest.mark.parametrize("opened", ["served", "as-files"])
def test_every_page_of_the_book_works_offline(site, browser, shots, opened):
    """Served from localhost, and opened as files (the README says a reader may open index.html directly)."""
    pages = _book_pages(site)
    assert {"index.html", "executed/00_setup.html", "executed/01_redundancy.html"} <= set(pages)
    pages.append(_views_page(site))
    (shots / opened).mkdir(exist_ok=True)
    with serve(site) if opened == "served" else contextlib.nullcontext(site.as_uri() + "/") as base:
        reports = [check_page(browser, base, page, shots / opened) for page in pages]
    assert_offline(reports)
    print(f"\nchecked {len(reports)} pages offline ({opened}): " + ", ".join(r.page for r in reports))


def test_the_scorecard_is_the_first_page_and_every_link_on_it_resolves(site, browser):
    with serve(site) as base:
        tab = browser.new_page()
        tab.goto(base, wait_until="load")  # index.html sends the reader on to the scorecard
        tab.wait_for_url("**/scorecard.html", timeout=10_000)
        assert tab.locator("h1").first.inner_text().startswith("Scorecard")
        tab.wait_for_selector(".headlab-chart svg", timeout=20_000)  # the verdict grid opens the page, drawn
        links = sorted(set(tab.eval_on_selector_all("a[href]", "els => els.map(e => e.href.split('#')[0])")))
        local = [url for url in links if url.startswith(base)]
        assert any(url.endswith("executed/01_redundancy.html") for url in local)
        broken = [url for url in local if tab.request.get(url).status != 200]
        tab.close()
    assert not broken, f"links on the scorecard that do not resolve: {broken}"


def test_views_on_one_page_keep_their_own_ids_and_respond(site, browser, shots):
    page = _views_page(site)
    with serve(site) as base:
        tab = browser.new_page()
        tab.goto(base + page, wait_until="load")
        tab.wait_for_function(_DRAWN, timeout=20_000)
        tab.screenshot(path=str(shots / "views.png"), full_page=True)
        ids = tab.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)")
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
        # the head view redraws for another layer; the chart's slider recolours its bars; tooltips show
        first = tab.locator(".headlab-view").first
        before = first.locator("svg").inner_html()
        first.locator("select[id$='-layer']").select_option("1")
        assert first.locator("svg").inner_html() != before
        chart = tab.locator(".headlab-chart")
        bars = chart.locator("path[aria-roledescription='bar']")
        colours = bars.evaluate_all("els => els.map(e => e.getAttribute('fill'))")
        chart.locator("input[type='range']").fill("4")
        assert bars.evaluate_all("els => els.map(e => e.getAttribute('fill'))") != colours
        bars.first.hover()
        tab.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
        tab.close()


def test_a_page_that_reaches_a_cdn_fails_the_check(site, browser, shots):
    """The check is not blind: a page that loads Vega from a CDN, throws, and leaves its chart empty fails it."""
    page = _plant(
        site,
        "cdn.html",
        '<head><script src="https://cdn.jsdelivr.net/npm/vega@5"></script></head><body>'
        '<div class="headlab-chart" id="c"></div><script>vegaEmbed("#c", {});</script></body>',
    )
    with serve(site) as base:
        report = check_page(browser, base, page, shots, wait_ms=2_000)
    assert report.external == ["https://cdn.jsdelivr.net/npm/vega@5"]
    assert any("vegaEmbed is not defined" in e for e in report.errors)
    assert report.not_drawn == ["headlab-chart c"]
    with pytest.raises(AssertionError, match="cdn.jsdelivr.net"):
        assert_offline([report])


def test_a_page_a_reader_would_see_broken_fails_the_check(site, browser, shots):
    """The reader's checks catch a table left as text, a NaN, a warning and a traceback, each on its own."""
    lines = [
        "<p>| the study's claim | verdict |</p><p>|—|—|</p>",
        "<table><tr><td>NaN</td></tr></table>",
        "<pre>RuntimeWarning: invalid value encountered in scalar divide</pre>",
        "<pre>Traceback (most recent call last):</pre>",
    ]
    page = _plant(site, "broken.html", '<head><meta charset="utf-8"></head><body>' + "".join(lines) + "</body>")
    with serve(site) as base:
        report = check_page(browser, base, page, shots)
    found = {u.split(":")[0] for u in report.unreadable}
    assert found == set(UNREADABLE), report.unreadable
    assert unreadable("a verdict table that rendered, 0.0 [−0.1, +0.1]\tx = np.nan\tfloat('nan') in code") == []
    assert [u.split(":")[0] for u in unreadable("share\tlo\n0.5\tNaN\n")] == ["NaN for a missing number"]


def test_a_figure_over_nothing_or_a_clipped_legend_fails_the_check(site, browser, shots):
    """The figure and legend checks are not blind: a caption whose cell drew no chart, figures numbered out of order,
    a label Vega cut short and a legend past its chart's edge are each reported."""
    table = pd.DataFrame({"x": [1, 2], "y": [3, 4], "direction": ["hurts", "helps"]})
    cut = (
        alt.Chart(table)
        .mark_point()
        .encode(x="x:Q", y="y:Q", color=alt.Color("direction:N", legend=alt.Legend(labelLimit=12)))
    )
    from headlab.report.render import BookChart

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADLAB_BOOK", "1")
        drawn = BookChart(cut.properties(width=200, height=100))._repr_html_()
    cells = (
        f'<div class="cell">{drawn}<p><strong>Figure 9.2.</strong> a label cut short.</p></div>'
        '<div class="cell"><p><strong>Figure 9.1.</strong> a caption with no chart.</p></div>'
        '<div class="headlab-chart" id="past"><svg class="marks" width="100" height="50"><g class="role-legend" '
        'transform="translate(80,0)"><rect width="60" height="20"></rect></g></svg></div>'
    )
    page = _plant(site, "figures.html", f'<head><meta charset="utf-8"></head><body>{cells}</body>')
    with serve(site) as base:
        report = check_page(browser, base, page, shots)
    assert report.figures == [
        "Figure 9.1. has no chart drawn in its cell",
        "figures numbered ['9.2', '9.1'], not figures's 1 to 2",
    ]
    assert any(c.startswith('a legend label cut to "') for c in report.clipped), report.clipped
    assert "a legend drawn 40 px past its chart" in report.clipped
    assert declared_charts(NOTEBOOKS / "02_layer_dependence.ipynb")[0] >= 3  # the page's figures, from its code
    assert figure_problems([{"number": "Figure 3.1.", "drawn": True}], 1, "executed/02_layer_dependence.html")[0] == (
        "figures numbered ['3.1'], not 02_layer_dependence's 1 to 1"
    )  # another page's numbers
