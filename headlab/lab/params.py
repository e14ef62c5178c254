"""The parameters every notebook shares (:class:`Params`): model, data, sizes, seed, device, where results go.

Each notebook's ``parameters`` cell assigns every parameter the page takes (:mod:`headlab.lab.pages`);
``Params.from_globals`` gathers the shared ones, :meth:`headlab.lab.lab.Lab.from_params` turns them into a lab (the
cached fine-tuned model, the tokenized evaluation split and the unmasked baseline), and ``Params.table_dir`` is where
the notebook's tidy result tables go (and where later notebooks read them: :func:`headlab.lab.pages.artifact`). A
relative ``RUN_DIR`` is taken from the repository root, wherever the kernel starts, so that JupyterLab and
``make book`` share ``runs/`` and its sweeps.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from headlab.core.device import precision, resolve_device
from headlab.core.grades import GradeScale
from headlab.core.stats import N_BOOT
from headlab.core.sweep import plan_table
from headlab.inputs.data import get_split, grade_scale, load_data
from headlab.models.finetune import FinetuneConfig, checkpoint_dir, finetune
from headlab.models.loading import fine_tuned_scale, is_pruned_folder

REPO = Path(__file__).resolve().parents[2]


def results_root(run_dir) -> Path:
    """``RUN_DIR`` as a folder; a relative one lies in the repository, not in the kernel's folder (JupyterLab starts a
    notebook's kernel in ``notebooks/``, papermill in the repository, and both must find the same results)."""
    path = Path(run_dir).expanduser()
    return path if path.is_absolute() else REPO / path


@dataclass
class Params:
    """Model, data, sizes, seed and device: the papermill parameters common to all notebooks."""

    model: str = "minilm"
    data: str = "stsb-en"
    seed: int = 0
    device: str = "auto"
    epochs: int = 3
    lr: float = 5e-5
    train_limit: int | None = None
    freeze_word_embeddings: bool = False
    eval_split: str = "test"
    eval_limit: int | None = None
    batch_size: int = 64
    run_dir: str = "runs"
    n_boot: int = N_BOOT  # bootstrap resamples for every interval the lab computes
    cluster: str | None = None  # sweeps on Dask: "local:N" or a scheduler address (headlab.core.cluster)

    @classmethod
    def from_globals(cls, names: dict) -> Params:
        """Build from a notebook's upper-case parameters (MODEL, DATA, SEED, ...) where they are defined."""
        fields = cls.__dataclass_fields__
        return cls(**{f: names[f.upper()] for f in fields if f.upper() in names})

    def __post_init__(self):
        if self.eval_limit is not None and int(self.eval_limit) < 1:
            raise ValueError(f"EVAL_LIMIT must be a positive integer or None, got {self.eval_limit}")
        if int(self.batch_size) < 1:
            raise ValueError(f"BATCH_SIZE must be a positive integer, got {self.batch_size}")
        if int(self.n_boot) < 1:
            raise ValueError(f"N_BOOT must be a positive integer, got {self.n_boot}")
        self.torch_device = resolve_device(self.device)

    @property
    def finetune_config(self) -> FinetuneConfig:
        """The fine-tuning settings these parameters name (the cache key of the fine-tuned model)."""
        return FinetuneConfig(
            model=self.model,
            data=self.data,
            epochs=self.epochs,
            lr=self.lr,
            train_limit=self.train_limit,
            seed=self.seed,
            freeze_word_embeddings=self.freeze_word_embeddings,
            precision=precision(self.torch_device),
        )

    def fine_tune(self) -> Path:
        """The fine-tuned model folder: trained on the first call (minutes), then read from the cache; a pruned
        model folder (:meth:`Lab.prune`) is already fine-tuned and is used as it is."""
        return (
            self.checkpoint
            if is_pruned_folder(self.model)
            else finetune(self.finetune_config, device=self.torch_device)
        )

    @property
    def checkpoint(self) -> Path:
        """Where the fine-tuned model lives in the cache (found from the settings; nothing is trained), or the pruned
        model's own folder."""
        if is_pruned_folder(self.model):
            return Path(self.model).expanduser().resolve()
        return checkpoint_dir(self.finetune_config)

    @property
    def results_folder(self) -> Path:
        """``<run_dir>/<checkpoint>-<split>-<limit>/``: one folder per model and evaluation set (named by the
        checkpoint's cache key, so finding it trains nothing); not created (:attr:`table_dir` is)."""
        limit = "all" if self.eval_limit is None else str(self.eval_limit)
        return results_root(self.run_dir) / f"{self.checkpoint.name}-{self.eval_split}-{limit}"

    @property
    def table_dir(self) -> Path:
        """:attr:`results_folder`, created: where the notebooks write their tables."""
        path = self.results_folder
        path.mkdir(parents=True, exist_ok=True)
        return path

    def sweep_dir(self, name: str, specs) -> Path:
        """A sweep's folder, named by its plan and precision, so other parameters start a new sweep and the same ones
        resume."""
        plan = plan_table(specs).to_csv(index=False) + f"precision={precision(self.torch_device)}"
        return self.table_dir / "sweeps" / f"{name}-{hashlib.sha256(plan.encode()).hexdigest()[:10]}"

    @cached_property
    def pairs(self) -> pd.DataFrame:
        """Every pair of ``DATA`` (every split), read once for the scale and the splits these parameters take."""
        return load_data(self.data, seed=self.seed)

    @cached_property
    def scale(self) -> GradeScale:
        """The data file's grades (read from every split's labels): the classes the model is fine-tuned on; a pruned
        model folder, already fine-tuned, grades in its own (:func:`headlab.models.loading.fine_tuned_scale`)."""
        data = grade_scale(self.pairs)
        return fine_tuned_scale(self.model, data) if is_pruned_folder(self.model) else data

    def eval_frame(self) -> pd.DataFrame:
        """The evaluation pairs (``EVAL_LIMIT`` of ``EVAL_SPLIT``, seeded): query, title, label, split."""
        return get_split(self.pairs, self.eval_split, limit=self.eval_limit, seed=self.seed)

    def train_frame(self) -> pd.DataFrame:
        """The pairs the model was fine-tuned on (``TRAIN_LIMIT`` of them, if set): what a baseline may learn from."""
        return get_split(self.pairs, "train", limit=self.train_limit, seed=self.seed)
