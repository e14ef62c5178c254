"""The circuit (notebook 09): senders, receivers and the routes between them as one graph."""

from __future__ import annotations

import textwrap

import altair as alt
import numpy as np
import pandas as pd


def circuit_graph(
    edges: pd.DataFrame,
    ranking: pd.DataFrame,
    matching,
    title: str = "",
    minimality: pd.DataFrame | None = None,
    faithfulness: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """The circuit page 09 finds (:func:`headlab.measures.circuit.found_circuit`): the matching heads (senders, at
    their layer and head) and the receivers above them that read most of their change, an edge from each sender to
    each receiver, its width the share of the grade-logit drop that comes back when that receiver alone reads that
    sender alone (grey where it restores, red where it pushes the other way), its tooltip the share with its
    interval; a receiver's tooltip gives what it reads of every sender at once (``ranking``). IOI's measures
    (:mod:`headlab.measures.faithfulness`), where given: each head's tooltip what it adds inside the circuit
    (``minimality``), and the subtitle what the circuit keeps beside random circuits (``faithfulness``)."""
    senders = pd.DataFrame([{"layer": int(l), "head": int(h), "role": "matching head"} for l, h in matching])
    found = edges[["layer", "head"]].drop_duplicates().merge(ranking, on=["layer", "head"], how="left")
    receivers = found.assign(role="receiver")[["layer", "head", "role", "restored", "lo", "hi"]]
    nodes = pd.concat([senders, receivers], ignore_index=True).assign(
        name=lambda t: t["layer"].astype(str) + "." + t["head"].astype(str)
    )
    adds = []
    if minimality is not None and not minimality.empty:
        added = minimality[["layer", "head", "value", "lo", "hi"]].rename(
            columns={"value": "adds", "lo": "adds_lo", "hi": "adds_hi"}
        )
        nodes = nodes.merge(added, on=["layer", "head"], how="left")
        adds = [alt.Tooltip(c, format=".2%") for c in ("adds:Q", "adds_lo:Q", "adds_hi:Q")]
    subtitle = ""
    if faithfulness is not None and not faithfulness.empty:
        kept = faithfulness.set_index("what")
        f = kept.loc["faithfulness"]
        subtitle = f"the circuit keeps {f['value']:.1%} [{f['lo']:.1%}, {f['hi']:.1%}] of the full model's difference"
        if "random circuits" in kept.index:
            r = kept.loc["random circuits"]
            subtitle += f"; {int(r['n_draws'])} random circuits of its size and layers {r['value']:.1%}"
    lines_data = edges.assign(
        head2=edges["head"],
        layer2=edges["layer"],
        head=edges["sender_head"],
        layer=edges["sender_layer"],
        edge=lambda t: (
            t["sender_layer"].astype(str)
            + "."
            + t["sender_head"].astype(str)
            + " → "
            + t["layer2"].astype(str)
            + "."
            + t["head2"].astype(str)
        ),
        size=edges["restored"].abs(),
        direction=np.where(edges["restored"] >= 0, "restores", "pushes the other way"),
    )
    x = alt.X("head:Q", title="head", scale=alt.Scale(padding=12))
    y = alt.Y("layer:Q", title="layer", scale=alt.Scale(padding=12))
    share = [alt.Tooltip(c, format=".1%") for c in ("restored:Q", "lo:Q", "hi:Q")]
    lines = (
        alt.Chart(lines_data)
        .mark_rule(opacity=0.6)
        .encode(
            x=x,
            y=y,
            x2="head2:Q",
            y2="layer2:Q",
            strokeWidth=alt.StrokeWidth("size:Q", title="share restored (size)", legend=alt.Legend(format=".0%")),
            color=alt.Color(
                "direction:N",
                title=None,
                scale=alt.Scale(domain=["restores", "pushes the other way"], range=["grey", "#d62728"]),
            ),
            tooltip=["edge:N", *share],
        )
    )
    points = (
        alt.Chart(nodes)
        .mark_circle(size=260, opacity=0.9)
        .encode(
            x=x,
            y=y,
            fill=alt.Fill("role:N", title=None),
            tooltip=["name:N", "role:N", *share, *adds],
        )
    )
    labels = alt.Chart(nodes).mark_text(dy=-14, fontSize=10).encode(x=x, y=y, text="name:N")
    return (
        alt.layer(lines, points, labels)
        .properties(
            width=360,
            height=240,
            # lines a column wide: a title longer than the plot widens the drawn chart past the page's column
            title=alt.TitleParams(textwrap.wrap(title, 70) or "", subtitle=textwrap.wrap(subtitle, 80) or ""),
        )
        .resolve_scale(color="independent")
    )
