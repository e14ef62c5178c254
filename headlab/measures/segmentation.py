"""Word-boundary heads: does a head's attention say where words end?

The study's reading (finding 3): from a token that ends a word, a segmentation head attends to ``[SEP]``;
from a token inside a word, it attends to the next token. So head (l, h) predicts "word end" for token t
when ``attn[l, h, t, [SEP]s] > attn[l, h, t, t + 1]``. Gold word ends come either from the tokenizer
itself (a piece ends a word when the next piece starts one: no ``##`` for WordPiece, a ``▁`` for SentencePiece,
see :mod:`headlab.inputs.pieces`) or from a gold segmentation aligned to the tokens character by character
(People's Daily, PKU-segmented: :mod:`headlab.inputs.pku`). Separators are the tokenizer's own (``[SEP]``,
``</s>``); a bare SentencePiece ``▁`` holds no text, so like a special token it is never scored.

On English WordPiece most tokens end a word, so "always word end" is a strong baseline; the
tokens of multi-token words (:func:`multi_token_words`) make a harder sub-task where it is not.

The last token of each segment, right before a ``[SEP]``, is never scored (:func:`rule_positions`): its next
token is that ``[SEP]``, so every head's rule would call it a word end, which it always is, a hit for free.

Two ways to score the heads, both here:

* the study's per-head rule, and its "at least one of several heads is right" union, which is an
  **oracle upper bound**: it picks, per token, whichever head happens to be right, so a head together
  with its exact inverse scores 100% (:func:`shuffled_union_control` shows what chance alone reaches);
* honest alternatives, chosen on some sentences and scored on others: the best single head
  (:func:`held_out_best_head`) and a logistic-regression probe on all heads' features (:func:`probe`).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded
from headlab.core.grades import GradeScale
from headlab.core.stats import bootstrap_weights
from headlab.inputs.pieces import WORDPIECE, Pieces, piece_convention
from headlab.lab.lab import Lab

SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", "<mask>"})
UNK_TOKENS = frozenset({"[UNK]", "<unk>"})
UNGRADED = GradeScale(0, 2)  # a corpus's sentences: no one graded them, each carries grade 0 and nothing reads it
ALL, MULTI = "all tokens", "multi-token words"  # the two subsets a head's boundaries are scored on


# --- gold word ends -------------------------------------------------------------------------------


def piece_word_ends(
    tokens: list[str], specials=SPECIAL_TOKENS, pieces: Pieces = WORDPIECE
) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, content)``: which tokens end a word in the tokenizer's own view, and which are text.

    A text token ends a word when the next token starts one (:meth:`headlab.inputs.pieces.Pieces.starts_word`:
    for WordPiece, it is no ``##`` continuation); a special token or the end of the sequence also close the
    word. Special tokens and bare ``▁`` pieces are no text and end no word. Punctuation is its own word, so
    ``"hello,"`` has two word ends.
    """
    special = np.array([t in specials for t in tokens], dtype=bool)
    content = ~special & np.array([bool(pieces.text(t)) for t in tokens], dtype=bool)
    ends = np.zeros(len(tokens), dtype=bool)
    for i in np.flatnonzero(content):
        ends[i] = i + 1 == len(tokens) or special[i + 1] or pieces.starts_word(tokens[i + 1], tokens[i])
    return ends, content


