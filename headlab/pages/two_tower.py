"""Finding 8, the study's two-tower argument: a two-tower (siamese) BERT, which encodes query and title apart, did
badly because it cannot match terms across the pair.

The study offers this, unmeasured, closing its finding 5. Here every condition is scored on the same test pairs,
against the cross-encoder run the same way (fp32, :func:`headlab.core.evaluate.predict`): the two-tower model
(:mod:`headlab.models.two_tower`), the cross-encoder with notebook 05's term-matching heads masked, the
cross-encoder with attention kept inside each sentence, and a lexical grader with no encoder
(:mod:`headlab.measures.lexical`). Effects are relative changes of accuracy, as in the study, with paired bootstrap
intervals. The study's reason is tested where it can be: if two towers fail because they cannot match terms, their
loss against the cross-encoder is larger on the pairs whose query and title share a term
(:func:`shares_terms`, :func:`shared_term_gap`). The claims are rows (:func:`claims`), judged by
:func:`headlab.judging.verdicts.judge`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.device import precision
from headlab.core.evaluate import metrics, predict
from headlab.core.grades import GradeScale
from headlab.core.masking import head_grid
from headlab.core.stats import N_BOOT, bootstrap_weights, mcnemar, relative_change
from headlab.core.sweep import BASELINE, kappa_columns
from headlab.judging.units import ACCURACY_CHANGE, PAIRED, TWO_TOWER_GAP
from headlab.judging.verdicts import Claim, Kind, StudyClaim, Tally
from headlab.lab.lab import Lab
from headlab.measures.lexical import fit_lexical
from headlab.measures.matching import term_matching_specs
from headlab.models.two_tower import finetune_two_tower, load_two_tower, pair_encodings, predict_two_tower

REFERENCE = "cross-encoder"
STUDY_MASKED = -0.524  # the study's 5 term-matching heads masked; it measured no two-tower model
BLOCKED = "attention kept inside each sentence"  # the cross-encoder, query and title not attending to each other
TWO_TOWERS = "two towers"
LEXICAL = "lexical overlap grader"

# How an encoder was pretrained matters here: one trained as a two-tower sentence encoder already knows how to
# compare sentences it reads apart, unlike the study's BERT (pretrained on masked words and sentence pairs).
PRETRAINING = {
    "minilm": "all-MiniLM-L6-v2 was trained as a two-tower sentence encoder (contrastive, on sentence pairs), "
    "unlike the study's BERT",
    "mpnet": "all-mpnet-base-v2 was trained as a two-tower sentence encoder (contrastive, on sentence pairs), "
    "unlike the study's BERT",
    "e5-small": "multilingual-e5-small was trained as a two-tower text encoder (contrastive, on text pairs), "
    "unlike the study's BERT",
    "e5-small-char": "multilingual-e5-small was trained as a two-tower text encoder (contrastive, on text pairs), "
    "unlike the study's BERT; here it reads Chinese one character per token, not in the pieces it was trained on",
    "e5-small-char-mlm": "multilingual-e5-small was trained as a two-tower text encoder (contrastive, on text pairs), "
    "unlike the study's BERT; here it reads Chinese one character per token, after a short masked-character pass "
    "over People's Daily by headlab",
    "zh-char": "zh-char was pretrained by headlab as the study's BERT was (masked characters and next-sentence "
    "prediction on sentence pairs read together), never as a two-tower encoder",
    "zh-char-mlm": "zh-char-mlm was pretrained by headlab on masked characters only, never as a two-tower encoder",
}


def cross_encoder_grades(lab: Lab, matching, draws: int, keep_draws: int) -> dict[str, np.ndarray]:
    """The cross-encoder's predicted grades unmasked (``"unmasked"``), with the term-matching heads masked
    (``"masked"``), and with attention kept inside each sentence (``"within sentence"``), all in the sweeps'
    precision: the first two read from notebook 05's sweep (the same masks, never evaluated twice; run here where 05
    has not run), the third computed once and kept (:meth:`headlab.lab.Lab.stored`)."""
    layers, heads = head_grid(lab.model)
    per_example = lab.sweep(
        term_matching_specs(layers, heads, matching, draws, keep_draws, lab.params.seed),
        "term_matching",
        progress=False,
    )
    grades = per_example.pivot(index="example", columns="mask_id", values="predicted").sort_index()
    sep = int(lab.tokenizer.sep_token_id)
    chosen = precision(lab.device)
    within = lab.stored(
        "within_sentence_probs",
        {"block_across": sep},
        lambda: pd.DataFrame(
            predict(
                lab.model,
                lab.encoded,
                batch_size=lab.batch_size,
                device=lab.device,
                pad_id=lab.pad_id,
                block_across=sep,
                precision=chosen,
            ),
            columns=[f"p{g}" for g in lab.scale.grades],
        ),
    )
    return {
        "unmasked": grades[BASELINE].to_numpy(),
        "masked": grades["matching"].to_numpy(),
        "within sentence": lab.scale.predicted(within.to_numpy()),
    }


def two_tower_probs(lab: Lab) -> tuple[Path, np.ndarray]:
    """``(folder, probs)``: the two-tower model fine-tuned on the lab's settings (trained on the first call, then read
    from the cache; :func:`headlab.models.two_tower.finetune_two_tower`) and its grade probabilities (pairs, grades) on
    the lab's pairs, query and title encoded apart, with the lab's batch size, device and pad id."""
    folder = finetune_two_tower(lab.params.finetune_config, device=lab.device)
    two_tower = load_two_tower(folder).to(lab.device)
    queries, titles = pair_encodings(lab.tokenizer, lab.frame, lab.scale)
    probs = predict_two_tower(
        two_tower, queries, titles, batch_size=lab.batch_size, device=lab.device, pad_id=lab.pad_id
    )
    return folder, probs


def pretraining_note(model: str) -> str:
    """The confound to state beside the result: how ``model`` was pretrained, where headlab knows it."""
    return PRETRAINING.get(
        model,
        f"how {model} was pretrained is not recorded in headlab: read its model card "
        "before comparing its two towers with the study's",
    )


def lexical_grades(train: pd.DataFrame, evaluated: pd.DataFrame, scale: GradeScale) -> np.ndarray:
    """Grades of the ``evaluated`` pairs by the lexical overlap grader fitted on the ``train`` pairs."""
    return fit_lexical(train, scale).grades(evaluated)


def masked_label(k: int) -> str:
    """The row of the cross-encoder with notebook 05's ``k`` term-matching heads masked."""
    return f"{k} term-matching heads masked"


