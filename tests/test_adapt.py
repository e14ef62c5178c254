"""headlab.models.adapt: a published model's masked-LM pretraining continued on People's Daily characters, on a tiny
random e5-shaped BERT reading characters (the corpus is a few sentences given here, not the asset)."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from test_e5_chars import MAPPING, PIECES, scores
from transformers import BertConfig, BertModel

from headlab.core.grades import STUDY_SCALE
from headlab.inputs.e5 import build_tokenizer
from headlab.inputs.e5_chars import character_tokenizer
from headlab.models import adapt
from headlab.models.loading import load_classifier, load_tokenizer
from headlab.models.names import ContinuedPretraining
from headlab.models.pretrain import describe, pretraining_report

TRAIN = ["我们喜欢北京", "他在看书", "京东小哥最近在干什么", "飞机正在起飞", "我在伊朗长大", "他们喜欢看书"]
HELD_OUT = [["他们", "在", "北京"], ["小哥", "在", "看书"]]


@pytest.fixture
def base(tmp_path):
    """A tiny random 2-layer BERT laid out as e5-small, with the character tokenizer over the test vocabulary."""
    folder = tmp_path / "tiny-e5-char"
    e5 = build_tokenizer(PIECES, scores(), {"bos": 0, "eos": 2, "pad": 1, "unk": 3}, MAPPING, 64)
    character_tokenizer(e5).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(PIECES),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=64,
        pad_token_id=1,
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture
def corpus(monkeypatch):
    """The training sentences and held-out sentences the pass reads, in place of People's Daily's."""
    read = {}

    def runs(held_out_share, seed):
        read["train"] = (held_out_share, seed)
        return [TRAIN[:3], TRAIN[3:]]

    def held_out(limit, held_out_share, seed):
        read["held_out"] = (limit, held_out_share, seed)
        return HELD_OUT[:limit]

    monkeypatch.setattr(adapt, "training_runs", runs)
    monkeypatch.setattr(adapt, "held_out_sentences", held_out)
    return read


def test_masking_targets_only_corpus_characters_bert_style():
    rows = [np.array([0, 5, 6, 7, 8, 2]), np.array([0, 9, 10, 2])] * 400
    outputs = np.array([5, 6, 7, 8, 9])  # 10 is no output character: masked, never scored
    batch = adapt.masked_batch(
        rows, {0, 1, 2, 3}, outputs, mask_id=99, pad_id=1, share=0.15, rng=np.random.default_rng(0)
    )
    labels, inputs = batch["labels"], batch["input_ids"]
    assert inputs.shape == (800, 6) and (batch["attention_mask"].sum(1).numpy() == [6, 4] * 400).all()
    scored = labels != -100
    original = torch.tensor(np.stack([np.pad(r, (0, 6 - len(r)), constant_values=1) for r in rows]))
    assert set(original[scored].tolist()) <= set(outputs.tolist())  # never <s>, </s>, padding or character 10
    assert torch.equal(torch.as_tensor(outputs)[labels[scored]], original[scored])  # labels index the outputs
    assert 0.12 < scored.float().sum() / (original >= 5).logical_and(original != 10).sum() < 0.18
    masked = (inputs[scored] == 99).float().mean()
    kept = (inputs[scored] == original[scored]).float().mean()
    assert 0.75 < masked < 0.85 and 0.05 < kept < 0.15
    assert (inputs[~scored & (original != 10)] == original[~scored & (original != 10)]).all()


def test_a_continued_pass_trains_the_encoder_and_keeps_the_word_embeddings(fresh_cache, base, corpus):
    config = ContinuedPretraining(base=str(base), steps=6, batch_size=4, max_length=16, lr=1e-3, eval_sentences=2)
    folder = adapt.continue_pretraining(config, "tiny-char-mlm", progress=False, save_every=3)
    assert corpus == {"train": (0.1, 0), "held_out": (2, 0.1, 0)}  # page 03's held-out tenth, never trained on
    before, after = load_file(base / "model.safetensors"), load_file(folder / "model.safetensors")
    assert before.keys() <= after.keys()
    word = "embeddings.word_embeddings.weight"
    np.testing.assert_array_equal(after[word], before[word])  # frozen, as the fine-tune freezes it
    query = "encoder.layer.0.attention.self.query.weight"
    assert not np.array_equal(after[query], before[query])  # the encoder learned
    assert load_tokenizer(str(folder)).tokenize("京东小哥") == list("京东小哥")  # it reads as its base does
    assert load_classifier(str(folder), STUDY_SCALE).config.num_labels == 5
    report = pretraining_report(folder)
    assert report["kind"] == adapt.KIND and report["steps"] == 6 and report["eval_sentences"] == 2
    assert report["corpus_sentences"] == len(TRAIN) and 0 <= report["masked_token_accuracy"] <= 1
    assert report["masked_tokens"] > 0 and len(report["history"]) == 1
    assert "continued by headlab on People's Daily" in describe(report)
    again = adapt.continue_pretraining(config, "tiny-char-mlm", progress=False)
    assert again == folder  # cached: found, not trained again
    other = adapt.continue_pretraining(replace(config, seed=1), "tiny-char-mlm", progress=False)
    assert other != folder and not np.array_equal(load_file(other / "model.safetensors")[query], after[query])


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        ContinuedPretraining(steps=0)
    with pytest.raises(ValueError, match="objective must be 'mlm'"):
        ContinuedPretraining(objective="mlm+nsp")
