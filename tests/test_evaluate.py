"""headlab.core.evaluate: pairs are encoded (and truncation reported), batched and predicted."""
import numpy as np
import pandas as pd
import pytest
from conftest import minilm_tokenizer

from headlab.core.attention import attention_maps
from headlab.core.evaluate import encode, length_batches, model_inputs, predict
from headlab.models.loading import load_classifier, load_tokenizer


def test_truncation_is_counted_and_reported():
    tokenizer = minilm_tokenizer()
    frame = pd.DataFrame({"query": ["word " * 100, "short"], "title": ["word " * 100, "short too"], "label": [1, 2]})
    with pytest.warns(UserWarning, match="1 of 2 pairs are longer than max_length=128"):
        encoded = encode(tokenizer, frame, max_length=128)
    assert encoded.n_truncated == 1 and max(len(x) for x in encoded.input_ids) == 128


def test_predictions_and_maps_without_token_types(mpnet_folder, mpnet_pairs):
    """MPNet has no token types: they are not passed, and padding does not change its predictions."""
    tokenizer, model = load_tokenizer(str(mpnet_folder)), load_classifier(str(mpnet_folder))
    encoded = encode(tokenizer, mpnet_pairs)
    _, batch = next(length_batches(encoded, 2, tokenizer.pad_token_id))
    assert set(model_inputs(model, batch, "cpu")) == {"input_ids", "attention_mask"}
    probs = predict(model, encoded, pad_id=tokenizer.pad_token_id)
    alone = [predict(model, encoded.subset([i]))[0] for i in range(2)]  # unpadded: padding must not matter
    np.testing.assert_allclose(probs, alone, atol=1e-5)
    example, maps = next(attention_maps(model, encoded, indices=[0], pad_id=tokenizer.pad_token_id))
    assert example == 0 and maps.shape == (2, 4, 13, 13)
