"""headlab.models.finetune: fine-tuning is deterministic, resumes after a kill, and rebuilds a broken checkpoint."""

import shutil
import signal
from dataclasses import asdict

import numpy as np
import pytest
import torch
from interrupt import freeze_after, run_killed
from safetensors.numpy import load_file

from headlab.core.evaluate import Encoded
from headlab.core.grades import STUDY_SCALE
from headlab.models import finetune as finetune_module
from headlab.models.finetune import FinetuneConfig, checkpoint_dir, finetune
from headlab.models.training import is_complete


def test_out_of_range_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="epochs"):
        FinetuneConfig(epochs=0)


def test_fine_tuning_twice_gives_byte_identical_results(fresh_cache, tiny_model_folder, pairs_file):
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=2, train_limit=64, seed=3)
    first = finetune(config, progress=False)
    history, weights = (first / "history.csv").read_bytes(), (first / "model.safetensors").read_bytes()
    shutil.rmtree(first)
    second = finetune(config, progress=False)
    assert (second / "history.csv").read_bytes() == history
    assert (second / "model.safetensors").read_bytes() == weights


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_fine_tune_resumes_to_the_same_weights(fresh_cache, tiny_model_folder, pairs_file, tmp_path, sig):
    config = FinetuneConfig(
        model=str(tiny_model_folder), data=str(pairs_file), epochs=4, train_limit=32, batch_size=4, seed=1
    )
    out = checkpoint_dir(config)
    state = out.with_name(out.name + ".partial") / "state.pt"
    marker = tmp_path / "frozen"

    def frozen_run():  # frozen as epoch 2 begins (its batches are drawn once per epoch), with epoch 1's state saved
        freeze_after(finetune_module, "length_bucketed_batches", 2, marker)
        finetune(config, progress=False)

    run_killed(frozen_run, marker, sig)
    assert state.exists() and not is_complete(out)
    assert torch.load(state, weights_only=True)["epoch"] == 0  # epoch 1 of 4 done
    finetune(config, progress=False)
    assert is_complete(out)
    resumed = (out / "model.safetensors").read_bytes()

    shutil.rmtree(out)
    finetune(config, progress=False)
    assert (out / "model.safetensors").read_bytes() == resumed


def test_a_corrupt_checkpoint_is_rebuilt_not_loaded(fresh_cache, tiny_model_folder, pairs_file):
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=1, train_limit=32)
    out = finetune(config, progress=False)
    good = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes(good[: len(good) // 2])  # truncated weights
    assert not is_complete(out)
    again = finetune(config, progress=False)
    assert is_complete(again) and (again / "model.safetensors").read_bytes() == good


def test_length_bucketed_batches_cover_every_example_once_with_little_padding():
    from headlab.models.finetune import length_bucketed_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 80, size=1000)
    encoded = Encoded([[1] * n for n in lengths], [[0] * n for n in lengths], np.ones(1000, dtype=int), 0, STUDY_SCALE)
    batches = length_bucketed_batches(encoded, 32, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    padded = sum(len(b) * lengths[b].max() for b in batches)
    random_padded = sum(len(b) * lengths[b].max() for b in np.array_split(rng.permutation(1000), len(batches)))
    assert padded < 0.7 * random_padded
    again = length_bucketed_batches(encoded, 32, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_a_model_folder_is_keyed_by_its_weights_not_its_pretraining_report(fresh_cache, tiny_model_folder, pairs_file):
    """Pretraining the same model again gives the same weights but another report (its timings): same fine-tune."""
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file))
    (tiny_model_folder / "pretraining.json").write_text('{"seconds": 1610.3}')
    before = checkpoint_dir(config)
    (tiny_model_folder / "pretraining.json").write_text('{"seconds": 1824.9}')
    assert checkpoint_dir(config) == before
    weights = tiny_model_folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")  # other weights: another model, another fine-tune
    assert checkpoint_dir(config) != before


def test_frozen_word_embeddings_stay_as_pretrained_and_name_another_checkpoint(
    fresh_cache, tiny_model_folder, pairs_file
):
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=1, train_limit=64)
    frozen = FinetuneConfig(**{**asdict(config), "freeze_word_embeddings": True})
    assert checkpoint_dir(frozen) != checkpoint_dir(config)
    pretrained = load_file(tiny_model_folder / "model.safetensors")
    name = next(k for k in pretrained if k.endswith("word_embeddings.weight"))
    for settings, stays in ((frozen, True), (config, False)):
        tuned = load_file(finetune(settings, progress=False) / "model.safetensors")
        tuned_name = next(k for k in tuned if k.endswith("word_embeddings.weight"))
        assert np.array_equal(tuned[tuned_name], pretrained[name]) == stays
        assert not np.array_equal(
            tuned[tuned_name.replace("word_embeddings", "position_embeddings")],
            pretrained[name.replace("word_embeddings", "position_embeddings")],
        )


def test_the_freeze_option_left_off_keeps_the_keys_of_earlier_checkpoints(fresh_cache):
    # the key of procedure 3 (fused AdamW) with neither option in it, as the keys before the options existed
    # (procedure 2's was minilm-stsb-en-857bb31955c6)
    assert checkpoint_dir(FinetuneConfig()).name == "minilm-stsb-en-ab5e251c8a2d"


def test_fine_tuning_steps_with_fused_adamw_on_one_thread(monkeypatch):
    """The fine-tune's optimizer is torch's fused AdamW (one kernel; the loop's update to float rounding), and
    the fine-tune asks for it, on one torch thread."""
    from headlab.models import training

    torch.manual_seed(0)
    weights = [torch.randn(64, 32), torch.randn(32)]
    grads = [torch.randn_like(w) for w in weights]
    stepped = {}
    for fused in (False, True):
        params = [torch.nn.Parameter(w.clone()) for w in weights]
        model = torch.nn.Module()
        model.params = torch.nn.ParameterList(params)
        optimizer, scheduler = training.optimizer_and_schedule(model, 1e-3, 0.01, 0.1, 10, fused=fused)
        assert bool(optimizer.defaults["fused"]) is fused
        for _ in range(3):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            optimizer.step()
            scheduler.step()
        stepped[fused] = [p.detach() for p in params]
    for loop, fused in zip(stepped[False], stepped[True]):
        assert torch.allclose(loop, fused, atol=1e-6)
        assert not torch.equal(loop, weights[0] if loop.ndim == 2 else weights[1])  # it did step

    class Asked(Exception):
        pass

    def record(*args, **kwargs):
        raise Asked(kwargs.get("fused"), torch.get_num_threads())

    monkeypatch.setattr(finetune_module, "optimizer_and_schedule", record)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(Asked) as asked:  # fit asks for its optimizer before anything else
            finetune_module.fit(torch.nn.Linear(2, 2), FinetuneConfig(), None, "cpu", False, [0], None, None, None)
        assert asked.value.args == (True, 1)  # fused, on one thread (the same weights wherever it trains) ...
        assert torch.get_num_threads() == 2  # ... and the threads are given back, even after a failure
    finally:
        torch.set_num_threads(threads)
