"""A live explorer of one head's attention across runs (models or masks): any example, any head (JupyterLab).

The static book draws the same comparison from precomputed cells
(:func:`headlab.measures.attention_compare.compare_maps` and :func:`headlab.report.charts.map_panels`), with menus and
no kernel.
"""

from __future__ import annotations

import headlab.report.charts as charts
from headlab.core.masking import head_grid
from headlab.lab.lab import Lab
from headlab.measures.attention_compare import DIFFERENCE, compare_maps
from headlab.report.render import in_book, live_panel


def live_explorer(lab: Lab, runs: dict, example: int = 0, head=(0, 0), stopwords=None):
    """ipywidgets controls (example, layer, head) that draw that head's maps in every run and their difference.

    ``lab`` gives the pairs (its encoded split, and its frame's query, title and label to caption each), the
    tokenizer and device; ``runs`` is as in :func:`headlab.measures.attention_compare.compare_maps`. In the static
    book (``HEADLAB_BOOK=1``) a widget does nothing without a kernel, so a note is returned instead.
    """
    from IPython.display import Markdown

    if in_book():
        return Markdown("*The live explorer needs a running kernel: open this notebook in JupyterLab.*")
    import ipywidgets as widgets

    model = next(iter(runs.values()))[0]
    layers, heads = head_grid(model)
    example_box = widgets.BoundedIntText(value=int(example), min=0, max=len(lab.encoded) - 1, description="example")
    layer_box = widgets.Dropdown(options=list(range(layers)), value=int(head[0]), description="layer")
    head_box = widgets.Dropdown(options=list(range(heads)), value=int(head[1]), description="head")

    def draw():
        i, chosen = example_box.value, (layer_box.value, head_box.value)
        cells = compare_maps(lab, runs, [i], [chosen], stopwords=stopwords)
        row = lab.frame.iloc[i]
        return (
            Markdown(f"**query** {row['query']}  \n**title** {row['title']}  \n**gold grade** {row['label']}"),
            charts.map_panels(cells, [c for c in cells.columns if c in runs or c == DIFFERENCE], select=False),
        )

    return live_panel([example_box, layer_box, head_box], draw)
