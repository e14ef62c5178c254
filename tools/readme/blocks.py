"""Every block rendered from ``results/`` and written between its markers, and what ``--check`` finds stale."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.lab.params import REPO
from tools.readme.figures import stale_figures
from tools.readme.markers import BLOCKS, RESULTS, SOURCE, begin, documents, end, homes
from tools.readme.results import (
    calibration_block,
    claims_block,
    models_block,
    power_block,
    pruning_block,
    roofline_block,
    scorecard_block,
    sensitivity_block,
    sizes_block,
    standing_block,
    tuning_block,
    two_tower_block,
)
from tools.readme.timings import cold_block, timings_block

RENDER = {
    "calibration": calibration_block,
    "sensitivity": sensitivity_block,
    "power": power_block,
    "cold": cold_block,
    "models": models_block,
    "tuning": tuning_block,
    "two_tower": two_tower_block,
    "timings": timings_block,
    "roofline": roofline_block,
}  # each from its own table; the scorecard block reads two more (scorecard_block)


def block(name: str, results: Path = RESULTS) -> str:
    """A generated block, markers included, from ``results/<name>.csv`` (a note when there is none yet)."""
    path = results / f"{SOURCE.get(name, name)}.csv"
    if name == "sizes":  # from the policy itself, never from results/
        body = sizes_block()
    elif not path.exists():
        body = [f"No `results/{path.name}` yet: no build has recorded one."]
    elif name in ("scorecard", "claims"):  # the blocks that also read other tables beside their own
        body = (scorecard_block if name == "scorecard" else claims_block)(pd.read_csv(path), results)
    elif name == "pruning":
        body = pruning_block(pd.read_csv(path), results)
    elif name == "calibration":
        body = calibration_block(pd.read_csv(path), results)
    elif name == "standing":
        body = standing_block(results)
    else:
        body = RENDER[name](pd.read_csv(path))
    return "\n".join([begin(name), "", *body, "", end(name)])


def rewrite(text: str, results: Path = RESULTS) -> str:
    """``text`` with every generated block present in it made anew from ``results``."""
    for name in BLOCKS:
        if begin(name) not in text:
            continue
        if end(name) not in text:
            raise ValueError(f"the {name} block has no end marker {end(name)!r}")
        before, rest = text.split(begin(name), 1)
        text = before + block(name, results) + rest.split(end(name), 1)[1]
    return text


def problems(repo: Path = REPO, results: Path = RESULTS) -> list[str]:
    """What differs from ``results``: a block missing or in several documents, a document whose blocks are not what
    ``results`` gives, a picture drawn from other tables (empty: all is up to date)."""
    paths = documents(repo)
    found = []
    for name, where in homes(paths).items():
        if len(where) != 1:
            found.append(
                f"the {name} block is in {len(where)} documents ({', '.join(p.name for p in where)}), not exactly one"
            )
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if rewrite(text, results) != text:
            found.append(f"{path.relative_to(repo)}: a generated block differs from results/")
    found += [f"results/{name}.png: not drawn from the latest results/ tables" for name in stale_figures(results)]
    return found
