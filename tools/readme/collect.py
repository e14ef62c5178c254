"""A build's tables copied into ``results/``: a preset's rows replace its older ones, timings accumulate, and a
column's pages must come from one model."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from headlab.book.presets import PRESETS
from headlab.book.scorecard import with_rule
from headlab.judging.units import is_missing
from headlab.judging.verdicts import KINDS, study_claim_id
from headlab.pages.claims import STUDY_CLAIMS
from headlab.report.standing import standing, study_shaped
from tools.readme.markers import RESULTS


def merge_by_preset(new: pd.DataFrame, old: pd.DataFrame | None, by: tuple[str, ...] = ("preset",)) -> pd.DataFrame:
    """``new``'s presets replace their rows of ``old``; the other presets' rows stay. ``by`` ("preset", "page"): a
    preset's rows of the pages ``new`` has replace those pages' rows alone (a build of a few pages, ``--pages``).
    Presets come in the order of :data:`headlab.book.presets.PRESETS` (any other after them), whichever was built
    last; :func:`collect` then moves the study's column (:func:`column_order`)."""
    both = new
    if old is not None and not old.empty:
        key = lambda t: pd.MultiIndex.from_frame(t[list(by)].astype(str))  # noqa: E731
        kept = old[~key(old).isin(key(new).unique())]
        both = pd.concat([new, kept], ignore_index=True) if not kept.empty else new
    return in_column_order(both, within=["page"] if "page" in by else [])


def in_column_order(table: pd.DataFrame, order: list[str] | None = None, within: list[str] | None = None):
    """``table``'s rows by preset in ``order`` (by default :data:`headlab.book.presets.PRESETS`'; any other preset
    after them), then by ``within``, otherwise as they were: the README's, the picture's and the site's columns
    follow the row order."""
    rank = {preset: i for i, preset in enumerate(order or PRESETS)}
    ranked = table.assign(_rank=table["preset"].map(lambda preset: rank.get(preset, len(rank))))
    return ranked.sort_values(["_rank", *(within or [])], kind="stable").drop(columns="_rank").reset_index(drop=True)


def column_order(results: Path = RESULTS) -> list[str]:
    """:data:`headlab.book.presets.PRESETS`' order, except that the column shaped like the study
    (:func:`headlab.report.standing.study_shaped`, from the tables in ``results``) comes first of the presets on
    its data: the Chinese column to read the study beside is the first Chinese column."""
    order = list(PRESETS)
    models = pd.read_csv(results / "models.csv") if (results / "models.csv").exists() else pd.DataFrame()
    chosen = study_shaped(standing(results)) if {"data", "accuracy_lo"} <= set(models.columns) else None
    if chosen in order:
        data = PRESETS[chosen].get("DATA")
        first = next(preset for preset in order if PRESETS[preset].get("DATA") == data)
        order.remove(chosen)
        order.insert(order.index(first), chosen)
    return order


def other_models(runs: Path, results: Path) -> list[str]:
    """Where a build of a few pages (``--pages``) would put its rows beside a preset's rows of other pages that another
    model gave: its model's checkpoint differs from the one ``results/models.csv`` names (its accuracy, where that
    table names none: a different accuracy on the same test pairs is a different model). A column is one model, so
    such a build goes in whole (every page) or not at all; one line per preset."""
    paths = [runs / "models.csv", results / "models.csv", runs / "scorecard.csv", results / "scorecard.csv"]
    if not all(path.exists() for path in paths):
        return []
    new_models, old_models, new_card, old_card = (pd.read_csv(path) for path in paths)
    found = []
    for new in new_models.itertuples():
        old = old_models[old_models["preset"] == new.preset]
        others = set(old_card.loc[old_card["preset"] == new.preset, "page"])
        others -= set(new_card.loc[new_card["preset"] == new.preset, "page"])
        if old.empty or not others:
            continue
        was, now = old.iloc[0].get("checkpoint"), getattr(new, "checkpoint", None)
        if is_missing(was) or is_missing(now):
            differs, what = abs(float(old.iloc[0]["accuracy"]) - float(new.accuracy)) > 1e-9, "test accuracy"
            was, now = f"{float(old.iloc[0]['accuracy']):.4%}", f"{float(new.accuracy):.4%}"
        else:
            differs, what = was != now, "checkpoint"
        if differs:
            found.append(
                f"{new.preset}: this build's model ({what} {now}) is not the one behind its rows of "
                f"{', '.join(sorted(others))} ({what} {was}); build every page of it, or these pages on that model"
            )
    return found


