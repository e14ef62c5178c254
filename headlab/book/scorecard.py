"""The scorecard: the study's claims (rows) against every model a site was built on (columns).

Each notebook saves its claims as ``claims_<page>.csv`` in its preset's results folder
(:mod:`headlab.judging.verdicts`, one verdict rule for all of them); the scorecard stacks them into one tidy table and
renders the first page of the book from it: per model its accuracy, majority grade and lexical grader with a warning
when the model is near its floor or beaten by the lexical grader; a tally of the study's claims per verdict; then per
finding a table whose rows are the study's claims (sub-rows indented under their claim) and whose cells give the
verdict, our number with its 95% interval, a mark where the condition sits at the model's floor, and a link to the
page with the evidence. The README carries a copy, generated from the last build's table by :mod:`tools.readme`.
The page opens on the grid of verdicts (a row per claim, a column per model: the README's picture), drawn by the
Vega bundle the book ships, so with no network: a cell's tooltip gives its number, intervals and rule, and a click
opens its page.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from headlab.core.stats import NEAR_FLOOR
from headlab.judging.units import KAPPA_START, is_missing, no_negative_zero, unit_of
from headlab.judging.verdicts import (
    ALPHA,
    FAMILIES,
    RULE_VERSION,
    RULES,
    TALLIES,
    VERDICTS,
    Kind,
    Tally,
    Verdict,
    study_claim_id,
)
from headlab.judging.verdicts import COLUMNS as CLAIM_COLUMNS
from headlab.lab.params import Params
from headlab.pages.claims import STUDY_CLAIMS
from headlab.report.charts.scorecard import SIZES_SHOWN, claims_in_sizes, verdict_grid
from headlab.report.layout import fit
from headlab.report.render import BookChart

CLAIM_FILES = "claims_*.csv"
COLUMNS = ["preset", "model", "data", *CLAIM_COLUMNS]
FLOOR_MARK = "⌊floor⌋"
MEAN_MARK = "≠"  # a verdict that changes when removed heads are mean-ablated instead of zeroed
SCALE_MARK = "⇄"  # a verdict that changes on the other scale (kappa for accuracy, accuracy for kappa: the sizes policy)
CENSORED_MARK = "⌊censored⌋"  # a comparison with one condition, not all, at the floor: a bound (verdicts.judge)
GRID_TOOLTIP = ("our number", "95% interval", "adjusted", "rule", "size or margin")  # after claim, model, verdict
GRID_LABELS = 280  # pixels of claim text beside the grid: the site's column holds it and four models
_TWO_LINES = (
    "indexof(datum.label, ' (') > 0 ? [slice(datum.label, 0, indexof(datum.label, ' (')), "
    "slice(datum.label, indexof(datum.label, ' (') + 1)] : datum.label"
)
CORRECTION = (
    f"Every verdict is taken at {ALPHA:.0%} over a family of claims (Bonferroni): one model's "
    f"{FAMILIES[Tally.STUDY]} claims of the study are one family, its {FAMILIES[Tally.OURS]} predictions of our own "
    f"another, so each claim of the study is judged at {ALPHA:.0%} / {FAMILIES[Tally.STUDY]} = "
    f"{ALPHA / FAMILIES[Tally.STUDY]:.2g}, "
    f"and a row chosen among k candidates on its page (a head among the heads of some layers) at {ALPHA:.0%} / "
    "(family × k). Each 95% interval is widened once to that level, each side at half of it, by the ratio of "
    "quantiles (normal where only pairs are resampled; where random draws are too, the pairs' and the draws' parts "
    "of the variance each at its own quantile, the draws' with their own degrees of freedom), so an adjusted interval "
    "is never narrower than the raw one; the pages show both. An equivalence (no effect) is two one-sided tests at "
    "the same level. A row shown as the weakest of k conditions has the end that would reject the claim widened for "
    "the k; a claim that some candidate has the effect (some head improves) is rejected only when every candidate's "
    "interval says so. A row the data cannot decide whose design could not show twice its smallest effect 80% of "
    "the time (its minimum detectable effect, MDE, on every row) reads **underpowered at this design**, counted apart. "
    "The rate of a wrong decisive verdict is held per column (docs/judging.md simulates it on each column's own "
    "rows, where nothing is true and where every claim sits at its smallest effect); across the columns of this page "
    "it is bounded by their sum: the columns are separate studies, not corrected together. "
    f"Rows judged by a verdict rule older than this one (v{RULE_VERSION}) are marked ⟨rule vN⟩."
)
OLD_RULE = "⟨rule v{}⟩"
JUDGED = [v for v in VERDICTS if v != Verdict.NOT_JUDGED]  # a claim's own row is always judged (sub-rows are not)
DECIDED = (Verdict.HOLDS, Verdict.DOES_NOT_HOLD, Verdict.OPPOSITE)


def results_folder(settings: dict) -> Path:
    """The results folder a preset's notebooks write to (found from its settings; nothing is trained)."""
    return Params.from_globals(settings).table_dir


