"""headlab.core.patching: a head's output taken from another run of the pair, undone on exit, and the engine that
patches one head at a time with the layers below it replayed."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_ENCODERS, random_encoded, tiny_bert

from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.grades import STUDY_SCALE
from headlab.core.patching import PatchEngine, expected_grade, grade_logit, patch_heads, recording_head_outputs


def _changed(encoded: Encoded, seed: int = 1) -> Encoded:
    """The same pairs with about a third of their inner tokens replaced: every length kept."""
    rng = np.random.default_rng(seed)
    ids = [
        [t if i in (0, len(x) - 1) or rng.random() > 0.35 else int(rng.integers(5, 50)) for i, t in enumerate(x)]
        for x in encoded.input_ids
    ]
    return Encoded(ids, [list(t) for t in encoded.token_type_ids], encoded.grades, 0, STUDY_SCALE)


def _batch(model, encoded):
    ((_, batch),) = length_batches(encoded, len(encoded))
    return model_inputs(model, batch, "cpu")


def _all_heads(model):
    return [(l, h) for l in range(3) for h in range(model.config.num_attention_heads)]


@torch.inference_mode()
def test_patching_a_head_with_its_own_output_changes_nothing_and_the_hooks_go():
    model, encoded = tiny_bert(), random_encoded(12)
    batch = _batch(model, encoded)
    with recording_head_outputs(model) as passes:
        before = model(**batch).logits
    with patch_heads(model, _all_heads(model), passes[0]):
        same = model(**batch).logits
    torch.testing.assert_close(same, before)
    assert all(not p._forward_pre_hooks for p in (layer.attention.output.dense for layer in model.bert.encoder.layer))


@torch.inference_mode()
def test_every_head_patched_with_the_source_embeddings_gives_the_source_grades():
    model, source = tiny_bert(), random_encoded(12)
    target = _changed(source)
    s, t = _batch(model, source), _batch(model, target)
    with recording_head_outputs(model) as passes:
        clean = model(**s).logits
    embedded = model.bert.embeddings(input_ids=s["input_ids"], token_type_ids=s["token_type_ids"])
    hook = model.bert.embeddings.register_forward_hook(lambda m, a, out: embedded)
    try:
        with patch_heads(model, _all_heads(model), passes[0]):
            patched = model(**t).logits
    finally:
        hook.remove()
    torch.testing.assert_close(patched, clean)
    assert not torch.allclose(model(**t).logits, clean)  # the target alone grades otherwise


@torch.inference_mode()
def test_the_engine_replays_the_layers_below_a_patch_and_matches_a_full_pass():
    model, source = tiny_bert(), random_encoded(20)
    target = _changed(source)
    engine = PatchEngine(model, source, target, batch_size=8, autocast=False)
    clean, corrupted = engine.unpatched()
    assert not np.allclose(clean, corrupted)
    patches = [[(1, 2)], [(2, 0), (2, 3)], [(0, 1), (2, 2)]]
    grades = engine.expected_grades(patches)
    s, t = _batch(model, source), _batch(model, target)
    order = np.argsort([len(x) for x in source.input_ids], kind="stable")
    with recording_head_outputs(model) as passes:
        model(**s)
    for heads, row in zip(patches, grades):
        with patch_heads(model, heads, passes[0]):
            full = expected_grade(model(**t).logits, STUDY_SCALE)
        np.testing.assert_allclose(row[order], full, atol=1e-5)
        assert not np.allclose(row, corrupted)  # a patch moves the grades
    np.testing.assert_allclose(engine.expected_grades([[]])[0], corrupted)


def test_the_engine_refuses_pairs_of_other_lengths_by_position():
    model, source = tiny_bert(), random_encoded(6)
    target = Encoded(
        [x + [3] if i == 4 else x for i, x in enumerate(source.input_ids)],
        source.token_type_ids,
        source.grades,
        0,
        STUDY_SCALE,
    )
    with pytest.raises(ValueError, match="pair 4: source has"):
        PatchEngine(model, source, target)


def test_patching_saves_patch_by_patch_and_resumes(tmp_path, monkeypatch):
    import headlab.core.patching as patching

    model, source = tiny_bert(), random_encoded(10)
    target = _changed(source)
    patches = patching.single_head_patches(3, 4)
    table = patching.run_patching(model, source, target, patches, tmp_path, batch_size=4, progress=False)
    assert len(table) == (len(patches) + 2) * len(source)
    assert set(table["patch"]) == {"source", "target", *patches}
    wide = table.pivot(index="example", columns="patch", values="expected")
    assert not np.allclose(wide["source"], wide["target"])

    def refuse(*args, **kwargs):
        raise AssertionError("a finished patching must be read, not computed")

    monkeypatch.setattr(patching, "PatchEngine", refuse)
    again = patching.run_patching(model, source, target, patches, tmp_path, batch_size=4, progress=False)
    pd.testing.assert_frame_equal(again, table)
    with pytest.raises(ValueError, match="plan.csv describes other patches"):
        patching.run_patching(model, source, target, {"x": [(0, 0)]}, tmp_path, progress=False)


def test_the_grade_logit_is_linear_and_blind_to_a_shift_of_every_logit():
    logits = np.array([[0.0, 1.0, 0.0, 0.0, 3.0], [2.0, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(grade_logit(logits), [-1.0 + 6.0, -4.0])
    np.testing.assert_allclose(grade_logit(logits + 7.5), grade_logit(logits))
    np.testing.assert_allclose(grade_logit(2 * logits), 2 * grade_logit(logits))
    torch.testing.assert_close(
        grade_logit(torch.tensor(logits)), torch.tensor(grade_logit(logits), dtype=torch.float32)
    )


def _scaled(engine: PatchEngine, eps: float) -> None:
    """Make the engine's recorded source head outputs target + eps * (source - target): a patch that small is
    linear in the model to first order, so attribution patching must equal it."""
    engine._recorded = [
        ([t + eps * (s - t) for s, t in zip(source, target)], *rest, target)
        for (source, *rest, target) in engine._record()
    ]


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_attribution_patching_is_activation_patching_to_first_order(make):
    model, source = make().double(), random_encoded(8)
    target = _changed(source)
    engine = PatchEngine(model, source, target, batch_size=3, autocast=False)
    attributed = engine.attribution()
    assert [a.shape for a in attributed] == [(3, 4, len(x)) for x in source.input_ids]
    assert all(p.requires_grad for p in model.parameters())  # the flags come back
    eps = 1e-2  # small enough to be linear, large enough for the logits' float32 to resolve
    _scaled(engine, eps)
    base = grade_logit(engine.unpatched_logits()[1])
    checked = [(0, 1, 1), (1, 2, 0), (1, 3, 2), (2, 0, 0)]  # layer, head, position
    for layer, head, position in checked:
        where = [[position] for _ in range(len(source))]
        patched = grade_logit(engine.logits([[(layer, head)]], where=where)[0])
        exact = (patched - base) / eps
        first_order = np.array([a[layer, head, position] for a in attributed])
        assert np.abs(first_order).max() > 1e-3  # not a trivially zero case
        np.testing.assert_allclose(first_order, exact, rtol=0.05, atol=0.01 * np.abs(exact).max())
    assert all(np.all(a[2, :, 1:] == 0) for a in attributed)  # the top layer reaches the grade through [CLS] alone


def test_patching_at_positions_adds_up_where_the_model_is_linear_and_all_positions_are_the_whole_patch():
    model, source = tiny_bert().double(), random_encoded(8)
    target = _changed(source)
    engine = PatchEngine(model, source, target, batch_size=3, autocast=False)
    heads = [[(1, 2), (1, 0)]]  # one layer: across layers, a later head patched at some positions blocks paths
    everywhere = [list(range(len(x))) for x in source.input_ids]
    np.testing.assert_allclose(engine.logits(heads, where=everywhere), engine.logits(heads))
    cls_only, rest = [[0] for _ in source.input_ids], [list(range(1, len(x))) for x in source.input_ids]
    whole = engine.logits(heads)[0]
    split = engine.logits(heads, where=cls_only)[0] + engine.logits(heads, where=rest)[0]
    assert not np.allclose(split - engine.unpatched_logits()[1], whole)  # far from linear at full size
    eps = 1e-2
    _scaled(engine, eps)
    base = engine.unpatched_logits()[1]
    whole = (engine.logits(heads)[0] - base) / eps
    split = (engine.logits(heads, where=cls_only)[0] - base + engine.logits(heads, where=rest)[0] - base) / eps
    np.testing.assert_allclose(split, whole, rtol=0.05, atol=0.01 * np.abs(whole).max())


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_path_logits_read_the_senders_change_through_one_receiver_at_a_time(make):
    model, source = make(), random_encoded(10)
    target = _changed(source)
    engine = PatchEngine(model, source, target, batch_size=4, autocast=False)
    new = engine.path_logits([(0, 1), (1, 2)], [(2, 3), (2, 0)])
    target_logits = engine.unpatched_logits()[1]
    assert not np.allclose(new[1], target_logits) and not np.allclose(new[0], new[1])
    only_cls = engine.path_logits([(0, 1), (1, 2)], [(2, 3)], cls_only=True)
    # the top layer reaches the classifier through [CLS] alone: its route at [CLS] is its whole path
    np.testing.assert_allclose(only_cls[0], new[0], atol=1e-5)
    lower = engine.path_logits([(0, 1)], [(1, 3)])[0]
    lower_cls = engine.path_logits([(0, 1)], [(1, 3)], cls_only=True)[0]
    assert not np.allclose(lower_cls, lower, atol=1e-4) and not np.allclose(lower_cls, target_logits, atol=1e-4)
    same = PatchEngine(model, target, target, batch_size=4, autocast=False).path_logits([(0, 1)], [(2, 3), (1, 0)])
    np.testing.assert_allclose(same, np.stack([target_logits, target_logits]), atol=1e-5)  # the zero path
    with pytest.raises(ValueError, match="must all sit above the senders"):
        engine.path_logits([(1, 0)], [(1, 3)])


@torch.inference_mode()
def test_path_patching_from_every_head_below_is_activation_patching_at_the_receivers_input():
    """With every head of the layers below a sender, nothing is frozen: the receiver reads exactly the input its layer
    gets when those heads are patched (activation patching), and every other head of the run is the target's."""
    import headlab.core.patching as patching

    model, source = tiny_bert(), random_encoded(10)
    target = _changed(source)
    senders = [(l, h) for l in range(2) for h in range(4)]
    engine = PatchEngine(model, source, target, batch_size=len(source), autocast=False)
    got = engine.path_logits(senders, [(2, 1)])[0]
    s, t = _batch(model, source), _batch(model, target)
    order = np.argsort([len(x) for x in source.input_ids], kind="stable")
    with recording_head_outputs(model) as passes:
        model(**s)
    captured = []
    hook = model.bert.encoder.layer[2].register_forward_pre_hook(
        lambda m, args, kwargs: captured.append(args[0] if args else kwargs["hidden_states"]), with_kwargs=True
    )
    try:
        with patch_heads(model, senders, passes[0]):
            model(**t)
    finally:
        hook.remove()
    with patching._reading(patching._Head(model, 2, 1), captured[0]):
        expected = model(**t).logits.numpy()  # the target run, head 2.1 alone reading the patched input
    np.testing.assert_allclose(got[order], expected, atol=1e-5)


