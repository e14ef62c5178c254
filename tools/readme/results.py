"""The blocks of results: the scorecard, the models, tuning, two towers, pruning, and the rule's audits (calibration,
sensitivity, power, sizes), each rendered from its table of ``results/`` alone."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.book.scorecard import CORRECTION, claim_tables
from headlab.judging.units import in_current_units, is_missing
from headlab.judging.verdicts import ALPHA, TALLIES, Kind, Verdict
from headlab.pages.claims import STUDY_CLAIMS
from headlab.pages.pruning import serve_summary, serve_text, speed_rows
from headlab.report.standing import standing, standing_markdown, standing_note
from tools.readme.markers import RESULTS
from tools.readme.timings import duration


def _pct(value) -> str:
    return "" if is_missing(value) else f"{value:.1%}"


def _interval(row, name: str) -> str:
    lo, hi = row[f"{name}_lo"], row[f"{name}_hi"]
    return "" if is_missing(lo) else f" [{lo:.1%}, {hi:.1%}]"


FINDING_HEADING = "###"  # a tally's heading under the page's "## Every claim" (its findings: one level below)


def _scorecard_lines(table: pd.DataFrame, results: Path) -> tuple[list[str], list[str], list[str]]:
    """The site's first page as markdown, verdicts in bold instead of links, cut in two: the summary (each model's
    accuracy from ``results/models.csv`` and ``results/two_tower.csv``, and its verdicts counted) and the claims
    (one table per finding); and the presets built before the current verdict rule."""
    presets = list(dict.fromkeys(table["preset"]))
    models, two_tower = (
        pd.read_csv(results / f"{name}.csv") if (results / f"{name}.csv").exists() else None
        for name in ("models", "two_tower")
    )
    lines = claim_tables(table, presets, lambda row, p: f"**{row.verdict}**", FINDING_HEADING, models, two_tower)
    first = next((i for i, line in enumerate(lines) if line.startswith(FINDING_HEADING + " ")), len(lines))
    waiting = [] if models is None else [p for p in dict.fromkeys(models["preset"]) if p not in set(presets)]
    return lines[:first], lines[first:], waiting


def claims_block(table: pd.DataFrame, results: Path = RESULTS) -> list[str]:
    """Every claim of the study on every model, one table per finding, as on the site's first page."""
    return [CORRECTION, "", *_scorecard_lines(table, results)[1]]


def scorecard_block(table: pd.DataFrame, results: Path = RESULTS) -> list[str]:
    """The scorecard's summary: each model's test accuracy beside its floors, and its verdicts counted (the claims
    themselves: :func:`claims_block`)."""
    presets = list(dict.fromkeys(table["preset"]))
    lines, _, waiting = _scorecard_lines(table, results)
    while lines and not lines[-1]:
        lines = lines[:-1]
    lines += [
        "",
        f"Each column's rate of a wrong decisive verdict is held to {ALPHA:.0%} per tally, where nothing is true and "
        "where every "
        "claim sits at its smallest effect, as simulated on that column's own rows "
        "([judging](docs/judging.md#what-each-verdict-can-detect)); the columns are separate studies, not corrected "
        f"together, so over these {len(presets)} a wrong verdict somewhere is bounded by {len(presets)} x "
        f"{ALPHA:.0%} per tally. "
        "*Underpowered* counts the rows whose design could not have decided them (minimum detectable effect beyond "
        "twice the smallest effect of interest), apart from *cannot tell*.",
    ]
    if waiting:
        lines += [
            "",
            f"Not judged by the current verdict rule yet (built before it; their models are in the models "
            f"table): {', '.join(waiting)}. Rebuild with "
            f'`make book PRESETS="{" ".join([*presets, *waiting])}"`, then `python -m tools.readme`.',
        ]
    return lines


def models_block(table: pd.DataFrame) -> list[str]:
    """Each preset's model, its fine-tuning and how well it grades the test pairs (95% bootstrap intervals)."""
    lines = [
        "| preset | model | data | layers x heads | fine-tuning | train / dev / test pairs | test accuracy | "
        "macro-F1 | always the commonest grade | pretraining (held-out masked characters) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        tuning = f"LR {r.lr:g}, {int(r.epochs)} epochs" + (
            ", word embeddings frozen" if bool(r.frozen_word_embeddings) else ""
        )
        if not is_missing(r.finetune_seconds):
            tuning += f", {duration(r.finetune_seconds)}"
        pretraining = (
            ""
            if is_missing(r.masked_token_accuracy)
            else (
                f"{_pct(r.masked_token_accuracy)}{_interval(r, 'masked_token_accuracy')}, "
                f"{duration(r.pretrain_seconds)}"
            )
        )
        lines.append(
            f"| {r.preset} | `{r.model}` | `{r.data}` | {int(r.layers)} x {int(r.heads)} | {tuning} | "
            f"{int(r.n_train)} / {int(r.n_dev)} / {int(r.n_test)} | **{_pct(r.accuracy)}**"
            f"{_interval(r, 'accuracy')} | {r.macro_f1:.3f} [{r.macro_f1_lo:.3f}, {r.macro_f1_hi:.3f}] | "
            f"{_pct(r.majority)} | {pretraining} |"
        )
    return lines


