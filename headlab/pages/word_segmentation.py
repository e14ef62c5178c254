"""Finding 3, word-segmentation heads: our numbers beside the study's 70% (one head) and 96% (a union of heads).

:func:`score_segmentation` turns the rule's calls (:class:`headlab.measures.segmentation.BoundaryData`) into the
tables the notebook shows, on all tokens and on the tokens of multi-token words, where "word end" is not
the answer almost everywhere. :func:`claims` gives the study's two claims as rows, each measured by what a rule adds
to the majority class on held-out examples and judged by the one rule of :mod:`headlab.judging.verdicts`; a model
whose pieces already mark the word ends (:func:`given_away`) says "not comparable". The verdicts render those rows,
then put every number next to the baseline that needs no attention.
No score counts the last token of a segment, whose "word end" is free
(:func:`headlab.measures.segmentation.rule_positions`); every table counts those tokens in ``n_excluded``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from headlab.core.attention import attention_maps
from headlab.core.evaluate import Encoded
from headlab.core.stats import by_interval
from headlab.inputs.pieces import piece_convention
from headlab.inputs.pku import held_out_sentences
from headlab.inputs.words import SEGMENTER, chinese_words, has_cjk
from headlab.judging.units import SEGMENTATION_GAIN, SINGLE_HEAD_ACCURACY, UNION_ACCURACY
from headlab.judging.verdicts import Claim, Kind, StudyClaim, render
from headlab.lab.lab import Lab
from headlab.measures.segmentation import (
    ALL,
    MULTI,
    BoundaryData,
    baselines,
    boundary_data,
    encode_segmented,
    encode_segmented_examples,
    greedy_oracle_heads,
    head_boundary_scores,
    held_out_best_head,
    probe,
    shuffled_union_control,
)

STUDY_SINGLE_HEAD = 0.70  # one head's rule (the 3rd head of the 1st layer)
STUDY_UNION = 0.96  # right when at least one of several heads is right
MIN_EXAMPLES = 4  # a subset is scored only when its tokens come from at least this many examples
CORPORA = ("eval", "eval-jieba", "pku-1998")
PKU_DEFAULT_SENTENCES = 500
PROBE_PIECES = 2000  # longer Chinese pieces (the commonest: lowest ids) character_level tokenizes to see how it reads


@dataclass
class SegmentationCorpus:
    """The examples whose attention is read, their gold words (None: the tokenizer's own), and a note on them."""

    name: str
    encoded: Encoded
    segments: list | None
    texts: list[str]  # one line per example, for captions
    note: str  # markdown


def segmentation_corpus(lab: Lab, corpus: str = "eval", limit: int | None = None, seed: int = 0) -> SegmentationCorpus:
    """``"eval"``: the first ``limit`` pairs of the evaluation split, gold = the tokenizer's own word ends;
    ``"eval-jieba"``: the same pairs, gold = jieba's segmentation (for Chinese pairs and a character model);
    ``"pku-1998"``: ``limit`` (default 500) held-out People's Daily sentences with gold segmentation.

    People's Daily only means something for a model that reads Chinese characters; for any other the note
    says how many tokens are unknown to it.
    """
    tokenizer = lab.tokenizer
    if corpus == "eval":
        n = len(lab.encoded) if limit is None else min(int(limit), len(lab.encoded))
        encoded = lab.encoded.subset(list(range(n)))
        texts = [f"{q} [SEP] {t}" for q, t in zip(lab.frame["query"][:n], lab.frame["title"][:n])]
        tokens = sum(map(len, encoded.input_ids))
        note = (
            f"**Corpus**: the first {n} {lab.params.eval_split} pairs (query and title), {tokens} tokens; gold "
            "word ends are the tokenizer's own: a piece ends a word unless the next piece continues it "
            "(WordPiece: `##`; SentencePiece: no `▁`, with punctuation and Chinese characters standing alone, "
            "as to BERT)."
        )
        return SegmentationCorpus(corpus, encoded, None, texts, note)
    if corpus == "eval-jieba":
        n = len(lab.frame) if limit is None else min(int(limit), len(lab.frame))
        pairs = [[chinese_words(q), chinese_words(t)] for q, t in zip(lab.frame["query"][:n], lab.frame["title"][:n])]
        segmented = encode_segmented_examples(tokenizer, pairs)
        note = (
            f"**Corpus**: the first {n} {lab.params.eval_split} pairs (query and title); gold word ends from "
            f"{SEGMENTER}, a dictionary segmenter (not a human gold standard), aligned character by character; "
            f"{segmented.n_too_long} left out as too long and {segmented.n_unaligned} because their tokens do not "
            "align to the text."
        )
        texts = [" / ".join(query) + " [SEP] " + " / ".join(title) for query, title in segmented.segments]
        return SegmentationCorpus(corpus, segmented.encoded, segmented.segments, texts, note)
    if corpus != "pku-1998":
        raise ValueError(f"SEG_CORPUS must be one of {CORPORA}, got {corpus!r}")
    sentences = held_out_sentences(PKU_DEFAULT_SENTENCES if limit is None else int(limit), seed=seed)
    segmented = encode_segmented(tokenizer, sentences)
    ids = [i for row in segmented.encoded.input_ids for i in row]
    unknown = sum(i == tokenizer.unk_token_id for i in ids) / max(len(ids), 1)
    note = (
        f"**Corpus**: {len(segmented)} held-out sentences of People's Daily (January 1998), gold segmentation by "
        f"Peking University, aligned character by character; {segmented.n_too_long} left out as too long and "
        f"{segmented.n_unaligned} because their tokens do not align to the text. {unknown:.0%} of the tokens are "
        f"unknown to this tokenizer (`{tokenizer.unk_token}`)."
    )
    if unknown > 0.05:
        note += (
            " **This model does not read Chinese**: its attention on these sentences says nothing about Chinese "
            "word segmentation; the page runs to show the pipeline, a Chinese character model gives the numbers."
        )
    texts = [" / ".join(words) for sentence in segmented.segments for words in sentence]
    return SegmentationCorpus(corpus, segmented.encoded, segmented.segments, texts, note)


def token_subsets(data: BoundaryData) -> dict[str, BoundaryData]:
    """All scored tokens, and the tokens of words made of several tokens, where there are enough of them."""
    subsets = {ALL: data, MULTI: data.subset(data.multi, data.excluded_multi)}
    return {name: d for name, d in subsets.items() if len(np.unique(d.groups)) >= MIN_EXAMPLES}


@dataclass
class SegmentationResults:
    """Tidy tables, each with a ``subset`` column."""

    heads: pd.DataFrame  # one row per head: accuracy (+ interval), precision, recall, f1, majority, gain
    baselines: pd.DataFrame  # always / never word end, majority class
    union: pd.DataFrame  # oracle union per k: kind "heads" or "shuffled control" (mean, min-max over draws)
    comparison: pd.DataFrame  # the headline numbers with intervals, beside the study's


def head_label(layer: int, head: int) -> str:
    """``L<layer>H<head>``: how the segmentation page names a head (layer and head counted from 0)."""
    return f"L{int(layer)}H{int(head)}"


def best_head(heads: pd.DataFrame) -> tuple[int, int]:
    """The head whose rule is most accurate on multi-token words (on all tokens if that subset was not scored)."""
    table = heads[heads["subset"] == MULTI] if (heads["subset"] == MULTI).any() else heads
    row = table.loc[table["accuracy"].idxmax()]
    return int(row["layer"]), int(row["head"])


def score_segmentation(
    data: BoundaryData,
    union_heads: int | None = None,
    max_heads: int = 8,
    control_draws: int = 5,
    test_share: float = 0.3,
    seed: int = 0,
    n_boot: int = 1000,
) -> SegmentationResults:
    """Score every head's rule, the oracle union (with its shuffled control) and the held-out alternatives.

    ``union_heads`` is the size of the union headlined beside the study's 96%; the study did not say how
    many heads it used, so by default it is the fewest heads whose union reaches 96% (or ``max_heads``,
    where the curves end, if none does).
    """
    heads, base, union, comparison = [], [], [], []
    for subset, d in token_subsets(data).items():
        n_excluded = len(d.excluded_multi)
        b = baselines(d.gold).assign(subset=subset, n_excluded=n_excluded)
        majority = float(b.loc[b["baseline"] == "majority class", "accuracy"].iloc[0])
        table = head_boundary_scores(d.pred, d.gold, d.groups, n_boot=n_boot, seed=seed)
        table = table.assign(subset=subset, majority=majority, gain=table["accuracy"] - majority, n_excluded=n_excluded)
        real = greedy_oracle_heads(d.pred, d.gold, max(max_heads, union_heads or 1))
        control = shuffled_union_control(d.pred, d.gold, len(real), control_draws, seed)
        spread = control.groupby("k")["union_accuracy"].agg(["mean", "min", "max"]).reset_index()
        union += [
            real.assign(subset=subset, kind="heads", lo=np.nan, hi=np.nan),
            spread.rename(columns={"mean": "union_accuracy", "min": "lo", "max": "hi"}).assign(
                subset=subset, kind="shuffled control"
            ),
        ]
        best = table.loc[table["accuracy"].idxmax()]
        held = held_out_best_head(d.pred, d.gold, d.groups, test_share, seed, n_boot)
        probed = probe(d.features, d.gold, d.groups, seed=seed, test_share=test_share, n_boot=n_boot)
        k = min(union_heads, len(real)) if union_heads else _fewest_heads(real, STUDY_UNION)
        at_k = spread[spread["k"] == k].iloc[0]
        common = {
            "subset": subset,
            "majority": majority,
            "n_tokens": len(d.gold),
            "n_excluded": n_excluded,
            "n_examples": len(np.unique(d.groups)),
            "end_share": float(np.mean(d.gold)),
        }
        comparison += [
            {**common, "measure": "majority class", "value": majority, "heads": ""},
            {
                **common,
                "measure": "best head, chosen on the same tokens",
                "value": best["accuracy"],
                "lo": best["accuracy_lo"],
                "hi": best["accuracy_hi"],
                "gain": best["gain"],
                "heads": head_label(best["layer"], best["head"]),
                "study": STUDY_SINGLE_HEAD,
            },
            {
                **common,
                **_held_out(held),
                "measure": "best head, chosen on other examples",
                "heads": head_label(held["layer"], held["head"]),
                "study": STUDY_SINGLE_HEAD,
            },
            {
                **common,
                "measure": "oracle union of heads",
                "value": real["union_accuracy"].iloc[k - 1],
                "k": k,
                "heads": "+".join(head_label(r.layer, r.head) for r in real.iloc[:k].itertuples()),
                "study": STUDY_UNION,
            },
            {
                **common,
                "measure": "oracle union of shuffled heads (control)",
                "value": at_k["mean"],
                "lo": at_k["min"],
                "hi": at_k["max"],
                "k": k,
                "n_draws": control_draws,
                "heads": "",
            },
            {**common, **_held_out(probed), "measure": "probe on all heads, held-out examples", "heads": "all"},
        ]
        heads.append(table)
        base.append(b)
    return SegmentationResults(
        _front(pd.concat(heads, ignore_index=True)),
        _front(pd.concat(base, ignore_index=True)),
        _front(pd.concat(union, ignore_index=True)),
        _front(pd.DataFrame(comparison), "measure"),
    )


def _fewest_heads(curve: pd.DataFrame, target: float) -> int:
    reached = curve[curve["union_accuracy"] >= target]
    return int(reached["k"].iloc[0]) if len(reached) else int(curve["k"].iloc[-1])


def _held_out(result: dict) -> dict:
    return {
        "value": result["test_accuracy"],
        "lo": result["test_accuracy_lo"],
        "hi": result["test_accuracy_hi"],
        "gain": result["gain"],
        "gain_lo": result["gain_lo"],
        "gain_hi": result["gain_hi"],
        "n_test_tokens": result["n_test"],
        "n_test_examples": result["n_test_groups"],
        "majority_held_out": result["test_majority_accuracy"],
    }


def _front(table: pd.DataFrame, *columns: str) -> pd.DataFrame:
    first = ["subset", *columns]
    return table[first + [c for c in table.columns if c not in first]]


# --- verdicts ----------------------------------------------------------------------------------------


def _row(comparison: pd.DataFrame, subset: str, measure: str):
    rows = comparison[(comparison["subset"] == subset) & (comparison["measure"] == measure)]
    return rows.iloc[0] if len(rows) else None


def _points(x: float) -> str:
    return f"{100 * x:+.{1 if abs(100 * x) >= 0.95 else 2}f} points"


def _against_majority(r) -> str:
    """Where the unadjusted 95% interval of the gain lies (the claim's verdict rests on the adjusted one)."""
    return (
        by_interval(
            r.gain_lo,
            r.gain_hi,
            "its 95% interval lies above the majority class",
            "its 95% interval lies **below** the majority class",
            "its 95% interval contains the majority class",
        )
        + " (unadjusted)"
    )


def score_corpus(
    lab,
    corpus: SegmentationCorpus,
    union_heads: int | None = None,
    max_heads: int = 8,
    control_draws: int = 5,
    test_share: float = 0.3,
    seed: int = 0,
    n_boot: int = 1000,
) -> tuple[BoundaryData, SegmentationResults]:
    """One corpus end to end: an attention pass (the lab's model, batch size, device and pad id), every score, and the
    tables saved as ``segmentation_<table>_<corpus name>`` (one set per corpus, so a second corpus never overwrites
    the first)."""
    attention = attention_maps(
        lab.model, corpus.encoded, batch_size=lab.batch_size, device=lab.device, pad_id=lab.pad_id
    )
    data = boundary_data(attention, corpus.encoded, lab.tokenizer, segments=corpus.segments)
    results = score_segmentation(data, union_heads, max_heads, control_draws, test_share, seed, n_boot)
    for name in ("heads", "baselines", "union", "comparison"):
        lab.save_table(getattr(results, name), f"segmentation_{name}_{corpus.name}")
    return data, results


def _left_out(comparison: pd.DataFrame) -> list[str]:
    """The line that says which tokens no score counts, and how many (none if nothing was scored)."""
    everything, multi = (_row(comparison, s, "majority class") for s in (ALL, MULTI))
    if everything is None:
        return []
    of_multi = "" if multi is None else f", {int(multi.n_excluded)} of them in multi-token words"
    return [
        f"- **Not scored:** the token right before each `[SEP]`, the last of its segment "
        f"({int(everything.n_excluded)} tokens{of_multi}). The rule would weigh its attention to `[SEP]` against "
        "a next token it does not have, so every head would call it a word end, which it always is: a hit for "
        "free. Every number below, the majority class's included, counts only the tokens that remain."
    ]


SINGLE_HEAD = StudyClaim(
    "word_segmentation.single_head",
    "03_word_segmentation",
    "One head's attention segments words (70% right in the study)",
    "Reading one head's attention this way segments words with 70% accuracy",
    Kind.EFFECT,
    direction=1,
)
HEAD_UNION = StudyClaim(
    "word_segmentation.head_union",
    "03_word_segmentation",
    "Several heads together segment words (96% right in the study)",
    "counting a character as right when at least one of them is right gives 96%",
    Kind.EFFECT,
    direction=1,
)
CLAIMS = (SINGLE_HEAD, HEAD_UNION)
STUDY_NUMBERS = {SINGLE_HEAD: (STUDY_SINGLE_HEAD, SINGLE_HEAD_ACCURACY), HEAD_UNION: (STUDY_UNION, UNION_ACCURACY)}
METHOD = "bootstrap over held-out examples, whole pairs or sentences"
CORPUS_TEXT = {
    "eval": "the evaluation pairs, word ends from the tokenizer's own pieces",
    "eval-jieba": "the relevance pairs, words cut by jieba",
    "pku-1998": "People's Daily sentences, words by Peking University's gold segmentation",
}
NOT_SCORED = (
    'Too few examples: the tokens of multi-token words, where "word end" is not the answer almost '
    f"everywhere, come from fewer than {MIN_EXAMPLES} examples."
)


def given_away(tokenizer, corpus) -> str:
    """Why the word ends the heads are scored on are already marked in the pieces the model reads, or "" when they
    are not (the claims are then comparable with the study's, whose model read single Chinese characters).

    ``corpus`` is a :class:`SegmentationCorpus` or its name. Two ways the pieces give the answer away:

    - the gold word ends are the tokenizer's own (``"eval"``): read off the pieces' marks, whatever the tokenizer;
    - the tokenizer cuts words into pieces (WordPiece marks a word's later pieces with ``##``, SentencePiece its
      first with ``▁``, and both hold whole words or runs of characters): where a piece ends, a word mostly ends.

    A character tokenizer (every piece one character, as the study's model and ``zh-char``) marks no word end in
    Chinese text, so with gold words from a segmentation (People's Daily, jieba) nothing is given away.
    """
    name = getattr(corpus, "name", corpus)
    pieces, characters = piece_convention(tokenizer), character_level(tokenizer)
    marks = (
        "SentencePiece pieces, which mark each word's first piece with `▁`"
        if pieces.word_start
        else f"WordPiece pieces, which mark each later piece of a word with `{pieces.continuation}`"
    )
    if name == "eval":
        later = (
            f"`{pieces.word_start}` marks the first piece of any other word"
            if pieces.word_start
            else f"`{pieces.continuation}` marks the later characters of any other word"
        )
        own = f"character pieces, to which each Chinese character is a word and {later}" if characters else marks
        return (
            f"Not comparable: the gold word ends of this corpus are read off the tokenizer's own {own}, so the "
            "token after each one already says whether it ends a word; a head can follow the marks without any "
            "notion of a word (the study's model read single Chinese characters, which mark nothing)."
        )
    if characters:
        return ""
    return (
        f"Not comparable: this model reads {marks}, and its pieces hold whole words or runs of characters, so "
        "where a piece ends a word mostly ends: the tokenizer has marked most of the word ends the heads are "
        "scored on before any attention (the study's model read single Chinese characters, which mark nothing)."
    )


def character_level(tokenizer) -> bool:
    """Whether the tokenizer reads Chinese one character per token, so its pieces mark no Chinese word end.

    True when every piece of its vocabulary but its special tokens stands for one character at most (its marks,
    ``##`` or ``▁``, left out): a character model's, such as ``zh-char``'s
    (:func:`headlab.models.pretrain.char_tokenizer`). True as well when the vocabulary has longer Chinese pieces
    that the tokenizer never produces: given the text of the first :data:`PROBE_PIECES` of them, it cuts every one
    into single characters (``e5-small-char``, :func:`headlab.inputs.e5_chars.character_tokenizer`). False for a
    tokenizer that shows no vocabulary, and for one whose longer pieces are all non-Chinese (English WordPiece:
    nothing shows how it reads Chinese)."""
    vocab = getattr(tokenizer, "get_vocab", None)
    if vocab is None:
        return False
    pieces, specials = piece_convention(tokenizer), set(getattr(tokenizer, "all_special_tokens", ()))
    longer = sorted((i, pieces.text(t)) for t, i in vocab().items() if t not in specials and len(pieces.text(t)) > 1)
    if not longer:
        return True
    chinese = [text for _, text in longer if has_cjk(text)][:PROBE_PIECES]
    if not chinese:
        return False
    ids = tokenizer("".join(chinese), add_special_tokens=False, verbose=False)["input_ids"]  # one long text
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return all(len(pieces.text(t)) <= 1 or not has_cjk(pieces.text(t)) for t in tokens)


def _held_out_claim(spec: StudyClaim, row, reason: str, not_comparable: str, corpus: str | None) -> Claim:
    """A claim measured by what a rule adds to the majority class on held-out examples (``row`` of the comparison,
    None when it was not scored); ``corpus`` names a second corpus, whose row is a sub-row of the claim."""
    part, claim = "", None
    if corpus is not None:
        part = re.sub(r"[^a-z0-9]+", "_", corpus.lower()).strip("_")
        claim = f"{spec.claim}, on a second corpus: {corpus} ({CORPUS_TEXT.get(corpus, corpus)})"
    study, study_unit = STUDY_NUMBERS[spec]
    if row is None:
        why = f"{reason} {not_comparable}".strip()
        return Claim.not_measured(spec, part=part, reason=why, unit=SEGMENTATION_GAIN, study=study, claim=claim)
    return Claim.measured(
        spec,
        ours=float(row.gain),
        lo=float(row.gain_lo),
        hi=float(row.gain_hi),
        unit=SEGMENTATION_GAIN,
        method=METHOD,
        n_examples=int(row.n_test_examples),
        reason=reason,
        study=study,
        study_unit=study_unit,
        claim=claim,
        part=part,
        not_comparable=not_comparable,
    )


def _single_head_claim(comparison: pd.DataFrame, not_comparable: str = "", corpus: str | None = None) -> Claim:
    held = _row(comparison, MULTI, "best head, chosen on other examples")
    if held is None:
        return _held_out_claim(SINGLE_HEAD, None, NOT_SCORED, not_comparable, corpus)
    return _held_out_claim(
        SINGLE_HEAD,
        held,
        f'On the tokens of multi-token words, where "word end" is not the answer almost everywhere, the head chosen '
        f"on other examples ({held.heads}) reads {held.value:.1%} [{held.lo:.1%}, {held.hi:.1%}] of "
        f"{int(held.n_test_tokens)} held-out tokens right, the majority class {held.majority_held_out:.1%}; ours is "
        "the difference, as the study's 70% came with no baseline",
        not_comparable,
        corpus,
    )


def _union_claim(comparison: pd.DataFrame, not_comparable: str = "", corpus: str | None = None) -> Claim:
    probed = _row(comparison, MULTI, "probe on all heads, held-out examples")
    if probed is None:
        return _held_out_claim(HEAD_UNION, None, NOT_SCORED, not_comparable, corpus)
    union = _row(comparison, MULTI, "oracle union of heads")
    control = _row(comparison, MULTI, "oracle union of shuffled heads (control)")
    return _held_out_claim(
        HEAD_UNION,
        probed,
        f"Measured by what a segmenter built from these heads reaches: a probe on all heads' attention, trained on "
        f"other examples, reads {probed.value:.1%} [{probed.lo:.1%}, {probed.hi:.1%}] of {int(probed.n_test_tokens)} "
        f"held-out tokens of multi-token words right, the majority class {probed.majority_held_out:.1%}; ours is the "
        f"difference. The study's 96% is an oracle union, right when any of its heads is right: here {int(union.k)} "
        f"heads reach {union.value:.1%}, and the same union of heads whose calls were shuffled {control.value:.1%}",
        not_comparable,
        corpus,
    )


def claims(comparison: pd.DataFrame, not_comparable: str = "", corpus: str | None = None) -> list[Claim]:
    """The study's two claims about word-segmentation heads, as rows, measured on the tokens of multi-token words.

    The study's 70% and 96% are accuracies with no baseline, on tokens most of which end a word in English
    WordPiece, so ours is what a rule adds to the majority class on examples it was not chosen on (a difference of
    shares, in points): the best head chosen on other examples (one head), and a probe on all heads' attention
    trained on other examples (several heads; the oracle union knows the answer when it picks the head). Both are
    judged by :func:`headlab.judging.verdicts.judge`. ``comparison`` is :attr:`SegmentationResults.comparison`;
    ``not_comparable`` is :func:`given_away`'s reason for this model and corpus ("" when comparable); ``corpus``
    names a second corpus, whose rows are sub-rows of the claims (``word_segmentation.single_head/eval_jieba``).
    """
    return [_single_head_claim(comparison, not_comparable, corpus), _union_claim(comparison, not_comparable, corpus)]


def _one(claim: Claim, spec: StudyClaim) -> Claim:
    if claim.study_claim != spec.claim_id:
        raise ValueError(f"expected a row of {spec.claim_id}, got {claim.claim_id}")
    return claim


def verdict_single_head(comparison: pd.DataFrame, claim: Claim) -> str:
    """Markdown: does one head's rule segment words (the study: 70%)? Its claim's row (``claim``, one of
    :func:`claims`' rows, rendered as built), then the numbers on both subsets against the trivial baselines."""
    lines = [render([_one(claim, SINGLE_HEAD)]), *_left_out(comparison)]
    for subset, what in (
        (ALL, "all {n} scored tokens"),
        (MULTI, "the {n} scored tokens of multi-token words, the harder sub-task"),
    ):
        best = _row(comparison, subset, "best head, chosen on the same tokens")
        if best is None:
            lines.append(f"- *{subset}*: too few examples to score.")
            continue
        held = _row(comparison, subset, "best head, chosen on other examples")
        lines.append(
            f"- On {what.format(n=int(best.n_tokens))} ({best.end_share:.1%} of them end a word), the best head "
            f"({best.heads}) reads {best.value:.1%} right (study: {STUDY_SINGLE_HEAD:.0%}), while the majority class "
            f"alone reads {best.majority:.1%} right. Chosen on other examples and scored on "
            f"{int(held.n_test_examples)} held-out ones, the best head ({held.heads}) scores {held.value:.1%} "
            f"[{held.lo:.1%}, {held.hi:.1%}], {_points(held.gain)} against the majority class "
            f"[{_points(held.gain_lo)}, {_points(held.gain_hi)}]: {_against_majority(held)}."
        )
    all_held = _row(comparison, ALL, "best head, chosen on other examples")
    if all_held is not None and all_held.end_share > 0.8:
        lines.append(
            f"- **Plainly:** with {all_held.end_share:.0%} of tokens ending a word, a rule that always "
            'says "word end" is right almost everywhere on all tokens, so an accuracy, the study\'s 70% or '
            "ours, says nothing by itself: a head's rule is worth only what it scores above that baseline."
        )
    return "\n".join(lines)


def verdict_union(comparison: pd.DataFrame, claim: Claim) -> str:
    """Markdown: the study's 96% union of heads. Its claim's row (``claim``, one of :func:`claims`' rows, rendered as
    built), then the union, its shuffled control and the held-out probe on both subsets."""
    lines = [render([_one(claim, HEAD_UNION)])]
    for subset in (ALL, MULTI):
        union = _row(comparison, subset, "oracle union of heads")
        if union is None:
            continue
        control = _row(comparison, subset, "oracle union of shuffled heads (control)")
        probed = _row(comparison, subset, "probe on all heads, held-out examples")
        if control.value > union.value + 0.005:
            worth = ": higher than the real heads' union, so the union measures the oracle's choice, not the heads"
        elif control.value >= union.value - 0.02:
            worth = ": about as high, so the union measures the oracle's choice, not the heads"
        else:
            worth = f", {100 * (union.value - control.value):.1f} points below the real heads' union"
        lines.append(
            f"- *{subset}*: the oracle union of {int(union.k)} heads ({union.heads}) is right on {union.value:.1%} "
            f"(study: {STUDY_UNION:.0%}; majority class {union.majority:.1%}). The same union built from heads whose "
            f"calls were shuffled over the tokens, so they see no text, scores {control.value:.1%} "
            f"(min-max over {int(control.n_draws)} draws: {control.lo:.1%} to {control.hi:.1%})"
            f"{worth}. "
            f"A probe on all heads' attention, trained on other examples and scored on {int(probed.n_test_examples)} "
            f"held-out ones, is right on {probed.value:.1%} [{probed.lo:.1%}, {probed.hi:.1%}], {_points(probed.gain)} "
            f"against the majority class [{_points(probed.gain_lo)}, {_points(probed.gain_hi)}]: "
            f"{_against_majority(probed)}."
        )
    if len(lines) > 1:
        lines.append(
            "- A union that counts a token right when *any* of its heads is right is an oracle upper bound, "
            "not a segmenter: it knows the answer when it picks the head. The held-out probe is the number a "
            "segmenter built from these heads could reach."
        )
    return "\n".join(lines)
