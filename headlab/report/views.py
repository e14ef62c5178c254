"""bertviz attention views that also work in the static book, with no network.

    from headlab.report.views import head_view, model_view
    head_view(maps, tokens)                       # maps: (layers, heads, tokens, tokens) array, row = attending token
    model_view(maps, tokens, sentence_b_start=9)  # a grid of every layer x head

End a cell with the call. bertviz's HTML loads require.js, jQuery and d3 from a CDN; headlab rewrites it to need no
network: no require.js, jQuery and d3 from the pinned files of :mod:`headlab.report.bookjs` (in the book,
``HEADLAB_BOOK=1``, the files the site ships; live in JupyterLab, their text inside the output), and every element id
prefixed by the view's own id, so that one page can hold several views.
"""

from __future__ import annotations

import re

import torch

from headlab.report.bookjs import D3, JQUERY, after_loading, inline_scripts
from headlab.report.render import in_book

_REQUIRE_TAG = re.compile(r'<script src="[^"]*require[^"]*"></script>')
_SCRIPT = re.compile(r'<script type="text/javascript">(.*)</script>', re.S)
_ROOT_ID = re.compile(r'<div id="(bertviz-[0-9a-f]+)"')
_INNER_IDS = re.compile(r"""id=(["'])(layer|filter|vis)\1""")
_REQUIRE_HEAD = re.compile(
    r"""^.*?require\.config\(\{.*?\}\);\s*"""
    r"""requirejs\(\['jquery', 'd3'\], function ?\(\$, d3\) \{""",
    re.S,
)
_REQUIRE_TAIL = re.compile(r"\}\);\s*$")
_JS_IDS = [  # (pattern, replacement): bertviz's fixed ids in the JS, made relative to config.rootDivId
    (re.compile(r"#\$\{config\.rootDivId\} #(\w+)"), r"#${config.rootDivId}-\1"),
    (re.compile(r'select\("#'), 'select("#" + config.rootDivId + "-'),
    (re.compile(r'\.attr\("id", ([^)]*)\)'), r'.attr("id", config.rootDivId + "-" + (\1))'),
]


class BertvizError(RuntimeError):
    """bertviz's output no longer has the shape this module rewrites (a new bertviz version?)."""


class OfflineView:
    """Display wrapper holding the view's HTML (``_repr_html_``), like render.BookChart."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return self.html


def _layers(attention_maps) -> list[torch.Tensor]:
    """bertviz wants one (1, H, T, T) tensor per layer; 3 decimals (it draws them as opacities) keep pages small."""
    layers = [torch.as_tensor(m).detach().cpu().double() for m in attention_maps]
    return [torch.round(m.reshape(1, *m.shape[-3:]), decimals=3) for m in layers]


def offline_html(html: str, inline: bool = False) -> str:
    """Rewrite bertviz's ``html_action="return"`` HTML: the book's scripts (``inline``: their text), unique ids."""
    root, script = _ROOT_ID.search(html), _SCRIPT.search(html)
    if not (root and script and _REQUIRE_HEAD.match(script.group(1)) and _REQUIRE_TAIL.search(script.group(1))):
        raise BertvizError("bertviz's HTML does not have the require.js loader headlab/report/views.py rewrites")
    code = _REQUIRE_TAIL.sub("", _REQUIRE_HEAD.sub("", script.group(1)))
    for pattern, replacement in _JS_IDS:
        code = pattern.sub(replacement, code)
    code = "var $ = window.jQuery, d3 = window.d3;\n" + code.replace("</", "<\\/")
    markup = _INNER_IDS.sub(lambda m: f'id="{root.group(1)}-{m.group(2)}"', html[: script.start()])
    markup = _REQUIRE_TAG.sub("", markup).strip()
    scripts = inline_scripts([JQUERY, D3], code) if inline else after_loading([JQUERY.path, D3.path], code)
    return f'<div class="headlab-view">\n{markup}\n</div>\n{scripts}'


def _show(view):
    return OfflineView(offline_html(view.data, inline=not in_book()))


def head_view(
    attention_maps,
    tokens: list[str],
    sentence_b_start: int | None = None,
    layer: int | None = None,
    heads: list[int] | None = None,
):
    """bertviz's head view: one layer's heads as lines from each token to the tokens it attends to.

    ``attention_maps``: (layers, heads, tokens, tokens) array or tensor, or a list of one (heads, tokens, tokens) or
    (1, heads, tokens, tokens) tensor per layer (what transformers returns), row = attending token; ``tokens``: the
    tokens; ``sentence_b_start``: index of the second sentence's first token (adds a menu to show either sentence's
    attention); ``layer``: the layer shown first; ``heads``: the heads selected first (default all).
    """
    from bertviz import head_view as bertviz_head_view

    return _show(
        bertviz_head_view(
            _layers(attention_maps),
            list(tokens),
            sentence_b_start=sentence_b_start,
            layer=layer,
            heads=heads,
            html_action="return",
        )
    )


def model_view(
    attention_maps,
    tokens: list[str],
    sentence_b_start: int | None = None,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
):
    """bertviz's model view: a thumbnail of every layer x head; click one to enlarge it.

    Arguments as in :func:`head_view`; ``layers`` and ``heads`` restrict the grid (default all). Large inputs make
    large pages: keep T small or pick layers.
    """
    from bertviz import model_view as bertviz_model_view

    return _show(
        bertviz_model_view(
            _layers(attention_maps),
            list(tokens),
            sentence_b_start=sentence_b_start,
            include_layers=layers,
            include_heads=heads,
            display_mode="light",
            html_action="return",
        )
    )
