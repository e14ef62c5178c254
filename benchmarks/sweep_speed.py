"""Time headlab's sweep engine against the naive loop, on the default model and test split.

The naive loop is how the transformers ``bertology`` example did it: one mask at a time, a full forward pass,
every pair padded to 128 tokens, eager attention. headlab's engine: length-sorted dynamic padding, sdpa,
reuse of the unmasked layers below a mask's first masked head, the last layer at ``[CLS]`` alone, removed heads
left out of the computation, its products through oneDNN on the CPU, several masks per pass where asked. The engine
also runs with removed heads computed and zeroed by the masking hooks instead, to show what leaving them out saves,
and on the CPU with its products through torch's default (MKL), to show what oneDNN saves.

    python benchmarks/sweep_speed.py                    # both workloads, every mask, both ways
    python benchmarks/sweep_speed.py --naive-sample 12  # time the naive loop on 12 masks per workload only
    python benchmarks/sweep_speed.py --masks 20 --naive-sample 2   # 20 masks per workload (a few minutes)

Prints both times, their ratio, the largest accuracy difference between the two (0 expected on a CPU), and
the achieved FLOP/s against this machine's measured fp32 matmul peak.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from headlab.core.engine import MaskEngine, first_masked_layer
from headlab.core.evaluate import NUM_GRADES, Encoded
from headlab.core.masking import mask_heads
from headlab.core.onednn import dense, onednn_available
from headlab.core.sweep import random_share_specs, single_head_specs
from headlab.lab.lab import Lab
from headlab.lab.params import Params


def naive_probabilities(model, encoded: Encoded, mask, batch_size: int, device) -> np.ndarray:
    """One mask, full forward passes, every pair padded to 128 tokens, eager attention."""
    probs = np.zeros((len(encoded), NUM_GRADES), dtype=np.float32)
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


def matmul_peak(device, n: int = 2048, repeats: int = 10, onednn: bool = False) -> float:
    """Measured fp32 matmul FLOP/s (torch's default, or oneDNN's): the practical ceiling for this model's work."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    product = dense(b, None) if onednn else (lambda x: x @ b)
    product(a)
    started = time.perf_counter()
    for _ in range(repeats):
        product(a)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * repeats / (time.perf_counter() - started)


def engine_flops(model, encoded: Encoded, masks, batch_size: int) -> float:
    """Matmul FLOPs the engine performs (skipped layers excluded): projections, attention and feed-forward."""
    cfg = model.config
    d, inner, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    lengths = np.sort([len(x) for x in encoded.input_ids])
    per_layer = 0.0
    for start in range(0, len(lengths), batch_size):
        t = lengths[start : start + batch_size].max()
        rows = len(lengths[start : start + batch_size])
        per_layer += rows * (2 * 4 * t * d * d + 2 * 2 * t * t * d + 2 * 2 * t * d * inner)
    computed_layers = sum(layers - min(first_masked_layer(m), layers) for m in masks)
    return per_layer * (computed_layers + layers)  # + the one unmasked pass that records layer outputs


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
    total_engine = total_naive = total_zeroed = total_mkl = 0.0
    for name, specs in workloads.items():
        if args.masks and args.masks < len(specs):
            specs = [specs[i] for i in np.sort(rng.choice(len(specs), args.masks, replace=False))]
        masks = [s.keep(layers, heads) for s in specs]
        started = time.perf_counter()
        engine = MaskEngine(model, encoded, args.batch_size, device, masks_per_pass=args.masks_per_pass)
        fast = engine.probabilities(masks)
        t_engine = time.perf_counter() - started
        flops = engine_flops(model, encoded, masks, args.batch_size)
        started = time.perf_counter()
        zeroed = MaskEngine(
            model, encoded, args.batch_size, device, masks_per_pass=args.masks_per_pass, leave_out_removed=False
        ).probabilities(masks)
        t_zeroed = time.perf_counter() - started
        agree = min(float(np.mean(a.argmax(1) == b.argmax(1))) for a, b in zip(fast, zeroed))
        t_mkl = agree_mkl = None
        if engine.onednn:
            started = time.perf_counter()
            default = MaskEngine(
                model, encoded, args.batch_size, device, masks_per_pass=args.masks_per_pass, onednn=False
            ).probabilities(masks)
            t_mkl = time.perf_counter() - started
            agree_mkl = min(float(np.mean(a.argmax(1) == b.argmax(1))) for a, b in zip(fast, default))
            total_mkl += t_mkl

        picked = (
            np.arange(len(masks))
            if not args.naive_sample
            else np.sort(rng.choice(len(masks), args.naive_sample, replace=False))
        )
        model.set_attn_implementation("eager")
        started = time.perf_counter()
        slow = {i: naive_probabilities(model, encoded, masks[i], args.batch_size, device) for i in picked}
        t_naive = (time.perf_counter() - started) * len(masks) / len(picked)
        model.set_attn_implementation("sdpa")

        def acc(probs):
            return float(np.mean(probs.argmax(1) + 1 == encoded.grades))

        diff = max(abs(acc(fast[i]) - acc(slow[i])) for i in picked)
        note = "" if len(picked) == len(masks) else f" (extrapolated from {len(picked)} of {len(masks)} masks)"
        print(f"\n{name}: {len(masks)} masks")
        print(f"  naive loop : {t_naive:8.1f} s{note}")
        print(f"  headlab    : {t_engine:8.1f} s   ({flops / t_engine / 1e9:.1f} GFLOP/s of a pass with every head)")
        print(f"  speed-up   : {t_naive / t_engine:8.2f}x   largest accuracy difference: {diff:.6f}")
        print(
            f"  removed heads computed and zeroed: {t_zeroed:8.1f} s ({t_zeroed / t_engine:.2f}x headlab's time; "
            f"grades agree on at least {agree:.4%} of pairs per mask)"
        )
        if t_mkl is not None:
            print(
                f"  products through torch's default (MKL), not oneDNN: {t_mkl:8.1f} s ({t_mkl / t_engine:.2f}x "
                f"headlab's time; grades agree on at least {agree_mkl:.4%} of pairs per mask)"
            )
        total_engine += t_engine
        total_naive += t_naive
        total_zeroed += t_zeroed
    peak = matmul_peak(device)
    print(
        f"\nall workloads: naive {total_naive:.1f} s, headlab {total_engine:.1f} s, "
        f"speed-up {total_naive / total_engine:.2f}x; "
        f"removed heads zeroed instead of left out: {total_zeroed:.1f} s"
    )
    print(f"measured fp32 matmul peak on this machine: {peak / 1e9:.1f} GFLOP/s")
    if onednn_available(device):
        print(
            f"  through oneDNN: {matmul_peak(device, onednn=True) / 1e9:.1f} GFLOP/s; the engine with MKL's products "
            f"instead: {total_mkl:.1f} s"
        )


if __name__ == "__main__":
    main()
