"""Which pretraining objective made which heads? The study credits masked-language modelling with the
word-segmentation heads and next-sentence prediction with the term-matching heads. headlab pretrains two
character-level Chinese BERTs that differ only in that switch (``zh-char``: MLM+NSP, ``zh-char-mlm``: MLM alone;
same corpus, sentence pairs, steps and seed), so the claim becomes a comparison of two result folders:

    make book MODEL=zh-char && make book MODEL=zh-char-mlm
    python -m headlab.pages.objectives runs/zh-char-stsb-zh-*-test-all runs/zh-char-mlm-stsb-zh-*-test-all

The prediction, if the study is right: masking the term-matching heads costs the MLM+NSP model more than the
MLM-only model (whose "term-matching heads", found by the same score, should be no worse to lose than random
heads), while the segmentation heads are as good without NSP. Each model is one pretraining run (one seed), so a
difference between them mixes the objective with the luck of that run; the verdict says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

from headlab.judging.units import OBJECTIVES_MATCHING, STUDY_OBJECTIVES_MATCHING, objectives_gain
from headlab.judging.verdicts import Claim, Kind, StudyClaim, Tally, render
from headlab.measures.segmentation import ALL, MULTI
from headlab.models.names import MODELS, named_model_dir
from headlab.models.pretrain import pretraining_report

SEG_CORPUS = "pku-1998"
NSP_ACCURACY = "next-sentence accuracy (pairs of the last 50 training steps; chance 50%)"
TERM_HEADS_MASKED = "the 5 term-matching heads masked: relative change"
STUDY_MATCHING_LOSS = -0.524  # the study's model (pretrained with NSP): the 5 matching heads masked, against +0% random


def best_head_gain(subset: str) -> str:
    """The measure naming the best segmentation head's gain on ``subset`` (ALL or MULTI)."""
    return f"best head: gain over the majority class ({subset})"


def pretrained_name(run_folder: Path) -> str:
    """``zh-char-mlm`` for ``runs/zh-char-mlm-stsb-zh-<key>-test-all``: the longest pretrained name it starts with."""
    names = [n for n in MODELS if Path(run_folder).name.startswith(n + "-")]
    if not names:
        raise ValueError(
            f"{run_folder} is not the result folder of a model headlab pretrains "
            f"(its name starts with none of {sorted(MODELS)})"
        )
    return max(names, key=len)


def _read(folder: Path, name: str) -> pd.DataFrame:
    path = Path(folder) / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run notebooks 00, 03 and 05 on this model first")
    return pd.read_csv(path)


def _row(table: pd.DataFrame, **where) -> pd.Series:
    hit = table
    for column, value in where.items():
        hit = hit[hit[column] == value]
    if len(hit) != 1:
        raise ValueError(f"expected one row with {where}, found {len(hit)}")
    return hit.iloc[0]


def objective_results(run_folder) -> pd.DataFrame:
    """One model's figures that bear on the claim, as tidy rows: finding, measure, value, lo, hi, n."""
    folder = Path(run_folder)
    name = pretrained_name(folder)
    rows = []
    report = pretraining_report(named_model_dir(name))  # None until that model is pretrained in this cache
    if report is not None:
        rows.append(
            (
                "pretraining",
                "masked-token accuracy (held-out sentences)",
                report["masked_token_accuracy"],
                report["masked_token_accuracy_lo"],
                report["masked_token_accuracy_hi"],
                report["masked_tokens"],
            )
        )
        if "nsp_accuracy" in report["final_train"]:  # the mean over the last 50 steps' pairs (half true, half random)
            n = 50 * report["config"]["batch_size"]
            ci = binomtest(round(report["final_train"]["nsp_accuracy"] * n), n).proportion_ci(method="wilson")
            rows.append(("pretraining", NSP_ACCURACY, report["final_train"]["nsp_accuracy"], ci.low, ci.high, n))
    acc = _row(_read(folder, "baseline_metrics.csv"), metric="accuracy")
    rows.append(("fine-tuned", "test accuracy", acc["value"], acc["lo"], acc["hi"], acc["n_examples"]))

    seg = _read(folder, f"segmentation_comparison_{SEG_CORPUS}.csv")
    for subset in (ALL, MULTI):
        for measure, label in (
            ("best head, chosen on other examples", best_head_gain(subset)),
            ("probe on all heads, held-out examples", f"probe on all heads: gain over the majority class ({subset})"),
        ):
            r = _row(seg, subset=subset, measure=measure)
            rows.append(("segmentation", label, r["gain"], r["gain_lo"], r["gain_hi"], r["n_test_tokens"]))

    terms = _read(folder, "term_matching_table.csv")
    for condition, label in (
        ("matching", TERM_HEADS_MASKED),
        ("random", "5 random heads masked: relative change (mean of draws)"),
    ):
        r = _row(terms, condition=condition)
        rows.append(("term matching", label, r["rel_change"], r["lo"], r["hi"], r["n_examples"]))
    vs = _row(_read(folder, "term_matching_vs_random.csv"), tested="matching", reference="random")
    rows.append(
        (
            "term matching",
            "matching heads minus the mean of random heads: relative change, in points",
            vs["difference"],
            vs["difference_lo"],
            vs["difference_hi"],
            vs["n_draws"],
        )
    )
    table = pd.DataFrame(rows, columns=["finding", "measure", "value", "lo", "hi", "n"])
    return table.assign(model=name, objective=MODELS[name].objective)[["model", "objective", *table.columns]]


