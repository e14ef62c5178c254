"""Time the single-head grid in one process against the same sweep on Dask worker processes, and size a big sweep.

On 2 cores, 2 worker processes of 1 thread against 1 process of 2 threads should be near parity: the point is
that the results are identical and the seam works. The script then estimates, from the measured cost of one mask
and the matmul FLOPs of a forward pass, what a 24 x 16 grid plus 1,000 random draws would cost for BERT-large on
the same pairs (an estimate on paper: it scales the FLOPs, at the throughput you give).

    python benchmarks/dask_speed.py --workers 2 --limit 400
    python benchmarks/dask_speed.py --gpu-tflops 400 --gpus 8     # the on-paper line for 8 GPUs at 400 TFLOP/s
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sweep_speed import engine_flops

from headlab.core.cluster import connect
from headlab.core.sweep import run_sweep, single_head_specs
from headlab.lab.lab import Lab
from headlab.lab.params import Params

BERT_LARGE = {"layers": 24, "heads": 16, "hidden": 1024, "inner": 4096}


def pass_flops(lengths, hidden: int, inner: int, layers: int, batch_size: int) -> float:
    """Matmul FLOPs of one full forward pass over pairs of these lengths (length-sorted batches)."""
    lengths = np.sort(np.asarray(lengths))
    per_layer = 0.0
    for start in range(0, len(lengths), batch_size):
        t = lengths[start : start + batch_size].max()
        rows = len(lengths[start : start + batch_size])
        per_layer += rows * (2 * 4 * t * hidden * hidden + 2 * 2 * t * t * hidden + 2 * 2 * t * hidden * inner)
    return per_layer * layers


def timed_sweep(lab, specs, folder: Path, **kwargs) -> tuple[float, pd.DataFrame]:
    started = time.perf_counter()
    table = run_sweep(
        lab.model,
        lab.encoded,
        specs,
        folder,
        batch_size=lab.batch_size,
        device=lab.device,
        pad_id=lab.pad_id,
        progress=False,
        **kwargs,
    )
    return time.perf_counter() - started, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="test pairs (default: all)")
    parser.add_argument("--gpu-tflops", type=float, default=200.0, help="sustained throughput per GPU for the estimate")
    parser.add_argument("--gpus", type=int, default=4)
    args = parser.parse_args()

    lab = Lab.from_params(Params(device="cpu", eval_limit=args.limit))
    layers, heads = lab.shape
    specs = single_head_specs(layers, heads)
    client = connect(f"local:{args.workers}")
    with tempfile.TemporaryDirectory() as tmp:
        torch.set_num_threads(args.workers)
        t_one, one = timed_sweep(lab, specs, Path(tmp) / "one")
        timed_sweep(lab, specs[:1], Path(tmp) / "warm", cluster=client)  # ship the model once, start the workers
        t_dask, spread = timed_sweep(lab, specs, Path(tmp) / "dask", cluster=client)
    identical = one.equals(spread)
    print(
        f"single-head grid, {len(specs)} masks + the unmasked model, {len(lab.encoded)} pairs, {layers}x{heads} heads:"
    )
    print(f"  1 process x {args.workers} threads : {t_one:7.1f} s")
    print(f"  {args.workers} Dask workers x 1 thread: {t_dask:7.1f} s   (model already on the workers)")
    print(f"  identical per-example tables: {identical}")

    lengths = [len(ids) for ids in lab.encoded.input_ids]
    masks = [s.keep(layers, heads) for s in specs]
    measured = engine_flops(lab.model, lab.encoded, masks, lab.batch_size) / t_one
    full = pass_flops(lengths, BERT_LARGE["hidden"], BERT_LARGE["inner"], BERT_LARGE["layers"], lab.batch_size)
    n_masks = BERT_LARGE["layers"] * BERT_LARGE["heads"] + 1000
    total = full * n_masks  # upper bound: no reuse of the layers below a mask
    print(
        f"\non paper: BERT-large ({BERT_LARGE['layers']}x{BERT_LARGE['heads']}) on these {len(lengths)} pairs, "
        f"{n_masks} masks (the grid and 1,000 random draws), {total / 1e15:.2f} PFLOP without layer reuse:"
    )
    print(f"  this machine at its measured {measured / 1e9:.0f} GFLOP/s: {total / measured / 3600:.1f} h")
    for n in sorted({1, args.gpus}):
        print(
            f"  {n} GPU(s) at an assumed {args.gpu_tflops:.0f} TFLOP/s each: "
            f"{total / (n * args.gpu_tflops * 1e12) / 60:.1f} min"
        )


if __name__ == "__main__":
    main()
