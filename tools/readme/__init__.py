"""The README's and docs' figures, generated: every result, accuracy and timing in ``README.md`` and ``docs/*.md``
comes from a table a build wrote, and so do the pictures ``results/*.png``.

A build writes ``runs/scorecard.csv`` (every claim of every preset), ``runs/models.csv`` (each preset's model and
its test metrics) and appends to ``runs/timings.csv`` (each step's seconds, the cache state and the machine);
``python -m headlab.book.tuning`` writes ``runs/tuning-PRESET.csv``. This command copies them into ``results/``
(committed; a preset's rows replace its older ones, timings accumulate), rewrites every generated block from
``results/`` alone, in whichever document holds it (:data:`BLOCKS`: each lives in exactly one of README.md and
docs/*.md), and draws again each picture of :data:`FIGURES` whose tables changed. The lock file
``results/pictures.lock`` (:data:`LOCK`) holds the sha256 of the tables each picture was drawn from, so a stale one
is found without drawing it.
``tests/test_readme.py`` checks that every block is exactly what ``results/`` gives, that every picture's tables
are the latest, and that the documents' own text states no result or timing.

    python -m tools.readme            # from runs/
    python -m tools.readme --check    # exit 1 if a block or a picture differs from results/ (nothing written)
    python -m tools.readme --redraw   # from runs/, and every picture drawn again (after a chart changed)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headlab.book.presets import PRESETS
from headlab.lab.params import REPO
from tools.readme.blocks import RENDER, block, problems, rewrite
from tools.readme.collect import (
    collect,
    column_order,
    in_column_order,
    judged_by_this_rule,
    merge_by_preset,
    other_models,
)
from tools.readme.figures import (
    FIGURE_SCALE,
    FIGURES,
    LOCK,
    PNG_SIGNATURE,
    draw_figure,
    drawn_from,
    figure_chart,
    fingerprint,
    recompressed,
    stale_figures,
)
from tools.readme.markers import BLOCKS, RESULTS, SOURCE, begin, documents, end, homes
from tools.readme.results import (
    FINDING_HEADING,
    calibration_block,
    claims_block,
    models_block,
    power_block,
    pruning_block,
    roofline_block,
    scorecard_block,
    sensitivity_block,
    sizes_block,
    speedup_text,
    standing_block,
    tuning_block,
    two_tower_block,
)
from tools.readme.timings import (
    BUDGETS,
    SHARED_LOAD,
    SITE,
    SITE_BUDGET,
    budget_lines,
    budget_rows,
    builds_of,
    cold_block,
    duration,
    pooled,
    shared,
    site_rows,
    timings_block,
)


def main(argv=None) -> int:
    """``python -m tools.readme [runs]``: a build's tables into ``results/``, then every block and picture;
    ``--check`` only says what is stale (exit 1)."""
    repo, results = REPO, RESULTS  # read when called (tests point them at a copy)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", type=Path, default=repo / "runs", help="a build's RUN_DIR (default: runs/)")
    parser.add_argument(
        "--check", action="store_true", help="only check that the documents' blocks and the pictures match results/"
    )
    parser.add_argument("--redraw", action="store_true", help="draw every picture again, not only the stale ones")
    args = parser.parse_args(argv)
    if args.check:
        found = problems(repo, results)
        print("\n".join(found) if found else "README.md, docs/ and results/*.png match results/")
        if found:
            print("run python -m tools.readme to regenerate them")
        return 1 if found else 0
    if not args.runs.is_dir():
        print(f"no results at {args.runs}: build the book first (make book PRESETS=...)", file=sys.stderr)
        return 1
    try:
        updated = collect(args.runs, results)
    except ValueError as err:
        print(f"nothing copied into results/: {err}", file=sys.stderr)
        return 1
    rewritten = []
    for path in documents(repo):
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, results)
        if new != text:
            path.write_text(new, encoding="utf-8")
            rewritten.append(path.relative_to(repo).as_posix())
    drawn = [draw_figure(name, results) for name in (FIGURES if args.redraw else stale_figures(results))]
    drawn = [path.relative_to(repo).as_posix() for path in drawn if path is not None]
    print(
        f"results/: {', '.join(updated) or 'nothing new'} from {args.runs}; rewritten: "
        f"{', '.join(rewritten) or 'nothing'}; drawn: {', '.join(drawn) or 'nothing'}"
    )
    return 0


__all__ = [
    "PRESETS",
    "REPO",
    "BLOCKS",
    "BUDGETS",
    "FIGURES",
    "FIGURE_SCALE",
    "FINDING_HEADING",
    "LOCK",
    "PNG_SIGNATURE",
    "RENDER",
    "RESULTS",
    "SHARED_LOAD",
    "SITE",
    "SITE_BUDGET",
    "SOURCE",
    "begin",
    "block",
    "budget_lines",
    "budget_rows",
    "builds_of",
    "calibration_block",
    "claims_block",
    "cold_block",
    "collect",
    "column_order",
    "documents",
    "draw_figure",
    "drawn_from",
    "duration",
    "end",
    "figure_chart",
    "fingerprint",
    "homes",
    "in_column_order",
    "judged_by_this_rule",
    "merge_by_preset",
    "models_block",
    "other_models",
    "pooled",
    "power_block",
    "problems",
    "pruning_block",
    "recompressed",
    "rewrite",
    "roofline_block",
    "scorecard_block",
    "sensitivity_block",
    "shared",
    "site_rows",
    "sizes_block",
    "speedup_text",
    "stale_figures",
    "standing_block",
    "timings_block",
    "tuning_block",
    "two_tower_block",
    "main",
]
