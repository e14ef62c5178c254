"""Time headlab's sweep engine against the naive loop, on the default model and test split.

The naive loop is how the transformers ``bertology`` example did it: one mask at a time, a full forward pass,
every pair padded to 128 tokens, eager attention. headlab's engine: length-sorted dynamic padding, sdpa,
reuse of the unmasked layers below a mask's first masked head, the last layer at ``[CLS]`` alone, removed heads
left out of the computation, its products through oneDNN on a CPU with AVX-512 (MKL's elsewhere: the faster of the
two there), several masks per pass where asked. The engine also runs with removed heads computed and zeroed by the
masking hooks instead, to show what leaving them out saves, and on the CPU with its products through the other of
MKL and oneDNN, to show what the choice saves on this processor.

    python benchmarks/sweep_speed.py                    # both workloads, every mask, both ways
    python benchmarks/sweep_speed.py --naive-sample 12  # time the naive loop on 12 masks per workload only
    python benchmarks/sweep_speed.py --masks 20 --naive-sample 2   # 20 masks per workload (a few minutes)
    python benchmarks/sweep_speed.py --engine-only      # the roofline alone: the engine against this machine's peak

Prints both times, their ratio, the largest accuracy difference between the two (0 expected on a CPU), and a
roofline: the FLOP/s of the products the engine computes (``MaskEngine.matmul_flops``: the work done, removed
heads and skipped layers not counted) beside this machine's fp32 and bf16 matmul peaks, measured in the same run on
the same threads (a large square product; and at the feed-forward's shape, what the model's layer width can reach). The
roofline rows are appended to ``results/roofline.csv`` (``--out``), so each processor's share is on record.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from headlab.book.records import machine
from headlab.core.device import precision
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import Encoded
from headlab.core.masking import mask_heads
from headlab.core.onednn import dense, onednn_available
from headlab.core.sweep import random_share_specs, single_head_specs
from headlab.lab.lab import Lab
from headlab.lab.params import Params


def naive_probabilities(model, encoded: Encoded, mask, batch_size: int, device) -> np.ndarray:
    """One mask, full forward passes, every pair padded to 128 tokens, eager attention."""
    probs = np.zeros((len(encoded), encoded.scale.count), dtype=np.float32)
    with torch.inference_mode(), mask_heads(model, mask):
        for start in range(0, len(encoded), batch_size):
            rows = range(start, min(start + batch_size, len(encoded)))
            ids = torch.zeros((len(rows), 128), dtype=torch.long)
            types = torch.zeros_like(ids)
            attention = torch.zeros_like(ids)
            for r, i in enumerate(rows):
                n = len(encoded.input_ids[i])
                ids[r, :n] = torch.tensor(encoded.input_ids[i])
                types[r, :n] = torch.tensor(encoded.token_type_ids[i])
                attention[r, :n] = 1
            logits = model(
                input_ids=ids.to(device), token_type_ids=types.to(device), attention_mask=attention.to(device)
            ).logits
            probs[start : start + len(rows)] = torch.softmax(logits.float(), -1).cpu().numpy()
    return probs


def matmul_rate(device, dtype=torch.float32, onednn: bool = False, shape=(2048, 2048, 2048), seconds=1.0) -> float:
    """Measured FLOP/s of an ``m x k`` by ``k x n`` product in ``dtype`` through torch (oneDNN's fp32 products with
    ``onednn``), repeated for at least ``seconds`` after one untimed product, on torch's threads as they are now. A
    large square product is this machine's practical peak; a layer's shape is what a model's products can reach."""
    m, k, n = shape
    device = torch.device(device)
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(n, k, device=device, dtype=dtype)
    product = dense(b, None) if onednn else (lambda x: torch.nn.functional.linear(x, b))

    def timed(repeats: int) -> float:
        started = time.perf_counter()
        for _ in range(repeats):
            product(a)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started

    repeats = 1
    timed(1)
    while (elapsed := timed(repeats)) < seconds:
        repeats *= 2
    return 2 * m * k * n * repeats / elapsed


