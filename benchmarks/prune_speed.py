"""Does pruning heads serve faster? Pairs per second of a pruned model against the unpruned one.

Masking a head costs as much as keeping it; a model rebuilt without it (``Lab.prune``) has smaller matrices. The
heads removed are the least important by gradient importance (normalized per layer, Michel et al. 2019), computed
on the dev pairs only; speed and grades are measured on the test pairs. Each batch size is timed ``--repeats`` times
(median, min and max; the two models in turn, round by round), on the device's precision (bf16 autocast where the
hardware has it), with the processor (and GPU) named.

    python benchmarks/prune_speed.py                       # the default model, half the heads removed
    python benchmarks/prune_speed.py --share 0.4 --batch-sizes 1 64 --repeats 7
    python benchmarks/prune_speed.py --preset e5-en --share 0.3   # a book preset's fine-tuned model
    python benchmarks/prune_speed.py --device cuda --batch-sizes 1 64 256   # on a GPU (benchmarks/gpu_book.sh)

Writes one row per model variant and batch size to ``--out`` (default ``results/prune_speed.csv``, appended), with
the parameter count, the safetensors file size and the share of test grades the pruned model shares with masking.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import headlab
from headlab.book.presets import PRESETS
from headlab.book.records import machine
from headlab.core.device import precision
from headlab.core.evaluate import predict
from headlab.measures.importance import least_important


def pairs_per_second(models: dict, encoded, batch_size: int, device, chosen: str, repeats: int, limit: int) -> dict:
    """Each model's throughput over the first ``limit`` pairs: one untimed pass of each, then ``repeats`` rounds in
    which every model is timed once, in turn, so a drift of the clock or the caches (a GPU warming up) falls on all
    of them alike rather than on whichever ran first."""
    subset = encoded.subset(np.arange(min(limit, len(encoded))))
    for model in models.values():
        predict(model, subset, batch_size=batch_size, device=device, precision=chosen)
    rates = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            started = time.perf_counter()
            predict(model, subset, batch_size=batch_size, device=device, precision=chosen)
            rates[name].append(len(subset) / (time.perf_counter() - started))
    return rates


FINETUNE_SETTINGS = ("EPOCHS", "LR", "FREEZE_WORD_EMBEDDINGS", "TRAIN_LIMIT")  # what picks a preset's fine-tuned model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--data", default="stsb-en")
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="a book preset's model, data and fine-tuning settings (its cached model; e.g. e5-en)",
    )
    parser.add_argument("--share", type=float, default=0.5, help="share of all heads removed (default 0.5)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=256, help="test pairs per timed pass at batch size 1")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--out", default="results/prune_speed.csv")
    parser.add_argument(
        "--run-dir", default="runs", help="a book's RUN_DIR: its dev-pair importance is read, not redone"
    )
    args = parser.parse_args(argv)
    if not 0 < args.share < 1:
        parser.error(f"--share must be between 0 and 1, got {args.share}")

    settings = PRESETS.get(args.preset, {})
    args.model, args.data = settings.get("MODEL", args.model), settings.get("DATA", args.data)
    tuning = {k.lower(): settings[k] for k in FINETUNE_SETTINGS if k in settings}
    test = headlab.load(
        model=args.model, data=args.data, split="test", device=args.device, run_dir=args.run_dir, **tuning
    )
    dev = test.on_split("dev")
    drop = least_important(dev.importance(), args.share)
    device, chosen = test.device, precision(test.device)
    with tempfile.TemporaryDirectory() as folder:
        pruned = test.prune(drop, folder)
        pruned_mb = sum(f.stat().st_size for f in Path(folder).glob("*.safetensors")) / 2**20
        test.model.save_pretrained(Path(folder) / "unpruned", safe_serialization=True)
        full_mb = sum(f.stat().st_size for f in (Path(folder) / "unpruned").glob("*.safetensors")) / 2**20
    pruned = pruned.to(device)
    masked = test.evaluate(drop)
    agreement = float(
        np.mean(
            test.scale.predicted(predict(pruned, test.encoded, batch_size=64, device=device, precision=chosen))
            == test.scale.predicted(masked.probs)
        )
    )
    where = machine(1, torch.get_num_threads())  # the processor; on a GPU, the GPU first
    if device.type == "cuda":
        where = f"{torch.cuda.get_device_name(device)} (host: {where})"
    models = {"unpruned": test.model, "pruned": pruned}
    limits = {b: args.pairs if b == 1 else len(test.encoded) for b in args.batch_sizes}
    rates = {
        b: pairs_per_second(models, test.encoded, b, device, chosen, args.repeats, limits[b]) for b in args.batch_sizes
    }
    rows = []
    for variant, mb in (("unpruned", full_mb), ("pruned", pruned_mb)):
        model = models[variant]
        for batch_size in args.batch_sizes:
            limit, timed = limits[batch_size], rates[batch_size][variant]
            rows.append(
                {
                    "model": args.model,
                    "data": args.data,
                    "variant": variant,
                    "share_removed": args.share,
                    "heads_removed": len(drop) if variant == "pruned" else 0,
                    "batch_size": batch_size,
                    "pairs": limit,
                    "repeats": args.repeats,
                    "pairs_per_s": statistics.median(timed),
                    "pairs_per_s_min": min(timed),
                    "pairs_per_s_max": max(timed),
                    "parameters": sum(p.numel() for p in model.parameters()),
                    "file_mb": round(mb, 2),
                    "accuracy": masked.accuracy if variant == "pruned" else masked.base_accuracy,
                    "grades_as_masking": agreement if variant == "pruned" else np.nan,
                    "machine": where,
                    "device": str(device),
                    "precision": chosen,
                }
            )
            print(
                f"{variant:9s} batch {batch_size:3d}: {rows[-1]['pairs_per_s']:8.1f} pairs/s "
                f"({min(timed):.1f}-{max(timed):.1f})",
                flush=True,
            )
    table = pd.DataFrame(rows)
    for batch_size in args.batch_sizes:
        rate = table[table["batch_size"] == batch_size].set_index("variant")["pairs_per_s"]
        print(
            f"batch {batch_size}: pruned / unpruned = {rate['pruned'] / rate['unpruned']:.2f}x; "
            f"{len(drop)} heads removed, grades as masking on {agreement:.1%} of {len(test.encoded)} test pairs"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, mode="a", header=not out.exists(), index=False, float_format="%.6g")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
