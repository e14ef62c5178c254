"""headlab.core.onednn: the sweeps' products through oneDNN give torch's numbers up to rounding, and the engine uses
them on the CPU for every layer it computes, its unmasked recording included."""

import platform

import numpy as np
import pytest
import torch
from conftest import random_encoded, tiny_bert

from headlab.core.engine import MaskEngine
from headlab.core.masking import encoder_layers
from headlab.core.onednn import dense, keep_freed_memory, onednn_available

pytestmark = pytest.mark.skipif(not onednn_available("cpu"), reason="this torch build has no oneDNN")


@pytest.mark.parametrize("with_bias", [True, False])
def test_dense_gives_torchs_linear_up_to_rounding(with_bias):
    torch.manual_seed(0)
    weight, bias = torch.randn(24, 16), torch.randn(24) if with_bias else None
    x = torch.randn(5, 7, 16)
    for given in (x, x.transpose(0, 1), x[:, :1]):  # 3-d, not contiguous, a [CLS]-like slice
        got, want = dense(weight, bias)(given), torch.nn.functional.linear(given, weight, bias)
        assert got.shape == want.shape and not got.is_mkldnn
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        dense(weight, bias, onednn=False)(x), torch.nn.functional.linear(x, weight, bias), rtol=0, atol=0
    )


def _masks():
    removed = torch.ones(3, 4)
    removed[0, 1] = removed[2, 3] = 0
    layer = torch.ones(3, 4)
    layer[1] = 0
    return [torch.ones(3, 4), removed, layer]


def test_the_engine_computes_its_layers_through_onednn_on_a_cpu_with_avx512(monkeypatch):
    """No Linear of the encoder runs during a sweep (the recording included), oneDNN does, and the grades are those of
    torch's own products."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    model, encoded = tiny_bert("sdpa"), random_encoded(11)
    linear_calls, onednn_calls = [], []
    for layer in encoder_layers(model):
        for module in layer.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(lambda *args: linear_calls.append(1))
    product = torch._C._nn.mkldnn_linear
    monkeypatch.setattr(torch._C._nn, "mkldnn_linear", lambda *a: onednn_calls.append(1) or product(*a))
    engine = MaskEngine(model, encoded, batch_size=4)
    assert engine.onednn
    fast = engine.probabilities(_masks())
    assert not linear_calls and onednn_calls
    default = MaskEngine(model, encoded, batch_size=4, onednn=False)
    assert not default.onednn
    slow = default.probabilities(_masks())
    assert linear_calls  # the same sweep without oneDNN runs the modules
    for got, want in zip(fast, slow):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert (got.argmax(1) == want.argmax(1)).all()
    assert np.abs(fast[1] - fast[0]).max() > 1e-4  # the masks change the grades' probabilities
    assert all("forward" not in vars(layer) for layer in encoder_layers(model))


def test_float_masks_keep_the_hooks_and_torchs_products():
    """A mask that scales heads (not 0/1) is applied by hooks on the modules, so those modules must run."""
    model, encoded = tiny_bert("sdpa"), random_encoded(11)
    half = torch.ones(3, 4)
    half[0, 0] = 0.5
    calls = []
    encoder_layers(model)[0].attention.output.dense.register_forward_pre_hook(lambda *args: calls.append(1))
    MaskEngine(model, encoded, batch_size=4).probabilities([half])
    assert calls


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_memory_is_kept_for_reuse_under_glibc():
    assert keep_freed_memory() and keep_freed_memory()  # once per process; the second call changes nothing


def test_on_a_cpu_without_avx512_the_engine_keeps_mkl_and_its_results_are_kept_apart(monkeypatch):
    """Where MKL is the faster library (an AVX2 processor) the engine leaves torch's products alone; the library is
    part of the results key, so a sweep never mixes masks computed through the two."""
    model, encoded = tiny_bert("sdpa"), random_encoded(11)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    on_avx2 = MaskEngine(model, encoded, batch_size=4, autocast=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    on_avx512 = MaskEngine(model, encoded, batch_size=4, autocast=False)
    assert not on_avx2.onednn and on_avx512.onednn
    assert on_avx2.results_key() != on_avx512.results_key()
    assert on_avx2.precision_key() == on_avx512.precision_key()  # the same precision check serves both
