"""What each head attends to: identical terms across the pair, itself, [SEP], [CLS], its neighbours.

These role scores read the study's findings 5-7 off attention maps: term-matching heads put attention
between identical query and title tokens, fine-tuning moves attention from the diagonal and [SEP] onto
those matches, and a high head's [CLS] row gathers on the shared terms.

A head that ignores token identity still puts *some* attention on identical terms, the more so the more
of the other sentence they make up. So ``match`` is always reported next to ``match_baseline``, the mass
that same head would put on the identical terms if it spread its attention on the other sentence evenly
over that sentence's tokens; ``match_excess`` and ``match_ratio`` compare the two.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from headlab.core.evaluate import weights_digest
from headlab.core.stats import N_BOOT, bootstrap_weights
from headlab.inputs.pair import Pair, read_pair
from headlab.lab.lab import Lab

# A small English stopword list (articles, pronouns, prepositions, conjunctions, auxiliaries and the pieces
# WordPiece cuts from contractions), lower case as an uncased tokenizer writes them. About half of the tokens
# of an STS-B pair also occur in its other sentence, mostly such words; leaving them out makes "shared
# terms" mean shared content words. It has no effect on Chinese text.
ENGLISH_STOPWORDS = frozenset(
    """
a an the this that these those there here
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
what which who whom whose when where why how
am is are was were be been being have has had having do does did doing will would shall should can could
may might must
and or but nor so yet if then than as because while although though
of at by for with about against between into through during before after above below to from up down in out
on off over under again further once
all any both each few more most other some such no not only own same too very just also
s t d ll m re ve
""".split()
)

# What :attr:`headlab.inputs.pair.Pair.shared` compares, named in the keys of saved role tables, so that a table
# scored under an earlier definition (token ids, before SentencePiece models) is computed again rather than read.
SHARED_TERMS = "words"

# a showcase pair shares part of its title, not all of it: a near-duplicate's attention map is a trivial diagonal
SHOWCASE_OVERLAP = 0.6  # at most this share of the title's term pieces belongs to a shared term
# two or more letters in a row from Latin-1 Supplement to Latin Extended-B are what a text decoded with the wrong
# code page looks like (STS-B's "ŔÄ"); one accented letter inside a word ("Müller") is not
MOJIBAKE = re.compile(r"[\u0080-\u024f]{2,}")

ROLE_COLUMNS = ["match", "match_baseline", "match_ratio", "match_excess", "self", "sep", "cls", "prev", "next"]


def longest_shared_phrase(pair: Pair) -> tuple[int, int, int]:
    """The longest run of identical consecutive tokens in query and title: (query start, title start, length).

    Tokens are compared by id, and stopwords and punctuation count inside a phrase ("grew up in iran"). Length 0
    when the sentences share no token.
    """
    query = [pair.ids[i] for i in pair.query]
    title = [pair.ids[i] for i in pair.title]
    best = (pair.query.start, pair.title.start, 0)
    run = [0] * (len(title) + 1)  # run[j + 1]: length of the common run ending at query[i] and title[j]
    for i, q in enumerate(query):
        for j in range(len(title) - 1, -1, -1):
            run[j + 1] = run[j] + 1 if q == title[j] else 0
            if run[j + 1] > best[2]:
                best = (pair.query.start + i - run[j + 1] + 1, pair.title.start + j - run[j + 1] + 1, run[j + 1])
    return best


def showcase_examples(
    encoded, tokenizer, max_tokens: int = 32, stopwords=None, texts=None, max_overlap: float = SHOWCASE_OVERLAP
) -> pd.DataFrame:
    """Pairs that show term matching best, by a stated rule: among pairs of at most ``max_tokens`` that share a term,
    none a near-duplicate (``overlap``, the share of the title's term pieces that the query shares, at most
    ``max_overlap``; stopwords and punctuation are no terms, so they cannot dilute it)
    and none with an unknown token or, where ``texts`` (one raw text per pair) is given, a trace of mojibake
    (:data:`MOJIBAKE`), the longest shared phrase first.

    One row per such pair: example, n_tokens, n_shared (shared-term pairs, as :attr:`headlab.inputs.pair.Pair.shared`
    counts them), overlap, phrase_terms (terms in the longest shared phrase), phrase_length (its tokens), phrase (its
    text). Sorted by phrase_terms, then phrase_length (both descending), then n_tokens (short pairs are easier to
    read), then example.
    """
    rows = []
    unknown = getattr(tokenizer, "unk_token_id", None)
    for example, ids in enumerate(encoded.input_ids):
        if len(ids) > max_tokens or unknown in ids or (texts is not None and MOJIBAKE.search(str(texts[example]))):
            continue
        pair = read_pair(tokenizer, ids, stopwords)
        terms = {i for word in pair.title_words for i in word.positions}  # stopwords and punctuation are no terms
        overlap = len({t for _, t in pair.shared}) / max(len(terms), 1)
        if not pair.shared or overlap > max_overlap:
            continue
        start, _, length = longest_shared_phrase(pair)
        shared_query = {q for q, _ in pair.shared}
        rows.append(
            {
                "example": example,
                "n_tokens": len(ids),
                "n_shared": len(pair.shared),
                "overlap": overlap,
                "phrase_terms": sum(i in shared_query for i in range(start, start + length)),
                "phrase_length": length,
                "phrase": tokenizer.convert_tokens_to_string(pair.tokens[start : start + length]),
            }
        )
    columns = ["example", "n_tokens", "n_shared", "overlap", "phrase_terms", "phrase_length", "phrase"]
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values(
        ["phrase_terms", "phrase_length", "n_tokens", "example"],
        ascending=[False, False, True, True],
        ignore_index=True,
    )


def first_showcase(showcase: pd.DataFrame, example: int | None = None) -> int:
    """The pair a page shows: ``example`` where given, else the first of :func:`showcase_examples`; a clear error
    where the rule leaves none (every pair too long, a near-duplicate, unclean or sharing no term)."""
    if example is not None:
        return int(example)
    if showcase.empty:
        raise ValueError(
            "no pair passes the showcase rule (at most MAX_TOKENS tokens, a shared term, no unknown token or "
            "mojibake, at most SHOWCASE_OVERLAP of the title's terms shared): raise MAX_TOKENS or name one with EXAMPLE"
        )
    return int(showcase["example"].iloc[0])


def _match_scores(maps: np.ndarray, pair: Pair) -> dict[str, np.ndarray]:
    """match and its identity-blind baseline per head; NaN when the pair shares no term."""
    n_layers, n_heads, n = maps.shape[:3]
    if not pair.shared:
        nan = np.full((n_layers, n_heads), np.nan)
        return {"match": nan, "match_baseline": nan.copy()}
    identical = np.zeros((n, n))
    for q, t in pair.shared:
        identical[q, t] = identical[t, q] = 1.0
    other = np.zeros((n, n))  # query rows -> title columns and title rows -> query columns
    other[np.ix_(pair.query, pair.title)] = 1.0
    other[np.ix_(pair.title, pair.query)] = 1.0
    sources = np.flatnonzero(identical.sum(axis=1))
    on_identical = (maps * identical).sum(axis=-1)[..., sources]  # (layers, heads, sources)
    on_other = (maps * other).sum(axis=-1)[..., sources]
    per_other_token = on_other / other.sum(axis=1)[sources]
    uniform_on_identical = per_other_token * identical.sum(axis=1)[sources]
    return {"match": on_identical.mean(axis=-1), "match_baseline": uniform_on_identical.mean(axis=-1)}


def example_role_scores(maps: np.ndarray, pair: Pair) -> dict[str, np.ndarray]:
    """Role scores of every head for one example, each an (layers, heads) array keyed by ``ROLE_COLUMNS``.

    ``maps`` is (layers, heads, T, T) with rows attending to columns, as :func:`attention_maps` yields.

    - ``match``: for each token with an identical token in the *other* sentence, the attention it puts on
      those identical tokens (query -> title and title -> query), averaged over such tokens.
    - ``match_baseline``: for the same tokens, (attention on the other sentence / its number of tokens)
      x (number of identical tokens there): the ``match`` of a head that spreads its attention on the
      other sentence evenly over its tokens (punctuation included, [SEP] and [CLS] not).
    - ``match_ratio`` = match / match_baseline, ``match_excess`` = match - match_baseline.
      All four are NaN when the two sentences share no term.
    - ``self``, ``sep``, ``cls``, ``prev``, ``next``: attention of a non-special token on itself, on all
      [SEP]s together, on [CLS], on the token before / after it (whatever that is: the first query
      token's previous token is [CLS]), averaged over the non-special tokens.
    """
    content = np.array(pair.content)
    scores = _match_scores(maps, pair)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores["match_ratio"] = scores["match"] / scores["match_baseline"]
    scores["match_excess"] = scores["match"] - scores["match_baseline"]
    rows = maps[..., content, :]  # (layers, heads, content, tokens)
    scores["self"] = rows[..., np.arange(len(content)), content].mean(axis=-1)
    scores["sep"] = rows[..., pair.seps].sum(axis=-1).mean(axis=-1)
    scores["cls"] = rows[..., pair.cls].mean(axis=-1)
    scores["prev"] = rows[..., np.arange(len(content)), content - 1].mean(axis=-1)
    scores["next"] = rows[..., np.arange(len(content)), content + 1].mean(axis=-1)
    return {name: scores[name] for name in ROLE_COLUMNS}


def per_head_rows(attention, encoded, tokenizer, score, stopwords=None) -> pd.DataFrame:
    """One row per (example, layer, head): ``score(maps, pair)`` gives (layers, heads) arrays or scalars (``pair``:
    the example read by :func:`headlab.inputs.pair.read_pair` with ``stopwords``).

    ``attention`` yields ``(example, maps)``: :func:`headlab.core.attention.attention_maps` (one model pass) or an
    :class:`headlab.core.attention.AttentionCache` (no pass at all)."""
    frames = []
    for example, maps in attention:
        scores = score(maps, read_pair(tokenizer, encoded.input_ids[example], stopwords))
        layers, heads = np.indices(maps.shape[:2])
        frames.append(
            pd.DataFrame(
                {
                    "example": example,
                    "layer": layers.ravel(),
                    "head": heads.ravel(),
                    **{k: np.broadcast_to(v, maps.shape[:2]).ravel() for k, v in scores.items()},
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def role_scores(attention, encoded, tokenizer, stopwords=None, per_example: bool = False) -> pd.DataFrame:
    """Role scores of every head over the examples ``attention`` yields (see :func:`per_head_rows`).

    The maps may come from a bare encoder or a classifier, with heads masked or not. Returns :func:`summarize_roles` of
    the per-example table, or with ``per_example=True`` that table itself (example, layer, head, one
    column per role): the paired values that before/after comparisons (:func:`paired_delta`) need.
    """
    long = per_head_rows(attention, encoded, tokenizer, example_role_scores, stopwords)
    long = long.sort_values(["example", "layer", "head"], ignore_index=True)
    return long if per_example else summarize_roles(long)


def pair_role_scores(lab: Lab, examples=None, model=None, stopwords=None) -> pd.DataFrame:
    """Every head's role scores on each of ``examples`` (all by default) of the lab's split, from the lab's model or
    ``model`` (e.g. the pretrained encoder): :func:`role_scores` with ``per_example=True``, computed once per model,
    examples and stopwords and kept (:meth:`headlab.lab.Lab.stored`), as each is an attention pass over the pairs."""
    key = {
        "examples": None if examples is None else [int(e) for e in examples],
        "stopwords": sorted(stopwords or []),
        "weights": weights_digest(lab.model if model is None else model),
    }
    return lab.stored(
        "pair_role_scores",
        key,
        lambda: role_scores(
            lab.attention(examples, model=model), lab.encoded, lab.tokenizer, stopwords=stopwords, per_example=True
        ),
    )


def summarize_roles(per_example: pd.DataFrame) -> pd.DataFrame:
    """Per head, the mean of each role over examples (match scores over the examples that share a term).

    ``match_ratio`` is the ratio of the mean match to the mean baseline (steadier than a mean of ratios);
    ``match_excess`` is the mean of per-example excesses, which equals the difference of the means.
    """
    grouped = per_example.groupby(["layer", "head"])
    out = grouped[[c for c in ROLE_COLUMNS if c != "match_ratio"]].mean()  # pandas means skip NaN
    out["match_ratio"] = out["match"] / out["match_baseline"]
    out["n_examples"] = grouped["example"].nunique()
    out["n_match_examples"] = grouped["match"].count()
    return out[ROLE_COLUMNS + ["n_examples", "n_match_examples"]].reset_index()


def rank_heads(scores: pd.DataFrame, by: str = "match_excess", among_layers=None, k: int = 5):
    """The ``k`` heads with the highest ``by`` (optionally only in ``among_layers``): ((layer, head) list, rows)."""
    rows = scores if among_layers is None else scores[scores["layer"].isin(list(among_layers))]
    top = rows.sort_values(by, ascending=False, na_position="last").head(k).reset_index(drop=True)
    return [(int(layer), int(head)) for layer, head in zip(top["layer"], top["head"])], top


def cls_attention_on_shared(maps: np.ndarray, pair: Pair) -> dict:
    """How every head's [CLS] row spreads over the non-special tokens, and how much lands on shared terms.

    Each row is renormalised over the non-special tokens (``content_mass``, per head, is the share it had
    before, and ``shared_mass`` the row's own weight on shared terms, before renormalising: what the special tokens
    leave), so ``shared_share`` can be read against ``chance``, the share a uniform row would give
    (shared-term tokens / non-special tokens). Both are NaN when the pair shares no term. ``entropy``
    (nats) of the renormalised row is 0 when all of it sits on one token and log(n_tokens) when uniform;
    ``n_effective`` = exp(entropy) is the number of tokens a uniform row with that entropy would cover.
    Per-head values are (layers, heads) arrays; ``chance``, ``n_shared_tokens``, ``n_tokens`` are numbers.
    """
    content = pair.content
    rows = maps[:, :, pair.cls, content].astype(np.float64)  # (layers, heads, content)
    content_mass = rows.sum(axis=-1)
    p = rows / content_mass[..., None]
    shared = pair.shared_positions
    on_shared = np.array([i in shared for i in content])
    entropy = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=-1)
    shared_share = p[..., on_shared].sum(axis=-1) if shared else np.full(content_mass.shape, np.nan)
    return {
        "shared_share": shared_share,
        "shared_mass": shared_share * content_mass,
        "chance": len(shared) / len(content) if shared else float("nan"),
        "entropy": entropy,
        "n_effective": np.exp(entropy),
        "content_mass": content_mass,
        "n_shared_tokens": len(shared),
        "n_tokens": len(content),
    }


def cls_profile(attention, encoded, tokenizer, heads=None, stopwords=None) -> pd.DataFrame:
    """:func:`cls_attention_on_shared` per example and head (all, or the (layer, head) pairs in ``heads``).

    Maps taken with heads masked show how the remaining heads' [CLS] attention changes when the removed
    heads' features are missing. One row per example and head, sorted by example, layer, head.
    """
    out = per_head_rows(attention, encoded, tokenizer, cls_attention_on_shared, stopwords)
    if heads is not None:
        chosen = pd.DataFrame([(int(l), int(h)) for l, h in heads], columns=["layer", "head"])
        out = out.merge(chosen, on=["layer", "head"])
    return out.sort_values(["example", "layer", "head"], ignore_index=True)


def paired_delta(
    before: pd.DataFrame,
    after: pd.DataFrame,
    metric: str,
    n_boot: int = N_BOOT,
    seed: int = 0,
    heads=None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Per head, the mean change (after - before) of ``metric`` with a paired bootstrap interval.

    ``before`` and ``after`` are per-example tables (example, layer, head, metric) on the same examples:
    role tables (``role_scores(..., per_example=True)``) of the pretrained encoder and the fine-tuned model
    (finding 6), or [CLS] profiles (:func:`cls_profile`) without and with a mask (finding 7). Examples are
    resampled once for all heads, so the rows scope="all" (mean over every head) and scope="subset" (mean
    over ``heads``, a list of (layer, head)) get intervals too. An example counts for a head only where both
    values are finite (``match`` and ``shared_share`` are NaN for pairs that share no term).
    """
    keys = ["example", "layer", "head"]
    paired = before[keys + [metric]].merge(
        after[keys + [metric]], on=keys, suffixes=("_before", "_after"), validate="one_to_one"
    )
    if len(paired) != len(before) or len(paired) != len(after):
        raise ValueError("before and after must cover the same examples and heads")
    wide = {
        side: paired.pivot(index="example", columns=["layer", "head"], values=f"{metric}_{side}")
        for side in ("before", "after")
    }
    head_index = wide["before"].columns
    b, a = wide["before"].to_numpy(), wide["after"][head_index].to_numpy()
    valid = np.isfinite(a) & np.isfinite(b)
    a, b = np.where(valid, a, 0.0), np.where(valid, b, 0.0)
    weights = bootstrap_weights(valid.shape[0], n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        count = valid.sum(axis=0)
        means = {"before": b.sum(axis=0) / count, "after": a.sum(axis=0) / count}
        boots = (weights @ (a - b)) / (weights @ valid)  # (n_boot, heads): mean change per resample
    alpha = (1.0 - level) / 2.0

    def row(scope, layer, head, columns):
        delta_boots = np.nanmean(boots[:, columns], axis=1) if len(columns) > 1 else boots[:, columns[0]]
        before_mean, after_mean = np.nanmean(means["before"][columns]), np.nanmean(means["after"][columns])
        return {
            "scope": scope,
            "layer": layer,
            "head": head,
            "metric": metric,
            "before": before_mean,
            "after": after_mean,
            "delta": after_mean - before_mean,
            "lo": np.nanquantile(delta_boots, alpha),
            "hi": np.nanquantile(delta_boots, 1 - alpha),
            "n_examples": int(valid[:, columns].any(axis=1).sum()),
        }

    rows = [row("head", layer, head, [j]) for j, (layer, head) in enumerate(head_index)]
    rows.append(row("all", pd.NA, pd.NA, list(range(len(head_index)))))
    if heads is not None:
        chosen = [head_index.get_loc((int(layer), int(head))) for layer, head in heads]
        rows.append(row("subset", pd.NA, pd.NA, chosen))
    out = pd.DataFrame(rows)
    out[["layer", "head"]] = out[["layer", "head"]].astype("Int64")
    return out


def shares_terms(encoded, tokenizer, stopwords=None) -> np.ndarray:
    """Per pair: whether query and title share a term, as notebook 05 counts shared terms (whole words joined from
    the tokenizer's pieces, casefolded; punctuation, unknown tokens and ``stopwords`` never count:
    :attr:`headlab.inputs.pair.Pair.shared`)."""
    return np.array([bool(read_pair(tokenizer, ids, stopwords).shared) for ids in encoded.input_ids], dtype=bool)
