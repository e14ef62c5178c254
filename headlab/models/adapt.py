"""Continue a published model's masked-LM pretraining on People's Daily, read the way the book then reads Chinese.

e5-small was pretrained on SentencePiece pieces; ``e5-small-char`` reads the same weights one Chinese character per
token (:mod:`headlab.inputs.e5_chars`). A short masked-LM pass over People's Daily's characters (the sentences
``pku-1998`` holds but the held-out tenth page 03 scores on) lets it get used to that reading before fine-tuning;
the ``e5-zh-char`` preset keeps it only where the dev split says it helps (:mod:`headlab.book.tuning`).

The file has no masked-LM head (e5 was trained as an encoder of sentences), so a new one is trained with it: BERT's
transform (dense, GELU, layer norm), then scores against the word embeddings of the characters the corpus holds (the
output layer tied to the input embeddings, as in BERT, over those rows only: a softmax over 250k pieces in many
languages would cost more than the encoder). Masking is BERT's (15% of the characters; 80% ``<mask>``, 10% a random
corpus character, 10% kept). Batches are seeded by step and the state is saved every ``save_every`` steps, so an
interrupted pass resumes to the same weights. The folder is the encoder alone, with the tokenizer and
``pretraining.json`` (steps, tokens, masked-character accuracy on held-out sentences beside the unigram baseline).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from headlab.core.stats import N_BOOT, bootstrap_weights
from headlab.inputs.pku import held_out_sentences, training_runs
from headlab.models.loading import load_encoder, load_tokenizer
from headlab.models.names import REPORT, ContinuedPretraining, model_dir
from headlab.models.training import Progress, cached, optimizer_and_schedule, train_step

KIND = "continued masked-LM pretraining"  # the report's "kind": what headlab.models.pretrain.describe reads


class MaskedCharacters(torch.nn.Module):
    """The encoder and a masked-LM head over ``outputs`` (vocabulary ids), scored against their word embeddings."""

    def __init__(self, encoder, outputs: np.ndarray):
        super().__init__()
        hidden = encoder.config.hidden_size
        self.encoder = encoder
        self.transform = torch.nn.Sequential(
            torch.nn.Linear(hidden, hidden),
            torch.nn.GELU(),
            torch.nn.LayerNorm(hidden, eps=encoder.config.layer_norm_eps),
        )
        self.register_buffer("outputs", torch.as_tensor(outputs, dtype=torch.long), persistent=False)
        self.bias = torch.nn.Parameter(torch.zeros(len(outputs)))

    def logits(self, batch: dict[str, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        """Scores of every output character at the ``targets`` positions (bool, like ``input_ids``)."""
        hidden = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        rows = self.encoder.get_input_embeddings().weight[self.outputs]
        return self.transform(hidden[targets]) @ rows.T + self.bias


def corpus_ids(tokenizer, sentences: list[str], max_length: int) -> list[np.ndarray]:
    """Each sentence as ``<s> characters </s>``, cut to ``max_length`` tokens; empty sentences dropped."""
    ids = tokenizer(sentences, truncation=True, max_length=max_length, verbose=False)["input_ids"]
    return [np.asarray(row, dtype=np.int64) for row in ids if len(row) > 2]


def masked_batch(
    rows: list[np.ndarray], special: set[int], outputs: np.ndarray, mask_id: int, pad_id: int, share: float, rng
) -> dict[str, torch.Tensor]:
    """BERT's masking of padded ``rows``: ``share`` of the ordinary tokens become targets (80% ``<mask>``, 10% a random
    output character, 10% kept); ``labels`` index ``outputs`` at the targets and are -100 elsewhere, and at a target
    outside ``outputs`` (a held-out character the training sentences never had): it is masked, never scored."""
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.from_numpy(row)
        attention[i, : len(row)] = 1
    ordinary = attention.bool() & ~torch.isin(ids, torch.tensor(sorted(special), dtype=torch.long))
    targets = torch.from_numpy(rng.random(ids.shape) < share) & ordinary
    position = torch.full((max(int(ids.max()), int(outputs.max())) + 1,), -100, dtype=torch.long)
    position[torch.from_numpy(outputs)] = torch.arange(len(outputs))
    labels = torch.where(targets, position[ids], torch.full_like(ids, -100))  # -100 too: a character not in outputs
    how = torch.from_numpy(rng.random(ids.shape))
    random_ids = torch.from_numpy(outputs[rng.integers(0, len(outputs), ids.shape)])
    inputs = torch.where(targets & (how < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(targets & (how >= 0.8) & (how < 0.9), random_ids, inputs)
    return {"input_ids": inputs, "attention_mask": attention, "labels": labels}


def continue_pretraining(
    config: ContinuedPretraining, name: str, device="cpu", progress: bool = True, save_every: int = 50
) -> Path:
    """The folder of ``config``'s model (cached as ``name``), trained first if it is not there."""
    out = model_dir(config, name)
    return cached(out, lambda work: _train(config, work, out.name, torch.device(device), progress, save_every))


