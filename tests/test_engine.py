import numpy as np
import pytest
import torch
from conftest import BERT_LAYERED, TINY_ENCODERS, random_encoded, tiny_bert, tiny_mpnet

from headlab.core.engine import MaskEngine, first_masked_layer, reads_cls_only
from headlab.core.evaluate import predict
from headlab.core.masking import encoder_layers


def _masks(layers=3, heads=4):
    masks = [torch.ones(layers, heads)]
    for layer, head in [(0, 1), (1, 2), (2, 3), (2, 0)]:
        m = torch.ones(layers, heads)
        m[layer, head] = 0
        masks.append(m)
    both = torch.ones(layers, heads)
    both[1, :] = 0
    both[2, 1] = 0
    return masks + [both]


def test_first_masked_layer():
    m = torch.ones(3, 4)
    assert first_masked_layer(m) == 3
    m[2, 1] = 0
    assert first_masked_layer(m) == 2
    m[0, 0] = 0.5
    assert first_masked_layer(m) == 0


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_layer_reuse_gives_the_same_probabilities_as_full_forward_passes(make):
    model, encoded = make(), random_encoded(11)
    full = [predict(model, encoded, mask=mask, batch_size=4) for mask in _masks()]  # before the engine touches it
    engine = MaskEngine(model, encoded, batch_size=4, cls_only=False, leave_out_removed=False)
    fast = engine.probabilities(_masks())
    for got, want in zip(fast, full):
        np.testing.assert_array_equal(got, want)  # bit-identical on CPU
    # masks really differ (the check above would be empty if masking were ignored)
    assert np.abs(fast[0] - fast[1]).max() > 1e-4


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("make", BERT_LAYERED, ids=lambda make: make.__name__)
def test_the_last_layer_at_cls_alone_gives_the_full_models_grades(make, attn):
    """The classifier reads the last layer at [CLS] only (BERT's pooler, RoBERTa's, XLM-R's and ELECTRA's dense head
    alike), so computing that row alone changes nothing but rounding, with padding in the batches and with heads of
    the last layer masked (their hooks still apply)."""
    model, encoded = make(attn), random_encoded(11)
    assert reads_cls_only(model)
    assert len(set(map(len, encoded.input_ids))) > 1  # batches are padded
    full = [predict(model, encoded, mask=mask, batch_size=4) for mask in _masks()]
    fast = MaskEngine(model, encoded, batch_size=4).probabilities(_masks())
    for got, want in zip(fast, full):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert (got.argmax(1) == want.argmax(1)).all()
    last_layer_heads = [3, 4]  # masks (2, 3) and (2, 0) of the 3-layer model
    assert all(np.abs(fast[i] - fast[0]).max() > 1e-4 for i in last_layer_heads)
    assert "forward" not in vars(encoder_layers(model)[-1])


def _whole_layer_and_a_last_layer_head(layers=3, heads=4):
    mask = torch.ones(layers, heads)
    mask[0, :] = 0
    mask[2, 2] = 0
    return mask


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("cls_only", [False, True])
@pytest.mark.parametrize("make", BERT_LAYERED, ids=lambda make: make.__name__)
def test_removed_heads_left_out_give_the_masked_models_grades(make, attn, cls_only):
    """The grades with removed heads left out of the computation are those of the hooks' zeroed outputs (a whole
    layer removed, heads of the last layer removed, padding in the batches); the layers get their forward back."""
    model, encoded = make(attn), random_encoded(11)
    masks = _masks() + [_whole_layer_and_a_last_layer_head()]
    full = [predict(model, encoded, mask=mask, batch_size=4) for mask in masks]
    fast = MaskEngine(model, encoded, batch_size=4, cls_only=cls_only).probabilities(masks)
    for got, want in zip(fast, full):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert (got.argmax(1) == want.argmax(1)).all()
    assert np.abs(full[-1] - full[0]).max() > 1e-4
    assert all("forward" not in vars(layer) for layer in encoder_layers(model))


