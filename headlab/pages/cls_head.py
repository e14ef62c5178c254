"""Finding 7, the high [CLS] head: the upper head that hurts most when masked, and what its [CLS] row reads.

The study found one high head (layer 10 of 12) whose masking hurt, whose ``[CLS]`` attention concentrated on
the terms query and title share, and whose attention spread over many more terms once the 5 low term-matching
heads were masked: the high head reads the low heads' matching features and hands them to the classifier.
Here: the test pairs are split in two halves (:func:`split_halves`, the halves notebook 05 chooses and measures its
heads on). The head is chosen on one, from each
head's per-example results masked alone (notebook 02's sweep, or computed the same way); everything quoted about
it is measured on the other: its effect on accuracy, its concentration on shared terms against the share a
uniform row would give, and the spread, a paired before/after change of the row's entropy placed among the
same change with random lower heads masked instead. Each of the study's claims is a
:class:`headlab.judging.verdicts.Claim` row (:func:`focus_claims`, :func:`concentration_claims`,
:func:`spread_claims`), judged by :func:`headlab.judging.verdicts.judge` from the registered claim, which the page
renders as its verdict and saves. This page's ``cls_head.masking_hurts`` is the book's one verdict on the study's
"so does one high head in layer 10", by one selection rule (:func:`focus_head` on one half, measured on the other).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from headlab.core.attention import attention_maps, cls_attention_rows, cls_value_weighted
from headlab.core.masking import head_grid
from headlab.core.stats import N_BOOT, bootstrap_weights, mcnemar, relative_change, versus_random
from headlab.core.sweep import (
    MaskSpec,
    kappa_columns,
)
from headlab.inputs.pair import read_pair
from headlab.judging.units import ACCURACY_CHANGE, CLS_CONCENTRATION, CLS_SPREAD, CLS_SPREAD_VERSUS_RANDOM
from headlab.judging.verdicts import Claim, Kind, StudyClaim, judge, reach, with_mean_ablation
from headlab.lab.lab import Lab
from headlab.measures.attention_compare import token_labels
from headlab.measures.grids import SingleHeads, focus_head, selection_grid, single_head_correct, single_heads
from headlab.measures.held_out import split_halves
from headlab.measures.roles import cls_attention_on_shared, paired_delta
from headlab.measures.study_layers import STUDY_HIGH_HEAD_LAYER, STUDY_LAYERS, study_layer_to_ours

SPREAD_METRICS = ["entropy", "shared_share", "content_mass"]
MASK_METHOD = "paired bootstrap over the held-out test pairs (the half the head was not chosen on)"
SPREAD_METHOD = "paired bootstrap over the held-out test pairs"
CONTROL_METHOD = (
    "matching heads minus the mean of the random sets, t interval on a two-stage bootstrap over sets and held-out "
    "pairs (Welch–Satterthwaite degrees of freedom)"
)


def held_out_effect(
    correct: pd.DataFrame,
    base_correct: np.ndarray,
    layer: int,
    head: int,
    estimate,
    n_boot: int = N_BOOT,
    seed: int = 0,
    grades=None,
) -> dict:
    """One head's effect on the pairs ``estimate`` only: :func:`headlab.core.stats.relative_change` (a paired bootstrap
    over those pairs), McNemar p, and the masked and unmasked accuracies there. ``grades`` (:attr:`SingleHeads.grades`)
    adds the chance-corrected scale on the same pairs and resamples (:func:`headlab.core.sweep.kappa_columns`:
    kappa_lost with its interval, at_floor, floor_reason)."""
    masked = correct.loc[(layer, head)].to_numpy()[estimate]
    base = np.asarray(base_correct)[estimate]
    kappa = {}
    if grades is not None:
        predicted, base_predicted, gold = grades
        kappa = kappa_columns(
            predicted.loc[(layer, head)].to_numpy()[estimate],
            np.asarray(base_predicted)[estimate],
            np.asarray(gold)[estimate],
            n_boot,
            seed,
        )
    return {
        **relative_change(masked, base, n_boot=n_boot, seed=seed).columns(),
        "p_mcnemar": mcnemar(masked, base),
        "accuracy": float(np.mean(masked)),
        "base_accuracy": float(np.mean(base)),
        **kappa,
    }


MASKING_HURTS = StudyClaim(
    "cls_head.masking_hurts",
    "07_cls_head",
    "One high-layer head (layer 10 of 12) costs accuracy when masked",
    "so does one high head in layer 10",
    Kind.EFFECT,
    direction=-1,
)
MATCHING_HEADS_HURT = StudyClaim(
    "cls_head.matching_heads_hurt",
    "07_cls_head",
    "Each of the term-matching heads (notebook 05's) costs accuracy when masked alone",
    "the term-matching heads hurt when masked",
    Kind.EFFECT,
    direction=-1,
)
CONCENTRATES_ON_SHARED = StudyClaim(
    "cls_head.concentrates_on_shared",
    "07_cls_head",
    "That head's [CLS] attention concentrates on the terms query and title share",
    "That head's `[CLS]` attention concentrates on the terms that query and title share",
    Kind.EFFECT,
    direction=1,
)
SPREADS_WITHOUT_MATCHING = StudyClaim(
    "cls_head.spreads_without_matching",
    "07_cls_head",
    "With the low-layer term-matching heads masked, its [CLS] attention spreads over many more terms",
    "its `[CLS]` attention spreads out over many more terms",
    Kind.EFFECT,
    direction=1,
)
READS_MATCHING_HEADS = StudyClaim(
    "cls_head.reads_matching_heads",
    "07_cls_head",
    "It reads the matching heads: masking them spreads its [CLS] attention more than masking random lower heads",
    "the high head reads the low heads' matching features",
    Kind.COMPARE,
    direction=1,
)
CLAIMS = (MASKING_HURTS, MATCHING_HEADS_HURT, CONCENTRATES_ON_SHARED, SPREADS_WITHOUT_MATCHING, READS_MATCHING_HEADS)


def _kappa(effect: dict) -> dict:
    """``kappa``/``at_floor``/``floor_reason`` of :meth:`Claim.measured` from an effect with the kappa columns."""
    if "kappa_lost" not in effect:
        return {}
    return {"kappa": effect, "at_floor": bool(effect["at_floor"]), "floor_reason": str(effect["floor_reason"])}


def focus_claims(row: pd.Series, effect: dict, layers: int) -> list[Claim]:
    """The study's first claim about its high head as a row: masked alone, it costs accuracy.

    One selection rule: ``row`` is the :func:`selection_grid` row of the head :func:`focus_head` chose on the
    selection pairs (the upper-half head whose masking alone costs most there); ``effect`` its
    :func:`held_out_effect` on the other pairs, the only ones the row's number, interval and p come from (with its
    kappa columns, the share of kappa lost is shown beside and the floor marked). Judged by
    :func:`headlab.judging.verdicts.judge` (an effect below zero); the McNemar p is kept beside the interval. Only one
    head is tested on the held-out pairs, so nothing is corrected for the many heads it was chosen from.
    """
    layer, head = int(row["layer"]), int(row["head"])
    ours = study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)
    place = f"the relative depth of our layer {ours}" + (", this head's layer" if layer == ours else "")
    accuracy = (
        f": accuracy {effect['base_accuracy']:.1%} → {effect['accuracy']:.1%}"
        if "accuracy" in effect and "base_accuracy" in effect
        else ""
    )
    reason = (
        f"Head {layer}.{head}, the upper-half head whose masking alone costs most on {int(row['n_examples'])} "
        f"selection pairs ({row['rel_change']:+.1%} there, where it was chosen as the worst of many, so partly "
        f"by chance), measured masked alone on the other {int(effect['n_examples'])} pairs only{accuracy} (exact "
        f"McNemar p = {effect['p_mcnemar']:.2g}). The study's head sat in layer {STUDY_HIGH_HEAD_LAYER} of "
        f"{STUDY_LAYERS}: {place}"
    )
    return [
        Claim.measured(
            MASKING_HURTS,
            ours=float(effect["rel_change"]),
            lo=float(effect["lo"]),
            hi=float(effect["hi"]),
            unit=ACCURACY_CHANGE,
            method=MASK_METHOD,
            n_examples=int(effect["n_examples"]),
            p=float(effect["p_mcnemar"]),
            reason=reason,
            **_kappa(effect),
        )
    ]


def matching_hurt_claims(
    correct: pd.DataFrame,
    base_correct: np.ndarray,
    matching,
    estimate,
    n_boot: int = N_BOOT,
    seed: int = 0,
    grades=None,
) -> list[Claim]:
    """The study's "the term-matching heads hurt when masked" as a row: each of notebook 05's heads masked alone
    (the single-head masks of notebook 02's grid), measured on the pairs ``estimate`` (05's held-out half, which
    chose none of them). The claim speaks of every one of them, so it is judged at the head whose interval reaches
    nearest no effect (a claim about all of them is no stronger than its weakest; no correction for choosing it)."""
    effects = {
        (int(l), int(h)): held_out_effect(correct, base_correct, int(l), int(h), estimate, n_boot, seed, grades)
        for l, h in matching
    }
    if not effects:
        return [Claim.not_measured(MATCHING_HEADS_HURT, reason="Not measured: no term-matching heads")]

    def weakness(e) -> float:  # its adjusted end nearest no effect, judged with its own design
        j = judge(
            MATCHING_HEADS_HURT, e["rel_change"], e["lo"], e["hi"], weakest_of=len(effects), n_examples=e["n_examples"]
        )
        return reach(MATCHING_HEADS_HURT, j)

    (layer, head), weakest = min(effects.items(), key=lambda item: weakness(item[1]))
    each = "; ".join(
        f"{l}.{h}: {e['rel_change']:+.1%} [{e['lo']:+.1%}, {e['hi']:+.1%}]" for (l, h), e in effects.items()
    )
    return [
        Claim.measured(
            MATCHING_HEADS_HURT,
            ours=float(weakest["rel_change"]),
            lo=float(weakest["lo"]),
            hi=float(weakest["hi"]),
            unit=ACCURACY_CHANGE,
            method=MASK_METHOD,
            n_examples=int(weakest["n_examples"]),
            weakest_of=len(effects),
            p=float(weakest["p_mcnemar"]),
            reason=f"Each of the {len(effects)} term-matching heads masked alone, on the {int(weakest['n_examples'])} "
            f"held-out pairs (layer.head: relative change): {each}. The claim speaks of every one, so the row shows "
            f"the weakest, {layer}.{head} (exact McNemar p = {weakest['p_mcnemar']:.2g})",
            **_kappa(weakest),
        )
    ]


def concentration(profile: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
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
    table = pd.DataFrame(
        {
            "layer": share.columns.get_level_values(0),
            "head": share.columns.get_level_values(1),
            "shared_share": share.mean().to_numpy(),
            "chance": chance.mean().to_numpy(),
            "excess": excess.mean(axis=0),
            "lo": np.quantile(boots, 0.025, axis=0),
            "hi": np.quantile(boots, 0.975, axis=0),
            "above_chance": (excess > 0).mean(axis=0),
            "p_sign": [sps.binomtest(int(w), int(w + l)).pvalue if w + l else 1.0 for w, l in zip(wins, losses)],
            "n_examples": len(excess),
        }
    )
    table["ratio"] = table["shared_share"] / table["chance"]
    return table


WEIGHED = {  # measure -> (which row, where)
    "attention on shared terms": ("weights", "shared"),
    "attention on special tokens": ("weights", "special"),
    "value-weighted, on shared terms": ("sent", "shared"),
    "value-weighted, on special tokens": ("sent", "special"),
}


def what_it_sends(lab: Lab, examples, layer: int, head: int, stopwords=None, n_boot: int = N_BOOT) -> pd.DataFrame:
    """What the head's ``[CLS]`` row takes from where, on ``examples``, by its attention weights and by the norms of
    what each token sends (:func:`headlab.core.attention.cls_value_weighted`, Kobayashi et al. 2020): the share of
    the whole row (special tokens included, no renormalising) on the shared-term tokens and on the special tokens,
    each a mean over the pairs (shared terms: over the pairs that share one) with a 95% bootstrap interval. A row
    that sits on ``[SEP]`` by weight may take almost nothing from it."""
    key = {"examples": [int(e) for e in examples], "head": [layer, head], "stopwords": sorted(stopwords or ())}

    def measure() -> pd.DataFrame:
        values: dict[str, list[float]] = {name: [] for name in WEIGHED}
        encoded = lab.encoded
        for example, weights, sent in cls_value_weighted(
            lab.model, encoded, layer, list(examples), lab.batch_size, lab.device, lab.pad_id
        ):
            pair = read_pair(lab.tokenizer, encoded.input_ids[example], stopwords)
            where = {"shared": sorted(pair.shared_positions), "special": np.flatnonzero(pair.special)}
            rows = {"weights": weights[head], "sent": sent[head] / sent[head].sum()}
            for name, (row, place) in WEIGHED.items():
                if place != "shared" or where["shared"]:
                    values[name].append(float(rows[row][where[place]].sum()))
        out = []
        for name, xs in values.items():
            x = np.asarray(xs)
            boots = bootstrap_weights(len(x), n_boot, lab.params.seed) @ x / len(x)
            lo, hi = np.quantile(boots, [0.025, 0.975])
            out.append(
                {"measure": name, "mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "n_examples": len(x)}
            )
        return pd.DataFrame(out)

    return lab.stored("cls_what_it_sends", key, measure)


def _one_head(profile: pd.DataFrame, layer: int, head: int) -> pd.DataFrame:
    return profile[(profile["layer"] == layer) & (profile["head"] == head)]


def spread(
    before: pd.DataFrame, after: pd.DataFrame, layer: int, head: int, n_boot: int = N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """Paired before/after change of one head's [CLS] row: entropy, share on shared terms, content mass.

    ``before`` and ``after`` are :func:`headlab.measures.roles.cls_profile` tables of the same examples without and with
    a mask (all heads or just this one); one row per metric with the mean change and its 95% paired bootstrap
    interval.
    """
    before, after = _one_head(before, layer, head), _one_head(after, layer, head)
    rows = [
        paired_delta(before, after, metric, n_boot=n_boot, seed=seed).query("scope == 'head'")
        for metric in SPREAD_METRICS
    ]
    return pd.concat(rows, ignore_index=True).drop(columns="scope")


def masked_name(k: int) -> str:
    """The run with notebook 05's ``k`` term-matching heads masked (:func:`masked_runs`)."""
    return f"{k} matching heads masked"


