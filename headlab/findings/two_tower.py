"""Finding 8, the study's two-tower argument: encoding query and title apart is "equivalent to masking" the
term-matching heads.

The study offers this, unmeasured, as the reason a two-tower BERT did badly. Here every condition is scored on the
same test pairs, against the cross-encoder run the same way (fp32, :func:`headlab.core.evaluate.predict`):
the two-tower model (:mod:`headlab.models.two_tower`), the cross-encoder with notebook 05's term-matching heads
masked, the cross-encoder with attention kept inside each sentence, and a lexical grader with no encoder
(:mod:`headlab.findings.lexical`). Effects are relative changes of accuracy, as in the study, with paired
bootstrap intervals; "equivalent" means the 90% interval of the difference lies within ``±margin``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from headlab.core.evaluate import metrics
from headlab.core.stats import bootstrap_weights, equivalent, mcnemar, relative_change
from headlab.findings.claims import Claim, render
from headlab.findings.lexical import fit_lexical

REFERENCE = "cross-encoder"
STUDY_MASKED = -0.524  # the study's 5 term-matching heads masked; it measured no two-tower model

# How an encoder was pretrained matters here: one trained as a two-tower sentence encoder already knows how to
# compare sentences it reads apart, unlike the study's BERT (pretrained on masked words and sentence pairs).
PRETRAINING = {
    "minilm": "all-MiniLM-L6-v2 was trained as a two-tower sentence encoder (contrastive, on sentence pairs), "
              "unlike the study's BERT",
    "mpnet": "all-mpnet-base-v2 was trained as a two-tower sentence encoder (contrastive, on sentence pairs), "
             "unlike the study's BERT",
    "e5-small": "multilingual-e5-small was trained as a two-tower text encoder (contrastive, on text pairs), "
                "unlike the study's BERT",
    "zh-char": "zh-char was pretrained by headlab as the study's BERT was (masked characters and next-sentence "
               "prediction on sentence pairs read together), never as a two-tower encoder",
    "zh-char-mlm": "zh-char-mlm was pretrained by headlab on masked characters only, never as a two-tower encoder",
}


def pretraining_note(model: str) -> str:
    """The confound to state beside the result: how ``model`` was pretrained, where headlab knows it."""
    return PRETRAINING.get(model, f"how {model} was pretrained is not recorded in headlab: read its model card "
                                  "before comparing its two towers with the study's")


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def lexical_grades(train: pd.DataFrame, evaluated: pd.DataFrame) -> np.ndarray:
    """Grades of the ``evaluated`` pairs by the lexical overlap grader fitted on the ``train`` pairs."""
    return fit_lexical(train).probabilities(evaluated).argmax(axis=1) + 1


def condition_table(predicted: dict[str, np.ndarray], grades: np.ndarray, n_boot: int = 2000, seed: int = 0,
                    study: dict | None = None) -> pd.DataFrame:
    """One row per condition (``label``): accuracy and macro-F1, the accuracy's 95% interval over the test pairs,
    and the paired relative change of accuracy against the cross-encoder (``rel_change``, ``lo``, ``hi``) with
    its McNemar p. ``predicted`` maps a condition to its predicted grades and must hold :data:`REFERENCE`;
    ``study`` maps a condition to the study's relative change, where it reported one."""
    grades = np.asarray(grades)
    w = bootstrap_weights(len(grades), n_boot, seed)
    reference = (predicted[REFERENCE] == grades).astype(int)
    rows = []
    for name, pred in predicted.items():
        correct = (np.asarray(pred) == grades).astype(int)
        boot = w @ correct / len(grades)
        change = relative_change(correct, reference, n_boot=n_boot, seed=seed)
        rows.append({"label": name, "n_examples": len(grades), "n_draws": 1, "accuracy": correct.mean(),
                     "acc_lo": np.quantile(boot, 0.025), "acc_hi": np.quantile(boot, 0.975),
                     "macro_f1": metrics(grades, np.asarray(pred))["macro_f1"],
                     "rel_change": change["rel_change"], "lo": change["lo"], "hi": change["hi"],
                     "p_mcnemar": mcnemar(correct, reference) if name != REFERENCE else np.nan,
                     "study": (study or {}).get(name, np.nan), "n_boot": n_boot})
    return pd.DataFrame(rows)


