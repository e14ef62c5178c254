"""Finding 5, term-matching heads: rank heads by attention between identical query/title terms, then mask them.

The study masked its 5 clearest term-matching heads (layers 2-4 of 12) and lost 52.4% of accuracy, while 5
random heads cost nothing; all heads of layers 0-5 cost 86.5%, and all of them but the 5 matching heads only
18.1%. Here the same masks run on the whole test set, each random mask as many seeded draws, and two controls
the study lacks: 5 random heads of the lower half (the matching heads' own half, where masking costs more),
and the lower half masked except 5 random heads of it. The matching heads' effects are then placed within the
spread of those random draws (an empirical p-value of the head choice). The page's verdict is the study's claims
as rows (:func:`claims`), rendered.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from headlab.core.masking import head_grid
from headlab.core.stats import empirical_p, equivalent, mcnemar, relative_change, undecidable
from headlab.core.sweep import MaskSpec, baseline_correct, baseline_spec, correct_matrix, draw_seed, random_share_specs
from headlab.findings.claims import Claim, render
from headlab.findings.importance import half_pool, half_split
from headlab.findings.layer_dependence import STUDY_MATCHING_LAYERS, study_layers_to_ours
from headlab.findings.roles import SHARED_TERMS, rank_heads, role_scores

# condition -> (how the table names it, the study's relative change or None where the study has no number)
CONDITIONS = {
    "none": ("no mask", 0.0),
    "random": ("{k} random heads", 0.0),
    "random_lower": ("{k} random heads of the lower half", None),
    "matching": ("the {k} term-matching heads", -0.524),
    "lower": ("all heads of the lower half", -0.865),
    "lower_but_matching": ("the lower half but the {k} term-matching heads", -0.181),
    "lower_but_random": ("the lower half but {k} random heads of it", None),
}
# tested condition -> (random condition it is compared with, the side on which it is more extreme)
COMPARISONS = [("matching", "random", "lower"), ("matching", "random_lower", "lower"),
               ("lower_but_matching", "lower_but_random", "higher")]


def _role_key(limit, seed: int, stopwords) -> str:
    settings = {"limit": limit, "seed": seed, "stopwords": sorted(stopwords or ()), "terms": SHARED_TERMS}
    return hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:10]


def role_indices(n_examples: int, limit: int | None, seed: int) -> np.ndarray | None:
    """The examples role scores are computed on: all (None), or a seeded random ``limit`` of them in order."""
    if limit is None or limit >= n_examples:
        return None
    return np.sort(np.random.default_rng(seed).choice(n_examples, int(limit), replace=False))


def head_roles(setup, limit: int | None = None, stopwords=None) -> pd.DataFrame:
    """Every head's role scores (:func:`headlab.findings.roles.role_scores`) on the evaluation split: loaded or computed.

    Notebooks 05-07 all rank heads by these scores, so the first to run saves them in the study's table
    folder as ``head_roles-<key>.csv``, the key naming ``limit`` (examples used, a seeded subset), the seed,
    the stopword list and what a shared term is (:data:`headlab.findings.roles.SHARED_TERMS`); the others load
    that file.
    """
    study = setup.study
    name = f"head_roles-{_role_key(limit, study.seed, stopwords)}"
    path = study.table_dir / f"{name}.csv"
    if path.exists():
        return pd.read_csv(path)
    table = role_scores(setup.attention(role_indices(len(setup.encoded), limit, study.seed)), setup.encoded,
                        setup.tokenizer, stopwords=stopwords)
    setup.save_table(table, name)
    return table


HEADS_TABLE = "term_matching_heads"


def _stopword_key(stopwords) -> str:
    """A short name for a stopword list ("none" without one), saved with the heads it helped choose."""
    return hashlib.sha256(json.dumps(sorted(stopwords)).encode()).hexdigest()[:10] if stopwords else "none"


def matching_heads(setup, k: int = 5, by: str = "match_excess", limit: int | None = None, stopwords=None,
                   choose: bool = False) -> tuple[list[tuple[int, int]], pd.DataFrame]:
    """The ``k`` lower-half heads with the highest ``by`` role score: ``(heads, rows)``.

    Notebook 05 chooses them (``choose=True``) and saves them with the settings that chose them (table
    ``term_matching_heads``); notebooks 06 and 07 read that table and stop if it was made with other settings,
    so every page speaks of the same heads. Where no table exists yet (a notebook run alone), they are chosen here
    the same way and saved.
    """
    settings = {"k": int(k), "by": by, "limit": "all" if limit is None else str(int(limit)),
                "seed": int(setup.study.seed), "stopwords": _stopword_key(stopwords)}
    path = setup.study.table_dir / f"{HEADS_TABLE}.csv"
    if not choose and path.exists():
        saved = pd.read_csv(path, dtype={"limit": str, "stopwords": str})
        theirs = {name: saved[name].iloc[0] for name in settings}
        theirs = {**theirs, "k": int(theirs["k"]), "seed": int(theirs["seed"])}
        if theirs != settings:
            differ = {n: (theirs[n], settings[n]) for n in settings if theirs[n] != settings[n]}
            raise ValueError(f"{path} holds heads chosen with other settings (saved, asked): {differ}; run notebook 05 "
                             "with these settings first, or set them as notebook 05 had them")
        return [(int(l), int(h)) for l, h in zip(saved["layer"], saved["head"])], saved
    layers, _ = head_grid(setup.model)
    heads, rows = rank_heads(head_roles(setup, limit, stopwords), by, among_layers=half_split(layers)[0], k=k)
    rows = rows.assign(**settings)
    setup.save_table(rows, HEADS_TABLE)
    return heads, rows


def placement(roles: pd.DataFrame, matching, layers: int, by: str = "match_excess") -> str:
    """Where the chosen heads sit, against the study's layers 2-4 of 12, and the best heads of any layer (markdown)."""
    scores = roles.set_index(["layer", "head"])[by]
    ours = study_layers_to_ours(STUDY_MATCHING_LAYERS, layers)
    there = sum(layer in ours for layer, _ in matching)
    best = scores.sort_values(ascending=False).head(len(matching))
    in_lower = sum(layer < layers // 2 for layer, _ in best.index)
    heads = ", ".join(f"{l}.{h} ({scores[(l, h)]:.2f})" for l, h in matching)
    return (f"- The {len(matching)} lower-half heads with the highest `{by}` (layer.head, score): {heads}. "
            f"The study's {len(matching)} sat in layers 2–4 of 12, at the relative depth of our layers "
            f"{', '.join(map(str, ours))}: {there} of ours are there.\n"
            f"- Over all layers the top {len(matching)} by the same score are "
            f"{', '.join(f'{l}.{h} ({v:.2f})' for (l, h), v in best.items())}; {in_lower} of them in the lower half.")


def labels(k: int) -> dict[str, str]:
    """Condition -> its name in tables and charts, for ``k`` matching heads."""
    return {condition: text.format(k=k) for condition, (text, _) in CONDITIONS.items()}


def random_lower_sets(layers: int, heads: int, k: int, draws: int, seed: int) -> list[tuple[tuple[int, int], ...]]:
    """``draws`` seeded sets of ``k`` heads of the lower half: the control sets of notebooks 05 and 07.

    Drawn by :func:`headlab.core.sweep.random_share_specs` with the seed ``seed + 1`` (so independent of the
    all-heads draws); draw d is the same set whatever ``draws`` is.
    """
    pool = half_pool(layers, heads, "lower")
    specs = random_share_specs(layers, heads, [k / (layers * heads)], draws, seed + 1, pool=pool, kind="random_lower")
    return [spec.dropped for spec in specs]


def term_matching_specs(layers: int, heads: int, matching, draws: int, keep_draws: int, seed: int) -> list[MaskSpec]:
    """The masks of the study's table and of the controls; each mask's ``kind`` is its condition.

    ``random``: ``draws`` sets of k heads from all heads; ``random_lower``: ``draws`` sets of k heads of
    the lower half; ``lower_but_random``: the lower half but each of the first ``keep_draws`` of those
    sets (so kept and removed random sets are the same heads; see :func:`random_lower_sets`). k = len(matching).
    """
    matching = sorted((int(l), int(h)) for l, h in matching)
    if not matching:
        raise ValueError("matching must name at least one head")
    if draws < 1 or keep_draws < 1:
        raise ValueError(f"draws and keep_draws must be positive, got {draws} and {keep_draws}")
    k, lower = len(matching), half_pool(layers, heads, "lower")
    lower_sets = random_lower_sets(layers, heads, k, max(draws, keep_draws), seed)
    return [baseline_spec(), *random_share_specs(layers, heads, [k / (layers * heads)], draws, seed, kind="random"),
            *[MaskSpec(f"random_lower-d{d}", s, "random_lower", {"draw": d}) for d, s in enumerate(lower_sets[:draws])],
            MaskSpec("matching", tuple(matching), "matching"),
            MaskSpec("lower", tuple(lower), "lower"),
            MaskSpec("lower_but_matching", tuple(h for h in lower if h not in matching), "lower_but_matching"),
            *[MaskSpec(f"lower_but_random-d{d}", tuple(h for h in lower if h not in s), "lower_but_random",
                       {"draw": d}) for d, s in enumerate(lower_sets[:keep_draws])]]


def draw_table(per_example: pd.DataFrame, plan: pd.DataFrame, k: int) -> pd.DataFrame:
    """One row per mask: condition, its label, accuracy and relative change (each random draw on its own)."""
    correct = correct_matrix(per_example)
    base = baseline_correct(per_example).astype(np.float64)
    names = labels(k)
    rows = plan[plan["kind"].isin(list(CONDITIONS))][["mask_id", "kind", "n_dropped"]]
    accuracy = correct.loc[rows["mask_id"]].to_numpy(dtype=np.float64).mean(axis=1)
    return pd.DataFrame({"mask_id": rows["mask_id"].to_numpy(), "condition": rows["kind"].to_numpy(),
                         "label": [names[c] for c in rows["kind"]], "n_dropped": rows["n_dropped"].to_numpy(),
                         "accuracy": accuracy, "rel_change": accuracy / base.mean() - 1.0})


def condition_table(per_example: pd.DataFrame, plan: pd.DataFrame, k: int, n_boot: int = 2000,
                    seed: int = 0) -> pd.DataFrame:
    """The study's table, ours beside it: one row per condition, against the sweep's unmasked row.

    ``rel_change`` of a random condition is that of the accuracy averaged over its draws; ``lo``/``hi`` is
    its 95% two-stage bootstrap interval (draws, then test pairs), ``lo90``/``hi90`` the 90% one for
    equivalence; ``draw_lo``/``draw_hi`` the 2.5-97.5% range of the single draws (which heads were drawn).
    ``p_mcnemar`` (exact, against the unmasked model) is given for single masks. ``kept`` is the accuracy
    kept, 1 + rel_change; ``study`` the study's number.
    """
    base = baseline_correct(per_example).astype(np.float64)
    correct = correct_matrix(per_example)
    names = labels(k)
    rows = []
    for condition, (_, study) in CONDITIONS.items():
        masks = plan[plan["kind"] == condition]
        if masks.empty:
            continue
        values = correct.loc[masks["mask_id"]].to_numpy(dtype=np.float64)
        per_draw = values.mean(axis=1) / base.mean() - 1.0
        effect = relative_change(values, base, n_boot=n_boot, seed=seed, draw_seed=draw_seed(seed, condition, 0.0))
        rows.append({"condition": condition, "label": names[condition], "n_heads": int(masks["n_dropped"].iloc[0]),
                     "accuracy": float(values.mean()), **effect, "kept": 1.0 + effect["rel_change"],
                     "draw_lo": float(np.quantile(per_draw, 0.025)), "draw_hi": float(np.quantile(per_draw, 0.975)),
                     "p_mcnemar": mcnemar(values[0], base) if len(values) == 1 else np.nan, "study": study})
    return pd.DataFrame(rows)


def random_comparison(per_example: pd.DataFrame, plan: pd.DataFrame, k: int) -> pd.DataFrame:
    """Do the matching heads matter more than random heads? An empirical p-value per comparison.

    For each tested mask and its random condition: the share of random draws at least as extreme (as low a
    change when masking the matching heads, as high when keeping them), and the one-sided empirical p-value
    (1 + that count) / (1 + draws). It measures the choice of heads on this test set; the example
    uncertainty is in :func:`condition_table`.
    """
    draws = draw_table(per_example, plan, k)
    names = labels(k)
    rows = []
    for tested, reference, side in COMPARISONS:
        value = draws[draws["condition"] == tested]["rel_change"]
        pool = draws[draws["condition"] == reference]["rel_change"].to_numpy()
        if value.empty or not len(pool):
            continue
        value = float(value.iloc[0])
        extreme = int(np.sum(pool <= value) if side == "lower" else np.sum(pool >= value))
        rows.append({"tested": tested, "tested_label": names[tested], "reference": reference,
                     "reference_label": names[reference], "side": side, "tested_change": value,
                     "reference_mean": float(pool.mean()), "reference_min": float(pool.min()),
                     "reference_max": float(pool.max()), "n_draws": len(pool), "n_as_extreme": extreme,
                     "p_empirical": empirical_p(extreme, len(pool))})
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _change(row, margin: float) -> str:
    """What a relative change shows: a "loss" or a "gain" (the 95% interval below or above 0), "none" (the 90%
    interval within ±``margin``: equivalence), else "unclear"."""
    if row["hi"] < 0:
        return "loss"
    if row["lo"] > 0:
        return "gain"
    return "none" if equivalent(row["lo90"], row["hi90"], margin) else "unclear"


def _state(row, margin: float) -> str:
    return {"loss": "a loss distinguishable from zero", "gain": "a gain distinguishable from zero",
            "none": f"**no change**: the 90% interval lies within ±{margin:.0%} (equivalence)",
            "unclear": f"no change distinguishable from zero, but not shown to be none either (the 90% interval "
                       f"[{_pct(row['lo90'])}, {_pct(row['hi90'])}] reaches past ±{margin:.0%})"}[_change(row, margin)]


FINDING = "05 term matching"
UNIT = "relative change of accuracy"
NAN = float("nan")
# the verdict on a claim of no change, and on a claim of a loss, for each thing a change can show (:func:`_change`)
NO_CHANGE = {"none": "holds", "loss": "does not hold", "gain": "does not hold", "unclear": "cannot tell"}
A_LOSS = {"loss": "holds", "gain": "opposite", "none": "does not hold", "unclear": "cannot tell"}


def _claim(claim_id: str, claim: str, study, row, n_draws: int, p, verdict: str, reason: str) -> Claim:
    """A claim whose number is one condition's relative change (``row``), or not measured (``row`` None)."""
    if row is None:
        return Claim(claim_id, FINDING, claim, study, NAN, NAN, NAN, UNIT, 0, 0, None, verdict, reason)
    return Claim(claim_id, FINDING, claim, study, float(row["rel_change"]), float(row["lo"]), float(row["hi"]), UNIT,
                 int(row["n_examples"]), int(n_draws), None if p is None or pd.isna(p) else float(p), verdict, reason)


def _names(table: pd.DataFrame) -> dict[str, str]:
    """Condition -> its name as the table gives it (with our k); a condition the table lacks is named with "k"."""
    return {**labels("k"), **dict(zip(table["condition"], table["label"]))}


def _condition_claim(claim_id: str, claim: str, rows: pd.DataFrame, condition: str, verdicts: dict,
                     margin: float) -> Claim:
    """One column of the study's table: our change of the same mask, judged by ``verdicts`` (:data:`NO_CHANGE` or
    :data:`A_LOSS`) on what the change shows (:func:`_change`), beside the study's number."""
    study = CONDITIONS[condition][1]
    if condition not in rows.index:
        return _claim(claim_id, claim, study, None, 0, None, "cannot tell", "Not measured: no such mask in the sweep.")
    row = rows.loc[condition]
    contains = "contains" if row["lo"] <= study <= row["hi"] else "excludes"
    spread = (f" (two-stage interval over {row['n_draws']} draws and the pairs; single draws "
              f"{_pct(row['draw_lo'])} to {_pct(row['draw_hi'])})" if row["n_draws"] > 1
              else f", McNemar p = {row['p_mcnemar']:.2g}")
    return _claim(claim_id, claim, study, row, row["n_draws"], row["p_mcnemar"], verdicts[_change(row, margin)],
                  f"Ours: {_state(row, margin)}{spread}; our interval {contains} the study's number.")


def _far_more_claim(rows: pd.DataFrame, by_test: dict, names: dict, alpha: float) -> Claim:
    """Do the matching heads matter far more than random heads? Masking them must cost accuracy (McNemar p <
    ``alpha``), more than every random draw of their half, and at least twice the mean loss of those draws, with an
    empirical p-value below ``alpha`` (which needs at least 1/alpha - 1 draws). The number is their change."""
    claim_id = "term_matching.matching_far_more_than_random"
    claim = f"Masking {names['matching']} costs far more accuracy than masking random heads"
    if "matching" not in rows.index:
        return _claim(claim_id, claim, None, None, 0, None, "cannot tell", "Not measured: no mask of the "
                      "term-matching heads in the sweep.")
    m = rows.loc["matching"]
    parts = [f"{r.n_as_extreme} of {r.n_draws} draws of *{r.reference_label}* cost as much or more (their mean "
             f"{_pct(r.reference_mean)}; empirical p = {r.p_empirical:.2g})"
             for r in (by_test.get(("matching", ref)) for ref in ("random", "random_lower")) if r is not None]
    strict = by_test.get(("matching", "random_lower")) or by_test.get(("matching", "random"))
    hurts = m["rel_change"] < 0 and m["p_mcnemar"] < alpha
    if strict is None:
        state, why = "cannot tell", "Not tested: no random draws to compare with."
    elif not hurts:
        state, why = "does not hold", ("Masking them costs no accuracy distinguishable from zero (McNemar p ≥ "
                                       f"{alpha}).")
    elif strict.p_empirical >= alpha:
        state, why = (("cannot tell", undecidable(strict.n_draws, alpha) + " (raise DRAWS).")
                      if undecidable(strict.n_draws, alpha) else
                      ("does not hold", "Random heads cost as much often enough."))
    elif strict.n_as_extreme == 0 and m["rel_change"] <= 2 * strict.reference_mean:
        state, why = "holds", "The term-matching heads matter far more than random heads here."
    else:
        state, why = "does not hold", "They matter more than random heads, but not far more."
    return _claim(claim_id, claim, None, m, 0 if strict is None else strict.n_draws,
                  None if strict is None else strict.p_empirical, state,
                  f"{why} Shown: their change, McNemar p = {m['p_mcnemar']:.2g} against the unmasked model; "
                  + "; ".join(parts) + f". Far more means: a loss (McNemar p < {alpha}), more than every random draw "
                  f"of their half and at least twice those draws' mean loss, with an empirical p below {alpha}.")


def _keep_claim(rows: pd.DataFrame, by_test: dict, names: dict, alpha: float, margin: float) -> Claim:
    """Keeping only the matching heads of the lower half: do they keep more than as many random heads of it would?
    Holds when the empirical p-value against the kept random sets is below ``alpha``; cannot be told when there
    are too few sets for p to get there. The number is the change with the half masked but them."""
    claim_id, study = "term_matching.matching_keep_lower_half", CONDITIONS["lower_but_matching"][1]
    claim = (f"Keeping only {names['matching']} of the lower half keeps much of its accuracy, more than as many "
             "random heads of it would")
    if "lower_but_matching" not in rows.index:
        return _claim(claim_id, claim, study, None, 0, None, "cannot tell", "Not measured: no mask of the lower half "
                      "but the term-matching heads in the sweep.")
    keep = rows.loc["lower_but_matching"]
    r = by_test.get(("lower_but_matching", "lower_but_random"))
    if r is None:
        state, why = "cannot tell", "Not tested: no random sets of lower heads kept to compare with."
    elif undecidable(r.n_draws, alpha):
        state, why = "cannot tell", f"{undecidable(r.n_draws, alpha)}, raise KEEP_DRAWS."
    elif r.p_empirical < alpha:
        state, why = "holds", f"Few random sets of as many lower heads keep as much (empirical p < {alpha})."
    else:
        state, why = "does not hold", "Random sets of as many lower heads keep as much often enough."
    text = f"{why} Here they keep {keep['kept']:.0%} [{1 + keep['lo']:.0%}, {1 + keep['hi']:.0%}] of the accuracy"
    if "lower" in rows.index:
        text += f", against {rows.loc['lower', 'kept']:.0%} with the whole lower half masked"
    if r is not None:
        text += (f"; keeping {r.n_draws} random sets of as many lower heads instead keeps {1 + r.reference_mean:.0%} "
                 f"on average ({1 + r.reference_min:.0%} to {1 + r.reference_max:.0%}), {r.n_as_extreme} of them at "
                 f"least as much (empirical p = {r.p_empirical:.2g})")
    contains = "contains" if keep["lo"] <= study <= keep["hi"] else "excludes"
    return _claim(claim_id, claim, study, keep, 0 if r is None else r.n_draws, None if r is None else r.p_empirical,
                  state, f"{text}. The change: {_state(keep, margin)}; our interval {contains} the study's number.")


def claims(table: pd.DataFrame, comparison: pd.DataFrame, alpha: float = 0.05, margin: float = 0.02) -> list[Claim]:
    """The study's claims about the term-matching heads as rows (:func:`condition_table`, :func:`random_comparison`).

    The study's "+0%" for random heads is a claim of no change, tested as equivalence within ±``margin``; its
    losses (the matching heads, the whole lower half) hold when the 95% interval lies below 0. Whether the matching
    heads matter *far* more than random heads, and whether keeping only them keeps more than random heads of their
    half would, are judged against the random draws (empirical p-values below ``alpha``).
    """
    rows = table.set_index("condition")
    names = _names(table)
    by_test = {(r.tested, r.reference): r for r in comparison.itertuples()}
    return [
        _condition_claim("term_matching.random_no_change", f"Masking {names['random']} changes no accuracy", rows,
                         "random", NO_CHANGE, margin),
        _condition_claim("term_matching.matching_costs", f"Masking {names['matching']} costs accuracy", rows,
                         "matching", A_LOSS, margin),
        _condition_claim("term_matching.lower_half_costs", f"Masking {names['lower']} costs accuracy", rows, "lower",
                         A_LOSS, margin),
        _far_more_claim(rows, by_test, names, alpha),
        _keep_claim(rows, by_test, names, alpha, margin),
    ]


def verdict(table: pd.DataFrame, comparison: pd.DataFrame, alpha: float = 0.05, margin: float = 0.02) -> str:
    """The study's table against ours, and whether the matching heads matter far more than random ones (markdown),
    rendered from :func:`claims`."""
    return render(claims(table, comparison, alpha, margin))
