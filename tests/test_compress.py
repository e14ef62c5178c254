"""headlab.core.compress: feed-forward neurons masked like heads, the Fisher importance of both from one backward
pass per batch, what each costs a token, and Kwon et al.'s search for the most important under a FLOP budget."""

import numpy as np
import pytest
import torch
from tiny_setup import tiny_setup

from headlab.core.compress import fisher_importance, flops_per_token, mask_neurons, search_masks
from headlab.core.evaluate import length_batches, model_inputs, predict
from headlab.core.grades import STUDY_SCALE
from headlab.core.masking import encoder_layers, mask_heads


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("compress"), layers=2)


def test_a_neuron_mask_of_ones_changes_nothing_and_a_zero_is_the_neuron_removed(setup):
    model, encoded = setup.model, setup.encoded
    base = predict(model, encoded)
    with mask_neurons(model, torch.ones(2, 32)):
        np.testing.assert_array_equal(predict(model, encoded), base)
    mask = torch.ones(2, 32)
    mask[1, :5] = 0
    with mask_neurons(model, mask):
        masked = predict(model, encoded)
    assert not np.allclose(masked, base)
    dense = encoder_layers(model)[1].output.dense
    kept = dense.weight.data.clone()
    dense.weight.data[:, :5] = 0  # the neurons' columns out of the block: the same function
    try:
        np.testing.assert_allclose(predict(model, encoded), masked, atol=1e-6)
    finally:
        dense.weight.data.copy_(kept)
    with pytest.raises(ValueError, match="neuron mask must have shape"):
        with mask_neurons(model, torch.ones(2, 31)):
            pass


def test_fisher_is_the_squared_gradient_of_each_pairs_loss_summed(setup):
    model, encoded = setup.model, setup.encoded
    heads, neurons = fisher_importance(model, encoded, batch_size=2)
    assert heads.shape == (2, 4) and neurons.shape == (2, 32) and (heads > 0).all()
    expected_heads, expected_neurons = np.zeros((2, 4)), np.zeros((2, 32))
    for i in range(len(encoded)):  # one pair at a time, by hand
        ((_, batch),) = length_batches(encoded.subset([i]), 1, 0)
        xi = torch.ones(2, 4, requires_grad=True)
        nu = torch.ones(2, 32, requires_grad=True)
        with mask_heads(model, xi), mask_neurons(model, nu):
            logits = model(**model_inputs(model, batch, "cpu")).logits
        loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(encoded.grades[[i]] - 1))
        g_heads, g_neurons = torch.autograd.grad(loss, (xi, nu))
        expected_heads += g_heads.double().numpy() ** 2
        expected_neurons += g_neurons.double().numpy() ** 2
    np.testing.assert_allclose(heads, expected_heads, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(neurons, expected_neurons, rtol=1e-4, atol=1e-12)
    assert all(not p.requires_grad or p.grad is None for p in model.parameters())  # no weight got a gradient


def test_the_flops_of_a_head_and_a_neuron(setup):
    head, neuron = flops_per_token(setup.model, tokens=10)
    assert head == 2 * (4 * 16 * 4 + 2 * 10 * 4) and neuron == 2 * 2 * 16


def test_the_search_keeps_the_most_importance_a_budget_buys():
    heads = np.array([[5.0, 1.0], [0.5, 0.1]])
    neurons = np.array([[3.0, 2.0, 0.2], [1.5, 0.1, 0.0]])
    everything = 4 * 10.0 + 6 * 1.0
    kept_heads, kept_neurons = search_masks(heads, neurons, 10.0, 1.0, everything)
    assert kept_heads.all() and kept_neurons.all()
    none_heads, none_neurons = search_masks(heads, neurons, 10.0, 1.0, 0.0)
    assert not none_heads.any() and not none_neurons.any()
    # 12 FLOPs: one head (5) and two neurons (3 + 2 = 5): 10, against twelve neurons' worth (all six: 6.8)
    kept_heads, kept_neurons = search_masks(heads, neurons, 10.0, 1.0, 12.0)
    assert kept_heads.tolist() == [[True, False], [False, False]]
    assert kept_neurons.tolist() == [[True, True, False], [False, False, False]]
    best = max(  # brute force over every split the budget allows
        np.sort(heads.ravel())[::-1][:h].sum() + np.sort(neurons.ravel())[::-1][: min(6, int(12 - 10 * h))].sum()
        for h in range(2)
    )
    assert heads[kept_heads].sum() + neurons[kept_neurons].sum() == best
    with pytest.raises(ValueError, match="must not be negative"):
        search_masks(heads, neurons, 10.0, 1.0, -1.0)


def test_mask_tuning_keeps_what_is_kept_and_fits_the_layers_back_after_a_cut(setup):
    from headlab.core.compress import compressed_model, tune_masks

    model, encoded = setup.model, setup.encoded
    everything = tune_masks(model, np.ones((2, 4), bool), np.ones((2, 32), bool), encoded, batch_size=2, ridge=0)
    np.testing.assert_allclose(everything[0], 1.0, atol=1e-3)  # nothing cut: every scale is 1
    np.testing.assert_allclose(everything[1], 1.0, atol=1e-3)
    heads = np.ones((2, 4), bool)
    heads[0, 1] = heads[1, 3] = False
    neurons = np.ones((2, 32), bool)
    neurons[:, ::2] = False
    head_scale, neuron_scale = tune_masks(model, heads, neurons, encoded, batch_size=2)
    assert (head_scale[~heads] == 0).all() and (neuron_scale[~neurons] == 0).all()
    base = predict(model, encoded)
    with (
        mask_heads(model, torch.as_tensor(heads, dtype=torch.float32)),
        mask_neurons(model, torch.as_tensor(neurons, dtype=torch.float32)),
    ):
        cut = predict(model, encoded)
    with mask_heads(model, torch.as_tensor(head_scale)), mask_neurons(model, torch.as_tensor(neuron_scale)):
        tuned = predict(model, encoded)
    assert np.abs(tuned - base).mean() < np.abs(cut - base).mean()  # closer to the original than the bare cut
    small = compressed_model(model, head_scale, neuron_scale)
    np.testing.assert_allclose(predict(small, encoded), tuned, atol=1e-5)  # the scales folded into smaller matrices
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in model.parameters())