def test_removed_heads_get_no_attention_computed(monkeypatch):
    """What makes it faster: a removed layer runs no attention, and a layer runs attention for its kept heads only."""
    model, encoded = tiny_bert("sdpa"), random_encoded(11)
    engine = MaskEngine(model, encoded, batch_size=4, cls_only=False)
    engine.probabilities([torch.ones(3, 4)])  # records the unmasked layers' outputs (every head, once)
    heads_per_call = []
    attend = torch.nn.functional.scaled_dot_product_attention

    def recording(query, *args, **kwargs):
        heads_per_call.append(query.shape[1])
        return attend(query, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    engine.probabilities([_whole_layer_and_a_last_layer_head()])
    assert heads_per_call == [4, 3] * len(engine.batches)  # layer 0: none; layer 1: all 4; layer 2: 3 of 4
    heads_per_call.clear()
    MaskEngine(model, encoded, batch_size=4, cls_only=False, leave_out_removed=False).probabilities(
        [_whole_layer_and_a_last_layer_head()]
    )
    assert set(heads_per_call) == {4}  # the hooks zero outputs of heads that were computed


def test_a_model_that_reads_more_than_cls_keeps_its_last_layer():
    assert reads_cls_only(tiny_bert()) and not reads_cls_only(tiny_mpnet())
    assert not reads_cls_only(tiny_bert().bert)  # the bare encoder: every position is its output


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_the_layers_compute_again_after_a_replay(make):
    """Replayed layers get their own forward back: a model used by the engine then predicts new inputs right."""
    model = make()
    masks = _masks()
    assert max(first_masked_layer(m) for m in masks) == 3  # the unmasked mask replays every layer
    MaskEngine(model, random_encoded(11), batch_size=4).probabilities(masks)
    assert all("forward" not in vars(layer) for layer in encoder_layers(model))
    other = random_encoded(7, seed=1)
    np.testing.assert_array_equal(predict(model, other, batch_size=4), predict(make(), other, batch_size=4))


def test_several_masks_per_pass_match_one_at_a_time():
    model, encoded = tiny_bert(), random_encoded(11)
    one = MaskEngine(model, encoded, batch_size=4).probabilities(_masks())
    many = MaskEngine(model, encoded, batch_size=4, masks_per_pass=3).probabilities(_masks())
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_results_come_back_in_the_order_asked_whatever_the_processing_order():
    model, encoded = tiny_bert(), random_encoded(11)
    masks = _masks()
    forward = MaskEngine(model, encoded, batch_size=4).probabilities(masks)
    backward = MaskEngine(model, encoded, batch_size=4).probabilities(masks[::-1])
    for a, b in zip(forward, backward[::-1]):
        np.testing.assert_array_equal(a, b)


def test_mean_ablation_puts_each_removed_heads_mean_in_its_place():
    """The engine folds a removed head's mean output into the output projection's bias; the hooks add it to the
    zeroed slice: the same grades either way, and not those of zeroing (the means are not zero)."""
    from headlab.core.evaluate import length_batches, model_inputs
    from headlab.core.masking import head_means

    model, encoded = tiny_bert(), random_encoded(11)
    means = head_means(model, (model_inputs(model, b, "cpu") for _, b in length_batches(encoded, 4)))
    assert means.shape == (3, model.config.hidden_size) and means.abs().max() > 1e-3
    masks = _masks()
    with_hooks = MaskEngine(model, encoded, batch_size=4, leave_out_removed=False, means=means).probabilities(masks)
    folded = MaskEngine(model, encoded, batch_size=4, means=means).probabilities(masks)
    zeroed = MaskEngine(model, encoded, batch_size=4).probabilities(masks)
    for hooks, fast in zip(with_hooks, folded):
        np.testing.assert_allclose(fast, hooks, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(folded[0], zeroed[0])  # nothing removed: nothing replaced
    assert all(np.abs(folded[i] - zeroed[i]).max() > 1e-5 for i in range(1, len(masks)))


def test_head_means_average_each_projection_input_over_real_tokens_only():
    """The mean is over real tokens: padding (present here, the pairs differ in length) does not count."""
    from headlab.core.evaluate import length_batches, model_inputs
    from headlab.core.masking import head_means, output_projections

    model, encoded = tiny_bert(), random_encoded(11)
    batches = [model_inputs(model, b, "cpu") for _, b in length_batches(encoded, 4)]
    seen = []
    hook = output_projections(model)[1].register_forward_pre_hook(lambda m, a: seen.append(a[0].detach()))
    with torch.no_grad():
        for inputs in batches:
            model(**inputs)
    hook.remove()
    real = torch.cat([h[b["attention_mask"].bool()] for h, b in zip(seen, batches)])
    assert any(bool((b["attention_mask"] == 0).any()) for b in batches)  # some pairs are padded
    torch.testing.assert_close(head_means(model, batches)[1], real.mean(dim=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [{}, {"cls_only": False}, {"leave_out_removed": False}, {"masks_per_pass": 2}, {"reuse_layers": False}],
)
@pytest.mark.parametrize("make", BERT_LAYERED, ids=lambda make: make.__name__)
def test_matmul_flops_counts_the_products_the_engine_performs(make, options):
    """The roofline's numerator is the work done: torch's own count of every product (eager attention, products
    through torch) equals the engine's count, the unmasked recording pass included (and ELECTRA's projection of its
    embeddings, which every pass runs); a removed head saves work."""
    from torch.utils.flop_counter import FlopCounterMode

    model, encoded = make("eager"), random_encoded(11)
    masks = _masks() + [_whole_layer_and_a_last_layer_head()]
    engine = MaskEngine(model, encoded, batch_size=4, onednn=False, autocast=False, **options)
    with FlopCounterMode(display=False) as counter:
        engine.probabilities(masks)
    assert engine.matmul_flops(masks) == counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        engine.probabilities(masks[1:2])  # layers already recorded
    assert engine.matmul_flops(masks[1:2], recording=False) == counter.get_total_flops()
    fewer = engine.matmul_flops([_whole_layer_and_a_last_layer_head()])
    more = engine.matmul_flops([torch.zeros(3, 4) + (torch.arange(3)[:, None] > 0)])  # layer 0 removed only
    assert (fewer < more) == engine.leave_out_removed  # a removed head costs nothing only where it is left out
