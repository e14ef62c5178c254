"""headlab.core.attention: attention maps and one head's [CLS] row."""

import numpy as np
import pytest
import torch
from conftest import TINY_ENCODERS, random_encoded

from headlab.core.attention import attention_maps, cls_attention_rows, cls_value_weighted
from headlab.core.masking import encoder_layers, output_projections, query_key_value


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_one_heads_cls_row_is_that_of_the_full_maps(make):
    """The pass that stops at the head's layer gives the [CLS] row of the full maps, with heads below removed."""
    model, encoded = make(), random_encoded(11)
    mask = np.ones((3, 4), dtype=np.float32)
    mask[0, 1] = 0
    examples = [5, 0, 7]
    for removed in (None, mask):
        full = {e: m[1, 2, 0] for e, m in attention_maps(model, encoded, examples, removed, batch_size=2)}
        rows = dict(cls_attention_rows(model, encoded, 1, 2, examples, removed, batch_size=2))
        assert sorted(rows) == sorted(examples)
        for e in examples:
            np.testing.assert_allclose(rows[e], full[e], rtol=0, atol=1e-6)
    assert np.abs(rows[5] - dict(cls_attention_rows(model, encoded, 1, 2, [5]))[5]).max() > 1e-4
    assert not any(layer._forward_pre_hooks for layer in encoder_layers(model))


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_value_weighted_rows_are_the_weights_times_what_each_token_sends(make):
    model, encoded = make(), random_encoded(7)
    layer = 1
    yielded = list(cls_value_weighted(model, encoded, layer, [4, 1], batch_size=2))
    got = {example: rows for example, _, rows in yielded}
    assert sorted(got) == [1, 4]
    _, (_, _, value) = query_key_value(model, layer)
    out_weight = output_projections(model)[layer].weight
    size = out_weight.shape[1] // 4
    for example, rows in got.items():
        ids = torch.tensor([encoded.input_ids[example]])
        with torch.inference_mode():
            out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
            v = value(out.hidden_states[layer])[0]  # tokens x hidden
            for head in range(4):
                cols = slice(head * size, (head + 1) * size)
                sent = (v[:, cols] @ out_weight[:, cols].T).norm(dim=-1)
                expected = out.attentions[layer][0, head, 0] * sent
                np.testing.assert_allclose(rows[head], expected.numpy(), rtol=1e-4, atol=1e-6)
    maps = dict(attention_maps(model, encoded, [1]))[1][layer, :, 0]
    weights = {example: w for example, w, _ in yielded}
    np.testing.assert_allclose(weights[1], maps, atol=1e-6)
    assert not np.allclose(got[1] / got[1].sum(-1, keepdims=True), maps)
