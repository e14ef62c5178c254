"""headlab.core.arch: one adapter per encoder architecture, the only place a model's type is read. The core's tests
run over every supported architecture's tiny model (conftest.TINY_ENCODERS); these check the adapters themselves."""

import ast
import json
import re
from pathlib import Path

import pytest
import torch
from conftest import BERT_LAYERED, TINY_ENCODERS, tiny_mpnet
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

import headlab
from headlab.core.arch import ARCHITECTURES, architecture, supported
from headlab.core.compress import mask_neurons
from headlab.core.grades import STUDY_SCALE
from headlab.core.masking import encoder_layers, mask_heads
from headlab.core.pruning import cannot_prune
from headlab.models.loading import ModelError, load_classifier

PACKAGE = Path(headlab.__file__).parent


def test_every_supported_architecture_has_a_tiny_model_the_core_tests_run_on():
    assert sorted({make().config.model_type for make in TINY_ENCODERS}) == supported()
    assert {make().config.model_type for make in BERT_LAYERED} == {t for t, a in ARCHITECTURES.items() if a.bert_layers}


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_an_adapters_paths_are_the_models_modules(make):
    model = make()
    adapter = architecture(model)
    for layer in encoder_layers(model):
        attention = layer.get_submodule(adapter.self_attention)
        assert all(isinstance(getattr(attention, name), torch.nn.Linear) for name in adapter.projections)
        mixer = layer.get_submodule(adapter.output_projection)
        assert isinstance(mixer, torch.nn.Linear) and mixer.in_features == model.config.hidden_size
    assert (cannot_prune(model) == "") == adapter.bert_layers


def _tiny_deberta():
    config = DebertaV2Config(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32, num_labels=5
    )
    return DebertaV2ForSequenceClassification(config).eval()


def test_deberta_v2_is_refused_by_name_with_why_before_any_head_is_touched(tmp_path):
    model = _tiny_deberta()
    with pytest.raises(ValueError, match=r"model_type='deberta-v2'.*disentangled attention.*supported: bert"):
        encoder_layers(model)
    with pytest.raises(ValueError, match="deberta-v2"), mask_heads(model, torch.ones(2, 4)):
        pass
    model.save_pretrained(tmp_path / "deberta")
    with pytest.raises(ModelError, match=r"config.json: headlab cannot take apart model_type='deberta-v2'"):
        load_classifier(str(tmp_path / "deberta"), STUDY_SCALE)


def test_an_unknown_architecture_is_refused_naming_what_is_supported(tmp_path):
    folder = tmp_path / "gpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelError, match=r"model_type='gpt2': no adapter .*supported: bert, electra, mpnet"):
        load_classifier(str(folder), STUDY_SCALE)


def test_compression_refuses_an_architecture_whose_layers_are_not_berts():
    with (
        pytest.raises(ValueError, match="compression reads BERT's layers; MPNet's are not"),
        mask_neurons(tiny_mpnet(), torch.ones(3, 32)),
    ):
        pass


def test_no_module_but_the_adapters_reads_a_model_type():
    """``model_type`` compared anywhere else would be a second place an architecture must be added."""
    compared = re.compile(r"model_type\s*(==|!=|in\b|not\s+in\b)|==\s*['\"](bert|mpnet|roberta)['\"]")
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "arch.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and compared.search(ast.unparse(node)):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, f"model types compared outside headlab.core.arch: {found}"