def _train(
    config: ContinuedPretraining, work: Path, folder_name: str, device: torch.device, progress: bool, save_every: int
) -> None:
    tokenizer = load_tokenizer(config.base)
    if tokenizer.mask_token_id is None:
        raise ValueError(f"ContinuedPretraining.base {config.base!r}: its tokenizer has no mask token")
    sentences = [s for run in training_runs(config.held_out_share, config.seed) for s in run]
    rows = corpus_ids(tokenizer, sentences, config.max_length)
    special = set(tokenizer.all_special_ids)  # <unk> too: never a target, never an output
    counts = np.bincount(np.concatenate(rows), minlength=len(tokenizer))
    counts[sorted(special)] = 0
    outputs = np.flatnonzero(counts)

    torch.manual_seed(config.seed)
    model = MaskedCharacters(load_encoder(config.base, attn="sdpa"), outputs).to(device)
    model.encoder.get_input_embeddings().requires_grad_(not config.freeze_word_embeddings)
    head = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
    encoder = [p for p in model.encoder.parameters() if p.requires_grad]
    groups = [{"params": encoder}, {"params": head, "lr": config.head_lr}]
    optimizer, scheduler = optimizer_and_schedule(
        model, config.lr, config.weight_decay, config.warmup, config.steps, params=groups
    )
    run = Progress(work, (model, optimizer, scheduler), device, config.steps, log_every=25, save_every=save_every)

    def batch_at(step: int, chosen: list[np.ndarray], rng) -> dict[str, torch.Tensor]:
        batch = masked_batch(
            chosen, special, outputs, tokenizer.mask_token_id, tokenizer.pad_token_id, config.mask_share, rng
        )
        return {k: v.to(device) for k, v in batch.items()}

    model.train()
    bar = tqdm(
        range(run.step, config.steps), desc="continue mlm", initial=run.step, total=config.steps, disable=not progress
    )
    for step in bar:
        torch.manual_seed(config.seed * 100_003 + step)  # dropout stream, reproducible after a resume
        rng = np.random.default_rng([config.seed, step])
        batch = batch_at(step, [rows[k] for k in rng.integers(0, len(rows), config.batch_size)], rng)
        targets = batch["labels"] != -100
        logits = model.logits(batch, targets)
        loss = F.cross_entropy(logits, batch["labels"][targets])
        train_step(model, loss, optimizer, scheduler)
        right = (logits.argmax(-1) == batch["labels"][targets]).float().mean().item()
        run.done(step, int(batch["attention_mask"].sum()), {"mlm_loss": loss.item(), "mlm_accuracy": right}, bar)
    run.finish()

    held_out = [
        "".join(words) for words in held_out_sentences(config.eval_sentences, config.held_out_share, config.seed)
    ]
    report = {
        "kind": KIND,
        "name": folder_name.rsplit("-", 1)[0],
        "config": asdict(config),
        "steps": config.steps,
        "tokens_seen": run.tokens_seen,
        "corpus_sentences": len(rows),
        "corpus_tokens": int(sum(map(len, rows))),
        "output_characters": len(outputs),
        **_held_out_accuracy(model, held_out, tokenizer, special, outputs, counts, config, device),
        "history": run.history,
        "seconds": round(run.seconds, 1),
        "torch": torch.__version__,
    }
    model.encoder.save_pretrained(work, safe_serialization=True)
    tokenizer.save_pretrained(work)
    (work / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


@torch.inference_mode()
def _held_out_accuracy(model, sentences, tokenizer, special, outputs, counts, config, device, n_boot: int = N_BOOT):
    """Masked-character accuracy on sentences never trained on, beside always guessing the commonest training
    character, each with a 95% bootstrap interval over sentences; the same masks for both."""
    model.eval()
    rng = np.random.default_rng([config.seed, 2**31 - 1])
    guess = int(np.argmax(counts[outputs]))
    rows = corpus_ids(tokenizer, sentences, config.max_length)
    right, baseline_right, targets = [], [], []
    for start in range(0, len(rows), 64):
        batch = masked_batch(
            rows[start : start + 64],
            special,
            outputs,
            tokenizer.mask_token_id,
            tokenizer.pad_token_id,
            config.mask_share,
            rng,
        )
        batch = {k: v.to(device) for k, v in batch.items()}
        on = batch["labels"] != -100
        hits = torch.zeros_like(batch["labels"], dtype=torch.bool)
        hits[on] = model.logits(batch, on).argmax(-1) == batch["labels"][on]
        right.append(hits.sum(1).cpu().numpy())
        baseline_right.append(((batch["labels"] == guess) & on).sum(1).cpu().numpy())
        targets.append(on.sum(1).cpu().numpy())
    right, baseline_right, targets = map(np.concatenate, (right, baseline_right, targets))
    weights = bootstrap_weights(len(targets), n_boot, config.seed)
    result = {
        "eval_sentences": len(rows),
        "masked_tokens": int(targets.sum()),
        "unigram_guess": tokenizer.convert_ids_to_tokens(int(outputs[guess])),
    }
    for name, hits in (("masked_token_accuracy", right), ("unigram_baseline", baseline_right)):
        boot = (weights @ hits) / (weights @ targets)
        result |= {
            name: float(hits.sum() / targets.sum()),
            f"{name}_lo": float(np.quantile(boot, 0.025)),
            f"{name}_hi": float(np.quantile(boot, 0.975)),
        }
    return result


def describe_continued(report: dict) -> str:
    """One paragraph for the book: which model, how long its pretraining was continued, how much it recovers."""
    c = report["config"]
    return (
        f"**Model**: `{c['base']}` (a published pretrained encoder), its masked-LM pretraining continued by headlab "
        f"on People's Daily (January 1998) read the same way: {report['steps']} steps of {c['batch_size']} sentences "
        f"of at most {c['max_length']} tokens, {report['tokens_seen']:,} tokens seen, word embeddings "
        f"{'frozen' if c['freeze_word_embeddings'] else 'trained'}, {report['seconds'] / 60:.1f} minutes. On "
        f"{report['eval_sentences']} held-out sentences ({report['masked_tokens']} masked characters) its new "
        f"masked-LM head recovers {report['masked_token_accuracy']:.1%} [{report['masked_token_accuracy_lo']:.1%}, "
        f"{report['masked_token_accuracy_hi']:.1%}]; always guessing the most frequent character "
        f"(`{report['unigram_guess']}`) gets {report['unigram_baseline']:.1%} [{report['unigram_baseline_lo']:.1%}, "
        f"{report['unigram_baseline_hi']:.1%}]."
    )