def masked_runs(lab: Lab, heads) -> dict[str, tuple]:
    """The two runs the page's [CLS] bars and maps compare, ``{name: (model, keep-mask or None)}``: every head, and
    ``heads`` (notebook 05's term-matching heads) masked (:func:`masked_name`), a (layers, heads) mask of 1 for a
    kept head, 0 for these."""
    mask = np.ones(lab.shape, dtype=np.float32)
    for layer, head in heads:
        mask[int(layer), int(head)] = 0.0
    return {"all heads": (lab.model, None), masked_name(len(heads)): (lab.model, mask)}


def head_cls_profile(lab: Lab, examples, layer: int, head: int, drop=(), stopwords=None) -> pd.DataFrame:
    """:func:`headlab.measures.roles.cls_profile` of one head on ``examples``, heads in ``drop`` removed, from one pass
    that stops at the head's layer (:func:`headlab.core.attention.cls_attention_rows`): the same table, for a
    fraction of the work, where one head is read under many masks."""
    mask = MaskSpec("attention", tuple(drop), "attention").keep(*head_grid(lab.model)) if len(drop) else None
    rows = []
    for example, row in cls_attention_rows(
        lab.model, lab.encoded, layer, head, examples, mask, lab.batch_size, lab.device, lab.pad_id
    ):
        pair = read_pair(lab.tokenizer, lab.encoded.input_ids[example], stopwords)
        scores = cls_attention_on_shared(row[None, None, None, :], pair)
        rows.append(
            {
                "example": example,
                "layer": layer,
                "head": head,
                **{k: float(np.asarray(v).ravel()[0]) for k, v in scores.items()},
            }
        )
    return pd.DataFrame(rows).sort_values(["example", "layer", "head"], ignore_index=True)