def compare_objectives(with_nsp, without_nsp) -> pd.DataFrame:
    """Both models' figures side by side, and their difference (MLM+NSP minus MLM only) with an approximate 95%
    interval from the two intervals taken as independent normal ones (the models are scored on the same examples,
    which this ignores; with positively correlated errors the true interval is narrower)."""
    a, b = objective_results(with_nsp), objective_results(without_nsp)
    if a["objective"].iat[0] != "mlm+nsp" or b["objective"].iat[0] != "mlm":
        raise ValueError(
            f"pass the MLM+NSP model's results first and the MLM-only model's second; got "
            f"{a['model'].iat[0]} ({a['objective'].iat[0]}) and {b['model'].iat[0]} ({b['objective'].iat[0]})"
        )
    keys = ["finding", "measure"]
    table = a.drop(columns="objective").merge(
        b.drop(columns="objective"), on=keys, how="outer", suffixes=("_nsp", "_mlm"), sort=False
    )
    half = (((table["hi_nsp"] - table["lo_nsp"]) / 2) ** 2 + ((table["hi_mlm"] - table["lo_mlm"]) / 2) ** 2) ** 0.5
    # only estimates with an interval on both sides are differenced (not p-values, not a one-sided NSP accuracy)
    table["difference"] = (table["value_nsp"] - table["value_mlm"]).where(half.notna())
    table["difference_lo"], table["difference_hi"] = table["difference"] - half, table["difference"] + half
    return table


def _interval(value, lo, hi, unit: str = "%") -> str:
    """``-0.6% [-2.3%, +1.3%]`` for a relative change; ``unit=" points"`` for a difference of accuracies."""
    fmt = (lambda x: f"{100 * x:+.1f}%") if unit == "%" else (lambda x: f"{100 * x:+.1f}")
    text = fmt(value) if pd.isna(lo) else f"{fmt(value)} [{fmt(lo)}, {fmt(hi)}]"
    return text if unit == "%" else text + unit


MATCHING_CLAIM = StudyClaim(
    "objectives.nsp_made_matching_heads",
    "objectives",
    "Next-sentence prediction made the term-matching heads: losing them costs the model pretrained with it "
    "more than the model pretrained without it",
    "(credited to next-sentence-prediction pretraining)",
    Kind.COMPARE,
    direction=-1,
    tally=Tally.OBJECTIVES,
)
SEGMENTATION_CLAIM = StudyClaim(
    "objectives.mlm_made_segmentation_heads",
    "objectives",
    "Masked-language modelling alone made the word-segmentation heads: they segment as well without "
    "next-sentence prediction",
    "The study credits masked-language-model pretraining for this.",
    Kind.NO_EFFECT,
    tally=Tally.OBJECTIVES,
)
CLAIMS = (MATCHING_CLAIM, SEGMENTATION_CLAIM)
DIFFERENCE_METHOD = (
    "the two models' 95% intervals taken as independent normal ones (root sum of squares; one pretraining run each)"
)


