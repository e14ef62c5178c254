"""The build's presets: the parameter sets a build passes to every notebook that declares the parameter
(papermill ignores the rest), one per model and data the site shows, and the tiny one the tests build."""

from __future__ import annotations

from headlab.core.stats import N_BOOT
from headlab.lab.pages import (
    tiny_settings,
)
from headlab.models.names import is_pretrained_name

# Parameter sets passed to every notebook that declares the parameter (papermill ignores the rest).
PRESETS = {
    "default": {},
    "tiny": tiny_settings(),  # each page declares its tiny values (headlab.lab.pages)
    # all-mpnet-base-v2 (12 x 12 heads) on one GPU: 30 random draws per share and random condition (the CPU defaults
    # use 3-20)
    "mpnet": {
        "MODEL": "mpnet",
        "DEVICE": "cuda",
        "REDUNDANCY_DRAWS": 30,
        "HALF_DRAWS": 30,
        "MATCHING_DRAWS": 30,
        "N_BOOT": N_BOOT,
        "BATCH_SIZE": 256,
    },
    # the character-level Chinese BERT headlab pretrains (12 x 12 heads; headlab.models.pretrain), on Chinese STS-B;
    # LR and EPOCHS: chosen on the dev split, never on test, by `python -m headlab.book.tuning zh-char` (its grid is
    # headlab.book.tuning.GRIDS; the table and the choice: see README)
    "zh-char": {
        "MODEL": "zh-char",
        "DATA": "stsb-zh",
        "SEG_CORPUS": "pku-1998",
        "SEG_ALSO": "eval-jieba",
        "LR": 2e-4,
        "EPOCHS": 4,
    },
}
# the same pretrained without next-sentence prediction: the study credits NSP for the term-matching heads;
# it keeps zh-char's LR and EPOCHS, so the two models differ only in their pretraining
PRESETS["zh-char-mlm"] = {**PRESETS["zh-char"], "MODEL": "zh-char-mlm"}
# multilingual-e5-small (12 x 12 heads, XLM-R SentencePiece pieces; the e5-small asset), on Chinese and English STS-B,
# its 96M-weight word-embedding matrix frozen (headlab.models.finetune.FinetuneConfig); LR and EPOCHS chosen on the
# dev split by `python -m headlab.book.tuning e5-zh` (e5-en) over headlab.book.tuning.GRIDS (the runs: README)
E5_SETTINGS = {"MODEL": "e5-small", "FREEZE_WORD_EMBEDDINGS": True}
PRESETS["e5-zh"] = {
    **E5_SETTINGS,
    "DATA": "stsb-zh",
    "SEG_CORPUS": "pku-1998",
    "SEG_ALSO": "eval-jieba",
    "LR": 5e-5,
    "EPOCHS": 2,
}
PRESETS["e5-en"] = {**E5_SETTINGS, "LR": 5e-5, "EPOCHS": 3}
# the same weights reading Chinese one character per token, as the study's BERT did (the e5-small-char asset,
# headlab.inputs.e5_chars), so page 03 judges its word-segmentation heads against People's Daily's and jieba's words;
# MODEL (e5-small-char, or e5-small-char-mlm: first a short masked-LM pass over People's Daily characters), LR and
# EPOCHS chosen on the dev split by `python -m headlab.book.tuning e5-zh-char` over GRIDS (12 runs: README)
PRESETS["e5-zh-char"] = {**PRESETS["e5-zh"], "MODEL": "e5-small-char", "LR": 5e-5, "EPOCHS": 3}


def pretrains(settings: dict) -> bool:
    """Whether the preset's model is one headlab pretrains (``zh-char``): its build has a
    :data:`~headlab.lab.pages.PRETRAINING` step."""
    model = settings.get("MODEL")
    return isinstance(model, str) and is_pretrained_name(model)