def spread_under_masks(
    lab: Lab, layer: int, head: int, head_sets, before: pd.DataFrame, stopwords=None
) -> pd.DataFrame:
    """Per pair, the change of the head's [CLS] entropy and shared-term share with each set of heads masked.

    ``before`` is the unmasked :func:`headlab.measures.roles.cls_profile` of the same examples (at least this head).
    One row per head set and pair: draw, heads ("l.h;l.h"), example, entropy_delta, shared_share_delta (NaN where
    the pair shares no term), so a comparison with these sets resamples the pairs and the draws alike
    (:func:`draw_means` gives one row per set). Computed once and kept (:meth:`headlab.lab.Lab.stored`): each set is
    an attention pass over the examples.
    """
    keys = ["example", "layer", "head"]
    base = _one_head(before, layer, head).set_index(keys)
    examples = base.index.get_level_values("example").unique()
    head_sets = [[(int(l), int(h)) for l, h in chosen] for chosen in head_sets]

    def compute() -> pd.DataFrame:
        rows = []
        for draw, chosen in enumerate(head_sets):
            after = head_cls_profile(lab, examples, layer, head, chosen, stopwords).set_index(keys)
            change = (after[["entropy", "shared_share"]] - base[["entropy", "shared_share"]]).reset_index()
            rows.append(
                pd.DataFrame(
                    {
                        "draw": draw,
                        "heads": ";".join(f"{l}.{h}" for l, h in chosen),
                        "example": change["example"].to_numpy(),
                        "entropy_delta": change["entropy"].to_numpy(),
                        "shared_share_delta": change["shared_share"].to_numpy(),
                    }
                )
            )
        return pd.concat(rows, ignore_index=True)

    key = {
        "layer": int(layer),
        "head": int(head),
        "head_sets": head_sets,
        "stopwords": sorted(stopwords or []),
        "before": hashlib.sha256(base.to_csv().encode()).hexdigest(),
        "per_pair": True,
    }
    return lab.stored("cls_spread_under_masks", key, compute)


