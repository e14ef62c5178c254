"""Finding 7, the high [CLS] head: the upper head that hurts most when masked, and what its [CLS] row reads.

The study found one high head (layer 10 of 12) whose masking hurt, whose ``[CLS]`` attention concentrated on
the terms query and title share, and whose attention spread over many more terms once the 5 low term-matching
heads were masked: the high head reads the low heads' matching features and hands them to the classifier.
Here: the test pairs are split in two halves (:func:`split_halves`). The head is chosen on one, from each
head's per-example results masked alone (notebook 02's sweep, or computed the same way); everything quoted about
it is measured on the other: its effect on accuracy, its concentration on shared terms against the share a
uniform row would give, and the spread, a paired before/after change of the row's entropy placed among the
same change with random lower heads masked instead.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.attention import attention_maps, token_roles
from headlab.core.masking import head_grid
from headlab.core.stats import (
    bootstrap_weights,
    by_interval,
    empirical_p,
    empirical_p_floor,
    mcnemar,
    relative_change,
    undecidable,
)
from headlab.core.sweep import (
    SweepError,
    baseline_correct,
    baseline_spec,
    correct_matrix,
    load_sweep,
    single_head_specs,
)
from headlab.findings.attention_compare import token_labels
from headlab.findings.importance import half_split
from headlab.findings.layer_dependence import STUDY_HIGH_HEAD_LAYER, STUDY_LAYERS, study_layer_to_ours
from headlab.findings.roles import cls_profile, content_positions, paired_delta, shared_terms
from headlab.findings.segmentation import group_split

GRID_SWEEP = "layer_dependence"  # the name of notebook 02's sweep, which holds every single-head mask
SPREAD_METRICS = ["entropy", "shared_share", "content_mass"]
SLIGHT = 1.2  # a spread that multiplies the effectively attended tokens by less than this is called slight


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(select, estimate)``: a seeded split of the ``n`` evaluation pairs into two halves (sorted indices).

    The head is chosen on ``select`` and everything quoted about it is measured on ``estimate``: the worst
    of many heads on some pairs looks worse there by chance too (winner's curse), so its size is measured on
    pairs the choice never saw, as notebook 03 scores its best head (:func:`headlab.findings.segmentation.group_split`).
    """
    estimate = group_split(np.arange(n), 0.5, seed)
    return np.flatnonzero(~estimate), np.flatnonzero(estimate)


def single_head_correct(setup, progress: bool = True) -> tuple[pd.DataFrame, np.ndarray, str]:
    """``(correct, base_correct, source)``: per-example correctness of each head masked alone, and unmasked.

    ``correct`` has one row per head (index layer, head) and one column per evaluation pair; the baseline
    comes from the same sweep, so both sides ran at the same precision. Read from notebook 02's sweep when a
    finished one in the study's sweep folder holds the unmasked and every single-head mask (its plan holds
    other masks too, so it is found by name rather than resumed); else the same masks run here with the same
    sweep code (resumable, folder ``single_head``), one pass over the evaluation set per mask.
    """
    study = setup.study
    layers, heads = head_grid(setup.model)
    specs = [baseline_spec(), *single_head_specs(layers, heads)]
    wanted = {s.mask_id for s in specs}
    for folder in sorted((study.table_dir / "sweeps").glob(f"{GRID_SWEEP}-*")):
        plan = folder / "plan.csv"
        if plan.exists() and wanted <= set(pd.read_csv(plan, keep_default_na=False)["mask_id"]):
            try:
                return (*_correct_matrix(load_sweep(folder), specs), f"notebook 02's sweep ({folder.name})")
            except SweepError:  # notebook 02 has not finished it
                continue
    per_example = setup.sweep(specs, "single_head", progress=progress)
    source = f"computed ({len(specs) - 1} single-head masks and the unmasked model)"
    return (*_correct_matrix(per_example, specs), source)


def _correct_matrix(per_example: pd.DataFrame, specs) -> tuple[pd.DataFrame, np.ndarray]:
    """The single-head rows of a sweep as a (layer, head) x example 0/1 table, and the unmasked row."""
    heads = [s for s in specs if s.kind == "head"]
    correct = correct_matrix(per_example).loc[[s.mask_id for s in heads]]
    correct.index = pd.MultiIndex.from_tuples([s.dropped[0] for s in heads], names=["layer", "head"])
    return correct, baseline_correct(per_example)


