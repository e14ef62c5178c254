"""Dense layers through oneDNN on the CPU, for the sweeps' forward passes.

torch sends an fp32 ``Linear`` on the CPU to MKL, whose GEMM takes a slower path on AMD processors: on one core of a
2-core AMD EPYC (Zen 5, AVX-512) it reached 110 GFLOP/s where oneDNN, which torch also carries, reached 230 (a
1728 x 384 by 384 x 1536 product: the feed-forward of a 64-pair batch). A sweep's time is nearly all such products
(``addmm`` was 89% of a mask on all-MiniLM-L6-v2), so :class:`headlab.core.engine.MaskEngine` computes its layers with
:func:`dense`. Both are fp32; they differ in float rounding only.

oneDNN allocates every output afresh. glibc hands a freed block of that size back to the kernel at once, so each
product would fault its output's pages in anew, which cost half of the gain: :func:`keep_freed_memory` keeps freed
memory in the process for reuse.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import torch

# glibc's mallopt options (malloc.h) and the largest mmap threshold it accepts on 64-bit (32 MiB)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
LARGEST_MMAP_THRESHOLD = 32 * 1024 * 1024
_memory_kept = False


def onednn_available(device) -> bool:
    """True on the CPU when this torch build carries oneDNN."""
    return torch.device(device).type == "cpu" and torch.backends.mkldnn.is_available()


def dense(weight: torch.Tensor, bias: torch.Tensor | None, onednn: bool = True, dtype: torch.dtype | None = None):
    """``x -> x @ weight.T + bias`` for inference: through oneDNN (the weights converted once, here) or, with
    ``onednn=False``, through :func:`torch.nn.functional.linear`, its weights cast to ``dtype`` once here if given
    (under bf16 autocast a bf16 copy made once gives the same products as autocast's cast of every call)."""
    if not onednn:
        if dtype is not None:
            weight = weight.detach().to(dtype)
            bias = None if bias is None else bias.detach().to(dtype)
        return lambda x: torch.nn.functional.linear(x, weight, bias)
    packed_weight = weight.detach().float().contiguous().to_mkldnn()
    packed_bias = None if bias is None else bias.detach().float().contiguous().to_mkldnn()

    def apply(x: torch.Tensor) -> torch.Tensor:
        return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), packed_weight, packed_bias).to_dense()

    return apply


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks (up to 32 MiB each) for reuse instead of returning them to the kernel; once per
    process. False where the C library is not glibc (nothing changes there but speed)."""
    global _memory_kept
    if _memory_kept:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        settings = (
            (M_MMAP_THRESHOLD, LARGEST_MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, 2**31 - 1),
            (M_TOP_PAD, 64 * 1024 * 1024),
        )
        _memory_kept = all(libc.mallopt(option, value) == 1 for option, value in settings)
    except (OSError, AttributeError):
        _memory_kept = False
    return _memory_kept