def peaks(device, ffn_shape) -> dict[str, float]:
    """This machine's matmul FLOP/s, same run and threads as the engine: fp32 and bf16 at a large square product
    (the peak) and at the feed-forward's shape, and both fp32 ones through oneDNN where the engine can use it."""
    rates = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        rates[f"{name} peak"] = matmul_rate(device, dtype)
        rates[f"{name} at the feed-forward's shape"] = matmul_rate(device, dtype, shape=ffn_shape)
    if onednn_available(device):
        rates["fp32 peak through oneDNN"] = matmul_rate(device, onednn=True)
        rates["fp32 at the feed-forward's shape through oneDNN"] = matmul_rate(device, onednn=True, shape=ffn_shape)
    return rates


def engine_peak(engine: MaskEngine, rates: dict[str, float]) -> tuple[str, float]:
    """The peak of the products the engine computes: bf16 under autocast, else fp32 (through oneDNN if it uses it)."""
    name = "bf16 peak" if engine.autocast else "fp32 peak through oneDNN" if engine.onednn else "fp32 peak"
    return name, rates[name]


def compare(engine_probs, masks, model, encoded, args, device, rng) -> dict[str, float]:
    """The engine's grades and time against the naive loop, the engine with removed heads computed and zeroed, and
    (on the CPU in fp32) the engine with its products through the other library (oneDNN's instead of MKL's, or the
    reverse): seconds of each, printed as it goes."""
    fast, t_engine, engine = engine_probs

    def variant(**options) -> tuple[float, float]:
        """Seconds of the engine with ``options``, and the smallest share of pairs per mask graded as headlab does."""
        started = time.perf_counter()
        probs = MaskEngine(
            model, encoded, args.batch_size, device, masks_per_pass=args.masks_per_pass, **options
        ).probabilities(masks)
        seconds = time.perf_counter() - started
        return seconds, min(float(np.mean(a.argmax(1) == b.argmax(1))) for a, b in zip(fast, probs))

    t_zeroed, agree = variant(leave_out_removed=False)
    swapped = not engine.autocast and onednn_available(device)
    t_other, agree_other = variant(onednn=not engine.onednn) if swapped else (0.0, 1.0)
    picked = (
        np.arange(len(masks)) if not args.naive_sample else np.sort(rng.choice(len(masks), args.naive_sample, False))
    )
    model.set_attn_implementation("eager")
    started = time.perf_counter()
    slow = {i: naive_probabilities(model, encoded, masks[i], args.batch_size, device) for i in picked}
    t_naive = (time.perf_counter() - started) * len(masks) / len(picked)
    model.set_attn_implementation("sdpa")

    def acc(probs):
        return float(np.mean(encoded.scale.predicted(probs) == encoded.grades))

    diff = max(abs(acc(fast[i]) - acc(slow[i])) for i in picked)
    note = "" if len(picked) == len(masks) else f" (extrapolated from {len(picked)} of {len(masks)} masks)"
    print(f"  naive loop : {t_naive:8.1f} s{note}")
    print(f"  speed-up   : {t_naive / t_engine:8.2f}x   largest accuracy difference: {diff:.6f}")
    print(
        f"  removed heads computed and zeroed: {t_zeroed:8.1f} s ({t_zeroed / t_engine:.2f}x headlab's time; "
        f"grades agree on at least {agree:.4%} of pairs per mask)"
    )
    if swapped:
        print(
            f"  products through {other_library(engine)}: {t_other:8.1f} s ({t_other / t_engine:.2f}x "
            f"headlab's time; grades agree on at least {agree_other:.4%} of pairs per mask)"
        )
    return {"naive": t_naive, "zeroed": t_zeroed, "other": t_other}


