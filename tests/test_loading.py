"""headlab.models.loading: model folders are checked before anything is loaded, and load safely."""

import json

import pytest
from conftest import MINILM_TOKENIZER
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForSequenceClassification

from headlab.core.grades import STUDY_SCALE, GradeScale
from headlab.models.loading import (
    NEW_HEAD,
    POOLER,
    ModelError,
    fine_tuned_scale,
    load_classifier,
    load_encoder,
    resolve_model,
    unexpected_missing,
)


def test_missing_model_folder_is_named(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"))


def test_pickle_only_weights_are_refused_unless_allowed(tiny_model_folder):
    (tiny_model_folder / "model.safetensors").rename(tiny_model_folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match="pickle"):
        resolve_model(str(tiny_model_folder))
    assert resolve_model(str(tiny_model_folder), allow_pickle=True) == str(tiny_model_folder)


def test_remote_code_and_unsupported_encoders_are_refused(tiny_model_folder):
    config_path = tiny_model_folder / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "auto_map": {"AutoModel": "evil.Model"}}))
    with pytest.raises(ModelError, match="remote code"):
        resolve_model(str(tiny_model_folder))
    config_path.write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ModelError, match="cannot take apart model_type='gpt2'"):
        resolve_model(str(tiny_model_folder))


def test_a_model_without_sdpa_gets_eager_attention(mpnet_folder):
    """MPNet loads and reads like BERT: eager attention for want of sdpa."""
    assert load_classifier(str(mpnet_folder), STUDY_SCALE).config._attn_implementation == "eager"  # asked for sdpa
    assert load_encoder(str(mpnet_folder)).config._attn_implementation == "eager"


@pytest.mark.slow
def test_the_tests_minilm_tokenizer_is_the_assets():
    """The fast tests tokenize with tests/data/minilm-tokenizer: the same files as the minilm asset's."""
    from headlab.inputs.assets import asset_path

    folder = asset_path("minilm")
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        assert (MINILM_TOKENIZER / name).read_bytes() == (folder / name).read_bytes(), name


def test_an_encoder_loads_under_a_new_head_quietly_and_a_checkpoint_missing_its_weights_is_refused(
    tiny_model_folder, capfd, recwarn
):
    """A new grade head on an encoder is expected when fine-tuning starts: no load report, no warning. An encoder
    without its own weights would give wrong numbers: refused, the weights named."""
    load_classifier(str(tiny_model_folder), STUDY_SCALE)
    out, err = capfd.readouterr()
    assert "LOAD REPORT" not in out + err and not recwarn.list
    keys = ["classifier.weight", "bert.pooler.dense.bias", "bert.encoder.layer.0.output.dense.bias"]
    assert unexpected_missing(keys, NEW_HEAD) == ["bert.encoder.layer.0.output.dense.bias"]
    assert unexpected_missing(keys, POOLER) == ["classifier.weight", "bert.encoder.layer.0.output.dense.bias"]
    assert unexpected_missing(keys) == keys
    weights = load_file(str(tiny_model_folder / "model.safetensors"))
    dropped = next(k for k in weights if "encoder.layer.1" in k)
    save_file({k: v for k, v in weights.items() if k != dropped}, str(tiny_model_folder / "model.safetensors"))
    with pytest.raises(ModelError, match=r"1 weights are missing from its checkpoint \(.*layer\.1"):
        load_encoder(str(tiny_model_folder))


def test_a_classifier_for_another_number_of_grades_is_refused_with_its_weights_named(tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_labels=3)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "three-grades")
    with pytest.raises(
        ModelError, match=r"2 weights .* do not fit .*\(classifier\.bias, classifier\.weight\).*grades 1-5"
    ):
        load_classifier(str(tmp_path / "three-grades"), STUDY_SCALE)


def test_a_classifier_names_its_grades_and_one_named_for_others_is_refused(tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_labels=3)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "encoder")
    scale = GradeScale(0, 3)
    model = load_classifier(str(tmp_path / "encoder"), scale)  # transformers' default names: read as the data's
    assert GradeScale.of_checkpoint(model.config.id2label, model.config.num_labels) == scale
    model.save_pretrained(tmp_path / "fine-tuned")
    assert fine_tuned_scale(str(tmp_path / "fine-tuned"), GradeScale(0, 2)) == scale  # a file without grade 2
    with pytest.raises(ModelError, match="fine-tuned on grades 0-2, the data's are grades 1-3"):
        load_classifier(str(tmp_path / "fine-tuned"), GradeScale(1, 3))
    with pytest.raises(ModelError, match="classes for grades 0-2; the data has grades 1-5"):
        fine_tuned_scale(str(tmp_path / "fine-tuned"), STUDY_SCALE)