def draw_means(control: pd.DataFrame) -> pd.DataFrame:
    """One row per head set of :func:`spread_under_masks`: draw, heads, and the mean entropy_delta and
    shared_share_delta over the pairs (NaN pairs left out)."""
    return control.groupby(["draw", "heads"], as_index=False, sort=True)[["entropy_delta", "shared_share_delta"]].mean()


def entropy_deltas(before: pd.DataFrame, after: pd.DataFrame, layer: int, head: int) -> pd.Series:
    """Per pair, the change of one head's [CLS] entropy from ``before`` to ``after`` (:func:`cls_profile` tables of the
    same pairs), indexed by example: the matching heads' side of the comparison with random sets."""
    b = _one_head(before, layer, head).set_index("example")["entropy"]
    a = _one_head(after, layer, head).set_index("example")["entropy"]
    return (a - b.loc[a.index]).sort_index()


def cls_rows(lab: Lab, runs: dict, examples, layer: int, head: int, stopwords=None) -> pd.DataFrame:
    """One head's [CLS] row on each of ``examples``, renormalised over the non-special tokens, per run.

    ``lab`` gives the tokenizer, the encoded pairs, the batch size, device and pad id. ``runs`` maps a name to
    ``(model, mask)`` as in :func:`headlab.measures.attention_compare.compare_maps`. One row per example and
    non-special token: example, position, token (position-prefixed label), shared (a term the other sentence
    shares), and one column per run: the share of that run's [CLS] row on the token, as
    :func:`headlab.measures.roles.cls_attention_on_shared` measures it.
    """
    examples = [int(e) for e in examples]
    tokenizer, encoded = lab.tokenizer, lab.encoded
    weights = {}
    for name, (model, mask) in runs.items():
        for example, maps in attention_maps(model, encoded, examples, mask, lab.batch_size, lab.device, lab.pad_id):
            weights[name, example] = maps[layer, head, 0].astype(np.float64)
    frames = []
    for example in examples:
        pair = read_pair(tokenizer, encoded.input_ids[example], stopwords)
        content, shared = pair.content, pair.shared_positions
        labels = token_labels(pair.tokens)
        frame = pd.DataFrame(
            {
                "example": example,
                "position": content,
                "token": [labels[i] for i in content],
                "shared": [i in shared for i in content],
            }
        )
        for name in runs:
            row = weights[name, example][content]
            frame[name] = np.round(row / row.sum(), 4)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def concentration_claims(table: pd.DataFrame, layer: int, head: int) -> list[Claim]:
    """The study's claim that the head's [CLS] row concentrates on the shared terms, as a row.

    ``table`` is the :func:`concentration` table of all heads on the held-out pairs (those the head was not
    chosen on), so the reason also says where the head ranks. Ours is the mean excess over a uniform row with its
    95% bootstrap interval, judged by :func:`headlab.judging.verdicts.judge` (an effect above zero); the sign test's p
    is kept beside it.
    """
    row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
    rank = int((table["excess"] > row["excess"]).sum()) + 1
    reason = (
        f"Head {layer}.{head}, over {int(row['n_examples'])} held-out pairs that share a term (pairs it was not "
        f"chosen on): {row['shared_share']:.1%} of its [CLS] attention on non-special tokens lands on shared "
        f"terms, against {row['chance']:.1%} for a uniform row ({row['ratio']:.2f}× chance); above chance on "
        f"{row['above_chance']:.0%} of pairs (two-sided sign test p = {row['p_sign']:.2g}). It ranks {rank} of "
        f"{len(table)} heads by that excess"
    )
    return [
        Claim.measured(
            CONCENTRATES_ON_SHARED,
            ours=float(row["excess"]),
            lo=float(row["lo"]),
            hi=float(row["hi"]),
            unit=CLS_CONCENTRATION,
            method="bootstrap over the held-out pairs that share a term",
            n_examples=int(row["n_examples"]),
            p=float(row["p_sign"]),
            reason=reason,
        )
    ]


