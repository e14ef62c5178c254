"""Pretrain a character-level Chinese BERT the way BERT was pretrained: masked LM, with or without next-sentence
prediction.

The study's model read Chinese characters, and its word-segmentation finding only means something for such a
model. None can be installed offline, so headlab trains one on the raw characters of People's Daily
(``pku-1998``: words joined, segmentation and tags dropped, held-out sentences cut out; see
:func:`headlab.inputs.pku.training_runs`). The result is an ordinary transformers model folder (safetensors, config,
tokenizer) that every notebook loads like any other model, plus ``pretraining.json``: steps, tokens seen,
masked-token accuracy on held-out sentences against the unigram baseline, hardware and time.

``objective="mlm"`` or ``"mlm+nsp"``: the study credits MLM for segmentation heads and NSP for term-matching
heads; the two presets differ only in that switch (the MLM-only model reads the same true sentence pairs).
Every batch is drawn from a generator seeded with (seed, step), and the state is saved every ``save_every``
steps, so an interrupted run resumes and ends with the same weights.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from headlab.core.device import autocast, resolve_device
from headlab.core.stats import N_BOOT, bootstrap_weights
from headlab.inputs.pku import held_out_sentences, training_runs
from headlab.models.adapt import continue_pretraining, describe_continued
from headlab.models.loading import resolve_model
from headlab.models.names import (
    MODELS,
    REPORT,
    ContinuedPretraining,
    PretrainConfig,
    model_dir,
    named_model_dir,
    pretraining_precision,
)
from headlab.models.training import Progress, cached, one_thread, optimizer_and_schedule, train_step

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# --- vocabulary and tokenizer ------------------------------------------------------------------------


def char_tokenizer(vocab: list[str], max_length: int = 512):
    """A BERT tokenizer over a character vocabulary: every CJK character is its own token, and any other run of
    characters (digits, Latin) is spelled out as ``x ##y ##z``, so each token is exactly one character.
    ``max_length`` is the model's number of positions, which :func:`headlab.core.evaluate.encode` respects."""
    from transformers import BertTokenizer

    return BertTokenizer(
        vocab={token: i for i, token in enumerate(vocab)},
        do_lower_case=True,
        tokenize_chinese_chars=True,
        model_max_length=max_length,
    )


def build_vocab(texts, min_count: int = 2) -> list[str]:
    """BERT's special tokens, then every character seen at least ``min_count`` times, most frequent first.

    Texts go through the same normaliser and pre-tokeniser the tokenizer uses; a character that continues a
    non-CJK word enters as ``##x``. Rarer characters become ``[UNK]``.
    """
    backend = char_tokenizer(SPECIALS).backend_tokenizer
    counts: Counter = Counter()
    for text in texts:
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(text)):
            counts[word[0]] += 1
            counts.update("##" + c for c in word[1:])
    kept = sorted((t for t, n in counts.items() if n >= min_count and t not in SPECIALS), key=lambda t: (-counts[t], t))
    return SPECIALS + kept


# --- batches -------------------------------------------------------------------------------------------


@dataclass
class PretrainCorpus:
    """Token ids of every training sentence, and the (sentence, next sentence) pairs the batches draw from."""

    sentences: list[np.ndarray]
    pairs: np.ndarray  # (n, 2) indices into sentences: b follows a in the newspaper
    vocab_size: int
    unigram: np.ndarray  # token counts over the training sentences

    @classmethod
    def from_runs(cls, runs: list[list[str]], tokenizer, max_length: int) -> PretrainCorpus:
        """The corpus of ``runs`` (lists of consecutive sentences), each cut to fit ``max_length`` with its special
        tokens."""
        flat = [s for run in runs for s in run]
        ids = tokenizer(flat, add_special_tokens=False, verbose=False)["input_ids"]  # cut below
        sentences = [np.asarray(x[: max_length - 3], dtype=np.int64) for x in ids]
        starts = np.cumsum([0] + [len(run) for run in runs])
        pairs = [(starts[r] + i, starts[r] + i + 1) for r, run in enumerate(runs) for i in range(len(run) - 1)]
        if not pairs:
            raise ValueError("the pretraining corpus has no two consecutive sentences to pair")
        unigram = np.bincount(np.concatenate(sentences), minlength=len(tokenizer.get_vocab()))
        return cls(sentences, np.asarray(pairs, dtype=np.int64), len(tokenizer.get_vocab()), unigram)

    @property
    def n_tokens(self) -> int:
        """Tokens over all training sentences."""
        return int(sum(map(len, self.sentences)))