def standing_block(results: Path = RESULTS) -> list[str]:
    """The models that grade Chinese pairs side by side (:func:`headlab.report.standing.standing`), and which column is
    shaped like the study (:func:`headlab.report.standing.standing_note`)."""
    table = standing(results)
    note = standing_note(table)
    return [*standing_markdown(table), *(["", note] if note else [])]


def tuning_block(table: pd.DataFrame) -> list[str]:
    """Every fine-tuning setting a preset's grid tried, scored on the dev split after its last epoch; the model column
    names the model where a grid ran on several (``model``, :func:`headlab.book.tuning.choose_over_models`), else the
    preset's own."""
    lines = [
        "| preset | model | LR | epochs | dev accuracy | dev macro-F1 | chosen |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        model = "" if is_missing(r.get("model")) else r.model
        lines.append(
            f"| {r.preset} | {model} | {r.lr:g} | {int(r.epochs)} | {_pct(r.dev_accuracy)} | {r.dev_macro_f1:.3f} | "
            f"{'**yes**' if bool(r.chosen) else ''} |"
        )
    return lines


def two_tower_block(table: pd.DataFrame) -> list[str]:
    """Notebook 08's conditions on every model: accuracy, and the paired change against the cross-encoder."""
    lines = [
        "| preset | condition | test accuracy | macro-F1 | change against the cross-encoder | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        change = "" if is_missing(r.p_mcnemar) else f"{r.rel_change:+.1%} [{r.lo:+.1%}, {r.hi:+.1%}]"
        p = "" if is_missing(r.p_mcnemar) else f"{r.p_mcnemar:.2g}"
        lines.append(
            f"| {r.preset} | {r.label} | {r.accuracy:.1%} [{r.acc_lo:.1%}, {r.acc_hi:.1%}] | "
            f"{r.macro_f1:.3f} | {change} | {p} |"
        )
    return lines


def pruning_block(table: pd.DataFrame, results: Path = RESULTS) -> list[str]:
    """Notebook 10 on every model: how many heads can go within the margin by importance (chosen on dev, measured on
    test), the pruned model at that share: its size, its grades beside masking, and its speed-up where
    ``benchmarks/prune_speed.py`` measured one (``results/prune_speed.csv``) at that share; then, per model that
    ``benchmarks/serve_speed.py`` measured, the compressed models' speed and cost and whether the goal was reached."""
    lines = [
        "| preset | heads removed within the margin by importance (chosen on dev) | κ lost on test | pruned model: "
        "heads kept, parameters, file | grades as masking | speed-up (pairs/s, pruned over unpruned) |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        grades = "" if is_missing(r.get("grades_as_masking")) else f"{r.grades_as_masking:.1%} of {int(r.n_examples)}"
        chosen, lost = (
            (
                f"**{r.importance_share:.0%}** ({int(r.importance_heads)} heads; {r.dev_kappa_lost:.1%} lost on "
                f"{int(r.n_dev)} dev pairs)",
                f"{r.kappa_lost:.1%} [{r.kappa_lost_lo:.1%}, {r.kappa_lost_hi:.1%}]",
            )
            if not is_missing(r.get("dev_kappa_lost"))
            else (f"not chosen on dev yet: `python -m headlab.book --preset {r.preset} --pages 10_pruning`", "")
        )
        lines.append(
            f"| {r.preset} | {chosen} | {lost} | {_pruned_cell(r)} | {grades} | "
            f"{speedup_text(results / 'prune_speed.csv', r) if lost else ''} |"
        )
    margin = table["margin"].dropna() if "margin" in table else pd.Series(dtype=float)
    if not margin.empty:
        lines += [
            "",
            f"Within the margin: every share up to it loses at most {margin.iloc[0]:.0%} of the unmasked quadratic "
            "κ on the dev pairs; the test column is the share chosen there, with a 95% paired bootstrap interval "
            "over the test pairs. The speed-ups are ratios of the medians of repeated timed passes, the two models "
            "timed in turn, on the machine named.",
        ]
    for r in table.drop_duplicates(["model", "data"]).itertuples():
        serving = serve_summary(r.model, r.data, results / "serve_speed.csv")
        if not serving.empty:
            lines += ["", f"Serving `{r.model}` compressed (`benchmarks/serve_speed.py`): {serve_text(serving)}"]
    return lines


def _pruned_cell(r) -> str:
    """The pruned model's heads, parameters and file size; or why none was built (its ``note``)."""
    if is_missing(r.get("heads_kept")):
        return "" if is_missing(r.get("note")) else str(r.note)
    return (
        f"{int(r.heads_kept)}, {r.parameters / 1e6:.1f}M of {r.parameters_unpruned / 1e6:.1f}M, "
        f"{r.file_mb:.0f} of {r.file_mb_unpruned:.0f} MB"
    )


def speedup_text(speed_table: Path, row) -> str:
    """The benchmark's speed-ups (:func:`headlab.pages.pruning.speed_rows`) for one preset's model and data at its
    importance share, per device and batch size."""
    if is_missing(row.get("heads_kept")):
        return ""
    rows = speed_rows(row.model, row.data, speed_table)
    if not rows.empty:
        rows = rows[(rows["variant"] == "pruned") & ((rows["share_removed"] - row.importance_share).abs() < 1e-6)]
    parts = []
    for (machine, device), runs in rows.groupby(["machine", "device"], sort=False):
        ratios = [
            f"{group['speedup'].iloc[-1]:.2f}x at batch {int(batch)}"
            for batch, group in runs.groupby("batch_size", sort=True)
            if group["speedup"].notna().any()
        ]
        if ratios:
            parts.append(f"{', '.join(ratios)} ({device}, {machine})")
    return "; ".join(parts) if parts else "not measured yet"


def calibration_block(table: pd.DataFrame, results: Path = RESULTS) -> list[str]:
    """The verdict rule's error rates on the rows' own designs (:mod:`headlab.book.calibration`): per preset and
    tally the familywise rate of a wrong decisive verdict where nothing is true and where every claim sits at its
    smallest effect, with its Clopper–Pearson interval; then per row and preset its design's MDE beside its size and
    the share of simulated scorecards giving "holds" at twice its size (the power). Rows measured in a unit the
    sizes policy has since replaced are named: they sit out until their column is rebuilt."""
    familywise = table["claim_id"].str.startswith("familywise")
    n_sim = int(table["n_sim"].iloc[0])
    presets = list(dict.fromkeys(table["preset"]))
    lines = [
        f"The familywise rate of a wrong decisive verdict, per column and tally, over {n_sim} simulated scorecards "
        "on that column's own rows (95% Clopper–Pearson interval); a tally's familywise rate is per column, and a "
        "wrong verdict somewhere on a page of five columns is bounded by the sum over its columns:",
        *_sitting_out(results),
        "",
        "| column | tally | claims | nothing true | every claim at its smallest effect |",
        "|---|---|---|---|---|",
    ]
    rate = lambda r: f"{r.wrong:.2%} [{r.wrong_lo:.2%}, {r.wrong_hi:.2%}]"  # noqa: E731
    for (preset, tally), rows in table[familywise].groupby(["preset", "tally"], sort=False):
        by_truth = {r.truth: r for r in rows.itertuples()}
        null, smallest = by_truth["no effect"], by_truth["smallest effect"]
        lines.append(f"| {preset} | {TALLIES[tally]} | {int(null.claims)} | {rate(null)} | {rate(smallest)} |")
    lines += [
        "",
        "Each row's minimum detectable effect (80% power, from its own interval, df, search and weakest-of count) "
        "against its smallest effect of interest (no effect: the margin it could show against the margin), and in "
        "brackets the share of simulated scorecards giving holds at twice the size; **bold**: underpowered at this "
        "design (it cannot read holds 80% of the time where the truth is twice its size, or a true null within its "
        "margin).",
        "",
        f"| claim | size | {' | '.join(presets)} |",
        f"|---|---|{'---|' * len(presets)}",
    ]
    twice = table[~familywise & (table["truth"] == "twice it")]
    for claim_id, rows in twice.groupby("claim_id", sort=False):
        spec = STUDY_CLAIMS[claim_id]
        size = spec.margin if spec.kind == Kind.NO_EFFECT else spec.min_size
        cells = []
        for preset in presets:
            row = rows[rows["preset"] == preset]
            if row.empty:
                cells.append("—")
                continue
            r = row.iloc[0]
            weak = r["mde"] > (size if spec.kind == Kind.NO_EFFECT else 2 * size)
            text = f"{r['mde']:.3g}" + ("" if spec.kind == Kind.NO_EFFECT else f" ({r['holds']:.0%})")
            cells.append(f"**{text}**" if weak else text)
        lines.append(f"| `{claim_id}` | {size:.3g} | {' | '.join(cells)} |")
    return lines


def sensitivity_block(table: pd.DataFrame) -> list[str]:
    """Which verdicts hang on the size (:mod:`headlab.book.sensitivity`): per column the study's claims counted
    by verdict at half, at and at twice their smallest effect of interest, then every row whose verdict moves with
    the size, and every row the current rule judges otherwise than the rule it was kept under."""
    verdicts = (Verdict.HOLDS, Verdict.DOES_NOT_HOLD, Verdict.OPPOSITE, Verdict.CANNOT_TELL, Verdict.UNDERPOWERED)
    lines = [
        "The study's claims per column, by verdict, judged by the current rule on each row's own numbers at half "
        "its smallest effect of interest (or margin), at it, and at twice it (half / at / twice):",
        "",
        f"| column | {' | '.join(verdicts)} |",
        f"|---|{'---|' * len(verdicts)}",
    ]
    study = table[table["tally"] == "study"]
    for preset, rows in study.groupby("preset", sort=False):
        cells = [" / ".join(str(int((rows[at] == v).sum())) for at in ("half", "size", "twice")) for v in verdicts]
        lines.append(f"| {preset} | {' | '.join(cells)} |")
    moving = table[table["moves"].astype(bool)]
    lines += ["", f"Rows whose verdict moves with the size ({len(moving)} of {len(table)}):", ""]
    lines += ["| column | claim | half | at | twice |", "|---|---|---|---|---|"]
    lines += [f"| {r.preset} | `{r.claim_id}` | {r.half} | {r.size} | {r.twice} |" for r in moving.itertuples()]
    ruled = table[table["kept"] != table["size"]]
    lines += [
        "",
        f"Rows the current rule (v{int(table['rule'].iloc[0])}) judges otherwise than the verdict kept in "
        f"`results/scorecard.csv` ({len(ruled)}; the same numbers, so the rule's doing alone):",
        "",
    ]
    lines += ["| column | claim | kept (rule) | now |", "|---|---|---|---|"]
    lines += [f"| {r.preset} | `{r.claim_id}` | {r.kept} (v{r.kept_rule}) | {r.size} |" for r in ruled.itertuples()]
    return lines


def power_block(table: pd.DataFrame) -> list[str]:
    """What more pairs or draws would buy (:mod:`headlab.book.power`): per column the study's rows whose design is
    not powered as built and under each purchase, then every row (either tally) some purchase would power."""
    from headlab.book.power import DRAWS_CAP, Purchase, underpowered_counts

    counts = underpowered_counts(table)
    purchases = [p.value for p in Purchase]
    lines = [
        "The study's rows whose design is not powered (MDE over twice the size; for no effect, over the margin), "
        "whatever their verdict, per column, as built and under each design the data allow, projected from each "
        "row's own spread (cross-fitted: chosen on one half and measured on the other, both ways; dev + test: the dev "
        f"pairs pooled in, after cross-fitting where it applies; more draws: {DRAWS_CAP} times the draws or seeds):",
        "",
        f"| column | {' | '.join(purchases)} |",
        f"|---|{'---|' * len(purchases)}",
        *(f"| {preset} | {' | '.join(str(int(n)) for n in row)} |" for preset, row in counts.iterrows()),
        "",
        "The rows some purchase would power: the limit, the MDE as built and under each purchase that applies:",
        "",
        f"| column | claim | tally | verdict | limit | {' | '.join(purchases)} |",
        f"|---|---|---|---|---|{'---|' * len(purchases)}",
    ]
    built, every = (f"powered {p.value}" for p in (Purchase.NONE, Purchase.ALL))
    bought = table[(table[built].astype(str) == "False") & (table[every].astype(str) == "True")]
    for _, r in bought.iterrows():
        cells = [
            "—"
            if pd.isna(r[f"mde {p}"])
            else f"{r[f'mde {p}']:.3g}" + (" ✓" if str(r[f"powered {p}"]) == "True" else "")
            for p in purchases
        ]
        lines.append(
            f"| {r['preset']} | `{r['claim_id']}` | {r['tally']} | {r['verdict']} | {r['limit']:.3g} "
            f"| {' | '.join(cells)} |"
        )
    return lines


def sizes_block() -> list[str]:
    """The sizes policy (:mod:`headlab.judging.sizes`), written out from the policy itself, not from ``results/``:
    its version and date, its rule, the study's numbers it uses, and every claim's size or margin, scale and why."""
    from headlab.judging import sizes
    from headlab.pages.claims import STUDY_CLAIMS

    lines = [
        f"Sizes policy **v{sizes.POLICY_VERSION}**, dated {sizes.POLICY_DATE} (`headlab/judging/sizes.py`): every "
        "claim's smallest effect of interest, or no-change margin, computed from the study's numbers and words "
        "alone, never from `results/`. Where a size comes from, in order of preference:",
        "",
        *(f"- **{source.value}**: {rule}" for source, rule in sizes.RULES.items()),
        "",
        f"No change is ±{sizes.NO_CHANGE_MARGIN:.2%} of accuracy, the smallest change the book calls an effect, so no "
        "loss or gain size lies inside the no-change margin of its unit (the margin moved there from ±2%; the "
        "no-effect claims whose designs cannot show a margin that narrow read underpowered, and say so). Scale: "
        f"{sizes.KAPPA_CRITERION}. The other scale judges the same number, and the scorecard marks a verdict "
        "that differs there.",
        "",
        "The study's numbers the policy uses, each quoted from [the study](study.md):",
        "",
        "| number | printed | in the study's words |",
        "|---|---|---|",
        *(f"| `{key}` | {n.printed} | {n.quote.replace('|', '&#124;')} |" for key, n in sizes.STUDY_NUMBERS.items()),
        "",
        "| claim | kind | size | scale | from | why |",
        "|---|---|---|---|---|---|",
    ]
    for claim_id, size in sizes.POLICY.items():
        spec = STUDY_CLAIMS[claim_id]
        value = f"±{size.unit.size(size.margin)}" if spec.kind == Kind.NO_EFFECT else size.unit.size(size.min_size)
        scale = {sizes.Scale.ACCURACY: "accuracy", sizes.Scale.KAPPA: "κ", sizes.Scale.OWN: "own"}[size.scale]
        lines.append(
            f"| `{claim_id}` | {spec.kind} | {value} | {scale} | {size.source.value} | {size.why.replace('|', '/')} |"
        )
    return lines


def roofline_block(table: pd.DataFrame) -> list[str]:
    """``benchmarks/sweep_speed.py``'s roofline, the latest run per processor and workload: the FLOP/s of the
    products the sweep engine computes beside that processor's peak for the precision it computes in, both measured
    in the same run on the same threads, and the fp32 products at the feed-forward's shape through torch's default
    and through oneDNN."""
    lines = [
        "| processor | workload (masks) | engine | computes in | peak of that | share of it | share of the bf16 peak "
        "| fp32 at the feed-forward's shape: torch's default / oneDNN |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rate = lambda value: "" if is_missing(value) else f"{value:.1f} GFLOP/s"  # noqa: E731
    for _, r in table.groupby(["machine", "workload"], sort=False).tail(1).iterrows():
        peak = r["engine_gflops"] / r["share_of_own_peak"]
        bf16 = _pct(r["share_of_bf16_peak"]) if r["native_bf16"] else "no native bf16: emulated, not a ceiling"
        ffn = f"{rate(r.get('fp32_at_the_feed-forwards_shape_gflops'))} / "
        ffn += rate(r.get("fp32_at_the_feed-forwards_shape_through_oneDNN_gflops")) or "not measured"
        lines.append(
            f"| {r['machine']} | {r['workload']} ({int(r['masks'])}) | {rate(r['engine_gflops'])} "
            f"| {r['engine_precision'].removesuffix(' peak').replace(' peak ', ' ')} | {rate(peak)} "
            f"| {_pct(r['share_of_own_peak'])} | {bf16} | {ffn} |"
        )
    return lines


def _sitting_out(results: Path) -> list[str]:
    """A sentence naming the registered claims whose committed rows are in a unit the sizes policy has replaced (left
    out of the simulation, :func:`headlab.judging.units.in_current_units`), or nothing."""
    rows = pd.read_csv(results / "scorecard.csv")
    registered = rows[rows["claim_id"].isin(list(STUDY_CLAIMS))]
    out = registered.drop(index=in_current_units(registered).index)
    if out.empty:
        return []
    names = ", ".join(f"`{c}`" for c in dict.fromkeys(out["claim_id"]))
    return [
        "",
        f"Left out of these rates until their columns are rebuilt, measured in a unit the sizes policy has since "
        f"replaced: {names} ({len(out)} rows).",
    ]
