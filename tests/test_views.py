"""bertviz views for the static book: local scripts only, and ids that several views on one page cannot share."""

import re

import numpy as np
import pytest
import torch

from headlab.report.bookjs import D3, JQUERY
from headlab.report.views import BertvizError, head_view, model_view, offline_html

TOKENS = ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]


def _maps(layers=2, heads=3, seed=0):
    maps = np.random.default_rng(seed).random((layers, heads, len(TOKENS), len(TOKENS)))
    return maps / maps.sum(-1, keepdims=True)


@pytest.fixture
def book(monkeypatch):
    monkeypatch.setenv("HEADLAB_BOOK", "1")


def _ids(html):
    return re.findall(r"""\bid=["']([^"']+)["']""", html)


@pytest.mark.parametrize("view", [head_view, model_view])
def test_a_book_view_loads_only_shipped_scripts(book, view):
    html = view(_maps(), TOKENS, sentence_b_start=4)._repr_html_()
    assert "require" not in html and "cdnjs" not in html and not re.search(r"https?://(?!www\.w3\.org)", html)
    assert f'["{JQUERY.path}", "{D3.path}"]' in html
    assert html.startswith('<div class="headlab-view">')


@pytest.mark.parametrize("view", [head_view, model_view])
def test_every_id_of_a_view_starts_with_its_own_root_id(book, view):
    first, second = (view(_maps(), TOKENS)._repr_html_() for _ in range(2))
    root = re.search(r'id="(bertviz-[0-9a-f]+)"', first).group(1)
    assert all(i.startswith(root) for i in _ids(first))
    assert not set(_ids(first)) & set(_ids(second))
    # ids the script makes or looks up are prefixed too
    assert "#${config.rootDivId} #" not in first
    assert not re.search(r'select\("#(?!" \+ config\.rootDivId)', first)
    assert not re.search(r'\.attr\("id", (?!config\.rootDivId)', first)


def test_maps_may_be_an_array_or_per_layer_tensors(book):
    maps = _maps()
    forms = [
        maps,
        torch.tensor(maps, requires_grad=True),
        [torch.tensor(m).float() for m in maps],
        tuple(torch.tensor(m[None]) for m in maps),
    ]
    pages = {
        re.sub(r"bertviz-[0-9a-f]+", "ID", head_view(f, TOKENS, layer=1, heads=[0, 2])._repr_html_()) for f in forms
    }
    assert len(pages) == 1
    assert '"layer": 1' in pages.pop()


@pytest.mark.slow  # the pinned jQuery and d3 are assets
def test_live_a_view_carries_jquery_and_d3_inside_and_loads_nothing(monkeypatch):
    """JupyterLab serves no book files: the pinned jQuery and d3 go into the output, before the view's code."""
    monkeypatch.delenv("HEADLAB_BOOK", raising=False)
    html = model_view(_maps(), TOKENS)._repr_html_()
    markup, view_code = html[: html.index("<script>")], html[html.rindex("<script>") :]
    assert markup.startswith('<div class="headlab-view">') and "<script" not in markup
    assert html.index("jQuery v3.") < html.index("// https://d3js.org v5.") < html.rindex("<script>")
    assert view_code.startswith("<script>\n(function () {\nvar $ = window.jQuery, d3 = window.d3;")
    for own in (markup, view_code):
        assert "require" not in own and "cdnjs" not in own and "headlabLoad" not in own and "https://" not in own


def test_a_token_list_that_does_not_fit_the_maps_is_refused(book):
    with pytest.raises(ValueError, match="positions"):
        head_view(_maps(), TOKENS[:-1])


def test_html_of_an_unknown_shape_is_refused():
    with pytest.raises(BertvizError, match="require.js"):
        offline_html('<div id="bertviz-0a"></div><script type="text/javascript">draw()</script>')
