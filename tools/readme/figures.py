"""The pictures ``results/*.png``: drawn from their tables, recompressed so a redraw of the same chart is the same
file, and locked by the sha256 of the tables they came from."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import pandas as pd

from headlab.book.scorecard import column_label, is_main
from headlab.report import charts
from headlab.report.bookjs import VEGA_LITE
from tools.readme.markers import RESULTS

# the pictures results/<name>.png, each drawn from these tables of results/ (draw_figure)
FIGURES = {"scorecard": ("scorecard",), "two_tower": ("two_tower",)}


LOCK = "pictures.lock"  # results/pictures.lock: each picture and the sha256 of the tables it was drawn from


FIGURE_SCALE = 1.5  # pixels per Vega-Lite pixel: sharp on a high-density screen, and small enough to commit


def fingerprint(name: str, results: Path = RESULTS) -> str:
    """What picture ``name`` is drawn from: each of its tables with the sha256 of its bytes (``missing`` if none)."""
    parts = []
    for table in FIGURES[name]:
        path = results / f"{table}.csv"
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"
        parts.append(f"results/{table}.csv sha256:{digest}")
    return "; ".join(parts)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def recompressed(png: bytes) -> bytes:
    """``png`` with its image data compressed at zlib's best level (vl-convert writes fast, large files: the
    scorecard's 0.89 MB becomes 0.21 MB), its other chunks as they were."""
    if png[:8] != PNG_SIGNATURE:
        raise ValueError("not a PNG file")
    chunks, pos = [], 8
    while pos < len(png):
        (size,) = struct.unpack(">I", png[pos : pos + 4])
        chunks.append((png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + size]))
        pos += 12 + size
    data = zlib.compress(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), 9)
    out = [PNG_SIGNATURE]
    for kind, body in chunks:
        if kind == b"IDAT":
            body, data = data, b""
            if not body:
                continue
        out.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    return b"".join(out)


def drawn_from(results: Path = RESULTS) -> dict[str, str]:
    """The lock file ``results/pictures.lock``: each picture and the :func:`fingerprint` it was drawn from."""
    lock = results / LOCK
    return json.loads(lock.read_text(encoding="utf-8")) if lock.exists() else {}


def stale_figures(results: Path = RESULTS) -> list[str]:
    """The pictures of :data:`FIGURES` missing from ``results`` or drawn from other tables than it holds."""
    drawn = drawn_from(results)
    return [
        name
        for name in FIGURES
        if not (results / f"{name}.png").exists() or drawn.get(name) != fingerprint(name, results)
    ]


def figure_chart(name: str, results: Path = RESULTS):
    """The Altair chart of picture ``name``, from ``results`` (None when its tables are not there yet)."""
    if any(not (results / f"{table}.csv").exists() for table in FIGURES[name]):
        return None
    if name == "scorecard":
        table = pd.read_csv(results / "scorecard.csv")
        table = table[table["claim_id"].map(is_main)]
        table = table.assign(model=[column_label(preset, table) for preset in table["preset"]])
        return charts.verdict_grid(table, "The study's claims (rows) on each model (columns)").configure_view(
            stroke=None
        )
    if name == "two_tower":
        return charts.condition_accuracy(
            pd.read_csv(results / "two_tower.csv"),
            "Two towers against one: every condition of notebook 08 on each model",
        )
    raise KeyError(name)


def draw_figure(name: str, results: Path = RESULTS) -> Path | None:
    """Draw ``results/<name>.png`` offline (vl-convert, the Vega-Lite the book ships) and note the :func:`fingerprint`
    of its tables in the lock file; None when its tables are not there yet."""
    import vl_convert

    chart = figure_chart(name, results)
    if chart is None:
        return None
    png = vl_convert.vegalite_to_png(chart.to_dict(), vl_version=f"v{VEGA_LITE}", scale=FIGURE_SCALE)
    path = results / f"{name}.png"
    path.write_bytes(recompressed(png))
    lock = {**drawn_from(results), name: fingerprint(name, results)}
    (results / LOCK).write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
