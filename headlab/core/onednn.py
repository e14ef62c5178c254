"""Dense layers through oneDNN on the CPU, for the sweeps' forward passes, where it is the faster library.

torch sends an fp32 ``Linear`` on the CPU to MKL. Which of MKL and oneDNN (which torch also carries) is faster depends
on the processor. On one core of a 2-core AMD EPYC with AVX-512 (Zen 5) MKL reached 110 GFLOP/s where oneDNN reached
230 (a 1728 x 384 by 384 x 1536 product: the feed-forward of a 64-pair batch). On a 2-core AMD EPYC with AVX2 only
(Zen 3, family 25 model 1) it is the other way round: at that shape MKL reached 179 GFLOP/s and oneDNN 118
(``results/roofline.csv``), and the sweep benchmark's two workloads took 104 s with MKL's products against 135 s with
oneDNN's, every pair graded alike. A sweep's time is nearly all such products (``addmm`` was 89% of a mask on
all-MiniLM-L6-v2), so :class:`headlab.core.engine.MaskEngine` computes its layers with :func:`dense` through oneDNN
where :func:`onednn_pays` (torch's kernels for this CPU are its AVX-512 ones), and with MKL elsewhere. Both are fp32;
they differ in float rounding only. The choice is part of a sweep's results key: no sweep copies masks
computed through the other library (:func:`headlab.core.sweep.reuse_evaluated`).

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


def onednn_pays(device) -> bool:
    """True on a CPU with AVX-512 (torch's own choice of kernels for it) whose torch carries oneDNN: where oneDNN's
    fp32 products were twice MKL's. On an AVX2 CPU MKL's were faster (the module's docstring). A fixed rule, not a
    timing, so one machine always computes with the same library and gives the same numbers."""
    return onednn_available(device) and torch.backends.cpu.get_cpu_capability().startswith("AVX512")


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