def _spread_claim(change: pd.DataFrame, layer: int, head: int, k: int) -> Claim:
    """Does the head's row spread over many more terms with the matching heads masked: the entropy change in nats,
    judged against the registered size (log 1.5: the effectively attended tokens grow by a factor 1.5)."""
    rows = change.set_index("metric")
    e, s = rows.loc["entropy"], rows.loc["shared_share"]
    factor, factor_lo, factor_hi = np.exp([e["delta"], e["lo"], e["hi"]])
    shared = (
        "its interval lies below 0, as the study's reading implies"
        if s["hi"] < 0
        else "its interval lies above 0: the row moves towards the shared terms"
        if s["lo"] > 0
        else "its interval reaches 0"
    )
    reason = (
        f"Head {layer}.{head} with the {k} matching heads masked, paired over {int(e['n_examples'])} held-out "
        f"pairs: entropy {e['before']:.2f} → {e['after']:.2f} nats, so the effectively attended tokens (exp of "
        f"the entropy) change by a factor {factor:.2f} [{factor_lo:.2f}, {factor_hi:.2f}]. Its share on shared "
        f"terms {s['before']:.1%} → {s['after']:.1%} ({s['delta'] * 100:+.1f} points [{s['lo'] * 100:+.1f}, "
        f"{s['hi'] * 100:+.1f}]): {shared}"
    )
    return Claim.measured(
        SPREADS_WITHOUT_MATCHING,
        ours=float(e["delta"]),
        lo=float(e["lo"]),
        hi=float(e["hi"]),
        unit=CLS_SPREAD,
        method=SPREAD_METHOD,
        n_examples=int(e["n_examples"]),
        reason=reason,
    )