def other_library(engine: MaskEngine) -> str:
    """The fp32 product library the engine did not choose on this processor, named for the printout."""
    return "MKL (torch's default), not oneDNN" if engine.onednn else "oneDNN, not MKL (torch's default)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--masks-per-pass", type=int, default=1)
    parser.add_argument(
        "--naive-sample", type=int, default=0, help="naive loop on this many masks per workload (0: all)"
    )
    parser.add_argument(
        "--masks", type=int, default=0, help="time this many masks of each workload, drawn at random (0: all)"
    )
    parser.add_argument(
        "--engine-only", action="store_true", help="the engine and the roofline only (no naive loop or variants)"
    )
    parser.add_argument("--out", default="results/roofline.csv", help="the roofline rows are appended here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    params = Params(device=args.device, seed=args.seed)
    lab = Lab.from_params(params)
    model, encoded = lab.model, lab.encoded
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    device = params.torch_device
    print(
        f"model {params.fine_tune().name}: {layers}x{heads} heads, {len(encoded)} test pairs, device {device}, "
        f"{torch.get_num_threads()} threads"
    )
    workloads = {
        "single-head grid": single_head_specs(layers, heads),
        "10 shares x 10 draws": random_share_specs(layers, heads, [i / 10 for i in range(1, 11)], 10, args.seed),
    }
    rng = np.random.default_rng(args.seed)
    timed, totals = {}, {"engine": 0.0, "naive": 0.0, "zeroed": 0.0, "other": 0.0}
    for name, specs in workloads.items():
        if args.masks and args.masks < len(specs):
            specs = [specs[i] for i in np.sort(rng.choice(len(specs), args.masks, replace=False))]
        masks = [s.keep(layers, heads) for s in specs]
        started = time.perf_counter()
        engine = MaskEngine(model, encoded, args.batch_size, device, masks_per_pass=args.masks_per_pass)
        fast = engine.probabilities(masks)
        t_engine = time.perf_counter() - started
        timed[name] = (len(masks), t_engine, engine.matmul_flops(masks))
        totals["engine"] += t_engine
        print(f"\n{name}: {len(masks)} masks")
        rate = timed[name][2] / t_engine / 1e9
        print(f"  headlab    : {t_engine:8.1f} s   ({rate:.1f} GFLOP/s of the products it computes)")
        if not args.engine_only:
            for key, seconds in compare((fast, t_engine, engine), masks, model, encoded, args, device, rng).items():
                totals[key] += seconds
    if not args.engine_only:
        print(
            f"\nall workloads: naive {totals['naive']:.1f} s, headlab {totals['engine']:.1f} s, "
            f"speed-up {totals['naive'] / totals['engine']:.2f}x; "
            f"removed heads zeroed instead of left out: {totals['zeroed']:.1f} s"
            + (f"; products through {other_library(engine)}: {totals['other']:.1f} s" if totals["other"] else "")
        )
    record_roofline(engine, timed, device, Path(args.out))


def record_roofline(engine: MaskEngine, timed: dict, device, out: Path) -> None:
    """Print the engine's achieved FLOP/s beside this machine's measured fp32 and bf16 peaks (measured now, same
    threads) and append one row per workload to ``out``."""
    cells = [inputs["input_ids"].numel() for _, inputs in engine.batches]
    config = engine.model.config
    rates = peaks(device, (int(np.mean(cells)), config.hidden_size, config.intermediate_size))
    own, own_peak = engine_peak(engine, rates)
    native = precision(device) == "bf16"
    print("\nthis machine's matmul FLOP/s, measured now on the same threads:")
    for name, rate in rates.items():
        print(f"  {name:45s} {rate / 1e9:8.1f} GFLOP/s")
    if not native:
        print("  (no native bf16 here: its bf16 products are emulated, so the fp32 peak is the physical limit)")
    rows = []
    for name, (n_masks, seconds, flops) in timed.items():
        achieved = flops / seconds
        of_bf16 = achieved / rates["bf16 peak"] if native else float("nan")  # an emulated bf16 is no ceiling
        print(
            f"{name}: the engine reached {achieved / 1e9:.1f} GFLOP/s, {achieved / own_peak:.0%} of the {own} it "
            f"computes in" + (f" and {of_bf16:.0%} of the bf16 peak" if native else "")
        )
        rows.append(
            {
                "workload": name,
                "masks": n_masks,
                "seconds": seconds,
                "engine_gflops": achieved / 1e9,
                "engine_precision": own,
                "share_of_own_peak": achieved / own_peak,
                "share_of_bf16_peak": of_bf16,
                "native_bf16": native,
                **{f"{key.replace(' ', '_').replace(chr(39), '')}_gflops": r / 1e9 for key, r in rates.items()},
                "machine": machine(1, torch.get_num_threads()),
                "device": str(device),
                "torch": torch.__version__,
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, mode="a", header=not out.exists(), index=False, float_format="%.6g")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