def collect(runs: Path, results: Path = RESULTS) -> list[str]:
    """Copy what ``runs`` holds into ``results``; the names of the tables updated. Refuses (``ValueError``) a build
    of a few pages whose model is not the one behind the preset's other rows (:func:`other_models`)."""
    results.mkdir(parents=True, exist_ok=True)
    mixed = other_models(runs, results)
    if mixed:
        raise ValueError("a column would mix two models:\n" + "\n".join(mixed))
    updated = []
    for name in ("scorecard", "models", "two_tower", "pruning", "attribution_agreement"):
        source = runs / f"{name}.csv"
        if source.exists() and not pd.read_csv(source).empty:
            _merge_into(
                results / f"{name}.csv",
                pd.read_csv(source),
                judged_by_this_rule if name == "scorecard" else None,
                ("preset", "page") if name == "scorecard" else ("preset",),
            )
            updated.append(name)
    tuning = [pd.read_csv(p).assign(preset=p.stem.removeprefix("tuning-")) for p in sorted(runs.glob("tuning-*.csv"))]
    if tuning:
        _merge_into(results / "tuning.csv", pd.concat(tuning, ignore_index=True))
        updated.append("tuning")
    order = column_order(results)  # the merged models may have made another column the study's
    for name in updated:
        path = results / f"{name}.csv"
        in_column_order(pd.read_csv(path), order).to_csv(path, index=False, float_format="%.6g")
    source = runs / "timings.csv"
    if source.exists():
        target = results / "timings.csv"
        both = pd.concat([pd.read_csv(target), pd.read_csv(source)]) if target.exists() else pd.read_csv(source)
        both.drop_duplicates(["build", "preset", "step"], keep="last").to_csv(target, index=False)
        updated.append("timings")
    return updated


def _merge_into(target: Path, new: pd.DataFrame, keep_old=None, by: tuple[str, ...] = ("preset",)) -> None:
    old = pd.read_csv(target) if target.exists() else None
    if old is not None and keep_old is not None:
        old = keep_old(old)
    merge_by_preset(new, old, by).to_csv(target, index=False, float_format="%.6g")


def judged_by_this_rule(old: pd.DataFrame) -> pd.DataFrame:
    """The rows of an older scorecard to keep beside a new build's: every row of a registered claim (written by the
    current verdict rule or an older one, whose rows the scorecard marks with their rule's version,
    :func:`headlab.book.scorecard.with_rule`) whose verdict the current rule could have reached. Dropped, and the
    command says so (:func:`collect`): rows of claims no longer registered; rows judged under a kind the rule no
    longer has (``beats_control``'s empirical p over 20 draws could never pass the correction); rows whose adjusted
    interval is narrower than the raw one (an older rule clipped it). Such a claim shows "not run" until its model
    is rebuilt."""
    if "kind" not in old.columns:
        print(f"results/scorecard.csv: {len(old)} rows written before verdicts were data, dropped", file=sys.stderr)
        return old.iloc[0:0]
    known = old["claim_id"].map(lambda c: study_claim_id(c) in STUDY_CLAIMS)
    retired = ~old["kind"].isin(KINDS)
    narrower = (old["lo_adj"] > old["lo"] + 1e-12) | (old["hi_adj"] < old["hi"] - 1e-12)  # NaN compares False
    for why, dropped in (
        ("of claims no longer registered", ~known),
        ("judged under a kind the rule no longer has", known & retired),
        ("whose adjusted interval is narrower than the raw one", known & ~retired & narrower),
    ):
        if dropped.any():
            rows = sorted(set(old.loc[dropped, "preset"] + ":" + old.loc[dropped, "claim_id"]))
            print(f"results/scorecard.csv: rows {why} dropped: {', '.join(rows)}", file=sys.stderr)
    return with_rule(old[known & ~retired & ~narrower])