def _fold(text: str) -> str:
    """What a BERT tokenizer keeps of ``text``: casefolded, compatibility-decomposed, accents and spaces dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(
        c
        for c in decomposed
        if not unicodedata.combining(c) and not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf")
    )


def gold_word_ends_from_segmentation(words: list[str], tokens: list[str], pieces: Pieces = WORDPIECE) -> np.ndarray:
    """Align the tokens of one segment (no special tokens) to a gold segmentation; True where a token ends a word.

    Alignment is character by character, after the normalisation a BERT tokenizer applies (case, full-width forms,
    accents, whitespace), so ``"Ａ"`` in the corpus matches ``"a"`` in the vocabulary. A token covers its text without
    the piece marks (``##x`` and ``▁x`` cover ``x``); a bare ``▁`` covers nothing and ends no word; an unknown token
    (``[UNK]``) covers one character, extended up to where the next token's text begins (WordPiece turns a whole unknown
    word into one ``[UNK]``), or the rest if it is last. A token that spans a gold boundary counts as a word end exactly
    when its last character ends a word. Texts that do not align raise ValueError naming the first mismatch.
    """
    folded: list[str] = []
    char_word: list[int] = []
    char_stop: list[int] = []  # per folded character: its gold word, where its source character ends
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
        piece = _fold(pieces.text(token))
        if not piece:
            continue  # a bare word-start mark: no text, no word end
        if pos >= len(text):
            raise ValueError(
                f"token {i} {token!r}: the gold text {text!r} is used up; tokens {tokens[i:]} are left over"
            )
        if token in UNK_TOKENS:
            if i + 1 == len(tokens):
                pos = len(text)  # the last token: an unknown word takes the rest
            else:
                stop = char_stop[pos]  # at least one source character
                found = text.find(_fold(pieces.text(tokens[i + 1])), stop) if tokens[i + 1] not in UNK_TOKENS else -1
                pos = found if found != -1 else stop  # not found: the next token fails with its own message
        else:
            if text[pos : pos + len(piece)] != piece:
                raise ValueError(
                    f"token {i} {token!r} does not match the gold text at character {pos}: "
                    f"{text[pos : pos + len(piece) + 5]!r} (gold {text!r})"
                )
            pos += len(piece)
        ends[i] = last_of_word[pos - 1]
    if pos != len(text):
        raise ValueError(f"the tokens stop at character {pos} of the gold text {text!r}: {text[pos:]!r} is not covered")
    return ends


def segment_word_ends(
    tokens: list[str], segments: list[list[str]], specials=SPECIAL_TOKENS, pieces: Pieces = WORDPIECE
) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, content)`` for a whole encoded sequence: each run of non-special tokens aligned to its gold words.

    ``content`` is False for special tokens and for bare ``▁`` pieces, which hold no text.
    """
    special = np.array([t in specials for t in tokens], dtype=bool)
    content = ~special & np.array([bool(pieces.text(t)) for t in tokens], dtype=bool)
    ends = np.zeros(len(tokens), dtype=bool)
    runs = _runs(~special)
    if len(runs) != len(segments):
        raise ValueError(f"the tokens have {len(runs)} segments between special tokens, the gold has {len(segments)}")
    for (start, stop), words in zip(runs, segments):
        ends[start:stop] = gold_word_ends_from_segmentation(words, tokens[start:stop], pieces)
    return ends, content


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


def multi_token_words(ends: np.ndarray, content: np.ndarray) -> np.ndarray:
    """True for the text tokens of words made of several tokens (``play ##ing``; 中 and 国 of 中国).

    On these tokens "word end" is no longer the answer almost everywhere, so they make a harder sub-task.
    """
    ends, content = np.asarray(ends, dtype=bool), np.asarray(content, dtype=bool)
    continues = np.concatenate([[False], content[:-1] & ~ends[:-1]])  # the previous token is inside this word
    return content & (continues | ~ends)


