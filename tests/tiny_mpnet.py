"""Every notebook on a tiny random MPNet, run as the build runs them (two at a time), in a process of its own so that
the tests can start it beside the tiny book's build: ``python tests/tiny_mpnet.py FOLDER [GRADES]``. The `mpnet`
preset's architecture through the whole book (tiny sizes, CPU; the GPU run needs a GPU): a random 4 x 4 MPNet with the
real WordPiece vocabulary laid out the MPNet way, fine-tuned and taken apart; its tables land in ``FOLDER/runs``.

It grades a file of another scale than the study's, as a search team's own would be: STS-B's pairs with their grades
merged into three (1-3, the default) or two (0-1, ``binary``: relevant or not, numbered from 0), so every page runs on
a scale read from the data."""

import sys
from pathlib import Path

import torch
from transformers import MPNetConfig, MPNetForSequenceClassification, MPNetTokenizer

from headlab.book.build import execute_presets
from headlab.book.lanes import lanes_and_threads
from headlab.book.presets import PRESETS
from headlab.inputs.assets import asset_path
from headlab.inputs.data import load_data
from headlab.lab.pages import page_ids

MERGED = {  # STS-B's grade -> the file's
    "three": {1: 1, 2: 1, 3: 2, 4: 3, 5: 3},
    "binary": {1: 0, 2: 0, 3: 0, 4: 1, 5: 1},
}


def graded_file(root: Path, grades: str) -> Path:
    """STS-B's pairs, splits kept, with grades merged as :data:`MERGED` says, as a user's ``.tsv``."""
    pairs = load_data("stsb-en")
    path = root / f"stsb-{grades}.tsv"
    pairs.assign(label=pairs["label"].map(MERGED[grades]))[["query", "title", "label", "split"]].to_csv(
        path, sep="\t", index=False
    )
    return path


def run(root: Path, grades: str = "three") -> None:
    pieces = (asset_path("minilm") / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + [p for p in pieces if p and not p.startswith("[")] + ["<mask>"]
    folder = root / "tiny-mpnet-wordpiece"
    MPNetTokenizer(vocab={w: i for i, w in enumerate(vocab)}, unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = MPNetConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=160,
        num_labels=len(set(MERGED[grades].values())),
    )  # 8 heads per half
    MPNetForSequenceClassification(config).save_pretrained(folder)
    settings = {
        **PRESETS["tiny"],
        "MODEL": str(folder),
        "DATA": str(graded_file(root, grades)),
        "RUN_DIR": str(root / "runs"),
        "SHARES": [0.0, 0.5],
        "EVAL_LIMIT": 24,
    }
    (root / "logs").mkdir()
    presets = {"tiny-mpnet": (settings, root / "executed")}
    execute_presets(presets, page_ids(), None, root / "logs", None, *lanes_and_threads())  # as the build does


if __name__ == "__main__":
    run(Path(sys.argv[1]), *sys.argv[2:])