def claims(table: pd.DataFrame) -> list[Claim]:
    """The study's credit of its two pretraining objectives as rows (:data:`CLAIMS`, tally ``objectives``, a family
    of its own), judged by :func:`headlab.judging.verdicts.judge` on the differences of
    :func:`compare_objectives` (MLM+NSP minus MLM alone): NSP made the term-matching heads (masking them costs the NSP
    model more, by the registered size), and MLM alone made the segmentation heads (the best head's gain over the
    majority class is the same within the registered margin; multi-token words shown beside, not judged)."""

    def get(measure):
        return _row(table, measure=measure)

    tm = get(TERM_HEADS_MASKED)
    matching = Claim.measured(
        MATCHING_CLAIM,
        ours=tm.difference,
        lo=tm.difference_lo,
        hi=tm.difference_hi,
        unit=OBJECTIVES_MATCHING,
        method=DIFFERENCE_METHOD,
        n_examples=int(tm.n_nsp),
        study=STUDY_MATCHING_LOSS,
        study_unit=STUDY_OBJECTIVES_MATCHING,
        reason=f"Masking the 5 term-matching heads changes accuracy by {_interval(tm.value_nsp, tm.lo_nsp, tm.hi_nsp)} "
        f"with NSP and {_interval(tm.value_mlm, tm.lo_mlm, tm.hi_mlm)} without",
    )
    rows = [matching]
    for subset, part in ((ALL, ""), (MULTI, "multi-token")):
        r = get(best_head_gain(subset))
        rows.append(
            Claim.measured(
                SEGMENTATION_CLAIM,
                part=part,
                claim=f"… on {subset} only" if part else None,
                ours=r.difference,
                lo=r.difference_lo,
                hi=r.difference_hi,
                unit=objectives_gain(subset),
                method=DIFFERENCE_METHOD,
                n_examples=int(r.n_nsp),
                reason=f"The best single segmentation head (chosen and scored on different sentences) beats the "
                f"majority class on {subset} by {_interval(r.value_nsp, r.lo_nsp, r.hi_nsp, ' points')} with NSP and "
                f"{_interval(r.value_mlm, r.lo_mlm, r.hi_mlm, ' points')} with MLM alone",
            )
        )
    return rows


def verdict(table: pd.DataFrame) -> str:
    """The claims (:func:`claims`) rendered, then what bounds them: how much NSP was learned, and one run per
    objective (markdown)."""
    lines = [render(claims(table))]
    if NSP_ACCURACY in set(table["measure"]):
        nsp = _row(table, measure=NSP_ACCURACY)
        lines.append(
            f"- How much NSP was learned bounds what it can be credited with: the MLM+NSP model told true from "
            f"random next sentences on {nsp.value_nsp:.1%} [{nsp.lo_nsp:.1%}, {nsp.hi_nsp:.1%}] of its last "
            f"{nsp.n_nsp:.0f} training pairs (chance: 50%)."
        )
    lines.append(
        "- Each objective is one pretraining run with one seed: a difference between the two models mixes the "
        "objective with the luck of the run."
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m headlab.pages.objectives WITH_NSP WITHOUT_NSP``: write the comparison; the exit status."""
    parser = argparse.ArgumentParser(description="Compare the MLM+NSP and MLM-only Chinese models' result folders.")
    parser.add_argument("with_nsp", type=Path, help="result folder of zh-char (runs/zh-char-stsb-zh-...)")
    parser.add_argument("without_nsp", type=Path, help="result folder of zh-char-mlm (runs/zh-char-mlm-stsb-zh-...)")
    parser.add_argument("--out", type=Path, help="CSV to write (default: objectives.csv beside the two folders)")
    args = parser.parse_args(argv)
    table = compare_objectives(args.with_nsp, args.without_nsp)
    out = args.out or args.with_nsp.parent / "objectives.csv"
    table.to_csv(out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 70):
        print(
            table[
                ["finding", "measure", "value_nsp", "value_mlm", "difference", "difference_lo", "difference_hi"]
            ].to_string(index=False, float_format=lambda x: f"{x:.4f}")
        )
    print()
    print(verdict(table))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
