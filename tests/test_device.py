"""headlab.core.device: the device a notebook asks for must exist."""

import pytest
import torch

from headlab.core.device import resolve_device


def test_asking_for_a_gpu_that_is_not_there_is_an_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="DEVICE='cuda'"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="DEVICE must be"):
        resolve_device("tpu")