def preset_claims(preset: str, settings: dict) -> pd.DataFrame:
    """Every claim row the preset's notebooks saved, with the preset, model and data added."""
    params = Params.from_globals(settings)
    frames = [
        pd.read_csv(path).assign(page=path.stem.removeprefix("claims_"))
        for path in sorted(results_folder(settings).glob(CLAIM_FILES))
    ]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    table = pd.concat(frames, ignore_index=True).assign(preset=preset, model=params.model, data=params.data)
    return with_rule(table.reindex(columns=COLUMNS))


def with_rule(table: pd.DataFrame) -> pd.DataFrame:
    """Rows with their rule version and tally filled in: a row written before either existed was judged by rule 2,
    and belongs to the tally its registered claim has now (the study's, for a claim no longer registered)."""
    table = table.copy()
    version = table["rule_version"] if "rule_version" in table.columns else pd.Series(math.nan, index=table.index)
    table["rule_version"] = version.fillna(2).astype(int)
    registered = table["claim_id"].map(lambda c: getattr(STUDY_CLAIMS.get(study_claim_id(c)), "tally", "study"))
    tally = table["tally"] if "tally" in table.columns else pd.Series(math.nan, index=table.index)
    table["tally"] = tally.where(tally.isin(list(TALLIES)), registered)
    return table


def scorecard_table(built: dict[str, dict]) -> pd.DataFrame:
    """The claims of every built preset (``{preset: settings}``, in column order) as one tidy table."""
    tables = [preset_claims(preset, settings) for preset, settings in built.items()]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)


def is_main(claim_id: str) -> bool:
    """A row that carries a claim of the study (``<id>``), not a sub-row under it (``<id>/<part>``)."""
    return study_claim_id(claim_id) == str(claim_id)


def _raw_interval(row) -> str:
    return "" if is_missing(row.lo) else f"[{unit_of(row.unit).number(row.lo)}, {unit_of(row.unit).number(row.hi)}]"


def _adjusted_interval(row) -> str:
    lo_adj, hi_adj = getattr(row, "lo_adj", math.nan), getattr(row, "hi_adj", math.nan)
    return (
        ""
        if is_missing(lo_adj) or is_missing(hi_adj)
        else f"[{unit_of(row.unit).number(lo_adj)}, {unit_of(row.unit).number(hi_adj)}]"
    )


def _numbers(row) -> str:
    number = "" if is_missing(row.ours) else f" {unit_of(row.unit).number(row.ours)}"
    raw, adjusted = _raw_interval(row), _adjusted_interval(row)
    interval = (f" {raw}" if raw else "") + (f", adjusted {adjusted}" if adjusted else "")
    lost = _lost(row)
    floor = f" {FLOOR_MARK}" if bool(getattr(row, "at_floor", False)) is True else ""
    mean = getattr(row, "mean_ablation", "")
    method = f" ({MEAN_MARK} mean-ablation: {mean})" if isinstance(mean, str) and mean and mean != row.verdict else ""
    bound = getattr(row, "censored", 0)
    censored = f" {CENSORED_MARK}" if not is_missing(bound) and int(bound) != 0 else ""
    return number + interval + lost + _mde(row) + floor + censored + method + _scale_flip(row) + _old_rule(row)


SIGN_WORDS = {"claimed": "the claimed direction", "other": "the other direction", "neither": "no direction"}


