"""What a book build records besides the pages: how long each notebook took, from what cache state, on which
machine (``timings.csv``), and what each preset's model is and how well it grades (``models.csv``).

These tables are what the README's figures are generated from (:mod:`tools.readme`), so a timing or an
accuracy in the README is one a build measured, never one typed by hand.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch

from headlab.core.device import precision
from headlab.lab.pages import TABLE, artifact
from headlab.lab.params import REPO, Params
from headlab.models.names import is_pretrained_name, named_model_dir
from headlab.models.training import is_complete

TIMING_COLUMNS = ["build", "commit", "preset", "state", "step", "seconds", "computed", "load", "machine", "device"]
MODEL_COLUMNS = [
    "preset",
    "model",
    "data",
    "layers",
    "heads",
    "epochs",
    "lr",
    "frozen_word_embeddings",
    "n_train",
    "n_dev",
    "n_test",
    "accuracy",
    "accuracy_lo",
    "accuracy_hi",
    "macro_f1",
    "macro_f1_lo",
    "macro_f1_hi",
    "majority",
    "finetune_seconds",
    "checkpoint",
    "pretrain_seconds",
    "masked_token_accuracy",
    "masked_token_accuracy_lo",
    "masked_token_accuracy_hi",
]
MAKE_STARTED = "HEADLAB_MAKE_STARTED"  # the Makefile's start (epoch seconds): `make book` timed from venv to site


def processor(cpuinfo: str) -> str | None:
    """The first processor of a ``/proc/cpuinfo`` text: its name with its family and model, and AVX-512, AVX512-BF16 and
    AMX where it has them (bf16 products in hardware: :func:`headlab.core.device.precision`); a name such as "AMD EPYC"
    covers generations whose speeds differ severalfold. None without a name."""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if not key.strip():
            break  # the end of the first processor's block
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return None
    details = [
        f"{label} {fields[key]}" for key, label in (("cpu family", "family"), ("model", "model")) if key in fields
    ]
    flags = fields.get("flags", "").split()
    details += [
        label
        for flag, label in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX"))
        if flag in flags
    ]
    return fields["model name"] + (f" ({', '.join(details)})" if details else "")


def machine(lanes: int = 1, threads: int | None = None) -> str:
    """The processor, its cores, the precision of its products and torch's threads, and how many notebooks ran at once
    with how many threads each: what a timing is only true for."""
    try:
        model = processor(Path("/proc/cpuinfo").read_text())
    except OSError:
        model = None
    text = (
        f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{precision('cpu')} products, {torch.get_num_threads()} torch threads"
    )
    return text + (f"; notebooks {lanes} at a time, {threads} torch threads each" if lanes > 1 else "")


def device_machine(device: str, lanes: int = 1, threads: int | None = None) -> str:
    """What a build's timings ran on: on a GPU, the GPU and its precision first, then the host as :func:`machine`
    words it (``NVIDIA H200, bf16 products (host: ...)``, as benchmarks/prune_speed.py names a GPU); else the
    processor alone."""
    host = machine(lanes, threads)
    if torch.device(device).type != "cuda":
        return host
    return f"{torch.cuda.get_device_name(device)}, {precision(device)} products (host: {host})"


def load() -> float:
    """The 5-minute load average as a step ends: about the torch threads when nothing else runs, more when the
    machine was shared (a timing measured beside other work is no budget figure)."""
    try:
        return os.getloadavg()[1]
    except OSError:
        return float("nan")


COMMIT_VARIABLE = "HEADLAB_COMMIT"  # the commit a copy without git was made from (a checkout carried as files)


def commit() -> str:
    """The checkout's commit, marked ``+changes`` when the tree differs from it; outside git (a copy carried to a
    GPU machine as files, or no git there) the commit :data:`COMMIT_VARIABLE` names, else "unknown"."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get(COMMIT_VARIABLE) or "unknown"
    return head + ("+changes" if dirty else "")


