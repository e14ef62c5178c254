import os

# No network in tests (loopback only) and no model hub: set before headlab is imported anywhere.
os.environ.setdefault("HEADLAB_NO_NETWORK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, MPNetConfig, MPNetForSequenceClassification


def tiny_bert(attn: str = "eager", seed: int = 0):
    """A randomly initialised 3-layer x 4-head BERT with a 5-way head: no download needed."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=32, num_labels=5,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.3)
    config._attn_implementation = attn
    return BertForSequenceClassification(config).eval()


def tiny_mpnet(attn: str = "eager", seed: int = 0):
    torch.manual_seed(seed)
    config = MPNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=40, num_labels=5,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.3)
    config._attn_implementation = attn
    return MPNetForSequenceClassification(config).eval()


def random_encoded(n: int = 40, seed: int = 0, longest: int = 12):
    """``n`` random pairs of ``[2] ids [3]`` (3 to ``longest - 1`` ids) with random grades, for the tiny models."""
    import numpy as np

    from headlab.core.evaluate import Encoded

    rng = np.random.default_rng(seed)
    ids = [[2] + rng.integers(5, 50, size=rng.integers(3, longest)).tolist() + [3] for _ in range(n)]
    return Encoded(ids, [[0] * len(x) for x in ids], rng.integers(1, 6, size=n), 0)


@pytest.fixture
def batch():
    torch.manual_seed(1)
    ids = torch.randint(5, 50, (3, 7))
    attention = torch.ones_like(ids)
    attention[2, 5:] = 0
    return {"input_ids": ids, "attention_mask": attention}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run far faster on one thread than on two busy cores; restore the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_book(tmp_path_factory):
    """The whole book built once per session from tiny notebook runs (tests/test_book.py checks the build,
    tests/test_browser.py opens its pages): the build folder, the run folder and the build's stdout."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from headlab.book.build import REPO

    root = tmp_path_factory.mktemp("tiny-book")
    work, runs = root / "book", root / "runs"
    # laid out like the repository (a _config.yml beside book/), where jupyter-book would put _build by default
    (root / "_config.yml").write_text((REPO / "_config.yml").read_text())
    result = subprocess.run([sys.executable, "-m", "headlab.book", "--preset", "tiny", "--work", str(work),
                             "--run-dir", str(runs)], capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return SimpleNamespace(work=work, runs=runs, html=work / "_build" / "html", stdout=result.stdout)