def rule_positions(content: np.ndarray, special: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(scored, before_sep)``: the text tokens the rule is scored on, and the last one of each segment, left out.

    A segment's last token is followed by ``[SEP]`` (``</s>``), not by a next token: the rule would weigh its
    attention to ``[SEP]`` against nothing and say "word end", which the gold always says there too. That is a
    hit for every head and for the probe's features alike, for free, so those tokens are left out of every score.
    ``special`` flags the special tokens; without it every token that is no text counts as one. Given, a bare
    ``▁`` inside a segment (no text, no special token) does not make the token before it a segment's last.
    """
    content = np.asarray(content, dtype=bool)
    special = ~content if special is None else np.asarray(special, dtype=bool)
    followed_by_special = np.append(special[1:], True)
    before_sep = np.flatnonzero(content & followed_by_special)
    return np.setdiff1d(np.flatnonzero(content), before_sep), before_sep


@dataclass
class SegmentedSet:
    """Gold-segmented sentences encoded one per example (``[CLS] sentence [SEP]``), with their gold words."""

    encoded: Encoded
    segments: list[list[list[str]]]  # per example, per text segment: the gold words
    n_too_long: int  # sentences left out: longer than max_length tokens
    n_unaligned: int  # sentences left out: the tokens do not align to the gold text

    def __len__(self) -> int:
        return len(self.encoded)


def encode_segmented(tokenizer, sentences: list[list[str]], max_length: int = 128) -> SegmentedSet:
    """Tokenize each sentence's words joined without spaces, keeping those that fit whole and align to the gold.

    Truncation would cut the gold words, so long sentences are left out, and counted, rather than cut.
    """
    return encode_segmented_examples(tokenizer, [[words] for words in sentences], max_length)


def encode_segmented_examples(tokenizer, examples: list[list[list[str]]], max_length: int = 128) -> SegmentedSet:
    """Like :func:`encode_segmented` for examples of one or two segments (a query and a title), each a word list."""
    specials, pieces = special_tokens(tokenizer), piece_convention(tokenizer)
    ids, types, segments, too_long, unaligned = [], [], [], 0, 0
    for example in examples:
        if len(example) not in (1, 2):
            raise ValueError(f"an example has one or two segments, got {len(example)}")
        enc = tokenizer(
            *["".join(words) for words in example], verbose=False
        )  # long ones are counted, not warned about
        if len(enc["input_ids"]) > max_length:
            too_long += 1
            continue
        try:
            segment_word_ends(tokenizer.convert_ids_to_tokens(enc["input_ids"]), example, specials, pieces)
        except ValueError:
            unaligned += 1
            continue
        ids.append(enc["input_ids"])
        types.append(enc.get("token_type_ids") or [0] * len(enc["input_ids"]))
        segments.append([list(words) for words in example])
    encoded = Encoded(ids, types, np.zeros(len(ids), dtype=np.int64), 0, UNGRADED)
    return SegmentedSet(encoded, segments, too_long, unaligned)


# --- the study's rule -----------------------------------------------------------------------------


def _sep_and_next(maps: np.ndarray, sep_positions, scored_positions) -> tuple[np.ndarray, np.ndarray]:
    """(layers, heads, scored) attention of each scored token to all [SEP]s together, and to the token right after
    it."""
    maps = np.asarray(maps)
    scored = np.asarray(scored_positions, dtype=np.int64)
    if scored.size and scored.max() + 1 >= maps.shape[-1]:
        raise ValueError("a scored token has no next token (the last token of a sequence is [SEP], never scored)")
    if np.isin(scored + 1, list(sep_positions)).any():
        raise ValueError("a scored token is right before [SEP], so it has no next token: rule_positions leaves it out")
    rows = maps[:, :, scored, :]  # L, H, n, T
    to_sep = rows[..., list(sep_positions)].sum(axis=-1)
    to_next = np.take_along_axis(rows, (scored + 1)[None, None, :, None], axis=-1)[..., 0]
    return to_sep, to_next


def rule_predictions(maps: np.ndarray, sep_positions, scored_positions) -> np.ndarray:
    """(layers, heads, scored) bool: head (l, h) says "word end" for token t when attention to [SEP] beats attention
    to t + 1.

    ``maps`` is one example's (layers, heads, tokens, tokens), rows attending. All [SEP] positions count together. A
    token right before a [SEP] has no next token to weigh against [SEP] and raises ValueError; the study counted
    every character, but there the rule's "word end" is free (:func:`rule_positions` leaves those out).
    """
    to_sep, to_next = _sep_and_next(maps, sep_positions, scored_positions)
    return to_sep > to_next


def boundary_features(maps: np.ndarray, sep_positions, scored_positions) -> np.ndarray:
    """(n, L*H) attention to [SEP] minus attention to the next token, heads in layer-major order (l*H + h)."""
    to_sep, to_next = _sep_and_next(maps, sep_positions, scored_positions)
    diff = to_sep - to_next  # L, H, n; n is 0 for a text of one word-final token, which is never scored
    return diff.reshape(diff.shape[0] * diff.shape[1], diff.shape[2]).T.astype(np.float32)


@dataclass
class BoundaryData:
    """Every scored token of a set of examples: rule predictions, features, gold word ends and example ids.

    The tokens left out because a [SEP] follows them (:func:`rule_positions`) are kept apart, to be counted.
    """

    pred: np.ndarray  # (layers, heads, scored) bool
    features: np.ndarray  # (n, L*H)
    gold: np.ndarray  # (n,) bool
    groups: np.ndarray  # (n,) example index of each token (split and bootstrap by these)
    multi: np.ndarray  # (n,) bool: the token belongs to a word of several tokens (:func:`multi_token_words`)
    # (m,) bool, one per token left out: it belongs to a word of several tokens (none left out by default)
    excluded_multi: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def subset(self, keep, keep_excluded) -> BoundaryData:
        """The scored tokens where ``keep`` is True, and the left-out ones where ``keep_excluded`` is."""
        keep = np.asarray(keep, dtype=bool)
        return BoundaryData(
            self.pred[..., keep],
            self.features[keep],
            self.gold[keep],
            self.groups[keep],
            self.multi[keep],
            self.excluded_multi[np.asarray(keep_excluded, dtype=bool)],
        )


def special_tokens(tokenizer) -> set[str]:
    """The tokens that are no text: the tokenizer's special tokens but its unknown token, which stands for text."""
    return set(tokenizer.all_special_tokens) - {getattr(tokenizer, "unk_token", None)} - UNK_TOKENS


@dataclass
class Gold:
    """One encoded example's tokens, gold word ends, text and special flags, and separator positions."""

    tokens: list[str]
    ends: np.ndarray
    content: np.ndarray
    special: np.ndarray
    seps: list[int]

    def rule_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scored, before_sep)`` of this example: the tokens the rule is scored on (:func:`rule_positions`)."""
        return rule_positions(self.content, self.special)


def _gold(tokenizer, ids: list[int], segments) -> Gold:
    """One encoded example's :class:`Gold`: the tokenizer's own word ends, or the given gold words."""
    specials, pieces = special_tokens(tokenizer), piece_convention(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    if segments is None:
        ends, content = piece_word_ends(tokens, specials, pieces)
    else:
        ends, content = segment_word_ends(tokens, segments, specials, pieces)
    special = np.array([t in specials for t in tokens], dtype=bool)
    return Gold(tokens, ends, content, special, [i for i, t in enumerate(ids) if t == tokenizer.sep_token_id])


def boundary_data(attention, encoded: Encoded, tokenizer, segments=None) -> BoundaryData:
    """:class:`BoundaryData` of the examples ``attention`` yields, with WordPiece gold or, given ``segments``, gold
    words.

    ``segments[i]`` lists the gold words of each text segment of example i (e.g. ``[query_words, title_words]``).
    """
    preds, feats, golds, groups, multis, excluded = [], [], [], [], [], []
    for example, maps in attention:
        gold = _gold(tokenizer, encoded.input_ids[example], None if segments is None else segments[example])
        positions, before_sep = gold.rule_positions()
        multi = multi_token_words(gold.ends, gold.content)
        preds.append(rule_predictions(maps, gold.seps, positions))
        feats.append(boundary_features(maps, gold.seps, positions))
        golds.append(gold.ends[positions])
        groups.append(np.full(len(positions), example))
        multis.append(multi[positions])
        excluded.append(multi[before_sep])
    return BoundaryData(
        np.concatenate(preds, axis=-1),
        np.concatenate(feats),
        np.concatenate(golds),
        np.concatenate(groups),
        np.concatenate(multis),
        np.concatenate(excluded),
    )


@dataclass
class BoundaryExample:
    """One example read closely: its attention maps (layers, heads, tokens, tokens), tokens, and the rule per head
    and scored token."""

    example: int
    maps: np.ndarray
    tokens: list[str]
    table: pd.DataFrame  # layer, head, position, token, to_sep, to_next, predicted_end, gold_end, multi


def boundary_example(lab: Lab, encoded: Encoded, example: int, segments=None) -> BoundaryExample:
    """Attention and the rule's reading of every head on one example (``segments``: all examples' gold words).

    ``lab`` gives the model, tokenizer, device and pad id; ``encoded`` is the corpus's encoding (not always the lab's
    split)."""
    _, maps = next(
        attention_maps(
            lab.model, encoded, indices=[example], batch_size=lab.batch_size, device=lab.device, pad_id=lab.pad_id
        )
    )
    gold = _gold(lab.tokenizer, encoded.input_ids[example], None if segments is None else segments[example])
    tokens, ends, content = gold.tokens, gold.ends, gold.content
    positions, _ = gold.rule_positions()
    to_sep, to_next = _sep_and_next(maps, gold.seps, positions)
    layers, heads, n = to_sep.shape
    table = pd.DataFrame(
        {
            "example": example,
            "layer": np.repeat(np.arange(layers), heads * n),
            "head": np.tile(np.repeat(np.arange(heads), n), layers),
            "position": np.tile(positions, layers * heads),
            "token": np.tile(np.asarray(tokens, dtype=object)[positions], layers * heads),
            "to_sep": to_sep.reshape(-1),
            "to_next": to_next.reshape(-1),
            "predicted_end": (to_sep > to_next).reshape(-1),
            "gold_end": np.tile(ends[positions], layers * heads),
            "multi": np.tile(multi_token_words(ends, content)[positions], layers * heads),
        }
    )
    return BoundaryExample(example, maps, tokens, table)


def boundary_examples(lab: Lab, encoded: Encoded, examples, segments=None, first_head=None) -> pd.DataFrame:
    """The rule tables (:func:`boundary_example`) of several examples in one, for a static explorer.

    Rows come in the order of ``examples``, with ``first_head`` (layer, head) first within each, so a chart
    that starts on its first row shows that head on the first example.
    """
    tables = [boundary_example(lab, encoded, e, segments).table for e in examples]
    table = pd.concat(tables, ignore_index=True)
    if first_head is not None:
        other = (table["layer"] != first_head[0]) | (table["head"] != first_head[1])
        table = table.assign(other=other).sort_values(["other"], kind="stable").drop(columns="other")
        table = table.sort_values("example", key=lambda e: e.map({x: i for i, x in enumerate(examples)}), kind="stable")
    return table.reset_index(drop=True)


def readable_examples(data: BoundaryData, n: int = 1, max_tokens: int = 24) -> list[int]:
    """Examples worth a look: of those with at most ``max_tokens`` scored tokens, the ``n`` with most multi-token-word
    tokens.

    If no example is that short, the shortest ones.
    """
    examples, sizes = np.unique(data.groups, return_counts=True)
    multi = np.array([data.multi[data.groups == e].sum() for e in examples])
    short = sizes <= max_tokens
    if not short.any():
        return [int(e) for e in examples[np.argsort(sizes, kind="stable")[:n]]]
    order = np.argsort(-multi[short], kind="stable")
    return [int(e) for e in examples[short][order[:n]]]


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


def head_boundary_scores(
    pred: np.ndarray, gold: np.ndarray, groups=None, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
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
        lo, hi = _grouped_mean_interval(pred.reshape(layers * heads, n) == np.asarray(gold, bool), groups, n_boot, seed)
        table["accuracy_lo"], table["accuracy_hi"] = lo, hi
    return table


def _grouped_mean_interval(values: np.ndarray, groups, n_boot: int, seed: int):
    """95% cluster-bootstrap interval of the per-token mean of each row of ``values`` (rows, tokens).

    Whole examples (groups) are resampled, since the tokens of one sentence are not independent. Rows of 0/1
    give accuracies; rows of differences (-1, 0, 1) give paired accuracy gains.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    _, group_of = np.unique(np.asarray(groups), return_inverse=True)
    n_groups = group_of.max() + 1
    per_group = np.zeros((n_groups, values.shape[0]))
    np.add.at(per_group, group_of, values.T)
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
    """Add heads one at a time, each time the one that most raises the oracle union: rows k, layer, head,
    union_accuracy.

    An **oracle upper bound** curve (see :func:`oracle_union`): it rises with k even for heads that do not
    segment at all, because any head right on the tokens the others miss counts.
    """
    layers, heads, n = pred.shape
    right = (np.asarray(pred, dtype=bool) == np.asarray(gold, dtype=bool)).reshape(layers * heads, n)
    covered = np.zeros(n, dtype=bool)
    rows: list[dict] = []
    chosen: list[int] = []
    for k in range(1, min(max_heads, layers * heads) + 1):
        gains = (right | covered).sum(axis=1).astype(np.float64)
        gains[chosen] = -1
        best = int(np.argmax(gains))
        chosen.append(best)
        covered |= right[best]
        rows.append({"k": k, "layer": best // heads, "head": best % heads, "union_accuracy": float(covered.mean())})
    return pd.DataFrame(rows)


def shuffled_union_control(
    pred: np.ndarray, gold: np.ndarray, max_heads: int, draws: int = 5, seed: int = 0
) -> pd.DataFrame:
    """The greedy oracle union curve after shuffling each head's calls over the tokens: rows draw, k, union_accuracy.

    Shuffling keeps how often each head says "word end" but cuts every link to the text, so what such a
    union still scores is oracle selection alone; the real heads' union at the same k is worth only what
    it scores above this.
    """
    rng = np.random.default_rng(seed)
    pred = np.asarray(pred, dtype=bool)
    curves = [greedy_oracle_heads(rng.permuted(pred, axis=-1), gold, max_heads).assign(draw=d) for d in range(draws)]
    return pd.concat(curves, ignore_index=True)[["draw", "k", "union_accuracy"]]


# --- an honest probe --------------------------------------------------------------------------------


def group_split(groups, test_share: float = 0.3, seed: int = 0) -> np.ndarray:
    """Bool test mask over tokens: a seeded share of the *groups* (examples) is test, so no sentence is on both
    sides."""
    unique = np.unique(np.asarray(groups))
    rng = np.random.default_rng(seed)
    n_test = min(max(1, int(round(test_share * len(unique)))), len(unique) - 1)
    test_groups = rng.choice(unique, size=n_test, replace=False)
    return np.isin(np.asarray(groups), test_groups)


def _held_out_comparison(right: np.ndarray, gold: np.ndarray, groups, test: np.ndarray, n_boot: int, seed: int) -> dict:
    """Test accuracy of per-token ``right`` and its gain over the training part's majority class, with intervals."""
    majority = bool(gold[~test].mean() >= 0.5)
    majority_right = gold[test] == majority
    values = np.stack([right[test], right[test].astype(np.float64) - majority_right])
    lo, hi = _grouped_mean_interval(values, np.asarray(groups)[test], n_boot, seed)
    return {
        "test_accuracy": float(right[test].mean()),
        "test_accuracy_lo": float(lo[0]),
        "test_accuracy_hi": float(hi[0]),
        "test_majority_accuracy": float(majority_right.mean()),
        "gain": float(values[1].mean()),
        "gain_lo": float(lo[1]),
        "gain_hi": float(hi[1]),
        "n_train": int((~test).sum()),
        "n_test": int(test.sum()),
        "n_train_groups": len(np.unique(np.asarray(groups)[~test])),
        "n_test_groups": len(np.unique(np.asarray(groups)[test])),
    }


def held_out_best_head(
    pred: np.ndarray, gold: np.ndarray, groups, test_share: float = 0.3, seed: int = 0, n_boot: int = 1000
) -> dict:
    """The single head whose rule is most accurate on some examples, scored on the other examples.

    Picking the best of many heads on the data it is scored on flatters it; here the choice and the score
    use different sentences. ``gain`` is its test accuracy minus the majority class's (the class chosen on
    the training part too), with a 95% interval that resamples test examples.
    """
    gold = np.asarray(gold, dtype=bool)
    layers, heads, n = pred.shape
    test = group_split(groups, test_share, seed)
    right = (np.asarray(pred, dtype=bool) == gold).reshape(layers * heads, n)
    best = int(np.argmax(right[:, ~test].mean(axis=1)))
    return {
        "layer": best // heads,
        "head": best % heads,
        "train_accuracy": float(right[best, ~test].mean()),
        **_held_out_comparison(right[best], gold, groups, test, n_boot, seed),
    }


def probe(
    features: np.ndarray,
    gold: np.ndarray,
    groups,
    seed: int = 0,
    test_share: float = 0.3,
    l2: float = 1e-3,
    max_iter: int = 200,
    n_boot: int = 1000,
) -> dict:
    """Logistic regression from all heads' features to "word end", trained on some examples, scored on others.

    Features are standardised with the training part's statistics; the loss is the mean log-loss plus
    ``l2`` times the squared weights, minimised by full-batch L-BFGS. Returns train/test accuracy and F1,
    the test accuracy of the majority class (chosen on the training part) and the probe's ``gain`` over it,
    both with 95% intervals that resample test examples, token and example counts, and the weights (on the
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
        loss = (
            torch.nn.functional.binary_cross_entropy_with_logits(logits, target[train_idx])
            + l2 * weights.square().sum()
        )
        loss.backward()
        return loss

    optimizer.step(loss_fn)
    with torch.no_grad():
        predicted = ((z @ weights + bias) > 0).numpy()
    train_scores = _binary_scores(predicted[~test], y[~test])
    test_scores = _binary_scores(predicted[test], y[test])
    return {
        "train_accuracy": float(train_scores["accuracy"]),
        "train_f1": float(train_scores["f1"]),
        **_held_out_comparison(predicted == y, y, groups, test, n_boot, seed),
        "test_f1": float(test_scores["f1"]),
        "weights": weights.detach().numpy().copy(),
        "bias": float(bias.detach()),
    }
