"""Which torch device a run uses: asking for a GPU that is not there is an error, not a silent fallback."""
from __future__ import annotations

import torch


def resolve_device(device: str) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto``; asking for a GPU that is not there is an error, not a fallback."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"DEVICE={device!r} but torch sees no CUDA GPU (torch {torch.__version__}); use 'cpu' or 'auto'")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"DEVICE must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return torch.device(device)