def _scale_flip(row) -> str:
    """The sign the other scale shows, where it differs from this scale's (the sizes policy asks it for no more)."""
    other = getattr(row, "other_scale", "")
    if bool(getattr(row, "scale_flip", False)) is not True or not isinstance(other, str) or other not in SIGN_WORDS:
        return ""
    scale = "accuracy" if str(row.unit).startswith(KAPPA_START) else "κ"
    return f" ({SCALE_MARK} on {scale}: {SIGN_WORDS[other]})"


def scale_flips(table: pd.DataFrame, preset: str, family: Tally = Tally.STUDY) -> int:
    """How many of one tally's claims show another sign on one preset when read on the other scale."""
    if table.empty or "scale_flip" not in table:
        return 0
    return int((_main_rows(table, preset, family)["scale_flip"] == True).sum())  # noqa: E712 (NaN is not a flip)


def _mde(row) -> str:
    """The design's minimum detectable effect beside the number (rows of rule 4 on)."""
    mde = getattr(row, "mde", math.nan)
    return "" if is_missing(mde) else f"; MDE {unit_of(row.unit).size(mde)}"


def _lost(row) -> str:
    """The share of kappa lost beside an accuracy number (rule 3), or, on a row of rule 2, its floor-scale share."""
    kappa = getattr(row, "kappa_lost", None)
    if not is_missing(kappa) and not str(row.unit).startswith(KAPPA_START):
        return f"; {no_negative_zero(f'{kappa:.0%}')} of κ lost"
    old = getattr(row, "lost", None)
    return "" if is_missing(old) else f"; {no_negative_zero(f'{old:.0%}')} of above-chance accuracy lost"


def _old_rule(row) -> str:
    """The mark of a row judged by an older verdict rule than this one."""
    version = getattr(row, "rule_version", RULE_VERSION)
    return f" {OLD_RULE.format(int(version))}" if not is_missing(version) and int(version) < RULE_VERSION else ""


def column_label(preset: str, table: pd.DataFrame) -> str:
    """A preset's column heading: the preset, and its model and data from ``table`` (``default (minilm, stsb-en)``)."""
    first = table[table["preset"] == preset].iloc[0] if (table["preset"] == preset).any() else None
    return preset if first is None else f"{preset} ({first.model}, {first.data})"


def _study_cell(row) -> str:
    """The study's number, only where it is in our unit; else its own unit in words."""
    if is_missing(row.study):
        return ""
    own = getattr(row, "study_unit", "")
    if isinstance(own, str) and own:
        return f"{row.study:g} ({own}; not our unit)"
    return unit_of(row.unit).number(row.study)


def _rule_cell(row) -> str:
    """The claim's kind, with its rule (and the size or margin and why) as a tooltip."""
    kind = str(row.kind)
    rule = RULES.get(kind, "")
    why = getattr(row, "size_why", "")
    if isinstance(why, str) and why:
        rule += f". {why}"
    return f'<abbr title="{html.escape(rule, quote=True)}">{kind}</abbr>'


def _text(row, column: str) -> str:
    value = getattr(row, column, "")
    return value if isinstance(value, str) else ""


UNDECIDED = (Verdict.CANNOT_TELL, Verdict.UNDERPOWERED)  # verdicts whose cell shows which way the estimate leans


def _toward(value: float, spec) -> float:
    """``value`` from the claim's null, positive the claimed way."""
    return (value - spec.null) * spec.direction


def leaning(row) -> str:
    """Which way an undecided row's estimate leans, for its cell: " (+)" the claim's way, " (−)" the other way, from
    the claim's null; "" for a decided row, a no-effect claim or no estimate."""
    spec = STUDY_CLAIMS.get(row.claim_id)
    if row.verdict not in UNDECIDED or spec is None or spec.direction == 0 or is_missing(row.ours):
        return ""
    lean = _toward(row.ours, spec)
    return " (+)" if lean > 0 else " (−)" if lean < 0 else ""


