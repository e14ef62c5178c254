"""The parameters every page shares, declared once: a notebook's ``parameters`` cell star-imports them and adds or
overrides its own, and papermill's injected cell (after it) overrides any of them.

    from headlab.lab.defaults import *  # noqa: F403  MODEL, DATA, SEED, DEVICE, ... (every page)
    DRAWS = 5                           # what this page adds

A group of parameters several pages must agree on lives in a module of its own, named after the page that owns
them (:mod:`headlab.lab.defaults.term_matching`, :mod:`headlab.lab.defaults.redundancy`), imported by the pages that
read that page's results. :func:`declared_parameters` is how the build knows what a cell declares.
"""

from __future__ import annotations

import ast
import importlib

MODEL = "minilm"  # asset name, "zh-char" (pretrained by headlab), local model folder, or a Hugging Face id
DATA = "stsb-en"  # asset name ("stsb-en", "stsb-zh") or a query,title,label file
SEED = 0
DEVICE = "auto"  # "cpu", "cuda", "cuda:N" or "auto"
EPOCHS = 3  # fine-tuning epochs (the checkpoint is cached per setting)
LR = 5e-5  # fine-tuning learning rate
FREEZE_WORD_EMBEDDINGS = False  # fine-tuning: keep the word-embedding matrix as pretrained (e5 presets)
TRAIN_LIMIT = None  # fine-tune on this many training pairs (None: all)
EVAL_SPLIT = "test"
EVAL_LIMIT = None  # evaluate on this many pairs of EVAL_SPLIT (None: all)
BATCH_SIZE = 64
RUN_DIR = "runs"  # where result tables are written (a relative folder lies in the repository)
N_BOOT = 2000  # bootstrap resamples for every interval
CLUSTER = None  # Dask cluster for the sweeps: None, "local:N" or "tcp://host:8786" (headlab[cluster])

__all__ = [
    "MODEL",
    "DATA",
    "SEED",
    "DEVICE",
    "EPOCHS",
    "LR",
    "FREEZE_WORD_EMBEDDINGS",
    "TRAIN_LIMIT",
    "EVAL_SPLIT",
    "EVAL_LIMIT",
    "BATCH_SIZE",
    "RUN_DIR",
    "N_BOOT",
    "CLUSTER",
]


def declared_parameters(cell: str) -> set[str]:
    """The parameter names a ``parameters`` cell declares: its assignments, and the names it imports from
    ``headlab.lab.defaults`` or one of its modules (``*``: the module's ``__all__``)."""
    names: set[str] = set()
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(__name__):
            module = importlib.import_module(node.module or __name__)
            for alias in node.names:
                names |= set(module.__all__) if alias.name == "*" else {alias.asname or alias.name}
    return names
