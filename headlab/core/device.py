"""Which torch device a run uses (asking for a GPU that is not there is an error, not a silent fallback), and in
which precision its products are computed."""

from __future__ import annotations

import os
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path

import torch


def resolve_device(device: str) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto``; asking for a GPU that is not there is an error, not a fallback."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"DEVICE={device!r} but torch sees no CUDA GPU (torch {torch.__version__}); use 'cpu' or 'auto'"
        )
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"DEVICE must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return torch.device(device)


PRECISION = "HEADLAB_PRECISION"  # auto (the default), fp32 or bf16: the precision of a run's matrix products
NATIVE_BF16 = ("avx512_bf16", "amx_bf16")  # CPU flags of bf16 products in hardware (AVX512-BF16, AMX)


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def precision(device) -> str:
    """``"bf16"`` or ``"fp32"``: how a run's products are computed on ``device`` (bf16 autocast, fp32 weights kept).

    bf16 where the hardware computes it natively: a CUDA GPU, or a CPU with AVX512-BF16 or AMX, where a BERT layer's
    products run 2-4x faster than in fp32 (on a 2-core AMD EPYC Zen 4: 180 against 55-80 GFLOP/s a core); fp32
    elsewhere, where bf16 is emulated and slower. :data:`PRECISION` (``fp32`` or ``bf16``) overrides. A masked run
    and its baseline always share one precision (:class:`headlab.core.engine.MaskEngine`), and a fine-tune's
    precision is part of its cache key, so a number never mixes the two."""
    chosen = os.environ.get(PRECISION, "auto")
    if chosen not in ("auto", "fp32", "bf16"):
        raise ValueError(f"{PRECISION} must be 'auto', 'fp32' or 'bf16', got {chosen!r}")
    if chosen != "auto":
        return chosen
    kind = torch.device(device).type
    return "bf16" if kind == "cuda" or (kind == "cpu" and cpu_flags() & set(NATIVE_BF16)) else "fp32"


def autocast(device, chosen: str | None = None):
    """bf16 autocast on ``device`` when its precision (``chosen``, else :func:`precision`) is bf16; else nothing."""
    device = torch.device(device)
    if (chosen or precision(device)) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()
