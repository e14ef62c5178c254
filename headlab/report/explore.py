"""Pick a head, see what masking it does and where it attends: live with ipywidgets, static with Altair.

The live explorer needs a running kernel (JupyterLab) and computes attention for any example. The static
explorer runs in the built book's browser with no kernel, from precomputed tables: the single-head grid,
the whole-layer effects and one example's attention maps; a click on a grid cell picks the head.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

import headlab.report.charts as charts
from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded, predict
from headlab.core.masking import head_grid, keep_all
from headlab.lab.lab import Lab
from headlab.report.render import in_book, live_panel


def attention_table(maps: np.ndarray, min_weight: float = 0.02) -> pd.DataFrame:
    """Tidy cells (layer, head, query, key, weight) of one example's (layers, heads, T, T) maps.

    Weights below ``min_weight`` are left out (drawn blank, i.e. about zero): every head of a model then
    fits in a page, since each row of a map sums to one and most of it sits on a few tokens.
    """
    layer, head, query, key = np.nonzero(maps >= min_weight)
    return pd.DataFrame(
        {"layer": layer, "head": head, "query": query, "key": key, "weight": np.round(maps[layer, head, query, key], 4)}
    )


def _inline_csv(table: pd.DataFrame) -> alt.InlineData:
    """A numeric table inlined as CSV text: a fraction of the JSON size, so a page can hold every head's map."""
    return alt.InlineData(
        values=table.to_csv(index=False), format=alt.DataFormat(type="csv", parse={c: "number" for c in table.columns})
    )


def _effect(row) -> str:
    return f"{row['rel_change']:+.1%} [{row['lo']:+.1%}, {row['hi']:+.1%}]"


def head_report(grid: pd.DataFrame, layer_table: pd.DataFrame, layer: int, head: int) -> str:
    """One line on what masking this head, and its whole layer, does to accuracy."""
    cell = grid[(grid["layer"] == layer) & (grid["head"] == head)]
    if cell.empty or pd.isna(cell.iloc[0]["rel_change"]):
        text = f"Head {layer}.{head} masked alone: not tested."
    else:
        r = cell.iloc[0]
        text = (
            f"Head {layer}.{head} masked alone: {_effect(r)}, McNemar p = {r['p_mcnemar']:.2g}, "
            f"Holm p = {r['p_holm']:.2g} ({r['direction']})."
        )
    whole = layer_table[layer_table["layer"] == layer]
    if not whole.empty:
        text += f" Whole layer {layer} masked: {_effect(whole.iloc[0])}."
    return text


def head_explorer_chart(
    grid: pd.DataFrame, layer_table: pd.DataFrame, attention: pd.DataFrame, tokens: list[str], title: str = ""
) -> alt.VConcatChart:
    """Click a cell of the single-head grid to see that head's attention on one example and its numbers.

    Starts on the head whose removal costs most. ``attention`` comes from :func:`attention_table`.
    """
    worst = grid.loc[grid["rel_change"].idxmin()] if grid["rel_change"].notna().any() else grid.iloc[0]
    pick = alt.selection_point(
        fields=["layer", "head"],
        on="click",
        clear=False,
        value=[{"layer": int(worst["layer"]), "head": int(worst["head"])}],
    )
    reports = grid[["layer", "head", "rel_change"]].assign(
        report=[head_report(grid, layer_table, int(l), int(h)) for l, h in zip(grid["layer"], grid["head"])]
    )
    cells = (
        alt.Chart(reports)
        .mark_rect()
        .encode(
            x=alt.X("head:O"),
            y=alt.Y("layer:O"),
            color=alt.Color(
                "rel_change:Q",
                scale=charts.symmetric_scale(grid["rel_change"]),
                title="masked alone",
                legend=alt.Legend(format="%"),
            ),
            stroke=alt.condition(pick, alt.value("black"), alt.value(None)),
            strokeWidth=alt.condition(pick, alt.value(3), alt.value(0)),
            tooltip=["report"],
        )
        .add_params(pick)
        .properties(width=22 * grid["head"].nunique(), height=22 * grid["layer"].nunique(), title="click a head")
    )
    # one sentence a line (the head alone, then its whole layer), so the text stays inside the column
    lines = reports.assign(report=reports["report"].str.replace(". Whole layer", ".\nWhole layer", regex=False))
    text = (
        alt.Chart(lines)
        .mark_text(align="left", baseline="top", fontSize=12, lineBreak="\n")
        .encode(text="report:N", x=alt.value(0), y=alt.value(0))
        .transform_filter(pick)
        .properties(width=600, height=36)
    )
    attn = charts.attention_cells(_inline_csv(attention), tokens, title=title).transform_filter(pick)
    return alt.vconcat(alt.hconcat(cells, attn).resolve_scale(color="independent"), text)


def example_view(
    model, tokenizer, encoded: Encoded, layer: int, head: int, example: int, device="cpu", pad_id: int = 0
) -> tuple[str, alt.Chart]:
    """The grades with and without this head on one example, and the head's attention map there."""
    one = encoded.subset([example])
    mask = keep_all(model)
    mask[layer, head] = 0.0
    kept = encoded.scale.predicted(predict(model, one, device=device, pad_id=pad_id))[0]
    masked = encoded.scale.predicted(predict(model, one, mask=mask, device=device, pad_id=pad_id))[0]
    _, maps = next(attention_maps(model, one, device=device, pad_id=pad_id))
    tokens = tokenizer.convert_ids_to_tokens(encoded.input_ids[example])
    text = (
        f"Example {example}: gold grade {encoded.grades[example]}; predicted {kept} with every head, "
        f"{masked} with head {layer}.{head} masked."
    )
    return text, charts.attention_heatmap(maps[layer, head], tokens, title=f"head {layer}.{head}, example {example}")


def head_explorer(lab: Lab, grid: pd.DataFrame, layer_table: pd.DataFrame, example: int = 0):
    """Live controls (layer, head, example) over the ablation tables and the lab's model's attention on its split.

    In the static book (``HEADLAB_BOOK=1``) a widget would show nothing without a kernel, so a note is returned.
    """
    from IPython.display import Markdown

    if in_book():
        return Markdown("*The live explorer needs a running kernel: open this notebook in JupyterLab.*")
    import ipywidgets as widgets

    layers, heads = head_grid(lab.model)
    layer_box = widgets.Dropdown(options=list(range(layers)), description="layer")
    head_box = widgets.Dropdown(options=list(range(heads)), description="head")
    example_box = widgets.BoundedIntText(value=example, min=0, max=len(lab.encoded) - 1, description="example")

    def draw():
        text, chart = example_view(
            lab.model,
            lab.tokenizer,
            lab.encoded,
            layer_box.value,
            head_box.value,
            example_box.value,
            lab.device,
            lab.pad_id,
        )
        return Markdown(head_report(grid, layer_table, layer_box.value, head_box.value) + "\n\n" + text), chart

    return live_panel([layer_box, head_box, example_box], draw)
