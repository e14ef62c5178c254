"""Live explorers for the word-segmentation and word-order notebooks (03, 04): any example, any head, any k.

They need a running kernel (JupyterLab). The static book shows the same explorations as Altair charts with
controls over precomputed tables (``charts.boundary_rule(select=True)``, ``charts.grade_distributions(select=True)``);
in the book build (``HEADLAB_BOOK=1``) these functions return a note instead of a widget.
"""

from __future__ import annotations

import pandas as pd

import headlab.report.charts as charts
from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded
from headlab.core.masking import head_grid
from headlab.measures.order import case_k_table, depth_matched_k
from headlab.measures.segmentation import boundary_example
from headlab.report.render import in_book, live_panel

LIVE_ONLY = "*The live explorer needs a running kernel: open this notebook in JupyterLab.*"


def case_texts(frame: pd.DataFrame, shuffled: pd.DataFrame, examples) -> pd.DataFrame:
    """(example, line): the query, the title and the shuffled title of each example, for chart captions."""
    rows = []
    for e in examples:
        rows += [
            {"example": int(e), "line": f"{name}: {text}"}
            for name, text in (
                ("query", frame["query"].iloc[e]),
                ("title", frame["title"].iloc[e]),
                ("shuffled", shuffled["title"].iloc[e]),
            )
        ]
    return pd.DataFrame(rows)


def _head_line(heads: pd.DataFrame | None, layer: int, head: int) -> str:
    if heads is None:
        return ""
    rows = heads[(heads["layer"] == layer) & (heads["head"] == head)]
    return "  \n".join(
        f"L{layer}H{head} on {r.subset}: accuracy {r.accuracy:.1%} (majority class {r.majority:.1%}), F1 {r.f1:.2f}"
        for r in rows.itertuples()
    )


def segmentation_explorer(
    lab,
    encoded: Encoded,
    segments=None,
    heads: pd.DataFrame | None = None,
    example: int = 0,
    layer: int = 0,
    head: int = 0,
):
    """Pick an example, a layer and a head: the rule's bars (attention to [SEP] vs the next token) and the head's map.

    ``lab`` gives the model, tokenizer and device; ``encoded`` is the corpus's encoding. ``segments``: gold words per
    example (None: WordPiece's own boundaries); ``heads``: the per-head scores (``score_segmentation(...).heads``),
    quoted for the chosen head.
    """
    from IPython.display import Markdown

    if in_book():
        return Markdown(LIVE_ONLY)
    import ipywidgets as widgets

    layers, n_heads = head_grid(lab.model)
    example_box = widgets.BoundedIntText(value=example, min=0, max=len(encoded) - 1, description="example")
    layer_box = widgets.IntSlider(value=layer, min=0, max=layers - 1, description="layer")
    head_box = widgets.IntSlider(value=head, min=0, max=n_heads - 1, description="head")
    cache = {}

    def draw():
        e, l, h = example_box.value, layer_box.value, head_box.value
        if e not in cache:
            cache[e] = boundary_example(lab, encoded, e, segments)
        seen = cache[e]
        table = seen.table[(seen.table["layer"] == l) & (seen.table["head"] == h)]
        return (
            Markdown(_head_line(heads, l, h) or f"L{l}H{h}"),
            charts.boundary_rule(table, select=False, title=f"example {e}, L{l}H{h}"),
            charts.attention_heatmap(seen.maps[l, h], seen.tokens, title=f"L{l}H{h}: attention map"),
        )

    return live_panel([example_box, layer_box, head_box], draw)


def order_explorer(
    lab,
    shuffled: Encoded,
    order_table: pd.DataFrame,
    texts: pd.DataFrame,
    example: int = 0,
    k: int = 7,
    draws: int = 10,
    seed: int = 0,
):
    """Pick an example, k and an order head: the four grade distributions of the study's chart, and the head's map.

    ``lab`` gives the model, tokenizer, the original pairs (its encoded split) and the device; ``shuffled`` is the same
    pairs with shuffled titles. The grade bars are computed live: the top-k order heads masked, and ``draws`` sets of k
    random other heads. ``texts`` (from :func:`case_texts` over all examples) captions the chosen example.
    """
    from IPython.display import Markdown

    if in_book():
        return Markdown(LIVE_ONLY)
    import ipywidgets as widgets

    model, tokenizer, original = lab.model, lab.tokenizer, lab.encoded
    layers, heads = head_grid(model)
    ranked = order_table.sort_values("rank").reset_index(drop=True)
    example_box = widgets.BoundedIntText(value=example, min=0, max=len(original) - 1, description="example")
    most = depth_matched_k(order_table, heads)  # random heads of the same layers need as many others there
    k_box = widgets.IntSlider(value=min(k, most), min=0, max=most, description="k")
    rank_box = widgets.IntSlider(value=1, min=1, max=len(ranked), description="head rank")

    def draw():
        e, top, rank = example_box.value, k_box.value, rank_box.value
        bars = case_k_table(lab, shuffled, [e], ranked, [top], draws, seed)
        row = ranked.iloc[rank - 1]
        l, h = int(row["layer"]), int(row["head"])
        _, maps = next(attention_maps(model, original, [e], device=lab.device, pad_id=lab.pad_id))
        tokens = tokenizer.convert_ids_to_tokens(original.input_ids[e])
        return (
            Markdown("  \n".join(texts[texts["example"] == e]["line"])),
            charts.grade_distributions(
                bars, title=f"example {e}: top-{top} order heads or {top} random heads ({draws} draws) masked"
            ),
            charts.attention_heatmap(
                maps[l, h], tokens, title=f"order head #{rank}: L{l}H{h} ({row['direction']} {row['score']:.0%})"
            ),
        )

    return live_panel([example_box, k_box, rank_box], draw)
