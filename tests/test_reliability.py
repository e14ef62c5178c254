"""Bad input gets a clear error, same seed gives the same tables, and interrupted work resumes."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import random_encoded, tiny_bert
from transformers import BertConfig, BertModel

from headlab.core.device import resolve_device
from headlab.core.evaluate import Encoded, encode
from headlab.core.sweep import MaskSpec, load_sweep, random_share_specs, run_sweep, single_head_specs
from headlab.lab.study import Study
from headlab.models.finetune import FinetuneConfig, checkpoint_dir, finetune
from headlab.models.loading import ModelError, load_tokenizer, resolve_model
from headlab.models.training import is_complete

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


@pytest.fixture
def tiny_model_folder(tmp_path, tokenizer):
    """A tiny random BERT saved like any model folder (safetensors + the real MiniLM tokenizer)."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)
    folder = tmp_path / "tiny-bert"
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def pairs_file(tmp_path):
    rng = np.random.default_rng(0)
    words = "cat dog sat mat ran far red blue car road sky sea".split()
    rows = ["query\ttitle\tlabel\tsplit"]
    for i in range(240):
        q, t = " ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 5))
        rows.append(f"{q}\t{t}\t{rng.integers(1, 6)}\t{['train', 'dev', 'test'][i % 3] if i >= 160 else 'train'}")
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private HEADLAB_CACHE that still sees the already downloaded assets."""
    from headlab.inputs.assets import cache_dir

    assets = cache_dir() / "assets"
    cache = tmp_path / "cache"
    cache.mkdir()
    if assets.exists():
        (cache / "assets").symlink_to(assets)
    monkeypatch.setenv("HEADLAB_CACHE", str(cache))
    return cache


# --- model loading ----------------------------------------------------------------------------------------

def test_missing_model_folder_is_named(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"))


def test_pickle_only_weights_are_refused_unless_allowed(tiny_model_folder):
    (tiny_model_folder / "model.safetensors").rename(tiny_model_folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match="pickle"):
        resolve_model(str(tiny_model_folder))
    assert resolve_model(str(tiny_model_folder), allow_pickle=True) == str(tiny_model_folder)


def test_remote_code_and_unsupported_encoders_are_refused(tiny_model_folder):
    config_path = tiny_model_folder / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "auto_map": {"AutoModel": "evil.Model"}}))
    with pytest.raises(ModelError, match="remote code"):
        resolve_model(str(tiny_model_folder))
    config_path.write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ModelError, match="gpt2.*not an encoder headlab supports"):
        resolve_model(str(tiny_model_folder))


def test_asking_for_a_gpu_that_is_not_there_is_an_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="DEVICE='cuda'"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="DEVICE must be"):
        resolve_device("tpu")


# --- parameters -------------------------------------------------------------------------------------------

def test_out_of_range_parameters_name_the_parameter():
    with pytest.raises(ValueError, match=r"shares must lie in \[0, 1\]"):
        random_share_specs(2, 4, [1.5], 2, 0)
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        random_share_specs(2, 4, [0.5], -1, 0)
    with pytest.raises(ValueError, match=r"head \(5, 0\) does not exist in a 2x4 model"):
        MaskSpec("x", ((5, 0),), "head").keep(2, 4)
    with pytest.raises(ValueError, match="EVAL_LIMIT"):
        Study(eval_limit=0, device="cpu")
    with pytest.raises(ValueError, match="epochs"):
        FinetuneConfig(epochs=0)


def test_truncation_is_counted_and_reported(tokenizer):
    frame = pd.DataFrame({"query": ["word " * 100, "short"], "title": ["word " * 100, "short too"], "label": [1, 2]})
    with pytest.warns(UserWarning, match="1 of 2 pairs are longer than max_length=128"):
        encoded = encode(tokenizer, frame, max_length=128)
    assert encoded.n_truncated == 1 and max(len(x) for x in encoded.input_ids) == 128


# --- determinism ------------------------------------------------------------------------------------------

def test_fine_tuning_twice_gives_byte_identical_results(fresh_cache, tiny_model_folder, pairs_file):
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=2, train_limit=64, seed=3)
    first = finetune(config, progress=False)
    history, weights = (first / "history.csv").read_bytes(), (first / "model.safetensors").read_bytes()
    import shutil

    shutil.rmtree(first)
    second = finetune(config, progress=False)
    assert (second / "history.csv").read_bytes() == history
    assert (second / "model.safetensors").read_bytes() == weights


def test_sweeps_twice_and_sharded_give_byte_identical_tables(tmp_path):
    model, encoded = tiny_bert(), random_encoded(longest=15)
    specs = single_head_specs(3, 4) + random_share_specs(3, 4, [0.25, 0.5], 2, seed=1)
    run_sweep(model, encoded, specs, tmp_path / "a", progress=False)
    run_sweep(model, encoded, specs, tmp_path / "b", progress=False)
    for shard in range(3):
        run_sweep(model, encoded, specs, tmp_path / "sharded", shard=shard, n_shards=3, progress=False)
    files = sorted(p.name for p in (tmp_path / "a" / "masks").glob("*.csv"))
    assert len(files) == len(specs) + 1  # the sweep adds the unmasked model
    for name in files:
        a = (tmp_path / "a" / "masks" / name).read_bytes()
        assert a == (tmp_path / "b" / "masks" / name).read_bytes() == (tmp_path / "sharded" / "masks" / name).read_bytes()
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "a"), load_sweep(tmp_path / "sharded"))


def test_a_sweep_folder_of_another_plan_is_refused(tmp_path):
    model, encoded = tiny_bert(), random_encoded(10, longest=15)
    run_sweep(model, encoded, single_head_specs(3, 4)[:2], tmp_path, progress=False)
    from headlab.core.sweep import SweepError

    with pytest.raises(SweepError, match="different sweep"):
        run_sweep(model, encoded, single_head_specs(3, 4)[:3], tmp_path, progress=False)


# --- interruption -----------------------------------------------------------------------------------------

# A killed child is first frozen at a known point (it touches a marker file, then sleeps until killed), so the
# kill lands part-way through the work however fast the machine is.
FREEZE = """
import time
from pathlib import Path