def graded_conditions(lab: Lab, cross: dict[str, np.ndarray], tower_probs: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Every grader's test grades under the name its row carries: the cross-encoder unmasked (:data:`REFERENCE`),
    with the ``k`` term-matching heads masked and with attention kept inside each sentence (``cross``:
    :func:`cross_encoder_grades`), the two towers (``tower_probs``: :func:`two_tower_probs`), the lexical grader
    fitted on the training pairs, and the training pairs' most common grade given to every pair (the floor)."""
    train = lab.params.train_frame()
    majority = int(train["label"].mode().iloc[0])
    return {
        REFERENCE: cross["unmasked"],
        masked_label(k): cross["masked"],
        BLOCKED: cross["within sentence"],
        TWO_TOWERS: lab.scale.predicted(tower_probs),
        LEXICAL: lexical_grades(train, lab.frame, lab.scale),
        f"always grade {majority}": np.full(len(lab.encoded), majority),
    }


def condition_table(
    predicted: dict[str, np.ndarray],
    grades: np.ndarray,
    scale: GradeScale,
    n_boot: int = N_BOOT,
    seed: int = 0,
    study: dict | None = None,
) -> pd.DataFrame:
    """One row per condition (``label``): accuracy and macro-F1, the accuracy's 95% interval over the test pairs,
    and the paired relative change of accuracy against the cross-encoder (``rel_change``, ``lo``, ``hi``) with
    its McNemar p, and the same on the chance-corrected scale (:func:`headlab.core.sweep.kappa_columns`: the share of
    the cross-encoder's quadratic kappa the condition loses, with at_floor and floor_reason decided from its
    predictions). ``predicted`` maps a condition to its predicted grades and must hold :data:`REFERENCE`;
    ``study`` maps a condition to the study's relative change, where it reported one."""
    grades = np.asarray(grades)
    w = bootstrap_weights(len(grades), n_boot, seed)
    reference = (predicted[REFERENCE] == grades).astype(int)
    rows = []
    for name, pred in predicted.items():
        correct = (np.asarray(pred) == grades).astype(int)
        boot = w @ correct / len(grades)
        change = relative_change(correct, reference, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "label": name,
                "n_examples": len(grades),
                "n_draws": 1,
                "accuracy": correct.mean(),
                "acc_lo": np.quantile(boot, 0.025),
                "acc_hi": np.quantile(boot, 0.975),
                "macro_f1": metrics(grades, np.asarray(pred), scale)["macro_f1"],
                "rel_change": change.rel_change,
                "lo": change.lo,
                "hi": change.hi,
                "p_mcnemar": mcnemar(correct, reference) if name != REFERENCE else np.nan,
                "study": (study or {}).get(name, np.nan),
                "n_boot": n_boot,
                **kappa_columns(np.asarray(pred), np.asarray(predicted[REFERENCE]), grades, n_boot, seed),
            }
        )
    return pd.DataFrame(rows)


