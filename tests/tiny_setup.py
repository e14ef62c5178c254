"""A tiny stand-in for ``Lab.from_params(Params(...))``: a random 4-layer x 4-head BERT over the real MiniLM tokenizer
(kept in tests/data, so no asset is needed).

The study, table folder and sweep folders are the real ones (the table folder is named by the checkpoint the study
would fine-tune, which finding it never trains); only the model is replaced, so nothing is fine-tuned.
"""

import numpy as np
import pandas as pd
import torch
from conftest import minilm_tokenizer
from transformers import BertConfig, BertForSequenceClassification

from headlab.core.evaluate import encode, predict
from headlab.core.grades import STUDY_SCALE
from headlab.lab.lab import Lab
from headlab.lab.params import Params

PAIRS = pd.DataFrame(
    {
        "query": ["red cat, red", "a dog runs fast", "the sun is hot", "a man plays a guitar", "two birds fly"],
        "title": ["the cat, red!", "a dog runs fast today", "cold moon", "a man plays a flute", "birds fly south"],
        "label": [5, 4, 1, 3, 4],
    }
)


def tiny_classifier(vocab_size: int, layers: int = 4, seed: int = 0):
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=5,
        initializer_range=0.3,
    )
    config._attn_implementation = "sdpa"
    return BertForSequenceClassification(config).eval()


def tiny_setup(
    run_dir,
    frame: pd.DataFrame = PAIRS,
    layers: int = 4,
    seed: int = 0,
    n_right: int | None = None,
    batch_size: int = 4,
) -> Lab:
    """The Lab of a random model on ``frame``; with ``n_right``, labels are set so that the unmasked model
    grades exactly the first ``n_right`` pairs right (a baseline accuracy of 0 has no relative change). The small
    default ``batch_size`` splits the five pairs into ragged batches; many pairs run faster in larger ones."""
    tokenizer = minilm_tokenizer()
    model = tiny_classifier(len(tokenizer), layers, seed)
    encoded = encode(tokenizer, frame, STUDY_SCALE)
    probs = predict(model, encoded, batch_size=batch_size)
    if n_right is not None:
        predicted = STUDY_SCALE.predicted(probs)
        frame = frame.assign(label=np.where(np.arange(len(frame)) < n_right, predicted, predicted % 5 + 1))
        encoded = encode(tokenizer, frame, STUDY_SCALE)
    params = Params(device="cpu", run_dir=str(run_dir), batch_size=batch_size)
    return Lab(params, model, tokenizer, frame, encoded, probs)


def masked_first_layer(setup):
    """The head mask of the tiny model with its first layer's heads removed."""
    mask = np.ones((4, 4), dtype=np.float32)
    mask[0] = 0
    return mask
