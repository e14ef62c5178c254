"""headlab.book.records: a build's timings (with the cache state each preset started from and the machine) and each
preset's model row, which the README's generated figures are made from."""

import json

import pandas as pd
import torch

from headlab.book import records
from headlab.book.records import (
    MAKE_STARTED,
    BuildClock,
    cache_state,
    device_machine,
    machine,
    model_row,
    models_table,
    outcome,
    overall_state,
    processor,
)
from headlab.core.device import precision
from headlab.inputs.assets import sha256_of
from headlab.lab.params import Params
from headlab.models.training import MARKER


def _fake_checkpoint(folder, layers=6, heads=12):
    """A complete cache entry as fine-tuning leaves it (weights, marker, config, report), without training."""
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / MARKER).write_text(sha256_of(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": layers, "num_attention_heads": heads}))
    (folder / "training.json").write_text(
        json.dumps({"train_examples": 5749, "dev_examples": 1500, "seconds_this_run": 224.5})
    )


def test_cache_state_is_cold_until_a_model_or_a_result_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    settings = {"RUN_DIR": str(tmp_path / "runs")}
    assert cache_state(settings) == "cold"
    params = Params.from_globals(settings)
    assert not params.results_folder.exists(), "asking for the state creates nothing"
    _fake_checkpoint(params.checkpoint)
    assert cache_state(settings) == "cached"  # a fine-tuned model, nothing measured with it yet
    (params.checkpoint / MARKER).write_text("not the weights' hash")  # a broken cache entry is rebuilt: not cached
    assert cache_state(settings) == "cold"
    mask = params.table_dir / "sweeps" / "redundancy-abc" / "masks" / "none.csv"
    mask.parent.mkdir(parents=True)
    mask.write_text("mask_id\n")
    assert cache_state(settings) == "cached"


def test_a_model_headlab_pretrains_is_cold_until_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    assert cache_state({"MODEL": "zh-char", "DATA": "stsb-zh", "RUN_DIR": str(tmp_path / "runs")}) == "cold"


def test_the_clock_appends_each_step_as_it_comes_and_times_make_book(tmp_path, monkeypatch):
    path = tmp_path / "timings.csv"
    monkeypatch.setenv(MAKE_STARTED, "1")  # the Makefile's start, in epoch seconds
    first = BuildClock(path, "cpu")
    first.record("default", "cold", "00_setup", 239.04, computed=True)
    assert pd.read_csv(path)["seconds"].tolist() == [239.0]  # on disk at once: a failed build keeps it
    first.finish("cold")
    second = BuildClock(path, "cpu")
    second.record("zh-char", "warm", "01_redundancy", 12)
    table = pd.read_csv(path)
    assert list(table["step"]) == ["00_setup", "build", "make book", "01_redundancy"]
    assert table.loc[2, "seconds"] > 1e9 and table.loc[1, "preset"] == "all"  # since the epoch's second 1
    assert table["machine"].str.contains("cores").all() and set(table["device"]) == {"cpu"}
    assert (table["load"] >= 0).all()  # the machine's load as each step ended: was it shared?
    assert table.loc[0, "computed"] == True and table["computed"].isna().sum() == 3  # noqa: E712 (read back as object)


def test_a_build_is_cold_or_warm_only_when_every_preset_is():
    assert overall_state(["cold", "cold"], computed=True) == "cold"
    assert overall_state(["cached", "cold"], computed=True) == "partial" and overall_state(["cached"]) == "warm"
    assert overall_state(["cached"], computed=True) == "partial"  # it found models cached but had to sweep
    assert outcome("cold", False) == "cold" and outcome("cached", False) == "warm"


def test_the_machine_says_how_many_notebooks_ran_at_once():
    assert machine().endswith(f"fp32 products, {torch.get_num_threads()} torch threads")  # tests run in fp32
    assert "at a time" not in machine()
    assert machine(2, 1).endswith("torch threads; notebooks 2 at a time, 1 torch threads each")
    assert BuildClock("timings.csv", "cpu", 2, 1).machine == machine(2, 1)


def test_a_copy_outside_git_names_the_commit_it_was_made_from(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "REPO", tmp_path)  # no .git: files carried to a GPU machine
    monkeypatch.delenv(records.COMMIT_VARIABLE, raising=False)
    assert records.commit() == "unknown"
    monkeypatch.setenv(records.COMMIT_VARIABLE, "abc1234")
    assert records.commit() == "abc1234" and BuildClock(tmp_path / "t.csv", "cpu").commit == "abc1234"


def test_a_gpu_build_names_the_gpu_and_its_precision_before_the_host(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    named = f"NVIDIA H200, {precision('cuda')} products (host: {machine(2, 8)})"  # bf16 unless tests force fp32
    assert device_machine("cuda", 2, 8) == named and BuildClock("timings.csv", "cuda", 2, 8).machine == named
    assert device_machine("cuda:0").startswith("NVIDIA H200, ") and device_machine("cpu", 2, 8) == machine(2, 8)


def test_the_processor_is_named_with_its_family_and_model():
    """ "AMD EPYC" alone covers Zen 3 to Zen 5, which the same build found severalfold apart."""
    first = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu sse avx2 avx512f avx512_bf16\n"
    )
    second = "\nprocessor\t: 1\ncpu family\t: 99\nmodel name\t: Other\n"
    assert processor(first + second) == "AMD EPYC (family 26, model 2, AVX-512, AVX512-BF16)"
    zen3 = "cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2\n"
    assert processor(zen3) == "AMD EPYC (family 25, model 1)"
    assert processor("model name\t: Intel(R) Xeon(R) Processor\n") == "Intel(R) Xeon(R) Processor"
    assert processor("processor\t: 0\n") is None


def test_a_model_row_reads_the_checkpoint_and_the_test_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    settings = {"RUN_DIR": str(tmp_path / "runs"), "EPOCHS": 2}
    params = Params.from_globals(settings)
    _fake_checkpoint(params.checkpoint, layers=6, heads=12)
    pd.DataFrame(
        [
            {"metric": "accuracy", "value": 0.546, "lo": 0.52, "hi": 0.57, "n_examples": 1379},
            {"metric": "macro_f1", "value": 0.533, "lo": 0.507, "hi": 0.557, "n_examples": 1379},
            {"metric": "majority class (grade 5) accuracy", "value": 0.245, "lo": None, "hi": None, "n_examples": 1379},
        ]
    ).to_csv(params.table_dir / "baseline_metrics.csv", index=False)
    row = model_row("default", settings)
    assert (row["layers"], row["heads"], row["epochs"], row["n_train"], row["n_test"]) == (6, 12, 2, 5749, 1379)
    assert (row["accuracy"], row["accuracy_lo"], row["majority"], row["finetune_seconds"]) == (
        0.546,
        0.52,
        0.245,
        224.5,
    )
    assert "pretrain_seconds" not in row  # a published model: nothing pretrained here
    assert list(models_table({"default": settings})["preset"]) == ["default"]
