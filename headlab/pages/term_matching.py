"""Finding 5, term-matching heads: rank heads by attention between identical query/title terms, then mask them.

The study masked its 5 clearest term-matching heads (layers 2-4 of 12) and lost 52.4% of accuracy, while 5
random heads cost nothing; all heads of layers 0-5 cost 86.5%, and all of them but the 5 matching heads only
18.1%. Here the heads are chosen by attention alone on a seeded half of the evaluation pairs
(:func:`measured_examples`) and every mask is measured on the other half, each random mask as many seeded draws,
with two controls the study lacks: 5 random heads of the lower half (the matching heads' own half, where masking
costs more), and the lower half masked except 5 random heads of it. The matching heads' effects are then compared
with the mean of those random draws, as a difference whose interval covers the draws' spread and the pairs. The
page's verdict is the study's claims as rows (:func:`claims`), each judged by :func:`headlab.judging.verdicts.judge`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from headlab.core.enums import Words
from headlab.core.stats import N_BOOT, mcnemar, relative_change, versus_random
from headlab.core.sweep import (
    MaskSpec,
    baseline_correct,
    baseline_grades,
    correct_matrix,
    draw_seed,
    kappa_columns,
    predicted_matrix,
)
from headlab.judging.units import (
    ACCURACY_CHANGE,
    KAPPA_LOST,
    KEEP_VERSUS_RANDOM_KAPPA,
    PAIRED,
    TWO_STAGE,
    VERSUS_RANDOM,
    with_interval,
)
from headlab.judging.verdicts import Claim, Kind, StudyClaim
from headlab.measures.matching import Condition
from headlab.measures.study_layers import STUDY_MATCHING_LAYERS, study_layers_to_ours

_pct = ACCURACY_CHANGE.number  # a relative change of accuracy as the pages write it

# condition -> (how the table names it, the study's relative change or None where the study has no number)
CONDITIONS: dict[Condition, tuple[str, float | None]] = {
    Condition.NONE: ("no mask", 0.0),
    Condition.RANDOM: ("{k} random heads", 0.0),
    Condition.RANDOM_LOWER: ("{k} random heads of the lower half", None),
    Condition.MATCHING: ("the {k} term-matching heads", -0.524),
    Condition.LOWER: ("all heads of the lower half", -0.865),
    Condition.LOWER_BUT_MATCHING: ("the lower half but the {k} term-matching heads", -0.181),
    Condition.LOWER_BUT_RANDOM: ("the lower half but {k} random heads of it", None),
}


class Side(Words):
    """The side of its random control a tested condition is more extreme on: lower accuracy, or higher."""

    LOWER = "lower"
    HIGHER = "higher"


# tested condition -> (random condition it is compared with, the side on which it is more extreme)
COMPARISONS = [
    (Condition.MATCHING, Condition.RANDOM, Side.LOWER),
    (Condition.MATCHING, Condition.RANDOM_LOWER, Side.LOWER),
    (Condition.LOWER_BUT_MATCHING, Condition.LOWER_BUT_RANDOM, Side.HIGHER),
]


def placement(roles: pd.DataFrame, matching, layers: int, by: str = "match_excess") -> str:
    """Where the chosen heads sit, against the study's layers 2-4 of 12, and the best heads of any layer (markdown)."""
    scores = roles.set_index(["layer", "head"])[by]
    ours = study_layers_to_ours(STUDY_MATCHING_LAYERS, layers)
    there = sum(layer in ours for layer, _ in matching)
    best = scores.sort_values(ascending=False).head(len(matching))
    in_lower = sum(layer < layers // 2 for layer, _ in best.index)
    heads = ", ".join(f"{l}.{h} ({scores[(l, h)]:.2f})" for l, h in matching)
    return (
        f"- The {len(matching)} lower-half heads with the highest `{by}` (layer.head, score): {heads}. "
        f"The study's {len(matching)} sat in layers 2–4 of 12, at the relative depth of our layers "
        f"{', '.join(map(str, ours))}: {there} of ours are there.\n"
        f"- Over all layers the top {len(matching)} by the same score are "
        f"{', '.join(f'{l}.{h} ({v:.2f})' for (l, h), v in best.items())}; {in_lower} of them in the lower half."
    )


def chosen_takeaway(roles: pd.DataFrame, matching, layers: int, by: str = "match_excess") -> str:
    """The role map's caption: the heads chosen and how many sit at the study's depth (layers 2-4 of 12)."""
    scores = roles.set_index(["layer", "head"])[by]
    ours = study_layers_to_ours(STUDY_MATCHING_LAYERS, layers)
    heads = ", ".join(f"{l}.{h} ({scores[(l, h)]:.2f})" for l, h in matching)
    there = sum(layer in ours for layer, _ in matching)
    return (
        f"The {len(matching)} lower-half heads with the highest {by}, framed: {heads}; {there} of them at the "
        f"study's depth (our layers {', '.join(map(str, ours))})."
    )


def conditions_takeaway(table: pd.DataFrame) -> str:
    """The conditions figure's caption: each condition's relative change of accuracy with its interval (random
    conditions averaged over their draws), in the table's order."""
    rows = table[table["condition"] != Condition.NONE]
    parts = [
        f"{r.label}{' (mean of draws)' if r.condition.startswith(('random', 'lower_but_random')) else ''} "
        f"{with_interval(ACCURACY_CHANGE, r.rel_change, r.lo, r.hi)}"
        for r in rows.itertuples()
    ]
    return "Relative change of accuracy, masking " + "; ".join(parts) + "."


def _study_change(condition: Condition) -> float:
    """The study's relative change for a condition it reported."""
    change = CONDITIONS[condition][1]
    if change is None:
        raise ValueError(f"the study reported no change for {condition!r}")
    return change


def labels(k: int | str) -> dict[str, str]:
    """Condition -> its name in tables and charts, for ``k`` matching heads."""
    return {condition: text.format(k=k) for condition, (text, _) in CONDITIONS.items()}


def draw_table(per_example: pd.DataFrame, plan: pd.DataFrame, k: int) -> pd.DataFrame:
    """One row per mask: condition, its label, accuracy and relative change (each random draw on its own)."""
    correct = correct_matrix(per_example)
    base = baseline_correct(per_example).astype(np.float64)
    names = labels(k)
    rows = plan[plan["kind"].isin(list(CONDITIONS))][["mask_id", "kind", "n_dropped"]]
    accuracy = correct.loc[rows["mask_id"]].to_numpy(dtype=np.float64).mean(axis=1)
    return pd.DataFrame(
        {
            "mask_id": rows["mask_id"].to_numpy(),
            "condition": rows["kind"].to_numpy(),
            "label": [names[c] for c in rows["kind"]],
            "n_dropped": rows["n_dropped"].to_numpy(),
            "accuracy": accuracy,
            "rel_change": accuracy / base.mean() - 1.0,
        }
    )


def condition_table(
    per_example: pd.DataFrame, plan: pd.DataFrame, k: int, n_boot: int = N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """The study's table, ours beside it: one row per condition, against the sweep's unmasked row.

    ``rel_change`` of a random condition is that of the accuracy averaged over its draws; ``lo``/``hi`` is
    its 95% two-stage bootstrap interval (draws, then test pairs), ``lo90``/``hi90`` the 90% one for
    equivalence; ``draw_lo``/``draw_hi`` the 2.5-97.5% range of the single draws (which heads were drawn).
    ``p_mcnemar`` (exact, against the unmasked model) is given for single masks. ``kept`` is the accuracy
    kept, 1 + rel_change; ``study`` the study's number. The kappa columns (:func:`headlab.core.sweep.kappa_columns`:
    kappa_lost with its interval, at_floor, floor_reason, ...) put each condition on the chance-corrected scale.
    """
    base = baseline_correct(per_example).astype(np.float64)
    correct = correct_matrix(per_example)
    predicted, (base_predicted, gold) = predicted_matrix(per_example), baseline_grades(per_example)
    names = labels(k)
    rows = []
    for condition, (_, study) in CONDITIONS.items():
        masks = plan[plan["kind"] == condition]
        if masks.empty:
            continue
        values = correct.loc[masks["mask_id"]].to_numpy(dtype=np.float64)
        per_draw = values.mean(axis=1) / base.mean() - 1.0
        seeds = draw_seed(seed, condition, 0.0)
        effect = relative_change(values, base, n_boot=n_boot, seed=seed, draw_seed=seeds)
        grades = predicted.loc[masks["mask_id"]].to_numpy()
        rows.append(
            {
                "condition": condition,
                "label": names[condition],
                "n_heads": int(masks["n_dropped"].iloc[0]),
                "accuracy": float(values.mean()),
                **effect.columns(),
                "kept": 1.0 + effect.rel_change,
                "draw_lo": float(np.quantile(per_draw, 0.025)),
                "draw_hi": float(np.quantile(per_draw, 0.975)),
                "p_mcnemar": mcnemar(values[0], base) if len(values) == 1 else np.nan,
                "study": study,
                **kappa_columns(grades, base_predicted, gold, n_boot, seed, seeds),
            }
        )
    return pd.DataFrame(rows)


def random_comparison(
    per_example: pd.DataFrame, plan: pd.DataFrame, k: int, n_boot: int = N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """Do the matching heads matter more than random heads? Per comparison, the tested mask's relative change minus
    the mean relative change of the random draws, on the same pairs.

    The difference's interval is a t interval on a two-stage bootstrap over the draws and the pairs (the same
    resampled pairs for every condition; :func:`headlab.core.stats.versus_random`), with Welch–Satterthwaite degrees
    of freedom (``df``), so the draws' spread is part of the uncertainty. ``n_as_extreme``: draws at least as far
    as the tested mask on its side (as low a change when masking the matching heads, as high when keeping them),
    ``n_reverse`` the draws at least as far the other way: where the named heads rank, told beside the verdict,
    never the verdict.

    Columns: tested, tested_label, reference, reference_label, side, tested_change, reference_mean, reference_min,
    reference_max, n_draws, n_as_extreme, n_reverse, difference, difference_lo, difference_hi, df, n_examples.
    """
    correct = correct_matrix(per_example)
    base = baseline_correct(per_example).astype(np.float64)
    names = labels(k)
    rows = []
    for tested, reference, side in COMPARISONS:
        named = plan[plan["kind"] == tested]["mask_id"]
        pool = plan[plan["kind"] == reference]["mask_id"]
        if named.empty or pool.empty:
            continue
        values = correct.loc[named].to_numpy(dtype=np.float64)[0]
        draws = correct.loc[pool].to_numpy(dtype=np.float64)
        versus = versus_random(values, draws, base, n_boot=n_boot, seed=seed, draw_seed=draw_seed(seed, reference, 0.0))
        value, per_draw = versus["named"], draws.mean(axis=1) / base.mean() - 1.0
        rows.append(
            {
                "tested": tested,
                "tested_label": names[tested],
                "reference": reference,
                "reference_label": names[reference],
                "side": side,
                "tested_change": value,
                "reference_mean": versus["random_mean"],
                "reference_min": versus["random_min"],
                "reference_max": versus["random_max"],
                "n_draws": versus["n_draws"],
                "n_as_extreme": int(np.sum(per_draw <= value) if side == Side.LOWER else np.sum(per_draw >= value)),
                "n_reverse": int(np.sum(per_draw >= value) if side == Side.LOWER else np.sum(per_draw <= value)),
                "difference": versus["difference"],
                "difference_lo": versus["difference_lo"],
                "difference_hi": versus["difference_hi"],
                "df": versus["df"],
                "n_examples": versus["n_examples"],
            }
        )
    return pd.DataFrame(rows)


VERSUS_METHOD = (
    "named heads minus the mean of the random draws, t interval on a two-stage bootstrap over draws and test pairs "
    "(Welch–Satterthwaite degrees of freedom)"
)
# the stricter control first: random heads of the matching heads' own half cost more than random heads of any layer
CONTROLS = (Condition.RANDOM_LOWER, Condition.RANDOM)
RANDOM_NO_CHANGE = StudyClaim(
    "term_matching.random_no_change",
    "05_term_matching",
    "Masking 5 random heads changes no accuracy",
    "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
    Kind.NO_EFFECT,
)
MATCHING_COSTS = StudyClaim(
    "term_matching.matching_costs",
    "05_term_matching",
    "Masking the 5 term-matching heads costs accuracy, far more than masking random heads",
    "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
    Kind.COMPARE,
    direction=-1,
)
LOWER_HALF_COSTS = StudyClaim(
    "term_matching.lower_half_costs",
    "05_term_matching",
    "Masking all heads of the lower half costs most of the model's skill (judged on κ: the mask removes half of all "
    "heads, where accuracy's floor differs between data sets)",
    "| change | +0% | +0% | -52.4% | -86.5% | -18.1% |",
    Kind.EFFECT,
    direction=1,
)
MATCHING_KEEP_LOWER_HALF = StudyClaim(
    "term_matching.matching_keep_lower_half",
    "05_term_matching",
    "Keeping only the 5 term-matching heads of the lower half keeps much of its skill, more than as many random heads "
    "of it would (judged on κ: the rest of the half masked removes more heads than the study's collapse point)",
    "Keeping only those 5 heads in layers 0-5 keeps about 82% of baseline performance",
    Kind.COMPARE,
    direction=-1,
)
NOT_ON_KAPPA = (
    "Not measured on κ, the scale the sizes policy reads this claim on (the mask removes more heads than the study's "
    "collapse point, where accuracy's floor differs between data sets): the page compares the kept sets on accuracy "
    "alone, shown below and not judged"
)
CLAIMS = (RANDOM_NO_CHANGE, MATCHING_COSTS, LOWER_HALF_COSTS, MATCHING_KEEP_LOWER_HALF)


def _names(table: pd.DataFrame) -> dict[str, str]:
    """Condition -> its name as the table gives it (with our k); a condition the table lacks is named with "k"."""
    return {**labels("k"), **dict(zip(table["condition"], table["label"]))}


def _kappa(row):
    """A condition's kappa columns (``kappa=`` of :meth:`Claim.measured`), or None for a table without them."""
    return row if "kappa_lost" in row.index else None


def _method(row) -> str:
    """The interval's method: over pairs, or over draws and pairs for a random condition."""
    return TWO_STAGE if int(row["n_draws"]) > 1 else PAIRED


def _kappa_note(row, what: str) -> str:
    """The condition on the chance-corrected scale: the share of quadratic kappa it loses, and whether it sits at the
    floor (decided from its predictions), in which case its change is a collapse, not a size to set beside the
    study's."""
    if "kappa_lost" not in row.index or pd.isna(row["kappa_lost"]):
        return ""
    text = (
        f" With {what} masked the model loses {row['kappa_lost']:.0%} [{row['kappa_lost_lo']:.0%}, "
        f"{row['kappa_lost_hi']:.0%}] of its quadratic κ"
    )
    if not bool(row["at_floor"]):
        return f"{text}."
    study = CONDITIONS[row.name][1]
    beside = f", not an effect size to set beside the study's {_pct(study)}" if study else ""
    return f"{text} and sits at the floor ({row['floor_reason']}): a collapse{beside}."


def _mcnemar(row) -> str:
    p = row.get("p_mcnemar", np.nan)
    return "" if p is None or pd.isna(p) else f", exact McNemar p = {p:.2g} against the unmasked model"


def _draws(r, what: str) -> str:
    """What the random draws of one comparison did (``what``: "cost as much or more", "keep at least as much"):
    where the named heads rank among them, as description."""
    return (
        f"{r.n_as_extreme} of {r.n_draws} draws of *{r.reference_label}* {what} (their mean "
        f"{_pct(r.reference_mean)}, {_pct(r.reference_min)} to {_pct(r.reference_max)})"
    )


def _versus_text(r) -> str:
    return (
        f"the difference, {100 * r.difference:+.1f} points [{100 * r.difference_lo:+.1f}, "
        f"{100 * r.difference_hi:+.1f}] ({r.df:.0f} degrees of freedom)"
    )


def _not_measured(spec: StudyClaim, condition: Condition, what: str) -> Claim:
    return Claim.not_measured(
        spec,
        reason=f"Not measured: no mask of {what} in the sweep",
        unit=ACCURACY_CHANGE,
        study=CONDITIONS[condition][1],
    )


def _random_claim(rows: pd.DataFrame, names: dict, selection: str) -> Claim:
    """The study's "+0%" for random heads: a claim of no effect, judged as equivalence within the registered margin."""
    if Condition.RANDOM not in rows.index:
        return _not_measured(RANDOM_NO_CHANGE, Condition.RANDOM, "random heads")
    r = rows.loc[Condition.RANDOM]
    spread = (
        f"; single draws {_pct(r['draw_lo'])} to {_pct(r['draw_hi'])} (2.5-97.5%)"
        if int(r["n_draws"]) > 1
        else _mcnemar(r)
    )
    return Claim.measured(
        RANDOM_NO_CHANGE,
        ours=r["rel_change"],
        lo=r["lo"],
        hi=r["hi"],
        unit=ACCURACY_CHANGE,
        method=_method(r),
        n_examples=r["n_examples"],
        n_draws=r["n_draws"],
        df=r["df"] if pd.notna(r.get("df")) else None,  # its interval's own Welch–Satterthwaite df
        study=CONDITIONS[Condition.RANDOM][1],
        kappa=_kappa(r),
        reason=f"Masking {names['random']}, averaged over {int(r['n_draws'])} draws{spread}. {selection}",
    )


def _matching_claim(rows: pd.DataFrame, by_test: dict, names: dict, selection: str) -> Claim:
    """Masking the matching heads costs far more than random heads: one row, the number the matching heads' change
    minus the mean change of the stricter control (random heads of their own half, where there are such draws),
    with the draws' spread in its interval."""
    if Condition.MATCHING not in rows.index:
        return _not_measured(MATCHING_COSTS, Condition.MATCHING, "the term-matching heads")
    m = rows.loc[Condition.MATCHING]
    tests = [by_test[(Condition.MATCHING, c)] for c in CONTROLS if (Condition.MATCHING, c) in by_test]
    if not tests:
        return Claim.not_measured(
            MATCHING_COSTS,
            reason=f"Not measured: masking {names['matching']} cost {_pct(m['rel_change'])}, but no random draws were "
            "masked to compare them with",
            unit=VERSUS_RANDOM,
            study=CONDITIONS[Condition.MATCHING][1],
        )
    strict = tests[0]
    control = (
        "Against random heads: "
        + "; ".join(_draws(r, "cost as much or more") for r in tests)
        + f". The control judged is *{strict.reference_label}*"
        + (
            ", the stricter one: random heads of the matching heads' own half, where masking costs more than in the "
            "upper half"
            if strict.reference == Condition.RANDOM_LOWER
            else ""
        )
        + f": {_versus_text(strict)}."
    )
    return Claim.measured(
        MATCHING_COSTS,
        ours=strict.difference,
        lo=strict.difference_lo,
        hi=strict.difference_hi,
        unit=VERSUS_RANDOM,
        method=VERSUS_METHOD,
        n_examples=m["n_examples"],
        n_draws=strict.n_draws,
        df=strict.df,
        study=_study_change(Condition.MATCHING) - _study_change(Condition.RANDOM),
        reason=f"Masking {names['matching']}: {_pct(m['rel_change'])} [{_pct(m['lo'])}, {_pct(m['hi'])}]"
        f"{_mcnemar(m)}.{_kappa_note(m, 'them')} {control} {selection}",
    )


def _lower_claim(rows: pd.DataFrame, names: dict, selection: str) -> Claim:
    if Condition.LOWER not in rows.index:
        return _not_measured(LOWER_HALF_COSTS, Condition.LOWER, "the lower half")
    r = rows.loc[Condition.LOWER]
    if _kappa(r) is None or pd.isna(r["kappa_lost"]):
        return Claim.not_measured(
            LOWER_HALF_COSTS,
            reason="Not measured: the sweep kept no κ for the lower half, the scale this claim is judged on",
            unit=KAPPA_LOST,
            study=CONDITIONS[Condition.LOWER][1],
        )
    return Claim.measured(
        LOWER_HALF_COSTS,
        ours=r["kappa_lost"],
        lo=r["kappa_lost_lo"],
        hi=r["kappa_lost_hi"],
        unit=KAPPA_LOST,
        method=_method(r),
        n_examples=r["n_examples"],
        p=None if pd.isna(r["p_mcnemar"]) else r["p_mcnemar"],
        study=CONDITIONS[Condition.LOWER][1],
        study_unit=ACCURACY_CHANGE,
        accuracy=r,
        reason=f"Masking {names['lower']} ({int(r['n_heads'])} heads) keeps {r['kept']:.0%} of the accuracy, "
        f"{_pct(r['rel_change'])} [{_pct(r['lo'])}, {_pct(r['hi'])}]{_mcnemar(r)}.{_kappa_note(r, 'them')} "
        f"{selection}",
    )


def _keep_claim(rows: pd.DataFrame, by_test: dict, names: dict, selection: str) -> list[Claim]:
    """Keeping only the matching heads of the lower half, against keeping as many random heads of it: the number is
    the change with the half masked but them, minus the mean change with the half masked but random sets of it. The
    sizes policy reads the claim on κ, which the page does not yet compare kept sets on: the claim's row says so, and
    the accuracy comparison is shown under it, not judged."""
    if Condition.LOWER_BUT_MATCHING not in rows.index:
        return [
            _not_measured(
                MATCHING_KEEP_LOWER_HALF, Condition.LOWER_BUT_MATCHING, "the lower half but the term-matching heads"
            )
        ]
    keep = rows.loc[Condition.LOWER_BUT_MATCHING]
    r = by_test.get((Condition.LOWER_BUT_MATCHING, Condition.LOWER_BUT_RANDOM))
    text = (
        f"Masking {names['lower_but_matching']}, they keep {keep['kept']:.0%} [{1 + keep['lo']:.0%}, "
        f"{1 + keep['hi']:.0%}] of the accuracy{_mcnemar(keep)}"
    )
    if Condition.LOWER in rows.index:
        text += f", against {rows.loc['lower', 'kept']:.0%} with the whole lower half masked"
    if r is None:
        return [
            Claim.not_measured(
                MATCHING_KEEP_LOWER_HALF,
                reason=f"{text}; no random sets of as many lower heads were kept to compare with",
                unit=KEEP_VERSUS_RANDOM_KAPPA,
            )
        ]
    text += (
        f"; keeping {r.n_draws} random sets of as many lower heads instead keeps {1 + r.reference_mean:.0%} "
        f"on average ({1 + r.reference_min:.0%} to {1 + r.reference_max:.0%}), {r.n_as_extreme} of them at "
        f"least as much: {_versus_text(r)}"
    )
    on_accuracy = Claim.measured(
        MATCHING_KEEP_LOWER_HALF,
        ours=r.difference,
        lo=r.difference_lo,
        hi=r.difference_hi,
        unit=VERSUS_RANDOM,
        method=VERSUS_METHOD,
        n_examples=keep["n_examples"],
        n_draws=r.n_draws,
        df=r.df,
        reason=f"{text}.{_kappa_note(keep, 'the rest of the lower half')} {selection}",
        claim="On accuracy: the relative accuracy kept with the 5 matching heads minus with as many random lower heads",
        part="accuracy",
    )
    return [
        Claim.not_measured(MATCHING_KEEP_LOWER_HALF, reason=f"{NOT_ON_KAPPA}: {text}", unit=KEEP_VERSUS_RANDOM_KAPPA),
        on_accuracy,
    ]


def claims(table: pd.DataFrame, comparison: pd.DataFrame, selection: str = "") -> list[Claim]:
    """The study's claims about the term-matching heads as rows (:func:`condition_table`, :func:`random_comparison`),
    one per registered claim, each judged by :func:`headlab.judging.verdicts.judge`.

    The table's kappa columns put each masked condition on the chance-corrected scale (beside its accuracy, and in
    the reason for a comparison with random heads) and mark a mask that leaves the model at the floor;
    ``selection`` (:func:`selection_note`) says which pairs chose the heads.
    """
    rows = table.set_index("condition")
    names = _names(table)
    by_test = {(r.tested, r.reference): r for r in comparison.itertuples()}
    return [
        _random_claim(rows, names, selection),
        _matching_claim(rows, by_test, names, selection),
        _lower_claim(rows, names, selection),
        *_keep_claim(rows, by_test, names, selection),
    ]


def mean_ablation_specs(specs: list[MaskSpec]) -> list[MaskSpec]:
    """The masks this page checks with mean-ablation (each removed head's output replaced by its mean over training
    pairs): the unmasked model, the matching heads and the lower half. The random controls stay zeroed (mean-ablating
    every draw would double the page's sweep), so the comparisons with random heads are judged zeroed only; the matching
    heads' own number under mean-ablation is reported beside."""
    return [s for s in specs if s.kind in (Condition.NONE, Condition.MATCHING, Condition.LOWER)]