def freeze_after(module, name, calls, marker, counts=lambda *args: True):
    # module.name runs as usual, but after its calls-th counted call it touches marker and sleeps until killed
    original, seen = getattr(module, name), []
    def frozen(*args, **kwargs):
        result = original(*args, **kwargs)
        if counts(*args):
            seen.append(1)
            if len(seen) == calls:
                Path(marker).touch()
                while True:
                    time.sleep(1)
        return result
    setattr(module, name, frozen)
"""

SWEEP_SCRIPT = """
import sys, numpy as np, torch
torch.set_num_threads(1)
sys.path.insert(0, {tests!r})
from conftest import random_encoded, tiny_bert
from headlab.core import sweep
from headlab.core.evaluate import Encoded
rng = np.random.default_rng(0)
ids = [[2] + rng.integers(5, 50, size=rng.integers(5, 20)).tolist() + [3] for _ in range(60)]
enc = Encoded(ids, [[0] * len(x) for x in ids], rng.integers(1, 6, size=60), 0)
"""
RUN_SWEEP = ("sweep.run_sweep(tiny_bert(), enc, sweep.random_share_specs(3, 4, [0.25, 0.5, 0.75], 10, seed=0), {out!r}, "
             "batch_size=8, progress=False)\n")
# frozen right after the third mask's file is in place
FREEZE_SWEEP = "freeze_after(sweep, '_atomic_write', 3, {marker!r}, counts=lambda path, text: path.parent.name == 'masks')\n"


def _run_frozen(script: str, marker: Path, sig) -> None:
    """Start ``script``, wait until it has frozen (``marker`` exists), send it ``sig``."""
    # a shell that starts the suite in the background has SIGINT ignored, and children inherit that: restore it
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert marker.exists() and proc.returncode != 0, "the child did not freeze part-way and die of the signal"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_sweep_resumes_to_the_same_table(tmp_path, sig):
    tests = str(REPO / "tests")
    killed, clean, marker = tmp_path / "killed", tmp_path / "clean", tmp_path / "frozen"
    masks = killed / "masks"
    _run_frozen(SWEEP_SCRIPT.format(tests=tests) + FREEZE + FREEZE_SWEEP.format(marker=str(marker))
                + RUN_SWEEP.format(out=str(killed)), marker, sig)
    done = {p.name: p.stat().st_ino for p in masks.glob("*.csv")}
    assert len(done) == 3
    subprocess.run([sys.executable, "-c", SWEEP_SCRIPT.format(tests=tests) + RUN_SWEEP.format(out=str(killed))],
                   cwd=REPO, check=True)
    assert {name: (masks / name).stat().st_ino for name in done} == done  # resumed: the 3 done masks not redone
    subprocess.run([sys.executable, "-c", SWEEP_SCRIPT.format(tests=tests) + RUN_SWEEP.format(out=str(clean))],
                   cwd=REPO, check=True)
    pd.testing.assert_frame_equal(load_sweep(killed), load_sweep(clean))
    assert not list(masks.glob(".*tmp"))  # no half-written file left behind


FINETUNE_SCRIPT = """
import torch
torch.set_num_threads(1)
from headlab.models import finetune
"""
RUN_FINETUNE = ("finetune.finetune(finetune.FinetuneConfig(model={model!r}, data={data!r}, epochs=4, train_limit=160, "
                "batch_size=4, seed=1), progress=False)\n")
# frozen as epoch 2 begins (its batches are drawn once per epoch), with epoch 1's state saved
FREEZE_FINETUNE = "freeze_after(finetune, 'length_bucketed_batches', 2, {marker!r})\n"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_fine_tune_resumes_to_the_same_weights(fresh_cache, tiny_model_folder, pairs_file, tmp_path, sig):
    run = RUN_FINETUNE.format(model=str(tiny_model_folder), data=str(pairs_file))
    config = FinetuneConfig(model=str(tiny_model_folder), data=str(pairs_file), epochs=4, train_limit=160,
                            batch_size=4, seed=1)
    out = checkpoint_dir(config)
    state = out.with_name(out.name + ".partial") / "state.pt"
    marker = tmp_path / "frozen"
    _run_frozen(FINETUNE_SCRIPT + FREEZE + FREEZE_FINETUNE.format(marker=str(marker)) + run, marker, sig)
    assert state.exists() and not is_complete(out)
    assert torch.load(state, weights_only=True)["epoch"] == 0  # epoch 1 of 4 done
    subprocess.run([sys.executable, "-c", FINETUNE_SCRIPT + run], cwd=REPO, check=True, env=os.environ)
    assert is_complete(out)
    resumed = (out / "model.safetensors").read_bytes()
    import shutil

    shutil.rmtree(out)
    subprocess.run([sys.executable, "-c", FINETUNE_SCRIPT + run], cwd=REPO, check=True, env=os.environ)
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
    encoded = Encoded([[1] * n for n in lengths], [[0] * n for n in lengths], np.ones(1000, dtype=int), 0)
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