def grid_cells(table: pd.DataFrame, pages: dict[str, str], family: Tally = Tally.STUDY) -> pd.DataFrame:
    """One row per claim (not sub-row) of one tally (``family``) and built preset (``pages``: preset -> folder of its
    pages), for a grid of the page: its verdict, its cell's ``label`` (the verdict, and for an undecided one which
    way it leans: :func:`leaning`), what its tooltip says (:data:`GRID_TOOLTIP`) and ``href``, the page with its
    evidence (relative to the scorecard, the site's root; the pages have no anchor per claim)."""
    columns = ["finding", "claim", "model", "verdict", "label", *GRID_TOOLTIP, "href"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    main = table[table["claim_id"].map(is_main) & table["preset"].isin(list(pages))]
    if "tally" in main:
        main = main[main["tally"].fillna(Tally.STUDY) == family]
    labels = {preset: column_label(preset, table) for preset in pages}
    cells = [
        {
            "finding": row.finding,
            "claim": row.claim,
            "model": labels[row.preset],
            "verdict": row.verdict,
            "label": f"{row.verdict}{leaning(row)}",
            "our number": "not measured" if is_missing(row.ours) else unit_of(row.unit).number(row.ours),
            "95% interval": _raw_interval(row) or "none",
            "adjusted": _adjusted_interval(row) or "none",
            "rule": f"{row.kind}: {_text(row, 'rule') or RULES.get(str(row.kind), '')}{_old_rule(row)}",
            "size or margin": _text(row, "size_why") or "none",
            "href": f"{pages[row.preset]}/{row.page}.html",
        }
        for row in main.itertuples()
    ]
    return pd.DataFrame(cells, columns=columns)


def grid_html(table: pd.DataFrame, pages: dict[str, str], family: Tally = Tally.STUDY) -> str:
    """One tally's grid as HTML that the book's own Vega bundle draws (no network; SVG for readers without
    JavaScript), laid out to fit the text column; empty when no claim of it was saved."""
    cells = grid_cells(table, pages, family)
    if cells.empty:
        return ""
    grid = verdict_grid(cells, tooltip=GRID_TOOLTIP, label_limit=GRID_LABELS)
    # a set width, not a step per model, so that fit can narrow the columns
    grid = grid.properties(width=130 * cells["model"].nunique()).configure_view(stroke=None)
    # "preset (model, data)" on two lines, so that narrow columns keep their names apart; the axis moved up a line
    # to make room for the second (Vega does not raise a label's first line)
    grid = grid.configure_axisX(labelExpr=_TWO_LINES, offset=13)
    return BookChart(fit(grid))._repr_html_()


def _in_sizes(value: float, spec, size: float) -> float:
    """``value`` in multiples of the claim's size from its null, turned to the claimed direction."""
    return _toward(value, spec) / size


def interval_rows(table: pd.DataFrame, pages: dict[str, str]) -> pd.DataFrame:
    """For :func:`headlab.report.charts.claims_in_sizes`: each study claim with a direction and a size (sub-rows and
    no-effect claims left out) on each built preset, its estimate, adjusted interval and the study's number (where in
    our unit) in multiples of its size from its null, turned to the claimed direction."""
    columns = ["finding", "claim", "model", "verdict", "estimate", "lo", "hi", "study"]
    if table.empty or "claim_id" not in table:
        return pd.DataFrame(columns=columns)
    rows = []
    study_rows = table["tally"].fillna("study") == "study" if "tally" in table else True
    for row in table[table["claim_id"].map(is_main) & table["preset"].isin(list(pages)) & study_rows].itertuples():
        spec = STUDY_CLAIMS.get(row.claim_id)
        size = row.min_size
        if spec is None or spec.direction == 0 or is_missing(size) or not size > 0 or is_missing(row.ours):
            continue
        ends = sorted(_in_sizes(v, spec, size) for v in (row.lo_adj, row.hi_adj))
        own = getattr(row, "study_unit", "")
        study = math.nan if is_missing(row.study) or (isinstance(own, str) and own) else row.study
        estimate, study = _in_sizes(row.ours, spec, size), _in_sizes(study, spec, size)
        rows.append((row.finding, row.claim, column_label(row.preset, table), row.verdict, estimate, *ends, study))
    return pd.DataFrame(rows, columns=columns)


def intervals_html(table: pd.DataFrame, pages: dict[str, str]) -> str:
    """The claims' intervals on a chosen model (:func:`interval_rows`), as HTML the book's Vega bundle draws; empty
    when no claim has a size."""
    rows = interval_rows(table, pages)
    return "" if rows.empty else BookChart(fit(claims_in_sizes(rows)))._repr_html_()


def tally(table: pd.DataFrame, preset: str, family: Tally = Tally.STUDY) -> pd.Series:
    """Verdicts of one tally's claims (:data:`headlab.judging.verdicts.TALLIES`) on one preset (sub-rows not
    counted)."""
    if table.empty:
        return pd.Series(dtype=int)
    return _main_rows(table, preset, family)["verdict"].value_counts()


def _main_rows(table: pd.DataFrame, preset: str, family: str) -> pd.DataFrame:
    return table[(table["preset"] == preset) & table["claim_id"].map(is_main) & (table["tally"] == family)]


def mean_flips(table: pd.DataFrame, preset: str, family: Tally = Tally.STUDY) -> int:
    """How many of one tally's claims change verdict on one preset when removed heads are mean-ablated."""
    if table.empty:
        return 0
    mine = _main_rows(table, preset, family)
    other = mine["mean_ablation"].fillna("").astype(str)
    return int(((other != "") & (other != mine["verdict"])).sum())


def tally_lines(table: pd.DataFrame, presets: list[str], family: Tally) -> list[str]:
    """One tally's verdicts counted per model, with the claims decided (holds, does not hold or opposite) and those
    whose verdict mean-ablation changes."""
    lines = [
        f"| model | {TALLIES[family]} | " + " | ".join(JUDGED) + f" | decided ({', '.join(DECIDED)}) | "
        f"{MEAN_MARK} with mean-ablation | {SCALE_MARK} on the other scale |",
        "|---|---|" + "---|" * (len(JUDGED) + 3),
    ]
    for preset in presets:
        counts = tally(table, preset, family)
        versions = table.loc[table["preset"] == preset, "rule_version"] if "rule_version" in table else []
        old = sorted({int(v) for v in versions if int(v) < RULE_VERSION})
        mark = "".join(f" {OLD_RULE.format(v)}" for v in old)
        lines.append(
            f"| {column_label(preset, table)}{mark} | {int(counts.sum())} | "
            + " | ".join(str(int(counts.get(v, 0))) for v in JUDGED)
            + f" | {sum(int(counts.get(v, 0)) for v in DECIDED)} | {mean_flips(table, preset, family)} | "
            f"{scale_flips(table, preset, family)} |"
        )
    return [*lines, ""]


# what a column is, from its model and data names (a name not here is shown as it is)
MODEL_WORDS = {
    "minilm": "MiniLM (all-MiniLM-L6-v2)",
    "e5-small": "multilingual-e5-small (word pieces)",
    "e5-small-char": "multilingual-e5-small reading one character a token",
    "zh-char": "a character BERT headlab pretrains (one character a token)",
    "zh-char-mlm": "a character BERT headlab pretrains without next-sentence prediction",
    "mpnet": "all-mpnet-base-v2",
}
DATA_WORDS = {
    "stsb-en": "English sentence pairs graded for similarity (STS-B)",
    "stsb-zh": "Chinese sentence pairs graded for similarity (Chinese STS-B)",
}
STUDY_COLUMN = "e5-zh-char"  # the column of the study's shape (Chinese, one character a token, 12 x 12): first
STUDY_SHAPE = "a Chinese BERT (12 x 12) reading one character a token, on query–title relevance in five grades"


PLURAL = {Verdict.HOLDS: "hold", Verdict.DOES_NOT_HOLD: "do not hold"}  # "3 hold, 2 do not hold, 1 opposite"


def column_order(presets: list[str]) -> list[str]:
    """The built presets with the study-shaped column first, the rest as built."""
    return sorted(presets, key=lambda p: p != STUDY_COLUMN)


def _strength(row) -> float:
    """How far a decided row's adjusted interval reaches past what decided it, in multiples of the claim's size (for
    no effect: of its margin), measured from the claim's null: for holds, how far its near end lies past the size in
    the claimed direction; for opposite, its far end beyond the null the other way, over the size; for does not
    hold, how far short of the size its far end stops, over the size (no effect: how far past the margin its nearer
    end lies). NaN where the row has no size or margin, or is a no-effect claim that holds."""
    spec = STUDY_CLAIMS.get(row.claim_id)
    if spec is None:
        return math.nan
    if spec.kind == Kind.NO_EFFECT:
        lo, hi = row.lo_adj - spec.null, row.hi_adj - spec.null
        margin = row.margin
        if row.verdict != Verdict.DOES_NOT_HOLD or is_missing(margin) or not margin > 0:
            return math.nan
        return (min(abs(lo), abs(hi)) - margin) / margin if lo * hi > 0 else math.nan
    size = row.min_size
    if is_missing(size) or not size > 0 or spec.direction == 0:
        return math.nan
    near, far = sorted(_toward(v, spec) for v in (row.lo_adj, row.hi_adj))
    if row.verdict == Verdict.HOLDS:
        return (near - size) / size
    if row.verdict == Verdict.OPPOSITE:
        return -far / size
    return (size - far) / size if row.verdict == Verdict.DOES_NOT_HOLD else math.nan


# how far past what decided it a row's adjusted interval lies (_strength), said per verdict
FIRMNESS_WORDS = {
    Verdict.HOLDS: "its near end {:.1f} sizes beyond the size",
    Verdict.OPPOSITE: "opposite, its far end {:.1f} sizes beyond no effect the other way",
    Verdict.DOES_NOT_HOLD: "does not hold, its far end {:.1f} sizes short of the size",
    "no effect": "does not hold, its near end {:.1f} margins beyond the margin",  # a no-effect claim's
}


def _firmness_key(row) -> str:
    spec = STUDY_CLAIMS.get(row.claim_id)
    return "no effect" if spec is not None and spec.kind == Kind.NO_EFFECT else row.verdict


def _strongest(rows: pd.DataFrame, verdicts: tuple[str, ...]) -> str:
    """The claim among ``rows`` of the first of ``verdicts`` present that its interval decides most firmly, with its
    number and adjusted interval; "none" where no row has one of them."""
    for verdict in verdicts:
        candidates = rows[rows["verdict"] == verdict]
        strengths = candidates.apply(_strength, axis=1) if len(candidates) else pd.Series(dtype=float)
        if strengths.notna().any():
            row = candidates.loc[strengths.idxmax()]
            unit = unit_of(row.unit)
            return (
                f"*{row.claim}*, {unit.number(row.ours)} (adjusted [{unit.number(row.lo_adj)}, "
                f"{unit.number(row.hi_adj)}]: {FIRMNESS_WORDS[_firmness_key(row)].format(strengths.max())})"
            )
    return "none"


def answer_lines(table: pd.DataFrame, presets: list[str], models: pd.DataFrame | None = None) -> list[str]:
    """The page's answer in words, per column (the study-shaped one first): what model, language and task it is and
    how it differs from the study's, the study's claims counted by verdict, and the claim each way its interval
    decides most firmly (in multiples of the claim's size)."""
    lines: list[str] = []
    if table.empty or "claim_id" not in table:
        return lines
    for preset in column_order(presets):
        rows = _main_rows(table, preset, Tally.STUDY)
        if rows.empty:
            continue
        first = rows.iloc[0]
        shape = ""
        if models is not None and {"layers", "heads"} <= set(models) and (models["preset"] == preset).any():
            m = models[models["preset"] == preset].iloc[0]
            shape = f", {int(m.layers)} layers x {int(m.heads)} heads"
        what = (
            f"{MODEL_WORDS.get(first.model, first.model)}{shape}, fine-tuned on "
            f"{DATA_WORDS.get(first.data, first.data)}"
        )
        counts = rows["verdict"].value_counts()
        tallied = ", ".join(
            f"{int(counts[v])} {v if counts[v] == 1 else PLURAL.get(v, v)}" for v in JUDGED if counts.get(v, 0)
        )
        lines += [
            f"- **{preset}**: {what}. Of the study's {len(rows)} claims: {tallied}. "
            f"Firmest hold: {_strongest(rows, ('holds',))}. Firmest contradiction: "
            f"{_strongest(rows, ('opposite', 'does not hold'))}.",
        ]
    return [*lines, ""] if lines else []


def model_lines(models: pd.DataFrame | None, two_tower: pd.DataFrame | None, presets: list[str]) -> list[str]:
    """Per model: test accuracy, the majority grade's, the lexical grader's, and a warning when the model is near its
    floor (less than NEAR_FLOOR above its majority grade) or the lexical grader is as good or better."""
    if models is None or models.empty:
        return []
    lines = [
        "| model | test accuracy | always the majority grade | lexical grader | warning |",
        "|---|---|---|---|---|",
    ]
    for preset in presets:
        rows = models[models["preset"] == preset]
        if rows.empty:
            continue
        m = rows.iloc[0]
        lexical = math.nan
        if two_tower is not None and not two_tower.empty:
            lex = two_tower[(two_tower["preset"] == preset) & two_tower["label"].str.startswith("lexical")]
            lexical = float(lex["accuracy"].iloc[0]) if len(lex) else math.nan
        warnings = []
        if m.accuracy - m.majority < NEAR_FLOOR:
            warnings.append(
                f"near its floor: {100 * (m.accuracy - m.majority):.1f} points above the majority grade, so "
                'a mask has little accuracy to take and "no change" verdicts say little'
            )
        if not math.isnan(lexical) and m.accuracy_lo <= lexical:
            warnings.append(
                f"the lexical grader ({lexical:.1%}) is as good or better: the model may grade by little "
                "more than word overlap"
            )
        lexical_text = "" if math.isnan(lexical) else f"{lexical:.1%}"
        lines.append(
            f"| {preset} (`{m.model}`) | {m.accuracy:.1%} [{m.accuracy_lo:.1%}, {m.accuracy_hi:.1%}] | "
            f"{m.majority:.1%} | {lexical_text} | {'; '.join(warnings) or 'none'} |"
        )
    return lines + [""]


def claim_tables(
    table: pd.DataFrame,
    presets: list[str],
    verdict_text,
    heading: str = "##",
    models: pd.DataFrame | None = None,
    two_tower: pd.DataFrame | None = None,
) -> list[str]:
    """Markdown lines: the models; the study's claims, then our own predictions, counted per verdict and model
    (:func:`tally_lines`); then per finding one table of the study's claims (rows, sub-rows indented) x ``presets``,
    and under its own heading the same for our predictions.

    ``verdict_text(row, preset)`` writes a cell's verdict (a link on the site, plain text in the README).
    """
    lines = model_lines(models, two_tower, presets)
    table = with_rule(table) if "claim_id" in table else table
    for family in TALLIES:
        if "tally" not in table or (table["tally"] == family).any():  # a tally no model's scorecard holds: no table
            lines += tally_lines(table, presets, family)
    shown: set[str] = set()
    for family, heading_text in TALLIES.items():
        mine = table[table["tally"] == family] if "tally" in table else table.iloc[0:0]
        if not mine.empty:  # each tally under its own heading, its findings one level below it
            lines += [f"{heading} {heading_text[0].upper()}{heading_text[1:]}", ""]
        for finding, rows in mine.groupby("finding", sort=True):
            title = f"{finding}: {heading_text}" if finding in shown else finding  # no contents entry twice
            shown.add(finding)
            lines += _finding_table(rows, title, presets, verdict_text, heading + "#", table)
    return lines


def _finding_table(rows: pd.DataFrame, title: str, presets: list[str], verdict_text, heading: str, table):
    lines = [
        f"{heading} {title}",
        "",
        "| claim | rule | unit (interval) | the study | " + " | ".join(column_label(p, table) for p in presets) + " |",
        "|---|---|---|---|" + "---|" * len(presets),
    ]
    for claim_id, claim_rows in rows.groupby("claim_id", sort=False):
        first = claim_rows.iloc[0]
        by_preset = {r.preset: r for r in claim_rows.itertuples()}
        cells = [
            verdict_text(by_preset[p], p) + _numbers(by_preset[p]) if p in by_preset else "not run" for p in presets
        ]
        name = first.claim if is_main(claim_id) else f"↳ {first.claim}"
        method = first.get("method")
        method = method if isinstance(method, str) and method else "no interval"
        lines.append(
            f"| {name} | {_rule_cell(first)} | {first.unit} ({method}) | {_study_cell(first)} | "
            + " | ".join(cells)
            + " |"
        )
    return [*lines, ""]


def scorecard_markdown(
    table: pd.DataFrame,
    pages: dict[str, str],
    not_built: dict[str, str],
    models: pd.DataFrame | None = None,
    two_tower: pd.DataFrame | None = None,
) -> str:
    """The scorecard page (MyST markdown).

    ``pages`` maps each built preset to the folder its pages live in (``executed`` or ``executed/<preset>``);
    ``not_built`` maps each preset left out of this build to the command that adds it; ``models`` and ``two_tower``
    (the build's ``models.csv`` and ``two_tower.csv``) give each model's accuracy, majority grade and lexical grader.
    """
    lines = [
        "# Scorecard: the study's claims on each model",
        "",
    ]
    answer = answer_lines(table, list(pages), models)
    if answer:
        first = "; the model of its shape first" if STUDY_COLUMN in pages else ""
        lines += [
            f"The answer, per model (the study's own: {STUDY_SHAPE}{first}). *Firmest*: the claim whose adjusted "
            "interval lies farthest from the line that decided it (beyond its size for holds, beyond no effect for "
            "opposite, short of its size for does not hold), in multiples of its size (for no effect, of its "
            "margin); the evidence is below:",
            "",
            *answer,
        ]
    for family, caption in (
        (
            Tally.STUDY,
            "The study's claims (rows) on each model (columns). Hover a cell for our number, its intervals and the "
            "rule; click it for the page with the evidence. An undecided cell says which way our estimate leans: (+) "
            "the claim's way, (−) the other way. The tables below give every cell in full.",
        ),
        (Tally.OURS, "Our own predictions (rows), apart from the study's, on each model (columns)."),
    ):
        grid = grid_html(table, pages, family)
        if grid:
            lines += [caption, "", "````{raw} html", grid, "````", ""]
        if family == Tally.STUDY and (intervals := intervals_html(table, pages)):
            lines += [
                "The same claims on one model (pick it in the menu): our estimate in multiples of the claim's size, "
                "from no effect (0) to the size it asks for (1) in the claimed direction, with the interval adjusted "
                "for the number of claims; the black tick is the study's own number where it is in our unit. Ends "
                f"beyond {SIZES_SHOWN[0]:g} or {SIZES_SHOWN[1]:g} sizes are drawn at the edge.",
                "",
                "````{raw} html",
                intervals,
                "````",
                "",
            ]
    lines += [
        "Each row is one claim of the study (indented rows are evidence under it, not counted); each column one "
        "model this site was built on. A cell gives the verdict, our number with its 95% interval and the "
        "interval adjusted for the number of claims that the verdict rests on, and links to the page "
        f"with the evidence, which quotes the study's sentence and states the rule; beside an accuracy, the share of "
        f"the unmasked model's quadratic-weighted kappa (κ) the condition loses. {FLOOR_MARK} marks a condition at "
        "the floor of that scale (decided from its predictions: its κ interval reaches 0, or nearly every pair gets "
        "one grade): two conditions both at the floor can fall no further, so their comparison is evidence neither for "
        f"nor against a claim about which falls further. {MEAN_MARK} marks a verdict that changes when each removed "
        "head's output is replaced by "
        f"its mean over training pairs instead of zero (mean-ablation). {SCALE_MARK} marks an effect whose sign "
        "differs on the other scale (κ beside an accuracy, accuracy beside a κ; the two share no size, so only the "
        f"sign is read there: headlab.judging.sizes); {CENSORED_MARK} a comparison with one condition at the floor, "
        "whose difference is then a bound: it can show the verdicts on the bound's side only. Verdicts: "
        f"{', '.join(VERDICTS)}. "
        f"{CORRECTION} Hover a rule for its wording. "
        "The study's number is shown only where it is in our unit. The study's own numbers, and what it left "
        "unmeasured, are in {doc}`intro`.",
        "",
    ]
    lines += claim_tables(
        table,
        list(pages),
        lambda row, p: f"{{doc}}`{row.verdict} <{pages[p]}/{row.page}>`",
        models=models,
        two_tower=two_tower,
    )
    if table.empty:
        lines += ["No notebook of this build saved any claim.", ""]
    if not_built:
        lines += ["## Models not in this build", ""]
        lines += [f"- {preset}: `{command}`" for preset, command in not_built.items()]
    return "\n".join(lines) + "\n"
