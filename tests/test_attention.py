"""headlab.core.attention: attention maps and one head's [CLS] row."""

import numpy as np
import pytest
from conftest import random_encoded, tiny_bert, tiny_mpnet

from headlab.core.attention import attention_maps, cls_attention_rows
from headlab.core.masking import encoder_layers


@pytest.mark.parametrize("make", [tiny_bert, tiny_mpnet])
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
