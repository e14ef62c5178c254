"""The parameters every notebook shares, and the fine-tuned model and evaluation split they lead to.

Each notebook's ``parameters`` cell fills a :class:`Study`; ``Study.setup()`` returns the cached fine-tuned
model, the tokenized evaluation split and the unmasked baseline, and ``Study.table_dir`` is where the
notebook's tidy result tables go (and where later notebooks read them). A relative ``RUN_DIR`` is taken from the
repository root, wherever the kernel starts, so that JupyterLab and ``make book`` share ``runs/`` and its sweeps.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.book import REPO
from headlab.data import get_split, load_data
from headlab.evaluate import Encoded, confusion, encode, metrics, predict, predicted_grades
from headlab.finetune import FinetuneConfig, finetune
from headlab.model import load_classifier, load_tokenizer, resolve_device
from headlab.stats import bootstrap_weights
from headlab.sweep import plan_table


def results_root(run_dir) -> Path:
    """``RUN_DIR`` as a folder; a relative one lies in the repository, not in the kernel's folder (JupyterLab starts a
    notebook's kernel in ``notebooks/``, papermill in the repository, and both must find the same results)."""
    path = Path(run_dir).expanduser()
    return path if path.is_absolute() else REPO / path


@dataclass
class Study:
    """Model, data, sizes, seed and device: the papermill parameters common to all notebooks."""

    model: str = "minilm"
    data: str = "stsb-en"
    seed: int = 0
    device: str = "auto"
    epochs: int = 3
    lr: float = 5e-5
    train_limit: int | None = None
    eval_split: str = "test"
    eval_limit: int | None = None
    batch_size: int = 64
    run_dir: str = "runs"

    @classmethod
    def from_globals(cls, names: dict) -> "Study":
        """Build from a notebook's upper-case parameters (MODEL, DATA, SEED, ...) where they are defined."""
        fields = cls.__dataclass_fields__
        return cls(**{f: names[f.upper()] for f in fields if f.upper() in names})

    def __post_init__(self):
        if self.eval_limit is not None and int(self.eval_limit) < 1:
            raise ValueError(f"EVAL_LIMIT must be a positive integer or None, got {self.eval_limit}")
        if int(self.batch_size) < 1:
            raise ValueError(f"BATCH_SIZE must be a positive integer, got {self.batch_size}")
        self.torch_device = resolve_device(self.device)

    @property
    def finetune_config(self) -> FinetuneConfig:
        return FinetuneConfig(model=self.model, data=self.data, epochs=self.epochs, lr=self.lr,
                              train_limit=self.train_limit, seed=self.seed)

    @property
    def checkpoint(self) -> Path:
        """The fine-tuned model folder (trained on first use, then cached)."""
        return finetune(self.finetune_config, device=self.torch_device)

    @property
    def table_dir(self) -> Path:
        """``<run_dir>/<checkpoint>-<split>-<limit>/``: one folder per model and evaluation set."""
        limit = "all" if self.eval_limit is None else str(self.eval_limit)
        path = results_root(self.run_dir) / f"{self.checkpoint.name}-{self.eval_split}-{limit}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def sweep_dir(self, name: str, specs) -> Path:
        """A sweep's folder, named by its plan, so other parameters start a new sweep and the same ones resume."""
        plan = plan_table(specs).to_csv(index=False)
        return self.table_dir / "sweeps" / f"{name}-{hashlib.sha256(plan.encode()).hexdigest()[:10]}"

    def eval_frame(self) -> pd.DataFrame:
        frame = load_data(self.data, seed=self.seed)
        return get_split(frame, self.eval_split, limit=self.eval_limit, seed=self.seed)

    def setup(self) -> "Setup":
        """Fine-tuned model (sdpa attention), tokenizer, evaluation split and unmasked baseline."""
        folder = self.checkpoint
        tokenizer = load_tokenizer(str(folder))
        model = load_classifier(str(folder)).to(self.torch_device)
        frame = self.eval_frame()
        encoded = encode(tokenizer, frame)
        probs = predict(model, encoded, batch_size=self.batch_size, device=self.torch_device,
                        pad_id=tokenizer.pad_token_id or 0)
        return Setup(self, model, tokenizer, frame, encoded, probs)


@dataclass
class Setup:
    study: Study
    model: object
    tokenizer: object
    frame: pd.DataFrame
    encoded: Encoded
    base_probs: np.ndarray

    @property
    def base_correct(self) -> np.ndarray:
        return (predicted_grades(self.base_probs) == self.encoded.grades).astype(int)

    def baseline_metrics(self, n_boot: int = 2000) -> pd.DataFrame:
        """Accuracy and macro-F1 of the unmasked model with 95% bootstrap intervals, and the majority-class rate."""
        grades, predicted = self.encoded.grades, predicted_grades(self.base_probs)
        w = bootstrap_weights(len(grades), n_boot, self.study.seed)
        correct = (grades == predicted).astype(float)
        boot_acc = w @ correct / len(grades)
        majority = np.bincount(grades).argmax()
        rows = [
            {"metric": "accuracy", "value": correct.mean(), "lo": np.quantile(boot_acc, 0.025), "hi": np.quantile(boot_acc, 0.975)},
            {"metric": "macro_f1", **_f1_interval(grades, predicted, w)},
            {"metric": f"majority class (grade {majority}) accuracy", "value": float(np.mean(grades == majority)), "lo": np.nan, "hi": np.nan},
        ]
        table = pd.DataFrame(rows)
        table["n_examples"] = len(grades)
        table["n_boot"] = n_boot
        return table

    def save_table(self, frame: pd.DataFrame, name: str) -> Path:
        """Write a tidy result table where the book and later notebooks read it."""
        path = self.study.table_dir / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        return path


def _f1_interval(grades, predicted, weights) -> dict:
    """Macro-F1 and its bootstrap interval (resampling examples with the given multinomial weights)."""
    stats = []
    for w in weights:
        rows = np.repeat(np.arange(len(grades)), w.astype(int))
        stats.append(metrics(grades[rows], predicted[rows])["macro_f1"])
    return {"value": metrics(grades, predicted)["macro_f1"], "lo": float(np.quantile(stats, 0.025)),
            "hi": float(np.quantile(stats, 0.975))}
