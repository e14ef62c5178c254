"""Does a compressed model serve faster, and what does it cost? Kwon et al.'s post-training compression, int8 and both,
each against the unpruned model, timed honestly.

Every setting is chosen on the dev pairs and measured on the test pairs. The FLOP budget is the smallest of
``--budgets`` whose compressed model stays within ``--within`` of the unpruned model's dev accuracy. The Fisher
importance comes from every dev pair and the mask tuning from ``--tune-pairs`` of them
(:mod:`headlab.core.compress`). Speed is timed in ABBA rounds against the unpruned model (:mod:`headlab.core.timing`):
pairs per second at batch 64 and at batch 1, each a median ratio over rounds with a bootstrap interval, and p50/p95
latency of single pairs, the models interleaved pair by pair. Beside each ratio stands its ceiling: the encoder's
matrix work of the unpruned model over the compressed one's, at the test pairs' mean length (int8 changes the
arithmetic, not the work: its ceiling is 1). Run it three times or more (``--invocation 1``, ``2``, ``3``, separate
processes): each appends its rows to ``--out``, so the spread between invocations shows what drifts from run to run.

    python benchmarks/serve_speed.py --invocation 1
    python benchmarks/serve_speed.py --budgets 0.5 0.6 0.7 --rounds 12 --invocation 2
    python benchmarks/serve_speed.py --save compressed   # also keep the model: compressed/, compressed-transformers/
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import headlab
from headlab.book.records import machine
from headlab.core.compress import (
    compressed_model,
    fisher_importance,
    flops_per_token,
    int8_dynamic,
    search_masks,
    tune_masks,
)
from headlab.core.evaluate import predict
from headlab.core.pruning import expanded
from headlab.core.stats import bootstrap_weights
from headlab.core.timing import abba_rounds, latency_percentiles, ratio_interval


def encoder_flops(model, heads_kept: np.ndarray, neurons_kept: np.ndarray, tokens: float) -> float:
    """The encoder's matrix work per token (:func:`headlab.core.compress.flops_per_token`) with these units kept."""
    head, neuron = flops_per_token(model, tokens)
    return float(heads_kept.sum() * head + neurons_kept.sum() * neuron)


def accuracy_change(grades, base, other, n_boot: int = 2000, seed: int = 0) -> dict:
    """Test accuracy of ``other`` minus ``base`` (predicted grades), in points, with a paired 95% bootstrap interval."""
    delta = (other == grades).astype(float) - (base == grades).astype(float)
    boot = bootstrap_weights(len(delta), n_boot, seed) @ delta / len(delta)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {
        "accuracy": float((other == grades).mean()),
        "change": float(delta.mean()),
        "change_lo": lo,
        "change_hi": hi,
    }