def cache_state(settings: dict) -> str:
    """What a preset finds before its notebooks run: ``cold`` (no pretrained or fine-tuned model and no results) or
    ``cached`` (some of them). Whether the build was then warm, nothing left to compute, the steps say (each step's
    work log: :mod:`headlab.core.worklog`)."""
    params = Params.from_globals(settings)
    if is_pretrained_name(params.model) and not is_complete(named_model_dir(params.model, params.torch_device)):
        return "cold"  # nothing can have been fine-tuned on, or measured with, a model that does not exist yet
    cached = is_complete(params.checkpoint) or any(params.results_folder.glob("sweeps/*/masks/*.csv"))
    return "cached" if cached else "cold"


class BuildClock:
    """Collects the seconds of every step of one build and appends them to ``timings.csv`` as they come, so a build
    that fails half-way still records what it measured."""

    def __init__(self, path: Path, device: str, lanes: int = 1, threads: int | None = None):
        self.path = Path(path)
        self.build = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.commit, self.machine, self.device = commit(), device_machine(device, lanes, threads), device
        self.started = time.time()

    def record(self, preset: str, state: str, step: str, seconds: float, computed: bool | None = None) -> None:
        """One step's seconds; ``computed``: whether it trained or swept anything (False: all of it was cached)."""
        row = pd.DataFrame(
            [
                {
                    "build": self.build,
                    "commit": self.commit,
                    "preset": preset,
                    "state": state,
                    "step": step,
                    "seconds": round(float(seconds), 1),
                    "computed": computed,
                    "load": round(load(), 2),
                    "machine": self.machine,
                    "device": self.device,
                }
            ],
            columns=TIMING_COLUMNS,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        row.to_csv(self.path, mode="a", header=not self.path.exists(), index=False)

    def finish(self, state: str) -> None:
        """The whole build, and the whole ``make book`` (venv, install, assets) when the Makefile says when it began."""
        self.record("all", state, "build", time.time() - self.started)
        started = os.environ.get(MAKE_STARTED)
        if started and started.isdigit():
            self.record("all", state, "make book", time.time() - int(started))


def recorded_seconds(preset: str, state: str, tables: list[Path]) -> dict[str, float]:
    """Each step's seconds in the latest recorded build of ``preset`` that started ``state`` (else in any state), from
    the first of the timing ``tables`` that has one: what the build expects a step to take when it orders the
    steps (:func:`headlab.book.lanes.critical_path_first`). Empty when nothing was recorded."""
    for path in tables:
        if not Path(path).exists():
            continue
        rows = pd.read_csv(path, dtype={"build": str, "preset": str, "state": str, "step": str})
        rows = rows[rows["preset"] == preset]
        same = rows[rows["state"] == state]
        rows = same if len(same) else rows
        if len(rows):
            latest = rows[rows["build"] == rows["build"].max()]
            return {str(step): float(s) for step, s in zip(latest["step"], latest["seconds"])}
    return {}


def outcome(start: str, computed: bool) -> str:
    """A preset's (or a build's) kind: ``cold`` when it started with nothing cached, ``warm`` when it started with
    everything it needed (no step computed anything), ``partial`` otherwise."""
    return "cold" if start == "cold" else "partial" if computed else "warm"


def overall_state(states: list[str], computed: bool = False) -> str:
    """The build's kind: cold when every preset started cold, else warm or partial as :func:`outcome` says."""
    return "cold" if set(states) == {"cold"} else outcome("cached", computed or "cold" in states)


def model_row(preset: str, settings: dict) -> dict:
    """One preset's model: its shape, fine-tuning settings and time, its checkpoint (the fine-tune's cache folder,
    named by the hash of its settings), the test metrics notebook 00 saved, and for a model headlab pretrained its
    pretraining time and held-out masked-token accuracy."""
    params = Params.from_globals(settings)
    folder = params.checkpoint
    config = json.loads((folder / "config.json").read_text())
    training = json.loads((folder / "training.json").read_text())
    metrics = pd.read_csv(params.table_dir / "baseline_metrics.csv").set_index("metric")
    majority = metrics[metrics.index.str.startswith("majority")]["value"]
    row = {
        "preset": preset,
        "model": params.model,
        "data": params.data,
        "layers": config["num_hidden_layers"],
        "heads": config["num_attention_heads"],
        "epochs": params.epochs,
        "lr": params.lr,
        "frozen_word_embeddings": params.freeze_word_embeddings,
        "n_train": training["train_examples"],
        "n_dev": training["dev_examples"],
        "n_test": int(metrics.loc["accuracy", "n_examples"]),
        "accuracy": metrics.loc["accuracy", "value"],
        "accuracy_lo": metrics.loc["accuracy", "lo"],
        "accuracy_hi": metrics.loc["accuracy", "hi"],
        "macro_f1": metrics.loc["macro_f1", "value"],
        "macro_f1_lo": metrics.loc["macro_f1", "lo"],
        "macro_f1_hi": metrics.loc["macro_f1", "hi"],
        "majority": float(majority.iloc[0]) if len(majority) else float("nan"),
        "finetune_seconds": training.get("seconds_this_run"),
        "checkpoint": folder.name,  # its settings' hash, the precision of its products included
    }
    if is_pretrained_name(params.model):
        report = json.loads(
            (named_model_dir(params.model, params.torch_device) / "pretraining.json").read_text(encoding="utf-8")
        )
        row.update(
            pretrain_seconds=report["seconds"],
            masked_token_accuracy=report["masked_token_accuracy"],
            masked_token_accuracy_lo=report["masked_token_accuracy_lo"],
            masked_token_accuracy_hi=report["masked_token_accuracy_hi"],
        )
    return row


def models_table(built: dict[str, dict]) -> pd.DataFrame:
    """:func:`model_row` for every built preset (``{preset: settings}``)."""
    return pd.DataFrame([model_row(p, s) for p, s in built.items()], columns=MODEL_COLUMNS)


def stacked(built: dict[str, dict], name: str) -> pd.DataFrame:
    """One result table of every built preset that saved it, stacked, with a ``preset`` column: ``name`` is a table
    a page declares for the build (:class:`headlab.lab.pages.Artifact`, ``for_build``), so a renamed table fails here,
    naming the registry, rather than leaving the README's table empty."""
    table = artifact(name)
    if not (table.kind == TABLE and table.for_build):
        raise KeyError(f"{name!r} is not a table a page declares for the build (Artifact(..., for_build=True))")
    frames = [
        pd.read_csv(path).assign(preset=preset)
        for preset, settings in built.items()
        if (path := table.path(Params.from_globals(settings).results_folder)).exists()
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["preset"])


def pruning_table(built: dict[str, dict]) -> pd.DataFrame:
    """Each preset's pruning page (``10_pruning``) in one row: its model and data, the largest share of heads removed
    by importance within the margin, chosen on dev (``importance_share``, ``importance_heads``, ``dev_kappa_lost``)
    and measured on test (``kappa_lost`` with ``_lo``/``_hi``, ``within``), and the pruned model's size and grades
    beside masking (``pruning_model.csv``)."""
    safe = stacked(built, "pruning_safe_share")
    if safe.empty:
        return pd.DataFrame(columns=["preset"])
    table = safe.rename(columns={"share": "importance_share", "n_heads": "importance_heads"}).drop(
        columns=["kind", "lo", "hi", "rel_change", "n_examples", "n_boot"], errors="ignore"
    )
    model = stacked(built, "pruning_model")
    table = table.merge(model, on="preset", how="left") if not model.empty else table
    studies = {preset: Params.from_globals(settings) for preset, settings in built.items()}
    names = pd.DataFrame([{"preset": p, "model": s.model, "data": s.data} for p, s in studies.items()])
    table = names.merge(table, on="preset")
    return table.set_index("preset").loc[[p for p in built if p in set(table["preset"])]].reset_index()
