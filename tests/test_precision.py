"""bf16 where the hardware computes it: the choice, its override, and that it never mixes with fp32 numbers."""

import dataclasses

import numpy as np
import pytest
import torch
from conftest import tiny_bert

from headlab.core import device as device_module
from headlab.core.device import PRECISION, autocast, precision
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE
from headlab.models.finetune import FinetuneConfig, cache_entry, checkpoint_dir


def _encoded(n=24, seed=0):
    rng = np.random.default_rng(seed)
    ids = [[2] + list(rng.integers(5, 50, size=int(rng.integers(4, 12)))) + [3] for _ in range(n)]
    return Encoded(ids, [[0] * len(x) for x in ids], rng.integers(1, 6, size=n), 0, STUDY_SCALE)


def test_the_cpu_runs_bf16_only_with_bf16_in_hardware(monkeypatch):
    monkeypatch.setenv(PRECISION, "auto")
    monkeypatch.setattr(device_module, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    assert precision("cpu") == "fp32"
    monkeypatch.setattr(device_module, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert precision("cpu") == "bf16"
    monkeypatch.setattr(device_module, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert precision("cpu") == "bf16"
    monkeypatch.setenv(PRECISION, "fp32")
    assert precision("cpu") == "fp32"


def test_a_bad_precision_names_the_variable(monkeypatch):
    monkeypatch.setenv(PRECISION, "fp16")
    with pytest.raises(ValueError, match="HEADLAB_PRECISION must be"):
        precision("cpu")


def test_autocast_computes_products_in_bf16_only_when_chosen():
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with autocast("cpu", "bf16"):
        assert (x @ w).dtype == torch.bfloat16
    with autocast("cpu", "fp32"):
        assert (x @ w).dtype == torch.float32


def test_the_engine_follows_the_chosen_precision_and_stays_close_to_fp32(monkeypatch):
    model, encoded = tiny_bert(), _encoded()
    monkeypatch.setenv(PRECISION, "bf16")
    fast = MaskEngine(model, encoded, batch_size=8)
    assert fast.autocast
    check = fast.precision_check()
    assert check["grade_agreement"] >= 0.9 and 0 < check["max_prob_diff"] < 0.05  # bf16 differs, a little
    monkeypatch.setenv(PRECISION, "fp32")
    assert not MaskEngine(model, encoded, batch_size=8).autocast


def test_a_bf16_fine_tune_has_a_cache_key_apart_and_fp32_keys_stay():
    fp32 = FinetuneConfig(model="minilm", data="stsb-en")
    bf16 = dataclasses.replace(fp32, precision="bf16")
    assert cache_entry(fp32) != cache_entry(bf16)
    # an fp32 fine-tune keeps the key it would have without the option (procedure 3; procedure 2's was 857bb31955c6)
    assert checkpoint_dir(fp32).name == "minilm-stsb-en-ab5e251c8a2d"
    with pytest.raises(ValueError, match="precision must be"):
        FinetuneConfig(precision="fp16")


def test_bf16_weights_cast_once_give_autocasts_numbers_exactly():
    from headlab.core.engine import computed_heads

    model, encoded = tiny_bert(), _encoded()
    engine = MaskEngine(model, encoded, batch_size=8, autocast=True)
    mask = torch.ones(engine.shape)
    mask[0, 1] = mask[2, 0] = 0
    inputs = engine.batches[0][1]
    with torch.inference_mode(), autocast("cpu", "bf16"):
        with computed_heads(model, mask):
            per_call = model(**inputs).logits
        with computed_heads(model, mask, dtype=torch.bfloat16):
            once = model(**inputs).logits
    assert torch.equal(per_call, once)
    assert engine._packed_dtype == torch.bfloat16
    assert MaskEngine(model, encoded, batch_size=8, autocast=False)._packed_dtype is None


def test_the_precision_check_keeps_its_bf16_pass_for_the_masks():
    model, encoded = tiny_bert(), _encoded()
    engine = MaskEngine(model, encoded, batch_size=8, autocast=True)
    engine.precision_check()
    assert engine._layer_outputs is not None  # the masks reuse the check's bf16 layers: no second unmasked pass
    kept = engine._layer_outputs
    engine.probabilities([torch.ones(engine.shape)])
    assert engine._layer_outputs is kept