def test_the_last_layer_at_cls_alone_changes_no_number_the_engine_reports():
    """A BERT classifier reads its last layer at [CLS] only: the engine computes that row alone there (its recorded
    last-layer head outputs are one row), and every patch, path, circuit and attribution agrees with full passes."""
    model, source = tiny_bert(), random_encoded(10)
    target = _changed(source)
    fast, full = (
        PatchEngine(model, source, target, batch_size=4, autocast=False, last_at_cls=c) for c in (True, False)
    )
    assert fast.last_at_cls and not full.last_at_cls
    assert all(rec[0][2].shape[1] == rec[4][2].shape[1] == 1 < rec[0][1].shape[1] for rec in fast._record())
    assert all(rec[0][2].shape[1] > 1 for rec in full._record())
    patches = [[(2, 1)], [(0, 3), (2, 2)], [(1, 0)]]
    where = [[0, len(x) - 2] for x in source.input_ids]
    for got, want in (
        (fast.unpatched_logits(), full.unpatched_logits()),
        (fast.logits(patches), full.logits(patches)),
        (fast.logits(patches, where=where), full.logits(patches, where=where)),
        (fast.path_logits([(0, 1)], [(2, 3), (1, 2)]), full.path_logits([(0, 1)], [(2, 3), (1, 2)])),
        (fast.path_logits([(0, 1)], [(2, 3)], cls_only=True), full.path_logits([(0, 1)], [(2, 3)], cls_only=True)),
    ):
        np.testing.assert_allclose(got, want, atol=1e-5)
    for got, want in zip(fast.attribution(), full.attribution()):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert not np.allclose(fast.logits(patches)[0], fast.unpatched_logits()[1])  # the patches move the grades
