"""Where each model that grades Chinese pairs stands beside the others: the study's model read Chinese one character
per token, and the book has three such columns that differ in one thing each (e5-zh and e5-zh-char: the same
weights, two readings; e5-zh-char and zh-char: the same reading, real or brief pretraining).

:func:`standing` reads the committed tables of ``results/`` (each build's models, page 08's cross-encoder row with
its quadratic κ and the lexical grader, page 03's segmentation rows) into one row per preset on that data, and
:func:`standing_note` says which of them is the column shaped like the study: the best-grading model that reads one
character per token, provided it grades better than the lexical grader on the same test pairs (page 08's paired
bootstrap of the grader's change of accuracy against the model lies below 0; else no column is, and the note says
so).
Notebook 00 and ``docs/models.md`` show them; nothing here computes a number a build did not record.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.judging.units import is_missing
from headlab.judging.verdicts import Verdict
from headlab.lab.params import REPO

SEGMENTATION = {  # page 03's rows: claim id -> what it scores (Chinese: People's Daily's gold words, then jieba's
    # words of the STS-B test pairs, SEG_ALSO)
    "word_segmentation.single_head": "one head",
    "word_segmentation.head_union": "heads together",
    "word_segmentation.single_head/eval_jieba": "one head, second corpus",
    "word_segmentation.head_union/eval_jieba": "heads together, second corpus",
}
NOT_COMPARABLE = Verdict.NOT_COMPARABLE  # page 03's verdict where the tokenizer's pieces give word ends away
CROSS_ENCODER, LEXICAL = "cross-encoder", "lexical"  # page 08's rows: the model itself, and the lexical grader
NAN = float("nan")


def standing(results: Path, data: str = "stsb-zh") -> pd.DataFrame:
    """One row per preset of ``results/models.csv`` on ``data``: its model, how it reads the text (one character per
    token where page 03 judged its segmentation, pieces where it found them not comparable), test accuracy with its
    95% interval, quadratic κ with its interval (page 08's cross-encoder row), the majority grade's and the lexical
    grader's accuracy with page 08's paired comparison on the same pairs (``lexical_change``, ``lexical_change_lo``,
    ``lexical_change_hi``: the grader's relative change of accuracy against the model, paired bootstrap interval;
    ``lexical_p``: exact McNemar p), and per row of :data:`SEGMENTATION` our number, interval and verdict (``seg_<i>``,
    ``seg_<i>_lo``, ``seg_<i>_hi``, ``seg_<i>_verdict``). Missing tables or rows give missing cells."""
    models = _read(results / "models.csv")
    if models.empty:
        return pd.DataFrame()
    models = models[models["data"] == data]
    two_tower, scorecard = _read(results / "two_tower.csv"), _read(results / "scorecard.csv")
    rows = []
    for m in models.itertuples():
        row = {
            "preset": m.preset,
            "model": m.model,
            "accuracy": m.accuracy,
            "accuracy_lo": m.accuracy_lo,
            "accuracy_hi": m.accuracy_hi,
            "majority": m.majority,
            **dict.fromkeys(["kappa", "kappa_lo", "kappa_hi"], NAN),
            **dict.fromkeys(["lexical", "lexical_change", "lexical_change_lo", "lexical_change_hi", "lexical_p"], NAN),
        }
        if not two_tower.empty:
            mine = two_tower[two_tower["preset"] == m.preset]
            cross = mine[mine["label"] == CROSS_ENCODER]
            if len(cross):
                c = cross.iloc[0]
                row.update(kappa=c["kappa_base"], kappa_lo=c["kappa_base_lo"], kappa_hi=c["kappa_base_hi"])
            lexical = mine[mine["label"].str.startswith(LEXICAL)]
            if len(lexical):
                g = lexical.iloc[0]
                row.update(
                    lexical=g["accuracy"],
                    lexical_change=g["rel_change"],
                    lexical_change_lo=g["lo"],
                    lexical_change_hi=g["hi"],
                    lexical_p=g["p_mcnemar"],
                )
        verdicts = []
        for i, claim in enumerate(SEGMENTATION):
            found = (
                scorecard[(scorecard["preset"] == m.preset) & (scorecard["claim_id"] == claim)]
                if not scorecard.empty
                else scorecard
            )
            r = found.iloc[0] if len(found) else None
            row[f"seg_{i}"] = float("nan") if r is None else r["ours"]
            row[f"seg_{i}_lo"] = float("nan") if r is None else r["lo"]
            row[f"seg_{i}_hi"] = float("nan") if r is None else r["hi"]
            row[f"seg_{i}_verdict"] = "" if r is None else r["verdict"]
            if r is not None:
                verdicts.append(r["verdict"])
        row["reading"] = (
            ""
            if not verdicts
            else "pieces that give word ends away"
            if NOT_COMPARABLE in verdicts
            else "one character per token"
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def _pct(value) -> str:
    return "—" if is_missing(value) else f"{100 * value:.1f}%"


def _interval(value, lo, hi, style: str = "share") -> str:
    if is_missing(value):
        return "—"
    show = {
        "share": lambda x: f"{100 * x:.1f}%",
        "points": lambda x: f"{100 * x:+.1f}",
        "number": lambda x: f"{x:.3f}",
        "change": lambda x: f"{100 * x:+.1f}%",
    }[style]
    return show(value) + ("" if is_missing(lo) else f" [{show(lo)}, {show(hi)}]")


def standing_markdown(table: pd.DataFrame) -> list[str]:
    """:func:`standing` as a markdown table (segmentation: points of tokens right above the majority class, with
    page 03's verdict)."""
    if table.empty:
        return ["No preset on this data is in `results/` yet."]
    lines = [
        "| preset | model | reads the text as | test accuracy | quadratic κ | always the commonest grade | "
        + "lexical grader | "
        + " | ".join(f"segmentation, {what} (points above the majority class)" for what in SEGMENTATION.values())
        + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(SEGMENTATION),
    ]
    for r in table.to_dict("records"):
        segmentation = [
            f"{_interval(r[f'seg_{i}'], r[f'seg_{i}_lo'], r[f'seg_{i}_hi'], 'points')}"
            + (f", {r[f'seg_{i}_verdict']}" if r[f"seg_{i}_verdict"] else "")
            for i in range(len(SEGMENTATION))
        ]
        lines.append(
            f"| {r['preset']} | `{r['model']}` | {r['reading'] or '—'} | "
            f"**{_interval(r['accuracy'], r['accuracy_lo'], r['accuracy_hi'])}** | "
            f"{_interval(r['kappa'], r['kappa_lo'], r['kappa_hi'], 'number')} | {_pct(r['majority'])} | "
            f"{_lexical(r)} | " + " | ".join(segmentation) + " |"
        )
    return lines


def _lexical(r: dict) -> str:
    """The lexical grader's accuracy and, where page 08 recorded it, its paired change against the model."""
    if is_missing(r["lexical_change"]):
        return _pct(r["lexical"])
    change = _interval(r["lexical_change"], r["lexical_change_lo"], r["lexical_change_hi"], "change")
    return f"{_pct(r['lexical'])} ({change} relative to the model on the same pairs; McNemar p = {r['lexical_p']:.2g})"


def study_shaped(table: pd.DataFrame) -> str | None:
    """The preset shaped like the study: of those reading one character per token that grade better than the
    lexical grader on the same test pairs (the paired interval of the grader's change lies below 0, which an
    interval of the model's accuracy alone set beside the grader's point cannot show), the one that grades best;
    None when there is none."""
    if table.empty:
        return None
    able = table[(table["reading"] == "one character per token") & (table["lexical_change_hi"] < 0)]
    return None if able.empty else str(able.sort_values("accuracy", ascending=False)["preset"].iloc[0])


def standing_note(table: pd.DataFrame) -> str:
    """Which column is shaped like the study (:func:`study_shaped`), or why none is, with each character-reading
    model's accuracy against the lexical grader; nothing where no model reads one character per token."""
    chars = table[table["reading"] == "one character per token"] if not table.empty else table
    if chars.empty:
        return ""
    gaps = "; ".join(
        f"{r.preset} {_pct(r.accuracy)} against the lexical grader's {_pct(r.lexical)} "
        f"({100 * (r.accuracy - r.lexical):+.1f} points; the grader's accuracy relative to the model's on the same "
        f"pairs {_interval(r.lexical_change, r.lexical_change_lo, r.lexical_change_hi, 'change')}, "
        f"McNemar p = {r.lexical_p:.2g})"
        for r in chars.itertuples()
        if not is_missing(r.lexical_change)
    )
    chosen = study_shaped(table)
    if chosen is None:
        return (
            "No model that reads one character per token grades better than the lexical grader on the same test "
            f"pairs (the paired interval of the grader's change below 0): {gaps or 'no lexical grader recorded'}. "
            "No column is shaped like the study."
        )
    return (
        f"The column shaped like the study is {chosen}: it reads one character per token and grades better than the "
        f"lexical grader on the same test pairs ({gaps}), so it is the first of the columns on these pairs."
    )


def standing_page(data: str, results: Path = REPO / "results") -> str:
    """Notebook 00's view: :func:`standing` of the committed builds on ``data`` as markdown, with
    :func:`standing_note`."""
    table = standing(results, data)
    note = standing_note(table)
    return "\n".join([*standing_markdown(table), *(["", note] if note else [])])
