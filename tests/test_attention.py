"""headlab.core.attention: the roles of a pair's tokens, whatever the model's way of joining the two texts."""

import numpy as np
import pytest
from conftest import random_encoded, tiny_bert, tiny_mpnet

from headlab.core.attention import attention_maps, cls_attention_rows, token_roles
from headlab.core.evaluate import encode
from headlab.core.masking import encoder_layers
from headlab.models.loading import load_tokenizer


def test_roles_of_a_pair_with_two_separators_in_the_middle(mpnet_folder, mpnet_pairs):
    """MPNet joins a pair as `<s> a </s></s> b </s>`."""
    tokenizer = load_tokenizer(str(mpnet_folder))
    roles = token_roles(tokenizer, encode(tokenizer, mpnet_pairs).input_ids[0])
    assert roles.tokens == ["<s>", "a", "cat", "sat", "on", "the", "mat", "</s>", "</s>", "the", "dog", "ran", "</s>"]
    assert (roles.cls, roles.seps) == (0, [7, 8, 12])
    assert [roles.tokens[i] for i in roles.query] == ["a", "cat", "sat", "on", "the", "mat"]
    assert [roles.tokens[i] for i in roles.title] == ["the", "dog", "ran"]


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
