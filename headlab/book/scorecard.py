"""The scorecard: the study's claims (rows) against every model a site was built on (columns).

Each notebook saves its claims as ``claims_<notebook>.csv`` in its preset's results folder
(:mod:`headlab.findings.claims`); the scorecard stacks them into one tidy table and renders the first page of the
book from it: per finding a table whose cells give the verdict and our number, each linking to the page with the
evidence, a count of verdicts per model, and the command that adds each model not built. The README carries a
copy, generated from the last build's table by :mod:`headlab.book.readme`.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from headlab.findings.claims import VERDICTS, number_text
from headlab.lab.study import Study

CLAIM_FILES = "claims_*.csv"
COLUMNS = ["preset", "model", "data", "page", "claim_id", "finding", "claim", "study", "ours", "lo", "hi", "unit",
           "n_examples", "n_draws", "p", "verdict", "reason"]


def results_folder(settings: dict) -> Path:
    """The results folder a preset's notebooks write to (found from its settings; nothing is trained)."""
    return Study.from_globals(settings).table_dir


def preset_claims(preset: str, settings: dict) -> pd.DataFrame:
    """Every claim row the preset's notebooks saved, with the preset, model, data and page (the notebook) added."""
    study = Study.from_globals(settings)
    frames = [pd.read_csv(path).assign(page=path.stem.removeprefix("claims_"))
              for path in sorted(results_folder(settings).glob(CLAIM_FILES))]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    table = pd.concat(frames, ignore_index=True).assign(preset=preset, model=study.model, data=study.data)
    return table[COLUMNS]


def scorecard_table(built: dict[str, dict]) -> pd.DataFrame:
    """The claims of every built preset (``{preset: settings}``, in column order) as one tidy table."""
    tables = [preset_claims(preset, settings) for preset, settings in built.items()]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)


def _numbers(row) -> str:
    number = "" if _missing(row.ours) else f" {number_text(row.ours, row.unit)}"
    interval = "" if _missing(row.lo) else f" [{number_text(row.lo, row.unit)}, {number_text(row.hi, row.unit)}]"
    return number + interval


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _column(preset: str, table: pd.DataFrame) -> str:
    first = table[table["preset"] == preset].iloc[0] if (table["preset"] == preset).any() else None
    return preset if first is None else f"{preset} ({first.model}, {first.data})"


def claim_tables(table: pd.DataFrame, presets: list[str], verdict_text, heading: str = "##") -> list[str]:
    """Markdown lines: verdicts counted per model, then per finding one table of claims (rows) x ``presets``.

    ``verdict_text(row, preset)`` writes a cell's verdict (a link on the site, plain text in the README).
    """
    lines = ["| model | claims | " + " | ".join(VERDICTS) + " |", "|---|---|" + "---|" * len(VERDICTS)]
    for preset in presets:
        mine = table[table["preset"] == preset]
        tally = mine["verdict"].value_counts()
        lines.append(f"| {_column(preset, table)} | {len(mine)} | "
                     + " | ".join(str(int(tally.get(v, 0))) for v in VERDICTS) + " |")
    lines.append("")
    for finding, rows in table.groupby("finding", sort=True):
        lines += [f"{heading} {finding}", "",
                  "| claim | the study | " + " | ".join(_column(p, table) for p in presets) + " |",
                  "|---|---|" + "---|" * len(presets)]
        for _, claim_rows in rows.groupby("claim_id", sort=False):
            first = claim_rows.iloc[0]
            by_preset = {r.preset: r for r in claim_rows.itertuples()}
            study = "" if _missing(first.study) else number_text(first.study, first.unit)
            cells = [verdict_text(by_preset[p], p) + _numbers(by_preset[p]) if p in by_preset else "not run"
                     for p in presets]
            lines.append(f"| {first.claim} | {study} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def scorecard_markdown(table: pd.DataFrame, pages: dict[str, str], not_built: dict[str, str]) -> str:
    """The scorecard page (MyST markdown).

    ``pages`` maps each built preset to the folder its pages live in (``executed`` or ``executed/<preset>``);
    ``not_built`` maps each preset left out of this build to the command that adds it.
    """
    lines = ["# Scorecard: the study's claims on each model", "",
             "Each row is one claim of the study; each column one model this site was built on. A cell gives the "
             "verdict, our number and its 95% interval, and links to the page with the evidence, where the rule "
             f"behind the verdict is stated. Verdicts: {', '.join(VERDICTS)}. The study's own numbers, and what it "
             "left unmeasured, are in {doc}`intro`.", ""]
    lines += claim_tables(table, list(pages), lambda row, p: f"{{doc}}`{row.verdict} <{pages[p]}/{row.page}>`")
    if table.empty:
        lines += ["No notebook of this build saved any claim.", ""]
    if not_built:
        lines += ["## Models not in this build", ""]
        lines += [f"- {preset}: `{command}`" for preset, command in not_built.items()]
    return "\n".join(lines) + "\n"