def selection_grid(correct: pd.DataFrame, base_correct: np.ndarray, select) -> pd.DataFrame:
    """Per head, accuracy and relative change when masked alone, on the pairs ``select`` only (what the choice sees)."""
    base = np.asarray(base_correct, dtype=np.float64)[select]
    accuracy = correct.iloc[:, select].to_numpy(dtype=np.float64).mean(axis=1)
    return pd.DataFrame({"layer": correct.index.get_level_values("layer"),
                         "head": correct.index.get_level_values("head"), "accuracy": accuracy,
                         "rel_change": accuracy / base.mean() - 1.0, "n_examples": len(base)})


def focus_head(grid: pd.DataFrame, layers: int) -> pd.Series:
    """The grid row of the upper-half head whose masking costs most accuracy (lowest ``rel_change``)."""
    upper = grid[grid["layer"].isin(half_split(layers)[1]) & grid["rel_change"].notna()]
    if upper.empty:
        raise ValueError("no upper-half head has a single-head result in the grid")
    return upper.loc[upper["rel_change"].idxmin()]


def held_out_effect(correct: pd.DataFrame, base_correct: np.ndarray, layer: int, head: int, estimate,
                    n_boot: int = 2000, seed: int = 0) -> dict:
    """One head's effect on the pairs ``estimate`` only: :func:`headlab.core.stats.relative_change` and McNemar p."""
    masked = correct.loc[(layer, head)].to_numpy()[estimate]
    base = np.asarray(base_correct)[estimate]
    return {**relative_change(masked, base, n_boot=n_boot, seed=seed), "p_mcnemar": mcnemar(masked, base)}


def focus_verdict(row: pd.Series, effect: dict, layers: int, alpha: float = 0.05) -> str:
    """Where the chosen head costs most, what masking it does on held-out pairs, and the study's layer (markdown).

    ``row`` is the head's :func:`selection_grid` row, ``effect`` its :func:`held_out_effect`. Only one head
    is tested on the held-out pairs, so its McNemar p needs no correction for the many heads it was chosen from.
    """
    ours = study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)
    place = f"the relative depth of our layer {ours}" + (", this head's layer" if int(row["layer"]) == ours else "")
    state = by_interval(effect["lo"], effect["hi"], "**masking it helps**", "**masking it hurts**",
                        "**no change distinguishable from zero**")
    test = "differ" if effect["p_mcnemar"] < alpha else "do not differ"
    return (f"- Chosen on {int(row['n_examples'])} pairs: the upper-half head whose masking costs most there is "
            f"**{int(row['layer'])}.{int(row['head'])}** ({row['rel_change']:+.1%} on those pairs, which flatters "
            f"it: the worst of many heads is worst partly by chance). Measured on the other {effect['n_examples']} "
            f"pairs: masked alone, accuracy changes by {effect['rel_change']:+.1%} [{effect['lo']:+.1%}, "
            f"{effect['hi']:+.1%}]: {state} (exact McNemar p = {effect['p_mcnemar']:.2g}: masked and unmasked "
            f"{test} beyond chance at {alpha:g}). The study's head sat in layer {STUDY_HIGH_HEAD_LAYER} of "
            f"{STUDY_LAYERS}: {place}.")


