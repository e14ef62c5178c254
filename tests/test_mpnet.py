"""MPNet loads and reads like BERT: eager attention for want of sdpa, `<s> a </s></s> b </s>` pairs, no token types.

The real model is a 440 MB asset; these tests use a tiny random MPNet saved with a tiny MPNet tokenizer.
"""
import numpy as np
import pandas as pd
import pytest
import torch
from transformers import MPNetConfig, MPNetForSequenceClassification, MPNetTokenizer

from headlab.core.attention import attention_maps, token_roles
from headlab.core.evaluate import encode, length_batches, model_inputs, predict
from headlab.models.loading import load_classifier, load_encoder, load_tokenizer

WORDS = "<s> <pad> </s> <unk> <mask> a cat dog sat on the mat ran far red blue car road".split()


@pytest.fixture(scope="module")
def mpnet_folder(tmp_path_factory):
    """A random 2-layer x 4-head MPNet classifier with a vocabulary laid out like all-mpnet-base-v2's."""
    folder = tmp_path_factory.mktemp("tiny-mpnet")
    tokenizer = MPNetTokenizer(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>")
    torch.manual_seed(0)
    config = MPNetConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=40, num_labels=5)
    MPNetForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def pairs():
    return pd.DataFrame({"query": ["a cat sat on the mat", "red car"], "title": ["the dog ran", "blue road far"],
                         "label": [4, 1]})


def test_a_model_without_sdpa_gets_eager_attention(mpnet_folder):
    assert load_classifier(str(mpnet_folder)).config._attn_implementation == "eager"  # asked for sdpa
    assert load_encoder(str(mpnet_folder)).config._attn_implementation == "eager"


def test_roles_of_a_pair_with_two_separators_in_the_middle(mpnet_folder, pairs):
    tokenizer = load_tokenizer(str(mpnet_folder))
    roles = token_roles(tokenizer, encode(tokenizer, pairs).input_ids[0])
    assert roles.tokens == ["<s>", "a", "cat", "sat", "on", "the", "mat", "</s>", "</s>", "the", "dog", "ran", "</s>"]
    assert (roles.cls, roles.seps) == (0, [7, 8, 12])
    assert [roles.tokens[i] for i in roles.query] == ["a", "cat", "sat", "on", "the", "mat"]
    assert [roles.tokens[i] for i in roles.title] == ["the", "dog", "ran"]


def test_predictions_and_maps_without_token_types(mpnet_folder, pairs):
    tokenizer, model = load_tokenizer(str(mpnet_folder)), load_classifier(str(mpnet_folder))
    encoded = encode(tokenizer, pairs)
    _, batch = next(length_batches(encoded, 2, tokenizer.pad_token_id))
    assert set(model_inputs(model, batch, "cpu")) == {"input_ids", "attention_mask"}
    probs = predict(model, encoded, pad_id=tokenizer.pad_token_id)
    alone = [predict(model, encoded.subset([i]))[0] for i in range(2)]  # unpadded: padding must not matter
    np.testing.assert_allclose(probs, alone, atol=1e-5)
    example, maps = next(attention_maps(model, encoded, indices=[0], pad_id=tokenizer.pad_token_id))
    assert example == 0 and maps.shape == (2, 4, 13, 13)


@pytest.mark.timeout(1200)  # a kernel that never answers fails the test instead of hanging the suite
def test_every_notebook_runs_on_a_tiny_random_mpnet_on_cpu(tmp_path):
    """The `mpnet` preset's architecture through the whole book (tiny sizes, CPU; the GPU run needs a GPU):
    a random 4 x 4 MPNet with the real WordPiece vocabulary laid out the MPNet way, fine-tuned and taken apart."""
    from headlab.book.build import PRESETS, REPO, execute_notebook, toc_notebooks
    from headlab.inputs.assets import asset_path

    pieces = (asset_path("minilm") / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + [p for p in pieces if p and not p.startswith("[")] + ["<mask>"]
    folder = tmp_path / "tiny-mpnet-wordpiece"
    MPNetTokenizer(vocab={w: i for i, w in enumerate(vocab)}, unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = MPNetConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=160, num_labels=5)  # 8 heads per half
    MPNetForSequenceClassification(config).save_pretrained(folder)

    settings = {**PRESETS["tiny"], "MODEL": str(folder), "RUN_DIR": str(tmp_path / "runs"),
                "SHARES": [0.0, 0.5], "EVAL_LIMIT": 24}
    for name in toc_notebooks(REPO / "book" / "_toc.yml"):
        execute_notebook(REPO / "notebooks" / f"{name}.ipynb", tmp_path / f"{name}.ipynb", settings, REPO)
    grid = pd.read_csv(next((tmp_path / "runs").glob("*/head_grid.csv")))
    assert len(grid) == 4 * 4  # every head of the MPNet was masked once