def equivalence(predicted: dict[str, np.ndarray], grades: np.ndarray, a: str, b: str, margin: float,
                n_boot: int = 2000, seed: int = 0) -> dict:
    """Is condition ``a``'s relative change (against the cross-encoder) the same as ``b``'s?

    The difference of the two changes is ``(acc_a - acc_b) / acc_cross``, bootstrapped over the same test pairs;
    ``holds`` when its 90% interval lies within ``±margin`` (two one-sided tests at 5%), ``does not hold`` when
    the 95% interval excludes 0, else ``cannot tell``."""
    grades = np.asarray(grades)
    w = bootstrap_weights(len(grades), n_boot, seed)

    def accuracy(name):
        return w @ (np.asarray(predicted[name]) == grades).astype(float) / len(grades)

    boots = (accuracy(a) - accuracy(b)) / accuracy(REFERENCE)
    point = (np.mean(predicted[a] == grades) - np.mean(predicted[b] == grades)) / np.mean(predicted[REFERENCE] == grades)
    lo, hi, lo90, hi90 = np.quantile(boots, [0.025, 0.975, 0.05, 0.95])
    state = "holds" if equivalent(lo90, hi90, margin) else "does not hold" if lo > 0 or hi < 0 else "cannot tell"
    return {"a": a, "b": b, "difference": float(point), "lo": float(lo), "hi": float(hi), "lo90": float(lo90),
            "hi90": float(hi90), "margin": margin, "verdict": state, "n_examples": len(grades), "n_boot": n_boot}


def error_overlap(cross_correct: np.ndarray, lexical_correct: np.ndarray) -> pd.DataFrame:
    """How the cross-encoder's and the lexical grader's errors overlap, as counts and shares of the pairs."""
    cross, lexical = np.asarray(cross_correct, dtype=bool), np.asarray(lexical_correct, dtype=bool)
    cells = {"both right": cross & lexical, "only the cross-encoder right": cross & ~lexical,
             "only the lexical grader right": ~cross & lexical, "both wrong": ~cross & ~lexical}
    table = pd.DataFrame([{"outcome": k, "pairs": int(v.sum()), "share": float(v.mean())} for k, v in cells.items()])
    errors = int((~cross).sum())
    table.attrs["lexical_right_on_cross_errors"] = float((lexical & ~cross).sum() / errors) if errors else np.nan
    return table


def claims(conditions: pd.DataFrame, tests: list[dict], masked_label: str, two_tower_label: str) -> list[Claim]:
    """The study's two claims about two towers, as rows: they do worse than one cross-encoder, and as badly as the
    cross-encoder with its term-matching heads masked (:func:`condition_table`, :func:`equivalence`)."""
    row = conditions.set_index("label")
    tower, masked = row.loc[two_tower_label], row.loc[masked_label]
    n = int(row.loc[REFERENCE].n_examples)
    worse = "holds" if tower.hi < 0 else "opposite" if tower.lo > 0 else "cannot tell"
    main = next(t for t in tests if {t["a"], t["b"]} == {two_tower_label, masked_label})
    same_as = {"holds": "the two changes are equivalent", "does not hold": "the two changes differ",
               "cannot tell": "the two changes are neither equivalent nor distinguishable"}[main["verdict"]]
    return [
        Claim("two_tower.worse", "08 two towers", "A two-tower model grades worse than one cross-encoder", None,
              float(tower.rel_change), float(tower.lo), float(tower.hi), "relative change of accuracy", n, 1,
              float(tower.p_mcnemar), worse,
              f"Same encoder, data and training; 95% paired bootstrap interval over {n} test pairs, exact McNemar "
              f"p = {tower.p_mcnemar:.2g}."),
        Claim("two_tower.as_masking", "08 two towers",
              "Two towers lose what masking the term-matching heads loses", None, float(main["difference"]),
              float(main["lo"]), float(main["hi"]), "relative change of accuracy, two towers minus heads masked", n,
              1, None, main["verdict"],
              f"{same_as}: two towers {_pct(tower.rel_change)}, heads masked {_pct(masked.rel_change)} "
              f"[{_pct(masked.lo)}, {_pct(masked.hi)}]; equivalence needs the 90% interval [{_pct(main['lo90'])}, "
              f"{_pct(main['hi90'])}] within ±{main['margin']:.0%}."),
    ]


def verdict(conditions: pd.DataFrame, tests: list[dict], masked_label: str, two_tower_label: str) -> str:
    """The study's claims in plain words (:func:`claims`), then the other comparisons by the same rule (markdown)."""
    lines = [render(claims(conditions, tests, masked_label, two_tower_label))]
    for t in tests:
        if {t["a"], t["b"]} != {two_tower_label, masked_label}:
            lines.append(f"- {t['a']} against {t['b']}: difference {_pct(t['difference'])} [{_pct(t['lo'])}, "
                         f"{_pct(t['hi'])}], {t['verdict']} (same rule).")
    return "\n".join(lines)
