"""headlab.models.names: a pretrained model's name stands for its config, and its cache folder for that config alone."""

from dataclasses import replace

import pytest

from headlab.core.device import PRECISION
from headlab.models.names import MODELS, is_pretrained_name, model_dir, named_model_dir


def test_a_name_is_cached_under_a_key_of_its_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path))
    monkeypatch.setenv(PRECISION, "fp32")
    # a change here orphans every cached copy (change PROCEDURE when that is meant); a BERT pretrained from scratch
    # is keyed by its one thread and its precision too (since the build pretrains in a lane)
    assert {name: named_model_dir(name).name for name in MODELS} == {
        "zh-char": "zh-char-b7aced7f399d",
        "zh-char-mlm": "zh-char-mlm-64426b2aa117",
        "zh-char-gpu": "zh-char-gpu-71f4fd6c26d5",
        "e5-small-char-mlm": "e5-small-char-mlm-ca9a1f5f5512",  # 200 steps, its head at head_lr
    }
    assert named_model_dir("zh-char").parent == tmp_path / "pretrained"
    assert model_dir(replace(MODELS["zh-char"], seed=1), "zh-char") != named_model_dir("zh-char")
    fp32 = {name: named_model_dir(name) for name in MODELS}
    monkeypatch.setenv(PRECISION, "bf16")  # a bf16 pretraining is another model; a continued one keeps its key
    assert {name for name in MODELS if named_model_dir(name) != fp32[name]} == {"zh-char", "zh-char-mlm", "zh-char-gpu"}


def test_only_registered_names_are_pretrained_names():
    assert is_pretrained_name("zh-char-mlm") and not is_pretrained_name("minilm")
    with pytest.raises(
        ValueError,
        match="unknown pretrained model 'zh-bogus'; known: e5-small-char-mlm, zh-char, zh-char-gpu, zh-char-mlm",
    ):
        named_model_dir("zh-bogus")