def choose_budget(model, dev, fisher, budgets, within: float, tune_pairs: int, tokens: float, pad_id: int):
    """The smallest FLOP budget (a share of the unpruned encoder's) whose compressed model grades the dev pairs within
    ``within`` of the unpruned model's dev accuracy; the largest budget if none does. Returns the budget, its masks
    and scales, and every budget's dev accuracy."""
    head_flops, neuron_flops = flops_per_token(model, tokens)
    full = encoder_flops(model, np.ones_like(fisher[0], bool), np.ones_like(fisher[1], bool), tokens)
    base = (dev.scale.predicted(predict(model, dev, pad_id=pad_id)) == dev.grades).mean()
    tried: dict[float, float] = {}
    found = None
    tune = dev.subset(np.arange(min(tune_pairs, len(dev))))
    for budget in sorted(budgets):
        heads, neurons = search_masks(*fisher, head_flops, neuron_flops, budget * full)
        scales = tune_masks(model, heads, neurons, tune, pad_id=pad_id)
        small = compressed_model(model, *scales)
        tried[budget] = float((dev.scale.predicted(predict(small, dev, pad_id=pad_id)) == dev.grades).mean())
        if found is None and tried[budget] >= base - within:
            found = (budget, heads, neurons, small)
    if found is None:
        found = (max(budgets), heads, neurons, small)
    return found, float(base), tried


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--data", default="stsb-en")
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.4, 0.5, 0.6, 0.7])
    parser.add_argument("--within", type=float, default=0.01, help="dev accuracy allowed to go (default 1 point)")
    parser.add_argument("--tune-pairs", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=512, help="test pairs per timed pass at batch 64")
    parser.add_argument("--single", type=int, default=64, help="single pairs per round at batch 1")
    parser.add_argument("--invocation", type=int, default=1, help="which run this is (rows pool over invocations)")
    parser.add_argument("--out", default="results/serve_speed.csv")
    parser.add_argument("--run-dir", default="runs")
    parser.add_argument(
        "--save",
        type=Path,
        help="save the compressed model here (headlab.load reads its smaller matrices) and, full size with zeros, "
        "in <save>-transformers (plain transformers loads it: the same grades, no speed-up)",
    )
    args = parser.parse_args(argv)

    test = headlab.load(model=args.model, data=args.data, split="test", device="cpu", run_dir=args.run_dir)
    dev = test.on_split("dev")
    model, pad = test.model, test.pad_id
    tokens = float(np.mean([len(x) for x in test.encoded.input_ids]))
    fisher = fisher_importance(model, dev.encoded, pad_id=pad)
    (budget, heads, neurons, small), dev_base, tried = choose_budget(
        model, dev.encoded, fisher, args.budgets, args.within, args.tune_pairs, tokens, pad
    )
    print(f"dev accuracy unpruned {dev_base:.3f}; compressed by budget: {tried}; chosen {budget}", flush=True)
    if args.save:
        for folder, saved in (
            (args.save, small),
            (args.save.with_name(args.save.name + "-transformers"), expanded(small)),
        ):
            saved.save_pretrained(folder)
            test.tokenizer.save_pretrained(folder)
            print(f"saved {folder}", flush=True)
    variants = {"compressed": small, "int8": int8_dynamic(model), "compressed+int8": int8_dynamic(small)}
    full = encoder_flops(model, np.ones_like(heads), np.ones_like(neurons), tokens)
    ceilings = {"compressed": full / encoder_flops(model, heads, neurons, tokens), "int8": 1.0}
    ceilings["compressed+int8"] = ceilings["compressed"]
    grades = test.encoded.grades
    base_grades = test.scale.predicted(predict(model, test.encoded, pad_id=pad))
    timed = test.encoded.subset(np.arange(min(args.pairs, len(test.encoded))))
    singles = [test.encoded.subset([i]) for i in range(min(args.single, len(test.encoded)))]
    rows = []
    for name, variant in variants.items():
        quality = accuracy_change(grades, base_grades, test.scale.predicted(predict(variant, test.encoded, pad_id=pad)))
        batch = ratio_interval(
            abba_rounds(
                lambda: predict(model, timed, batch_size=64, pad_id=pad),
                lambda v=variant: predict(v, timed, batch_size=64, pad_id=pad),
                args.rounds,
            )
        )
        one = ratio_interval(
            abba_rounds(
                lambda: [predict(model, s, batch_size=1, pad_id=pad) for s in singles],
                lambda v=variant: [predict(v, s, batch_size=1, pad_id=pad) for s in singles],
                args.rounds,
            )
        )
        latency: dict[str, list[float]] = {"base": [], "variant": []}
        for s in singles:
            for which, m in (("base", model), ("variant", variant)):
                started = time.perf_counter()
                predict(m, s, batch_size=1, pad_id=pad)
                latency[which].append(time.perf_counter() - started)
        base_ms, variant_ms = latency_percentiles(latency["base"]), latency_percentiles(latency["variant"])
        rows.append(
            {
                "model": args.model,
                "data": args.data,
                "variant": name,
                "budget": budget if name != "int8" else 1.0,
                "heads_kept": int(heads.sum()) if name != "int8" else int(heads.size),
                "neurons_kept": int(neurons.sum()) if name != "int8" else int(neurons.size),
                "flop_ceiling": ceilings[name],
                "speedup_64": batch["ratio"],
                "speedup_64_lo": batch["lo"],
                "speedup_64_hi": batch["hi"],
                "speedup_1": one["ratio"],
                "speedup_1_lo": one["lo"],
                "speedup_1_hi": one["hi"],
                "rounds": batch["n_rounds"],
                "p50_ms": variant_ms["p50"],
                "p95_ms": variant_ms["p95"],
                "base_p50_ms": base_ms["p50"],
                "base_p95_ms": base_ms["p95"],
                "test_pairs": len(grades),
                **quality,
                "base_accuracy": float((base_grades == grades).mean()),
                "dev_accuracy_by_budget": "; ".join(f"{b:g}: {a:.4f}" for b, a in tried.items()),
                "invocation": args.invocation,
                "machine": machine(1, torch.get_num_threads()),
            }
        )
        r = rows[-1]
        print(
            f"{name:16s} x{r['speedup_64']:.2f} [{r['speedup_64_lo']:.2f}, {r['speedup_64_hi']:.2f}] at batch 64 "
            f"(ceiling x{r['flop_ceiling']:.2f}), x{r['speedup_1']:.2f} at batch 1, p50 {r['p50_ms']:.1f} ms; "
            f"test accuracy {100 * r['change']:+.1f} points [{100 * r['change_lo']:+.1f}, {100 * r['change_hi']:+.1f}]",
            flush=True,
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, mode="a", header=not out.exists(), index=False, float_format="%.6g")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