def _control_claim(
    change: pd.DataFrame, control: pd.DataFrame | None, k: int, deltas: pd.Series | None, n_boot: int, seed: int
) -> Claim:
    """Do the matching heads spread the row more than random lower heads: their per-pair entropy change minus the mean
    over the random sets, with a t interval on a two-stage bootstrap over the sets and the pairs."""
    e = change.set_index("metric").loc["entropy"]
    if control is None or not len(control) or deltas is None:
        return Claim.not_measured(
            READS_MATCHING_HEADS,
            unit=CLS_SPREAD_VERSUS_RANDOM,
            reason="Not measured: no random lower-head sets were masked (CLS_CONTROL_DRAWS)",
        )
    wide = control.pivot(index="draw", columns="example", values="entropy_delta").loc[:, deltas.index]
    versus = versus_random(deltas.to_numpy(), wide.to_numpy(), n_boot=n_boot, seed=seed)
    n = versus["n_draws"]
    reason = (
        f"Masking the {k} matching heads changes the head's entropy by {e['delta']:+.3f} nats; masking {n} sets of "
        f"{k} random lower-half heads instead changes it by {versus['random_mean']:+.3f} on average "
        f"({versus['random_min']:+.3f} to {versus['random_max']:+.3f}); {versus['rank']} of the {n} sets change it "
        f"at least as much in the same direction (description, not the verdict)"
    )
    return Claim.measured(
        READS_MATCHING_HEADS,
        ours=versus["difference"],
        lo=versus["difference_lo"],
        hi=versus["difference_hi"],
        unit=CLS_SPREAD_VERSUS_RANDOM,
        method=CONTROL_METHOD,
        n_examples=versus["n_examples"],
        n_draws=n,
        df=versus["df"],
        reason=reason,
    )


