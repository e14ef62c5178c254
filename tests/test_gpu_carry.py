"""benchmarks/gpu_carry.py: a model trimmed to the rows its data uses tokenizes, predicts and fine-tunes exactly as
the full one on that data, and its pack comes back byte for byte."""

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import MINILM_TOKENIZER
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, BertConfig, BertModel

from headlab.inputs import load_data
from headlab.inputs.assets import ASSETS, MARKER
from headlab.models.finetune import FinetuneConfig, finetune


def _carry():
    path = Path(__file__).parents[1] / "benchmarks" / "gpu_carry.py"
    spec = importlib.util.spec_from_file_location("gpu_carry", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


carry = _carry()


@pytest.fixture
def minilm_sized(tmp_path):
    """A tiny random BERT with MiniLM's real WordPiece vocabulary (30522 pieces) and a tokenizer.json, as the
    minilm asset is laid out."""
    folder = tmp_path / "minilm-sized"
    AutoTokenizer.from_pretrained(MINILM_TOKENIZER).save_pretrained(folder)
    shutil.copy(MINILM_TOKENIZER / "vocab.txt", folder / "vocab.txt")  # the asset's own file, line for line
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    assert (folder / "tokenizer.json").exists() and (folder / "model.safetensors").exists()
    return folder


def _trimmed(full: Path, frame, target: Path):
    tokenizer = AutoTokenizer.from_pretrained(full)
    keep = carry.kept_ids(tokenizer, frame["query"].tolist() + frame["title"].tolist())
    return keep, carry.trim_model(full, target, keep)


def test_the_trimmed_model_tokenizes_and_predicts_exactly_as_the_full_one(minilm_sized, pairs_file, tmp_path):
    frame = load_data(str(pairs_file))
    keep, new_id = _trimmed(minilm_sized, frame, tmp_path / "trimmed")
    trimmed = AutoTokenizer.from_pretrained(tmp_path / "trimmed")
    assert 104 < len(keep) < 200 and trimmed.vocab_size == len(keep)  # [PAD] .. [MASK] (0-103) and the words
    assert json.loads((tmp_path / "trimmed" / "config.json").read_text())["vocab_size"] == len(keep)
    assert (trimmed.cls_token_id, trimmed.sep_token_id, trimmed.pad_token_id) == (101, 102, 0)
    counts = carry.check_tokenization(AutoTokenizer.from_pretrained(minilm_sized), trimmed, frame, new_id)
    assert counts == {"pairs": len(frame), "sentences": 2 * len(frame), "words": 12}
    assert carry.check_outputs(minilm_sized, tmp_path / "trimmed", frame, sample=40)["pairs"] == 40
    rows = load_file(tmp_path / "trimmed" / "model.safetensors")[carry.EMBEDDINGS]
    assert torch.equal(rows, load_file(minilm_sized / "model.safetensors")[carry.EMBEDDINGS][keep])


def test_a_changed_row_or_a_dropped_piece_fails_the_checks(minilm_sized, pairs_file, tmp_path):
    frame = load_data(str(pairs_file))
    keep, new_id = _trimmed(minilm_sized, frame, tmp_path / "trimmed")
    weights = tmp_path / "trimmed" / "model.safetensors"
    tensors = load_file(weights)
    tensors[carry.EMBEDDINGS][new_id[keep[-1]]] += 1e-3  # a word's row, no longer the pretrained one
    save_file(tensors, weights)
    with pytest.raises(AssertionError, match="differ after trimming"):
        carry.check_outputs(minilm_sized, tmp_path / "trimmed", frame, sample=240)
    short = keep[:-1]  # one word's piece left out: it becomes [UNK]
    new_id = carry.trim_model(minilm_sized, tmp_path / "short", short)
    with pytest.raises(AssertionError, match="tokenizes differently"):
        full, short = (AutoTokenizer.from_pretrained(folder) for folder in (minilm_sized, tmp_path / "short"))
        carry.check_tokenization(full, short, frame, new_id)


def test_the_trimmed_model_fine_tunes_to_the_same_weights(fresh_cache, minilm_sized, pairs_file, tmp_path):
    keep, _ = _trimmed(minilm_sized, load_data(str(pairs_file)), tmp_path / "trimmed")
    runs = []
    for folder in (minilm_sized, tmp_path / "trimmed"):
        config = FinetuneConfig(model=str(folder), data=str(pairs_file), epochs=1, train_limit=64, batch_size=16)
        runs.append(finetune(config, progress=False))
    full, trimmed = (load_file(run / "model.safetensors") for run in runs)
    name = f"bert.{carry.EMBEDDINGS}"
    assert torch.equal(full.pop(name)[keep], trimmed.pop(name))
    assert full.keys() == trimmed.keys() and all(torch.equal(full[k], trimmed[k]) for k in full)
    assert (runs[0] / "history.csv").read_bytes() == (runs[1] / "history.csv").read_bytes()


def test_the_pack_comes_back_byte_for_byte_and_marked_complete(minilm_sized, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "pairs.tsv.gz").write_bytes(bytes(range(256)) * 3)
    (data / MARKER).write_text("not packed\n")
    manifest = carry.pack({"minilm": minilm_sized, "stsb-en": data}, tmp_path / carry.PACK, preset=1)
    assert "stsb-en/pairs.tsv.gz" in manifest["files"] and f"stsb-en/{MARKER}" not in manifest["files"]
    folders = carry.unpack(tmp_path / carry.PACK, tmp_path / "cache", carry.PINS)
    assert [f.name for f in folders] == ["minilm", "stsb-en"]
    for folder, source in zip(folders, (minilm_sized, data)):
        for path in source.rglob("*"):
            if path.is_file() and path.name != MARKER:
                assert (folder / path.relative_to(source)).read_bytes() == path.read_bytes()
        assert (folder / MARKER).read_text().strip() == ASSETS[folder.name].sha256


def test_byte_planes_undo_exactly_and_the_pins_are_the_registrys():
    rng = np.random.default_rng(0)
    header = b'{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}'
    for tail in (0, 1, 3):
        data = len(header).to_bytes(8, "little") + header + rng.bytes(4 * 1000 + tail)
        assert carry.from_planes(carry.to_planes(data)) == data and carry.to_planes(data) != data
    assert carry.PINS == {name: ASSETS[name].sha256 for name in carry.PINS} and carry.MARKER == MARKER


def test_the_lent_gpu_script_parses_pins_its_wheels_and_runs_the_default_book_without_a_site():
    import subprocess

    script = Path(__file__).parents[1] / "benchmarks" / "gpu_lent.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    wheels = text.split('WHEELS="', 1)[1].split('"', 1)[0].split()
    assert len(wheels) > 30 and all("==" in w for w in wheels) and "vl-convert-python==1.9.0.post1" in wheels
    assert "PRESETS=default SITE=0" in text and "benchmarks/gpu_book.sh" in text and 'gpu_carry.py" unpack' in text
