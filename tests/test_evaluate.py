"""headlab.core.evaluate: pairs are encoded (and truncation reported), batched and predicted."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import minilm_tokenizer, tiny_bert

from headlab.core.attention import attention_maps
from headlab.core.evaluate import (
    Encoded,
    encode,
    length_batches,
    model_inputs,
    padded,
    predict,
    sentence_ids,
    within_sentence_mask,
)
from headlab.core.grades import STUDY_SCALE
from headlab.models.loading import load_classifier, load_tokenizer


def test_truncation_is_counted_and_reported():
    tokenizer = minilm_tokenizer()
    frame = pd.DataFrame({"query": ["word " * 100, "short"], "title": ["word " * 100, "short too"], "label": [1, 2]})
    with pytest.warns(UserWarning, match="1 of 2 pairs are longer than max_length=128"):
        encoded = encode(tokenizer, frame, STUDY_SCALE, max_length=128)
    assert encoded.n_truncated == 1 and max(len(x) for x in encoded.input_ids) == 128


def test_predictions_and_maps_without_token_types(mpnet_folder, mpnet_pairs):
    """MPNet has no token types: they are not passed, and padding does not change its predictions."""
    tokenizer, model = load_tokenizer(str(mpnet_folder)), load_classifier(str(mpnet_folder), STUDY_SCALE)
    encoded = encode(tokenizer, mpnet_pairs, STUDY_SCALE)
    _, batch = next(length_batches(encoded, 2, tokenizer.pad_token_id))
    assert set(model_inputs(model, batch, "cpu")) == {"input_ids", "attention_mask"}
    probs = predict(model, encoded, pad_id=tokenizer.pad_token_id)
    alone = [predict(model, encoded.subset([i]))[0] for i in range(2)]  # unpadded: padding must not matter
    np.testing.assert_allclose(probs, alone, atol=1e-5)
    example, maps = next(attention_maps(model, encoded, indices=[0], pad_id=tokenizer.pad_token_id))
    assert example == 0 and maps.shape == (2, 4, 13, 13)


def test_sentences_are_split_at_the_first_separator_whatever_the_token_types():
    bert = torch.tensor([[101, 7, 8, 102, 9, 102, 0]])  # [CLS] q q [SEP] t [SEP] pad
    e5 = torch.tensor([[0, 7, 8, 2, 2, 9, 2]])  # <s> q q </s></s> t </s>: token types are all 0
    assert sentence_ids(bert, 102).tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    assert sentence_ids(e5, 2).tolist() == [[0, 0, 0, 0, 1, 1, 1]]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_within_sentence_attention_keeps_the_query_blind_to_the_title(attn):
    """A change to a title token leaves every query token's hidden state as it was, in both attention kernels;
    [CLS] still reads the title; without the block the query tokens do change."""
    model = tiny_bert(attn).bert
    sep = 3
    encoded = Encoded(
        [[2, 5, 6, sep, 7, 8, sep], [2, 5, 6, sep, 9, 8, sep], [2, 5, sep, 7, sep]],
        [[0, 0, 0, 0, 1, 1, 1]] * 2 + [[0, 0, 0, 1, 1]],
        np.ones(3, dtype=int),
        0,
        STUDY_SCALE,
    )
    batch = padded(encoded, [0, 1, 2])

    def hidden(blocked):
        inputs = dict(batch, attention_mask=within_sentence_mask(batch, sep)) if blocked else batch
        with torch.no_grad():
            return model(**inputs).last_hidden_state

    blocked, open_ = hidden(True), hidden(False)
    torch.testing.assert_close(blocked[0, 1:4], blocked[1, 1:4], rtol=0, atol=1e-6)
    assert not torch.allclose(blocked[0, 0], blocked[1, 0], atol=1e-4)  # [CLS] reads both sentences
    assert not torch.allclose(open_[0, 1:4], open_[1, 1:4], atol=1e-4)
    # the padded third pair gets the same states as alone: padding is never read
    alone = padded(encoded, [2])
    with torch.no_grad():
        single = model(**dict(alone, attention_mask=within_sentence_mask(alone, sep))).last_hidden_state
    torch.testing.assert_close(blocked[2, :5], single[0], rtol=0, atol=1e-5)


def test_blocking_changes_predictions_and_none_is_the_plain_model():
    model = tiny_bert("eager")
    encoded = Encoded(
        [[2, 5, 6, 3, 7, 8, 3], [2, 9, 3, 9, 5, 3]],
        [[0] * 4 + [1] * 3, [0] * 3 + [1] * 3],
        np.ones(2, dtype=int),
        0,
        STUDY_SCALE,
    )
    plain, blocked = predict(model, encoded), predict(model, encoded, block_across=3)
    assert not np.allclose(plain, blocked, atol=1e-4)
    assert np.array_equal(predict(model, encoded, block_across=None), plain)


def test_the_weights_digest_follows_every_change_of_the_weights():
    from conftest import tiny_bert

    from headlab.core.evaluate import weights_digest

    model = tiny_bert()
    first, bias = weights_digest(model), model.classifier.bias.detach().clone()
    assert weights_digest(model) == first and weights_digest(tiny_bert()) == first  # same weights, same digest
    with torch.no_grad():
        model.classifier.bias.add_(1.0)
    assert weights_digest(model) != first
    with torch.no_grad():
        model.classifier.bias.copy_(bias)
    assert weights_digest(model) == first  # the bytes decide, not the history