def spread_claims(
    change: pd.DataFrame,
    control: pd.DataFrame | None,
    layer: int,
    head: int,
    k: int,
    deltas: pd.Series | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> list[Claim]:
    """The study's claim that the head's [CLS] attention spreads over many more terms with the matching heads masked,
    and its reading that the head reads those heads, as two rows.

    ``change`` comes from :func:`spread`; ``control`` from :func:`spread_under_masks` with random lower heads;
    ``deltas`` from :func:`entropy_deltas` (the matching heads' per-pair entropy change); all on the held-out pairs
    (those the head was not chosen on). The spread is the entropy change in nats, so the registered size "many more
    terms" (a factor 1.5 on the effectively attended tokens, log 1.5 nats) applies to it. The reading's row is the
    matching heads' entropy change minus the mean change of the random sets, on the same pairs.
    """
    return [_spread_claim(change, layer, head, k), _control_claim(change, control, k, deltas, n_boot, seed)]


def mean_ablated_effect(lab: Lab, layer: int, head: int, estimate, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """:func:`held_out_effect` with the head's output replaced by its mean over training pairs instead of zero
    (mean-ablation, one mask, saved as the sweep ``cls_focus-mean``), against that sweep's own unmasked row."""
    spec = MaskSpec(f"head-{layer}-{head}", ((layer, head),), "head")
    per_example = lab.sweep([spec], "cls_focus", ablation="mean", progress=False)
    heads = single_heads(per_example, [spec], "mean-ablated")
    return held_out_effect(heads.correct, heads.base_correct, layer, head, estimate, n_boot, seed, heads.grades)


@dataclass
class Focus:
    """The upper head page 07 follows and what chose and judged it: the halves (``select`` chooses, ``estimate``
    measures), every head masked alone (``single``), the grid on the selection half with the head framed (``focus``
    column), its held-out effect zeroed and mean-ablated (the method check), and the claims they give: the head's
    and the study's "the term-matching heads hurt when masked" (05's ``matching`` heads, each alone, held out)."""

    select: np.ndarray
    estimate: np.ndarray
    single: SingleHeads
    grid: pd.DataFrame
    layer: int
    head: int
    head_rows: list[Claim]
    matching_rows: list[Claim]

    @property
    def rows(self) -> list[Claim]:
        """Both claims' rows, the head's first."""
        return [*self.head_rows, *self.matching_rows]


def choose_focus(lab: Lab, matching, n_boot: int = N_BOOT, seed: int = 0) -> Focus:
    """Page 07's choice, then its measurement (:class:`Focus`): the upper-half head whose masking alone costs most
    on the selection half (:func:`headlab.measures.grids.focus_head`), measured on the held-out half."""
    select, estimate = split_halves(len(lab.encoded), seed)
    single = single_head_correct(lab)
    grid = selection_grid(single.correct, single.base_correct, select)
    layers = lab.shape[0]
    chosen = focus_head(grid, layers)
    layer, head = int(chosen["layer"]), int(chosen["head"])
    grid["focus"] = (grid["layer"] == layer) & (grid["head"] == head)
    effect = held_out_effect(single.correct, single.base_correct, layer, head, estimate, n_boot, seed, single.grades)
    mean_effect = mean_ablated_effect(lab, layer, head, estimate, n_boot=n_boot, seed=seed)
    head_rows = with_mean_ablation(focus_claims(chosen, effect, layers), focus_claims(chosen, mean_effect, layers))
    matching_rows = matching_hurt_claims(
        single.correct, single.base_correct, matching, estimate, n_boot, seed, single.grades
    )
    return Focus(select, estimate, single, grid, layer, head, head_rows, matching_rows)


def focus_takeaway(grid: pd.DataFrame, layer: int, head: int) -> str:
    """The selection grid's caption: the chosen head's cost where it was chosen (a point estimate on the pairs that
    chose it, so partly luck), beside the costliest head of any layer there."""
    chosen = grid[(grid["layer"] == layer) & (grid["head"] == head)].iloc[0]
    tested = grid.dropna(subset=["rel_change"])
    worst = tested.loc[tested["rel_change"].idxmin()]
    return (
        f"Chosen by the page's rule (the upper-half head that costs most here), head {layer}.{head} costs "
        f"{chosen['rel_change']:+.1%} masked alone on the {int(chosen['n_examples'])} selection pairs, a point "
        f"estimate on the pairs that chose it; the costliest head of any layer there is {int(worst['layer'])}."
        f"{int(worst['head'])} ({worst['rel_change']:+.1%}). Its effect is measured on the other pairs, below."
    )


def depth_conflict(
    correct: pd.DataFrame, base_correct, layer: int, head: int, layers: int, n_boot: int = N_BOOT, seed: int = 0
) -> str:
    """Where page 02 and this page meet on the study's layer-10 head, said beside the verdict ("" where the head
    chosen sits at the study's depth): the head this page tests is the costliest of the upper half, which need not
    sit there; page 02's number for the heads that do, on all the pairs as page 02 masks them (``correct``: every
    head masked alone, :class:`SingleHeads`), beside the chosen head's, each with its paired interval."""
    ours = study_layer_to_ours(STUDY_HIGH_HEAD_LAYER, layers)
    there = [h for l, h in correct.index if l == ours]
    if layer == ours or not there:
        return ""
    every = np.arange(len(np.asarray(base_correct)))
    effects = {h: held_out_effect(correct, base_correct, ours, h, every, n_boot, seed) for h in there}
    worst = min(effects, key=lambda h: effects[h]["rel_change"])
    chosen = held_out_effect(correct, base_correct, layer, head, every, n_boot, seed)

    def said(e: dict) -> str:
        return f"{e['rel_change']:+.1%} [{e['lo']:+.1%}, {e['hi']:+.1%}] (exact McNemar p = {e['p_mcnemar']:.2g})"

    return (
        f"\n\n**Where the pages meet.** The head tested here, {layer}.{head}, sits in our layer {layer}, not at the "
        f"study's layer-{STUDY_HIGH_HEAD_LAYER} depth (our layer {ours}): it is the study's high head by its rank in "
        f"the upper half, not by its place. On all {len(every)} pairs, as page 02 masks them, the costliest head of "
        f"layer {ours}, {ours}.{worst}, changes accuracy by {said(effects[worst])}, and {layer}.{head} by "
        f"{said(chosen)}; page 02 judges every head of layer {ours} with the Holm correction over all heads.\n"
    )


def concentration_takeaway(table: pd.DataFrame, layer: int, head: int) -> str:
    """The concentration map's caption: the chosen head's excess on shared terms and its rank among all heads."""
    ranked = table.sort_values("excess", ascending=False, ignore_index=True)
    rank = int(ranked.index[(ranked["layer"] == layer) & (ranked["head"] == head)][0]) + 1
    row = ranked.iloc[rank - 1]
    return (
        f"Head {layer}.{head} puts {row['excess']:+.3f} [{row['lo']:+.3f}, {row['hi']:+.3f}] more of its [CLS] row on "
        f"shared terms than a uniform row would, rank {rank} of {len(ranked)} heads; the most is "
        f"{int(ranked.loc[0, 'layer'])}.{int(ranked.loc[0, 'head'])} ({ranked.loc[0, 'excess']:+.3f})."
    )


def cls_bars_takeaway(rows: pd.DataFrame, runs, example: int) -> str:
    """The [CLS] bars' caption: on the pair shown, the share of the row on shared terms per run."""
    pair = rows[rows["example"] == example]
    parts = [f"{run}, {pair.loc[pair['shared'], run].sum():.0%}" for run in runs]
    return f"On pair {example}, the share of the head's [CLS] row on the shared terms (solid): {'; '.join(parts)}."


def spread_takeaway(change: pd.DataFrame, sets: pd.DataFrame) -> str:
    """The control figure's caption: the matching heads' entropy change (:func:`spread`, with its paired interval)
    against the random sets' (:func:`draw_means`)."""
    entropy = change.set_index("metric").loc["entropy"]
    tested = float(entropy["delta"])
    values = sets["entropy_delta"].to_numpy(dtype=np.float64)
    as_far = int((values >= tested).sum()) if tested >= 0 else int((values <= tested).sum())
    return (
        f"Masking the matching heads changes the head's [CLS] entropy by {tested:+.3f} [{entropy['lo']:+.3f}, "
        f"{entropy['hi']:+.3f}] nats; the {len(values)} random lower-half sets by {values.mean():+.3f} on average "
        f"(from {values.min():+.3f} to {values.max():+.3f}); {as_far} of them change it as much or more."
    )
