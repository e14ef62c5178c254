"""headlab.models.two_tower: the sentences never meet inside the encoder; training is cached, seeded and apart
from the cross-encoder's; a saved model predicts what it predicted before saving."""

import shutil

import numpy as np
import pytest
import torch

from headlab.core.evaluate import encode_sentences, padded
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.data import get_split, load_data
from headlab.models.finetune import FinetuneConfig, checkpoint_dir
from headlab.models.loading import load_encoder, load_tokenizer
from headlab.models.two_tower import (
    TwoTower,
    finetune_two_tower,
    load_two_tower,
    pair_encodings,
    predict_two_tower,
    two_tower_dir,
)


@pytest.fixture
def tower(tiny_model_folder):
    torch.manual_seed(0)
    return TwoTower(load_encoder(str(tiny_model_folder)), 5).eval(), load_tokenizer(str(tiny_model_folder))


def _batch(tokenizer, texts):
    return padded(
        encode_sentences(tokenizer, texts, np.ones(len(texts)), STUDY_SCALE),
        list(range(len(texts))),
        tokenizer.pad_token_id,
    )


def test_a_query_is_embedded_without_its_title_and_its_padding(tower):
    model, tokenizer = tower
    alone = model.embed(_batch(tokenizer, ["cat sat"]))
    beside_longer = model.embed(_batch(tokenizer, ["cat sat", "dog ran far on the red road"]))[:1]
    torch.testing.assert_close(beside_longer, alone, rtol=0, atol=1e-6)  # padding is not pooled
    query = _batch(tokenizer, ["cat sat", "cat sat"])
    logits = model(query, _batch(tokenizer, ["red car", "blue sea sky"]))
    assert not torch.allclose(logits[0], logits[1])  # the title matters, through its own tower


def test_the_score_depends_on_the_title_only_through_its_pooled_vector(tower):
    model, tokenizer = tower
    query, title = _batch(tokenizer, ["cat sat mat"]), _batch(tokenizer, ["dog ran far"])
    u, v = model.embed(query), model.embed(title)
    expected = model.head(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))
    torch.testing.assert_close(model(query, title), expected)


def test_two_tower_training_is_cached_seeded_and_keyed_apart(fresh_cache, tiny_model_folder, pairs_file):
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=2, train_limit=48, seed=1)
    assert two_tower_dir(config) != checkpoint_dir(config)
    folder = finetune_two_tower(config, progress=False)
    assert folder == two_tower_dir(config) and (folder / "history.csv").exists()
    weights = (folder / "model.safetensors").read_bytes()
    stamp = folder.stat().st_mtime_ns
    assert finetune_two_tower(config, progress=False) == folder and folder.stat().st_mtime_ns == stamp  # cached

    model = load_two_tower(folder)
    test = get_split(load_data(str(pairs_file)), "test")
    queries, titles = pair_encodings(load_tokenizer(str(folder)), test, STUDY_SCALE)
    probs = predict_two_tower(model, queries, titles, batch_size=7)
    assert probs.shape == (len(test), 5) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    in_one_batch = predict_two_tower(model, queries, titles, batch_size=len(test))
    np.testing.assert_allclose(probs, in_one_batch, atol=1e-5)

    shutil.rmtree(folder)
    assert (finetune_two_tower(config, progress=False) / "model.safetensors").read_bytes() == weights  # same seed


def test_loading_a_cross_encoder_folder_as_two_towers_says_what_is_missing(tiny_model_folder):
    with pytest.raises(FileNotFoundError, match="two_tower_head.safetensors"):
        load_two_tower(tiny_model_folder)