def test_int8_dynamic_quantization_replaces_every_linear_and_grades_close_to_fp32(setup):
    from headlab.core.compress import int8_dynamic

    model, encoded = setup.model, setup.encoded
    quantized = int8_dynamic(model)
    assert not any(type(m) is torch.nn.Linear for m in quantized.modules())
    assert any(type(m) is torch.nn.Linear for m in model.modules())  # the original is untouched
    np.testing.assert_allclose(predict(quantized, encoded), predict(model, encoded), atol=0.05)


def test_a_compressed_model_loads_with_headlab_and_full_size_with_plain_transformers_grading_as_masking(
    setup, tmp_path
):
    """Heads and neurons cut (a whole layer's heads too) with tuned scales folded in: saved, it loads with headlab in
    its smaller matrices, and expanded to full size with zeros it loads with plain transformers; both grade the pairs
    as masking with the same scales does (up to float rounding)."""
    from transformers import AutoModelForSequenceClassification

    from headlab.core.compress import compressed_model
    from headlab.core.pruning import KEPT_HEADS, KEPT_NEURONS, expanded
    from headlab.models.loading import load_classifier

    model, encoded = setup.model, setup.encoded
    head_scale = np.ones((2, 4))
    head_scale[0] = 0.0  # no head left in layer 0
    head_scale[1, 2], head_scale[1, 0] = 0.0, 0.7
    neuron_scale = np.ones((2, 32))
    neuron_scale[:, ::3], neuron_scale[1, 1] = 0.0, 1.3
    with (
        mask_heads(model, torch.as_tensor(head_scale, dtype=torch.float32)),
        mask_neurons(model, torch.as_tensor(neuron_scale, dtype=torch.float32)),
    ):
        masked = predict(model, encoded)
    assert not np.allclose(masked, predict(model, encoded), atol=1e-3)  # the cut changes the grades
    small = compressed_model(model, head_scale, neuron_scale)
    small.save_pretrained(tmp_path / "small")
    np.testing.assert_allclose(
        predict(load_classifier(str(tmp_path / "small"), STUDY_SCALE), encoded), masked, atol=1e-5
    )
    expanded(small).save_pretrained(tmp_path / "plain")
    config = (tmp_path / "plain" / "config.json").read_text()
    assert KEPT_HEADS not in config and KEPT_NEURONS not in config
    plain = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "plain")).eval()
    np.testing.assert_allclose(predict(plain, encoded), masked, atol=1e-5)
    assert sum(p.numel() for p in plain.parameters()) == sum(p.numel() for p in model.parameters())