def concentration(profile: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per head: how much more of its [CLS] row lands on shared terms than a uniform row would put there.

    Over the examples that share a term: mean ``shared_share`` and ``chance``, their difference ``excess``
    with a 95% bootstrap interval (examples resampled once for all heads), ``ratio`` of the means,
    ``above_chance`` (share of examples where the head beats chance) and a two-sided sign-test p-value.
    """
    rows = profile.dropna(subset=["shared_share"])
    share = rows.pivot(index="example", columns=["layer", "head"], values="shared_share")
    chance = rows.pivot(index="example", columns=["layer", "head"], values="chance")[share.columns]
    excess = (share - chance).to_numpy()
    boots = bootstrap_weights(len(excess), n_boot, seed) @ excess / len(excess)
    wins, losses = (excess > 0).sum(axis=0), (excess < 0).sum(axis=0)
    table = pd.DataFrame({"layer": share.columns.get_level_values(0), "head": share.columns.get_level_values(1),
                          "shared_share": share.mean().to_numpy(), "chance": chance.mean().to_numpy(),
                          "excess": excess.mean(axis=0), "lo": np.quantile(boots, 0.025, axis=0),
                          "hi": np.quantile(boots, 0.975, axis=0), "above_chance": (excess > 0).mean(axis=0),
                          "p_sign": [sps.binomtest(int(w), int(w + l)).pvalue if w + l else 1.0
                                     for w, l in zip(wins, losses)], "n_examples": len(excess)})
    table["ratio"] = table["shared_share"] / table["chance"]
    return table


def _one_head(profile: pd.DataFrame, layer: int, head: int) -> pd.DataFrame:
    return profile[(profile["layer"] == layer) & (profile["head"] == head)]


def spread(before: pd.DataFrame, after: pd.DataFrame, layer: int, head: int, n_boot: int = 2000,
           seed: int = 0) -> pd.DataFrame:
    """Paired before/after change of one head's [CLS] row: entropy, share on shared terms, content mass.

    ``before`` and ``after`` are :func:`headlab.findings.roles.cls_profile` tables of the same examples without and with
    a mask (all heads or just this one); one row per metric with the mean change and its 95% paired bootstrap
    interval.
    """
    before, after = _one_head(before, layer, head), _one_head(after, layer, head)
    rows = [paired_delta(before, after, metric, n_boot=n_boot, seed=seed).query("scope == 'head'")
            for metric in SPREAD_METRICS]
    return pd.concat(rows, ignore_index=True).drop(columns="scope")


def spread_under_masks(setup, layer: int, head: int, head_sets, before: pd.DataFrame, stopwords=None) -> pd.DataFrame:
    """Mean change of the head's [CLS] entropy and shared-term share with each set of heads masked.

    ``before`` is the unmasked :func:`headlab.findings.roles.cls_profile` of the same examples (at least this head).
    One row per head set: draw, heads ("l.h;l.h"), entropy_delta, shared_share_delta.
    """
    keys = ["example", "layer", "head"]
    base = _one_head(before, layer, head).set_index(keys)
    layers, heads = head_grid(setup.model)
    examples = base.index.get_level_values("example").unique()
    rows = []
    for draw, chosen in enumerate(head_sets):
        after = cls_profile(setup.attention(examples, drop=chosen), setup.encoded, setup.tokenizer, heads=[(layer, head)],
                            stopwords=stopwords).set_index(keys)
        change = after[["entropy", "shared_share"]] - base[["entropy", "shared_share"]]
        rows.append({"draw": draw, "heads": ";".join(f"{l}.{h}" for l, h in chosen),
                     "entropy_delta": float(change["entropy"].mean()),
                     "shared_share_delta": float(change["shared_share"].mean())})
    return pd.DataFrame(rows)


def cls_rows(runs: dict, encoded, tokenizer, examples, layer: int, head: int, batch_size: int = 32, device="cpu",
             stopwords=None) -> pd.DataFrame:
    """One head's [CLS] row on each of ``examples``, renormalised over the non-special tokens, per run.

    ``runs`` maps a name to ``(model, mask)`` as in :func:`headlab.findings.attention_compare.compare_maps`. One row
    per example and non-special token: example, position, token (position-prefixed label), shared (a term
    the other sentence shares), and one column per run: the share of that run's [CLS] row on the token,
    as :func:`headlab.findings.roles.cls_attention_on_shared` measures it.
    """
    examples = [int(e) for e in examples]
    pad_id = tokenizer.pad_token_id or 0
    weights = {}
    for name, (model, mask) in runs.items():
        for example, maps in attention_maps(model, encoded, examples, mask, batch_size, device, pad_id):
            weights[name, example] = maps[layer, head, 0].astype(np.float64)
    frames = []
    for example in examples:
        tokens = token_roles(tokenizer, encoded.input_ids[example])
        content = content_positions(tokens, tokenizer)
        shared = {i for pair in shared_terms(tokens, tokenizer, stopwords) for i in pair}
        labels = token_labels(tokens.tokens)
        frame = pd.DataFrame({"example": example, "position": content, "token": [labels[i] for i in content],
                              "shared": [i in shared for i in content]})
        for name in runs:
            row = weights[name, example][content]
            frame[name] = np.round(row / row.sum(), 4)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _interval(r, fmt: str = "+.3f") -> str:
    return f"{r['delta']:{fmt}} [{r['lo']:{fmt}}, {r['hi']:{fmt}}]"


def concentration_verdict(table: pd.DataFrame, layer: int, head: int, alpha: float = 0.05) -> str:
    """Does the head's [CLS] row concentrate on shared terms? (markdown)

    ``table`` is the :func:`concentration` table of all heads on the held-out pairs (those the head was not
    chosen on, as the text says), so the answer also says where the head ranks.
    A difference from chance needs the bootstrap interval of the mean excess and the sign test (p < ``alpha``)
    to agree; where only the sign test does, the answer says so.
    """
    row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
    rank = int((table["excess"] > row["excess"]).sum()) + 1
    sign = row["p_sign"] < alpha
    if row["lo"] > 0 and sign and row["above_chance"] > 0.5:
        state = "**it concentrates on the shared terms beyond chance**"
    elif row["hi"] < 0 and sign and row["above_chance"] < 0.5:
        state = "**it puts less on the shared terms than chance would**"
    elif sign:
        side = "above" if row["above_chance"] > 0.5 else "below"
        state = (f"**no consistent concentration**: the mean excess is not distinguishable from zero, though the "
                 f"head is {side} chance on most pairs")
    else:
        state = "**no concentration on the shared terms distinguishable from chance**"
    return (f"- *Its [CLS] attention concentrates on the terms query and title share* (study). Head {layer}.{head}, "
            f"over {int(row['n_examples'])} held-out pairs that share a term (pairs it was not chosen on): "
            f"{row['shared_share']:.1%} of its [CLS] attention on non-special tokens lands on shared terms, against "
            f"{row['chance']:.1%} for a uniform row "
            f"(excess {row['excess'] * 100:+.1f} points [{row['lo'] * 100:+.1f}, {row['hi'] * 100:+.1f}], "
            f"{row['ratio']:.2f}× chance; above chance on {row['above_chance']:.0%} of pairs, sign test "
            f"p = {row['p_sign']:.2g}): {state}. It ranks {rank} of {len(table)} heads by that excess.")


def spread_verdict(change: pd.DataFrame, control: pd.DataFrame | None, layer: int, head: int, k: int,
                   alpha: float = 0.05) -> str:
    """Does the head's [CLS] attention spread out when the matching heads are masked? (markdown)

    ``change`` comes from :func:`spread`; ``control`` from :func:`spread_under_masks` with random lower
    heads; both on the held-out pairs (those the head was not chosen on, as the text says). Spreading out
    means the entropy rises with an interval above zero; exp(entropy change) is the factor on the number of
    effectively attended tokens (a spread by a factor under 1.2 is called slight). The empirical p-value says
    how often k random lower heads raise the entropy as much; it is never below 1 / (1 + draws), so where that
    floor is ``alpha`` or more (fewer than 20 draws at 5%) the text says the comparison cannot be decided
    rather than report a result that could never have been significant.
    """
    rows = change.set_index("metric")
    e, s = rows.loc["entropy"], rows.loc["shared_share"]
    factor, factor_lo, factor_hi = np.exp([e["delta"], e["lo"], e["hi"]])
    if e["lo"] > 0:
        state = "**it spreads out**" if factor >= SLIGHT else "**it spreads out, but only slightly**"
    elif e["hi"] < 0:
        state = "**it concentrates further** (the opposite of the study)"
    else:
        state = "**no change of spread distinguishable from zero**"
    shared = ("falls, as the study's reading implies" if s["hi"] < 0 else
              "rises: the row moves towards the shared terms, not away from them" if s["lo"] > 0 else
              "does not change distinguishably")
    lines = [f"- *With the {k} matching heads masked, its [CLS] attention spreads over many more terms* (study). "
             f"Head {layer}.{head}, paired over {int(e['n_examples'])} held-out pairs: entropy {e['before']:.2f} → "
             f"{e['after']:.2f} nats ({_interval(e)}), so the effectively attended tokens grow by a factor "
             f"{factor:.2f} [{factor_lo:.2f}, {factor_hi:.2f}]: {state}. Its share on shared terms "
             f"{s['before']:.1%} → {s['after']:.1%} ({s['delta'] * 100:+.1f} points [{s['lo'] * 100:+.1f}, "
             f"{s['hi'] * 100:+.1f}]) {shared}."]
    if control is not None and len(control):
        values = control["entropy_delta"].to_numpy()
        extreme = int(np.sum(values >= e["delta"]))
        p = empirical_p(extreme, len(values))
        floor = empirical_p_floor(len(values))
        if p < alpha:
            answer = "the matching heads shape this head's [CLS] row more than random lower heads do"
        elif floor < alpha:
            answer = "random lower heads shape this head's [CLS] row as much as the matching heads"
        else:
            answer = undecidable(len(values), alpha) + " (raise CONTROL_DRAWS)"
        lines.append(f"- Masking {k} random heads of the lower half instead changes its entropy by "
                     f"{values.mean():+.3f} on average ({values.min():+.3f} to {values.max():+.3f} over "
                     f"{len(values)} draws); {extreme} of {len(values)} change it by {e['delta']:+.3f} or more "
                     f"(one-sided, in the study's direction; empirical p = {p:.2g}): {answer}.")
    return "\n".join(lines)