def _truncate_pair(a: np.ndarray, b: np.ndarray, room: int) -> tuple[np.ndarray, np.ndarray]:
    """BERT's rule: drop tokens from the end of the longer segment until the pair fits."""
    while len(a) + len(b) > room:
        if len(a) >= len(b):
            a = a[:-1]
        else:
            b = b[:-1]
    return a, b


def mask_tokens(ids: torch.Tensor, special: torch.Tensor, share: float, vocab_size: int, rng: np.random.Generator):
    """BERT's masking: ``share`` of the ordinary tokens become targets; of those 80% turn into ``[MASK]``, 10%
    into a random ordinary token and 10% stay. Returns (inputs, labels) with labels -100 off the targets."""
    mask_id, first_ordinary = SPECIALS.index("[MASK]"), len(SPECIALS)
    draw = torch.from_numpy(rng.random(ids.shape))
    targets = (draw < share) & ~special
    labels = torch.where(targets, ids, torch.full_like(ids, -100))
    how = torch.from_numpy(rng.random(ids.shape))
    random_ids = torch.from_numpy(rng.integers(first_ordinary, vocab_size, ids.shape))
    inputs = torch.where(targets & (how < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(targets & (how >= 0.8) & (how < 0.9), random_ids, inputs)
    return inputs, labels


def make_batch(corpus: PretrainCorpus, config: PretrainConfig, step: int) -> dict[str, torch.Tensor]:
    """Batch ``step``: sentence pairs, half of them with a random second sentence under NSP, then masked."""
    rng = np.random.default_rng([config.seed, step])
    cls_id, sep_id = SPECIALS.index("[CLS]"), SPECIALS.index("[SEP]")
    rows, types, nsp = [], [], []
    for k in rng.integers(0, len(corpus.pairs), config.batch_size):
        a, b = corpus.pairs[k]
        is_random = config.objective == "mlm+nsp" and rng.random() < 0.5
        if is_random:
            b = int(rng.integers(0, len(corpus.sentences)))
        first, second = _truncate_pair(corpus.sentences[a], corpus.sentences[b], config.max_length - 3)
        rows.append(np.concatenate([[cls_id], first, [sep_id], second, [sep_id]]))
        types.append(np.r_[np.zeros(len(first) + 2, dtype=np.int64), np.ones(len(second) + 1, dtype=np.int64)])
        nsp.append(int(is_random))
    return _masked(rows, types, corpus.vocab_size, config.mask_share, rng) | {"next_sentence_label": torch.tensor(nsp)}


def _masked(rows, types, vocab_size: int, share: float, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    token_types = torch.zeros_like(ids)
    attention = torch.zeros_like(ids)
    for i, (row, kind) in enumerate(zip(rows, types)):
        ids[i, : len(row)] = torch.from_numpy(row)
        token_types[i, : len(kind)] = torch.from_numpy(kind)
        attention[i, : len(row)] = 1
    special = ids < len(SPECIALS)
    inputs, labels = mask_tokens(ids, special, share, vocab_size, rng)
    return {"input_ids": inputs, "token_type_ids": token_types, "attention_mask": attention, "labels": labels}


# --- model, loss, evaluation -----------------------------------------------------------------------------


def new_model(config: PretrainConfig, vocab_size: int):
    """A freshly initialised BERT for pretraining (MLM and NSP heads), seeded by ``config.seed``."""
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(config.seed)
    bert = BertConfig(
        vocab_size=vocab_size,
        hidden_size=config.hidden,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        intermediate_size=4 * config.hidden,
        max_position_embeddings=config.max_length,
        type_vocab_size=2,
        pad_token_id=0,
    )
    return BertForPreTraining(bert)


def pretraining_losses(model, batch: dict, objective: str) -> tuple[torch.Tensor, dict]:
    """MLM loss on the masked positions only (the vocabulary projection is not spent on the rest), plus NSP."""
    out = model.bert(
        input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"]
    )
    targets = batch["labels"] != -100
    logits = model.cls.predictions(out.last_hidden_state[targets])
    gold = batch["labels"][targets]
    loss = F.cross_entropy(logits, gold)
    scores = {"mlm_loss": loss.item(), "mlm_accuracy": (logits.argmax(-1) == gold).float().mean().item()}
    if objective == "mlm+nsp":
        nsp_logits = model.cls.seq_relationship(out.pooler_output)
        nsp_loss = F.cross_entropy(nsp_logits, batch["next_sentence_label"])
        loss = loss + nsp_loss
        scores |= {
            "nsp_loss": nsp_loss.item(),
            "nsp_accuracy": (nsp_logits.argmax(-1) == batch["next_sentence_label"]).float().mean().item(),
        }
    return loss, scores


@torch.inference_mode()
def masked_token_accuracy(
    model,
    tokenizer,
    sentences: list[str],
    unigram: np.ndarray,
    config: PretrainConfig,
    device="cpu",
    n_boot: int = N_BOOT,
) -> dict:
    """Masked-token accuracy on single sentences never trained on, beside the unigram baseline (always guess
    the most frequent training token), each with a 95% bootstrap interval over sentences; same masks for both."""
    model.eval()
    rng = np.random.default_rng([config.seed, 2**31 - 1])
    guess = int(np.argmax(unigram[len(SPECIALS) :]) + len(SPECIALS))
    ids = tokenizer(sentences, add_special_tokens=True, truncation=True, max_length=config.max_length)["input_ids"]
    right, baseline_right, targets = [], [], []
    for start in range(0, len(ids), 64):
        rows = [np.asarray(x, dtype=np.int64) for x in ids[start : start + 64]]
        batch = _masked(
            rows, [np.zeros(len(r), dtype=np.int64) for r in rows], len(tokenizer.get_vocab()), config.mask_share, rng
        )
        out = model.bert(**{k: batch[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")})
        predicted = model.cls.predictions(out.last_hidden_state).argmax(-1).cpu()
        on = batch["labels"] != -100
        right.append(((predicted == batch["labels"]) & on).sum(1).numpy())
        baseline_right.append(((batch["labels"] == guess) & on).sum(1).numpy())
        targets.append(on.sum(1).numpy())
    right, baseline_right, targets = map(np.concatenate, (right, baseline_right, targets))
    w = bootstrap_weights(len(targets), n_boot, config.seed)
    result = {
        "eval_sentences": len(sentences),
        "masked_tokens": int(targets.sum()),
        "unigram_guess": tokenizer.convert_ids_to_tokens(guess),
    }
    for name, hits in (("masked_token_accuracy", right), ("unigram_baseline", baseline_right)):
        boot = (w @ hits) / (w @ targets)
        result |= {
            name: float(hits.sum() / targets.sum()),
            f"{name}_lo": float(np.quantile(boot, 0.025)),
            f"{name}_hi": float(np.quantile(boot, 0.975)),
        }
    return result


# --- the training run -------------------------------------------------------------------------------------


def pretrain(
    config: PretrainConfig = PretrainConfig(),
    name: str = "char-bert",
    device="cpu",
    progress: bool = True,
    save_every: int = 100,
) -> Path:
    """Return the folder of the pretrained model, training it first if it is not cached."""
    out = model_dir(config, name, torch.device(device))
    return cached(out, lambda work: _train(config, work, out.name, torch.device(device), progress, save_every))


def ensure_named(name: str, device="cpu", progress: bool = True) -> Path:
    """The cached model of a preset name such as ``zh-char``, trained on first use (``e5-small-char-mlm``: a published
    model's pretraining continued, :mod:`headlab.models.adapt`)."""
    named_model_dir(name)  # checks the name
    config = MODELS[name]
    if isinstance(config, ContinuedPretraining):
        return continue_pretraining(config, name, device, progress)
    return pretrain(config, name, device, progress)


@one_thread()
def _train(
    config: PretrainConfig, work: Path, folder_name: str, device: torch.device, progress: bool, save_every: int
) -> None:
    """One thread, as a fine-tune (:func:`headlab.models.training.one_thread`): the weights do not depend on the
    machine's cores, and the build trains the model in a lane beside other work; bf16 autocast where ``device``
    computes it natively (:func:`headlab.models.names.pretraining_precision`, part of the cache key)."""
    chosen = pretraining_precision(device)
    runs = training_runs(config.held_out_share, config.seed)
    vocab = build_vocab((s for run in runs for s in run), config.min_char_count)
    tokenizer = char_tokenizer(vocab, config.max_length)
    corpus = PretrainCorpus.from_runs(runs, tokenizer, config.max_length)

    model = new_model(config, len(vocab)).to(device)
    optimizer, scheduler = optimizer_and_schedule(model, config.lr, config.weight_decay, config.warmup, config.steps)
    run = Progress(work, (model, optimizer, scheduler), device, config.steps, log_every=50, save_every=save_every)

    model.train()
    bar = tqdm(
        range(run.step, config.steps),
        desc=f"pretrain {config.objective}",
        initial=run.step,
        total=config.steps,
        disable=not progress,
    )
    for step in bar:
        torch.manual_seed(config.seed * 100_003 + step)  # dropout stream, reproducible after a resume
        batch = {k: v.to(device) for k, v in make_batch(corpus, config, step).items()}
        with autocast(device, chosen):
            loss, scores = pretraining_losses(model, batch, config.objective)
        train_step(model, loss, optimizer, scheduler)
        run.done(step, int(batch["attention_mask"].sum()), scores, bar)
    run.finish()

    held_out = [
        "".join(words) for words in held_out_sentences(config.eval_sentences, config.held_out_share, config.seed)
    ]
    report = {
        "name": folder_name.rsplit("-", 1)[0],
        "config": asdict(config),
        "steps": config.steps,
        "tokens_seen": run.tokens_seen,
        "corpus_sentences": len(corpus.sentences),
        "corpus_tokens": corpus.n_tokens,
        "corpus_pairs": len(corpus.pairs),
        "vocab_size": len(vocab),
        **masked_token_accuracy(model, tokenizer, held_out, corpus.unigram, config, device),
        "final_train": {k: v for k, v in run.history[-1].items() if k not in ("step", "tokens_seen")},
        "history": run.history,
        "seconds": round(run.seconds, 1),
        "hardware": hardware(device),
        "precision": chosen,
        "torch": torch.__version__,
    }
    model.save_pretrained(work, safe_serialization=True)
    tokenizer.save_pretrained(work)
    (work / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


def hardware(device: torch.device) -> str:
    """What ran a pretraining, for its report: the GPU's name, or the CPU's cores and torch threads."""
    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    return f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads, {platform.machine()})"


def pretraining_report(model_folder) -> dict | None:
    """The ``pretraining.json`` of a model folder headlab pretrained, or None for any other model."""
    path = Path(model_folder) / REPORT
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def describe(report: dict) -> str:
    """One paragraph for the book: which model, how it was trained, how much it learned."""
    if report.get("kind"):  # a published model's pretraining continued
        return describe_continued(report)
    c = report["config"]
    return (
        f"**Model**: a character-level BERT pretrained by headlab on People's Daily (January 1998), "
        f"{c['layers']} layers x {c['heads']} heads, hidden size {c['hidden']}, objective {c['objective'].upper()}, "
        f"{report['steps']} steps of {c['batch_size']} sequences of at most {c['max_length']} characters: "
        f"{report['tokens_seen']:,} tokens seen (the training text has {report['corpus_tokens']:,}), "
        f"{report['seconds'] / 60:.1f} minutes on {report['hardware']}. On {report['eval_sentences']} held-out "
        f"sentences ({report['masked_tokens']} masked characters) it recovers "
        f"{report['masked_token_accuracy']:.1%} [{report['masked_token_accuracy_lo']:.1%}, "
        f"{report['masked_token_accuracy_hi']:.1%}] of the masked characters; always guessing the most frequent "
        f"one (`{report['unigram_guess']}`) gets {report['unigram_baseline']:.1%} "
        f"[{report['unigram_baseline_lo']:.1%}, {report['unigram_baseline_hi']:.1%}]."
    )


def model_note(spec: str) -> str:
    """What the book says about the model a run uses: the pretraining report when headlab trained it."""
    folder = resolve_model(spec)
    report = pretraining_report(folder) if Path(folder).is_dir() else None
    if report is not None:
        return describe(report)
    return f"**Model**: `{spec}`, a published pretrained encoder, loaded from `{folder}`; the book fine-tunes it below."


def main(argv=None) -> int:
    """``python -m headlab.models NAME``: pretrain the named model or find it cached; the exit status."""
    parser = argparse.ArgumentParser(description="Pretrain (or find in the cache) a character-level Chinese BERT.")
    parser.add_argument("name", choices=sorted(MODELS))  # e5-small-char-mlm: a continued pretraining
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    args = parser.parse_args(argv)
    folder = ensure_named(args.name, resolve_device(args.device))
    print(describe(pretraining_report(folder)))
    print(folder)
    return 0