def difference(
    predicted: dict[str, np.ndarray], grades: np.ndarray, a: str, b: str, n_boot: int = N_BOOT, seed: int = 0
) -> dict:
    """How condition ``a``'s relative change (against the cross-encoder) differs from ``b``'s: ``(acc_a - acc_b) /
    acc_cross``, in points of the cross-encoder's accuracy, with its 95% bootstrap interval over the same test pairs.
    A comparison the page shows; the study makes no claim about it, so it has no verdict."""
    grades = np.asarray(grades)
    w = bootstrap_weights(len(grades), n_boot, seed)

    def accuracy(name):
        return w @ (np.asarray(predicted[name]) == grades).astype(float) / len(grades)

    boots = (accuracy(a) - accuracy(b)) / accuracy(REFERENCE)
    point = (np.mean(predicted[a] == grades) - np.mean(predicted[b] == grades)) / np.mean(
        predicted[REFERENCE] == grades
    )
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {
        "a": a,
        "b": b,
        "difference": float(point),
        "lo": float(lo),
        "hi": float(hi),
        "n_examples": len(grades),
        "n_boot": n_boot,
    }


def comparisons_text(tests: list[dict]) -> str:
    """The comparisons of :func:`difference` as markdown bullets: numbers only, no verdict."""
    return "\n".join(
        f"- {t['a']} against {t['b']}: {100 * t['difference']:+.1f} [{100 * t['lo']:+.1f}, "
        f"{100 * t['hi']:+.1f}] points of the cross-encoder's accuracy (relative change of {t['a']} minus "
        f"that of {t['b']}; 95% paired bootstrap over {t['n_examples']} test pairs)."
        for t in tests
    )


GAP_METHOD = "bootstrap over test pairs, resampled within each group"


