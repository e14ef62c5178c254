"""Pruned heads are gone for real: smaller matrices, the grades of masking them, saved and loaded back as safetensors
with the kept heads in the config, and never masked by their old indices."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import BERT_LAYERED, random_encoded, tiny_bert
from tiny_setup import tiny_setup

import headlab
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import predict
from headlab.core.grades import STUDY_SCALE
from headlab.core.masking import head_grid, mask_heads
from headlab.core.pruning import KEPT_HEADS, kept_heads, prune_heads
from headlab.models.loading import ModelError, is_pruned_folder, load_classifier

DROP = [(0, 1), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3), (2, 2)]  # layer 1 loses every head


def _keep(model, drop):
    keep = torch.ones(head_grid(model))
    for l, h in drop:
        keep[l, h] = 0
    return keep


@pytest.mark.parametrize("make", BERT_LAYERED, ids=lambda make: make.__name__)
def test_a_pruned_model_gives_the_grades_of_masking_its_heads_with_fewer_weights(make):
    model, encoded = make(), random_encoded()
    pruned = prune_heads(model, DROP)
    masked = predict(model, encoded, mask=_keep(model, DROP), batch_size=8)
    np.testing.assert_allclose(predict(pruned, encoded, batch_size=8), masked, atol=1e-5)
    assert not np.allclose(masked, predict(model, encoded, batch_size=8), atol=1e-3)  # the heads mattered
    size = model.config.hidden_size // model.config.num_attention_heads
    first = pruned.base_model.encoder.layer[0].attention
    assert first.self.query.weight.shape == (2 * size, model.config.hidden_size)
    assert first.output.dense.weight.shape == (model.config.hidden_size, 2 * size)
    assert pruned.base_model.encoder.layer[1].attention.output.dense.weight.shape[1] == 0
    removed = len(DROP) * 4 * size * model.config.hidden_size + len(DROP) * 3 * size  # q, k, v, output; q, k, v bias
    assert sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in pruned.parameters()) == removed
    assert kept_heads(pruned) == [[0, 2], [], [0, 1, 3]] + [[0, 1, 2, 3]] * (len(kept_heads(pruned)) - 3)
    assert kept_heads(model) is None  # the original is untouched


def test_pruning_refuses_heads_that_are_not_there_and_a_pruned_model_refuses_masks():
    model = tiny_bert()
    with pytest.raises(ValueError, match=r"heads \[\(0, 9\)\] are not in this model's 3 layers x 4 heads"):
        prune_heads(model, [(0, 9)])
    pruned = prune_heads(model, DROP)
    with pytest.raises(ValueError, match="already pruned"):
        prune_heads(pruned, [(2, 0)])
    with pytest.raises(ValueError, match="this model is pruned"):
        predict(pruned, random_encoded(n=4), mask=_keep(model, [(2, 0)]))
    engine = MaskEngine(pruned, random_encoded(n=8), batch_size=4)  # its unmasked grades, through its own layers
    np.testing.assert_allclose(
        engine.probabilities([torch.ones(head_grid(pruned))])[0],
        predict(pruned, random_encoded(n=8), batch_size=4),
        atol=1e-5,
    )


def test_lab_prune_saves_a_folder_that_headlab_load_reads_back_without_training(tmp_path, monkeypatch):
    lab = tiny_setup(tmp_path / "runs", n_right=3)
    folder = tmp_path / "pruned"
    pruned = lab.prune([(0, 0), (1, 1), (1, 2)], folder)
    assert is_pruned_folder(str(folder)) and not is_pruned_folder(str(tmp_path))
    assert sorted(p.name for p in folder.glob("*.safetensors")) == ["model.safetensors"]
    assert not list(folder.glob("*.bin"))
    loaded = load_classifier(str(folder), STUDY_SCALE)
    assert kept_heads(loaded) == kept_heads(pruned)
    np.testing.assert_allclose(
        predict(loaded, lab.encoded, batch_size=8), predict(pruned, lab.encoded, batch_size=8), atol=1e-6
    )
    from headlab.lab import params as params_module

    monkeypatch.setattr(params_module, "finetune", lambda *a, **k: pytest.fail("a pruned folder is not trained again"))
    data = tmp_path / "pairs.csv"
    lab.frame[["query", "title", "label"]].assign(split="test").to_csv(data, index=False)
    reloaded = headlab.load(model=str(folder), data=str(data), device="cpu", run_dir=str(tmp_path / "runs"))
    assert reloaded.params.checkpoint == folder.resolve()
    np.testing.assert_allclose(reloaded.base_probs, predict(pruned, reloaded.encoded, batch_size=64), atol=1e-5)


def test_weights_that_do_not_fit_the_kept_heads_are_refused(tmp_path):
    model = tiny_bert()
    pruned = prune_heads(model, DROP)
    pruned.save_pretrained(tmp_path, safe_serialization=True)
    config = pd.read_json(tmp_path / "config.json", typ="series")
    config[KEPT_HEADS] = [[0, 1, 2, 3]] * len(config[KEPT_HEADS])  # a config that keeps more heads than the weights
    (tmp_path / "config.json").write_text(config.to_json())
    with pytest.raises(ModelError, match="the weights do not fit the heads and neurons its config keeps"):
        load_classifier(str(tmp_path), STUDY_SCALE)


def test_neurons_cut_from_the_feed_forward_blocks_grade_as_masking_them_and_load_back(tmp_path):
    from headlab.core.compress import mask_neurons
    from headlab.core.pruning import KEPT_NEURONS, kept_neurons, prune_neurons

    lab = tiny_setup(tmp_path / "runs", layers=2)
    size = lab.model.config.intermediate_size
    keep = [list(range(0, size, 3)), []]  # the second layer keeps no neuron: its block adds the bias alone
    mask = torch.zeros(2, size)
    mask[0, keep[0]] = 1
    with mask_neurons(lab.model, mask):
        masked = predict(lab.model, lab.encoded)
    cut = prune_neurons(prune_heads(lab.model, [(1, 2)]), keep)
    with mask_heads(lab.model, torch.tensor([[1.0] * 4, [1.0, 1.0, 0.0, 1.0]])), mask_neurons(lab.model, mask):
        both = predict(lab.model, lab.encoded)
    np.testing.assert_allclose(predict(cut, lab.encoded), both, atol=1e-5)
    assert not np.allclose(masked, both)  # the head counts too
    assert kept_neurons(cut) == keep and sum(p.numel() for p in cut.parameters()) < sum(
        p.numel() for p in lab.model.parameters()
    )
    cut.save_pretrained(tmp_path / "cut", safe_serialization=True)
    assert is_pruned_folder(str(tmp_path / "cut"))
    loaded = load_classifier(str(tmp_path / "cut"), STUDY_SCALE)
    assert getattr(loaded.config, KEPT_NEURONS) == keep
    np.testing.assert_allclose(predict(loaded, lab.encoded), predict(cut, lab.encoded), atol=1e-6)
    with pytest.raises(ValueError, match="already cut"):
        prune_neurons(cut, keep)
    with pytest.raises(ValueError, match="neurons in"):
        prune_neurons(prune_heads(lab.model, []), [[size], []])