def shared_term_gap(tower_correct, cross_correct, shares, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Is the two towers' loss against the cross-encoder larger on pairs that share a term?

    ``difference`` = (two-tower accuracy - cross-encoder accuracy) on the pairs that share a term, minus the same on
    the pairs that share none, in points of accuracy (negative: the towers lose more where there are terms to match),
    with its 95% percentile bootstrap interval: the pairs resampled within each group (each group keeps its size),
    both models' answers on a pair kept together. NaN where a group is empty.
    """
    tower = np.asarray(tower_correct, dtype=np.float64)
    cross = np.asarray(cross_correct, dtype=np.float64)
    shares = np.asarray(shares, dtype=bool)
    if not (len(tower) == len(cross) == len(shares)):
        raise ValueError(f"per-pair arrays differ in length: {len(tower)}, {len(cross)}, {len(shares)}")
    out: dict[str, float] = {
        "n_sharing": int(shares.sum()),
        "n_none": int((~shares).sum()),
        "n_examples": len(shares),
        "n_boot": n_boot,
    }
    gaps, boots = {}, {}
    for group, where, group_seed in (("sharing", shares, seed), ("none", ~shares, seed + 1)):
        t, c = tower[where], cross[where]
        out[f"tower_{group}"] = float(t.mean()) if len(t) else np.nan
        out[f"cross_{group}"] = float(c.mean()) if len(c) else np.nan
        gaps[group] = float((t - c).mean()) if len(t) else np.nan
        boots[group] = bootstrap_weights(len(t), n_boot, group_seed) @ (t - c) / len(t) if len(t) else None
        out[f"gap_{group}"] = gaps[group]
    if boots["sharing"] is None or boots["none"] is None:
        return {**out, "difference": np.nan, "lo": np.nan, "hi": np.nan}
    lo, hi = np.quantile(boots["sharing"] - boots["none"], [0.025, 0.975])
    return {**out, "difference": gaps["sharing"] - gaps["none"], "lo": float(lo), "hi": float(hi)}


def error_overlap(cross_correct: np.ndarray, lexical_correct: np.ndarray) -> pd.DataFrame:
    """How the cross-encoder's and the lexical grader's errors overlap, as counts and shares of the pairs."""
    cross, lexical = np.asarray(cross_correct, dtype=bool), np.asarray(lexical_correct, dtype=bool)
    cells = {
        "both right": cross & lexical,
        "only the cross-encoder right": cross & ~lexical,
        "only the lexical grader right": ~cross & lexical,
        "both wrong": ~cross & ~lexical,
    }
    table = pd.DataFrame([{"outcome": k, "pairs": int(v.sum()), "share": float(v.mean())} for k, v in cells.items()])
    errors = int((~cross).sum())
    table.attrs["lexical_right_on_cross_errors"] = float((lexical & ~cross).sum() / errors) if errors else np.nan
    return table


def _points(x: float) -> str:
    return f"{100 * x:+.1f} points"


WORSE = StudyClaim(
    "two_tower.worse",
    "08_two_tower",
    "A two-tower model grades worse than one cross-encoder",
    "a two-tower (siamese) BERT, which encodes query and title apart, did badly here",
    Kind.EFFECT,
    direction=-1,
)
FAILS_ON_SHARED_TERMS = StudyClaim(
    "two_tower.fails_on_shared_terms",
    "08_two_tower",
    "Two towers did badly because they cannot match terms: their loss is larger on pairs that share terms",
    "This is offered as the reason a two-tower (siamese) BERT",
    Kind.COMPARE,
    direction=-1,
    tally=Tally.OURS,
)
CLAIMS = (WORSE, FAILS_ON_SHARED_TERMS)


def claims(conditions: pd.DataFrame, gap: dict | None, two_tower_label: str, shared: str = "a term") -> list[Claim]:
    """The study's two-tower claims as rows: two towers grade worse than one cross-encoder (:func:`condition_table`;
    its kappa columns put the loss on the chance-corrected scale), and they fail because they
    cannot match terms: their loss is larger on pairs that share terms (:func:`shared_term_gap`, None when not
    measured; ``shared`` says what a shared term is)."""
    row = conditions.set_index("label")
    tower, cross = row.loc[two_tower_label], row.loc[REFERENCE]
    n = int(cross.n_examples)
    floor_note = ""
    if "at_floor" in tower.index and bool(tower.at_floor):
        floor_note = f" The two towers sit at the floor ({tower.floor_reason})."
    worse = Claim.measured(
        WORSE,
        ours=tower.rel_change,
        lo=tower.lo,
        hi=tower.hi,
        unit=ACCURACY_CHANGE,
        method=PAIRED,
        n_examples=n,
        p=None if pd.isna(tower.p_mcnemar) else tower.p_mcnemar,
        kappa=tower if "kappa_lost" in tower.index else None,
        at_floor=bool(tower.get("at_floor", False)),
        floor_reason=str(tower.get("floor_reason", "")),
        reason=f"Same encoder, data and training, but query and title read apart: the two towers grade "
        f"{tower.accuracy:.1%} of the {n} test pairs right, the cross-encoder {cross.accuracy:.1%}; exact "
        f"McNemar p = {tower.p_mcnemar:.2g}.{floor_note}",
    )
    if gap is None or not gap["n_sharing"] or not gap["n_none"]:
        missing = (
            "it was not measured"
            if gap is None
            else f"{'no' if not gap['n_sharing'] else 'every'} test pair shares {shared}, so there is no group to "
            "compare with"
        )
        terms = Claim.not_measured(FAILS_ON_SHARED_TERMS, reason=f"Not measured: {missing}", unit=TWO_TOWER_GAP)
    else:
        terms = Claim.measured(
            FAILS_ON_SHARED_TERMS,
            ours=gap["difference"],
            lo=gap["lo"],
            hi=gap["hi"],
            unit=TWO_TOWER_GAP,
            method=GAP_METHOD,
            n_examples=gap["n_examples"],
            reason=f"On the {gap['n_sharing']} pairs whose query and title share {shared}, the two towers grade "
            f"{gap['tower_sharing']:.1%} right against the cross-encoder's {gap['cross_sharing']:.1%} "
            f"({_points(gap['gap_sharing'])}); on the {gap['n_none']} pairs that share none, "
            f"{gap['tower_none']:.1%} against {gap['cross_none']:.1%} ({_points(gap['gap_none'])}). A "
            "negative difference means the towers lose more where there are terms to match",
        )
    return [worse, terms]
