"""The term-matching heads: heads ranked by how much more they attend to the terms query and title share
(:mod:`headlab.measures.roles`) on the examples that choose (:mod:`headlab.measures.held_out`), and the masks of
page 05's conditions, which pages 07 and 08 evaluate again from the same sweep rather than recompute."""

from __future__ import annotations

import hashlib
import json

import pandas as pd

from headlab.core.enums import Words
from headlab.core.masking import head_grid
from headlab.core.sweep import BASELINE, MaskSpec, all_heads, baseline_spec, random_share_specs
from headlab.lab.lab import Lab
from headlab.measures.halves import Half, half_pool, half_split
from headlab.measures.held_out import choice_limit, role_indices
from headlab.measures.roles import SHARED_TERMS, rank_heads, role_scores


class Condition(Words):
    """The masks page 05 compares, each a kind of its sweep: none, random heads (anywhere, or in the lower half), the
    term-matching heads, the whole lower half, and the lower half but the term-matching heads (or as many random ones
    of it)."""

    NONE = BASELINE
    RANDOM = "random"
    RANDOM_LOWER = "random_lower"
    MATCHING = "matching"
    LOWER = "lower"
    LOWER_BUT_MATCHING = "lower_but_matching"
    LOWER_BUT_RANDOM = "lower_but_random"


def _role_key(limit, seed: int, stopwords) -> str:
    settings = {"limit": limit, "seed": seed, "stopwords": sorted(stopwords or ()), "terms": SHARED_TERMS}
    return hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:10]


def head_roles(lab: Lab, limit: int | None = None, stopwords=None) -> pd.DataFrame:
    """Every head's role scores (:func:`headlab.measures.roles.role_scores`) on the evaluation split, loaded or
    computed.

    Notebooks 05-09 all rank heads by these scores, so the first to run saves them (the shared table
    ``head_roles``, one per key: ``limit``, the examples used, a seeded subset; the seed; the stopword list; what a
    shared term is, :data:`headlab.measures.roles.SHARED_TERMS`) and the others load them.
    """
    seed = lab.params.seed
    return lab.shared_table(
        "head_roles",
        lambda: role_scores(
            lab.attention(role_indices(len(lab.encoded), limit, seed)), lab.encoded, lab.tokenizer, stopwords=stopwords
        ),
        key=_role_key(limit, seed, stopwords),
    )


def _stopword_key(stopwords) -> str:
    """A short name for a stopword list ("none" without one), saved with the heads it helped choose."""
    return hashlib.sha256(json.dumps(sorted(stopwords)).encode()).hexdigest()[:10] if stopwords else "none"


def matching_heads(
    lab, k: int = 5, by: str = "match_excess", limit: int | None = None, stopwords=None, choose: bool = False
) -> tuple[list[tuple[int, int]], pd.DataFrame]:
    """The ``k`` lower-half heads with the highest ``by`` role score: ``(heads, rows)``.

    They are chosen on ``limit`` pairs of the evaluation split, a seeded subset (:func:`role_indices`); None: on a
    seeded half of them (:func:`choice_limit`), so that notebook 05 measures its masks on the other half
    (:func:`measured_examples`). Notebook 05 chooses them (``choose=True``) and saves them with the settings that
    chose them (the shared table ``term_matching_heads``); notebooks 06 to 09 read that table and stop if it was made
    with other settings, so every page speaks of the same heads. Where no table exists yet (a notebook run alone), they
    are chosen here the same way and saved.
    """
    settings = {
        "k": int(k),
        "by": by,
        "limit": "half" if limit is None else str(int(limit)),
        "seed": int(lab.params.seed),
        "stopwords": _stopword_key(stopwords),
    }
    path = lab.shared_path("term_matching_heads")
    if not choose and path.exists():
        saved = pd.read_csv(path, dtype={"limit": str, "stopwords": str})
        theirs = {name: saved[name].iloc[0] for name in settings}
        theirs = {**theirs, "k": int(theirs["k"]), "seed": int(theirs["seed"])}
        if theirs != settings:
            differ = {n: (theirs[n], settings[n]) for n in settings if theirs[n] != settings[n]}
            raise ValueError(
                f"{path} holds heads chosen with other settings (saved, asked): {differ}; run notebook 05 "
                "with these settings first, or set them as notebook 05 had them"
            )
        return [(int(l), int(h)) for l, h in zip(saved["layer"], saved["head"])], saved
    layers, _ = head_grid(lab.model)
    roles = head_roles(lab, choice_limit(len(lab.encoded), limit), stopwords)
    heads, rows = rank_heads(roles, by, among_layers=half_split(layers)[0], k=k)
    rows = rows.assign(**settings)
    lab.save_table(rows, path.stem)
    return heads, rows


def random_lower_sets(layers: int, heads: int, named, draws: int, seed: int) -> list[tuple[tuple[int, int], ...]]:
    """``draws`` seeded sets of as many heads of the lower half as ``named`` holds, none of them ``named``: the
    control sets of notebooks 05, 07 and 09, which a named head in a control set would blur. Where the lower half
    holds fewer other heads than that (a toy model, never a real one), they are drawn from the other heads of any
    layer.

    Drawn by :func:`headlab.core.sweep.random_share_specs` with the seed ``seed + 1`` (so independent of the
    all-heads draws); draw d is the same set whatever ``draws`` is.
    """
    named = {(int(l), int(h)) for l, h in named}
    pool = [h for h in half_pool(layers, heads, Half.LOWER) if h not in named]
    if len(pool) < len(named):  # a toy model whose lower half is mostly the named heads: the other heads of any layer
        pool = [h for h in all_heads(layers, heads) if h not in named]
    share = len(named) / (layers * heads)
    specs = random_share_specs(layers, heads, [share], draws, seed + 1, pool=pool, kind=Condition.RANDOM_LOWER)
    return [spec.dropped for spec in specs]


def term_matching_specs(layers: int, heads: int, matching, draws: int, keep_draws: int, seed: int) -> list[MaskSpec]:
    """The masks of the study's table and of the controls; each mask's ``kind`` is its condition.

    ``random``: ``draws`` sets of k heads from all heads; ``random_lower``: ``draws`` sets of k heads of
    the lower half; ``lower_but_random``: the lower half but each of the first ``keep_draws`` of those
    sets (so kept and removed random sets are the same heads; see :func:`random_lower_sets`). k = len(matching);
    no random set holds a matching head.
    """
    matching = sorted((int(l), int(h)) for l, h in matching)
    if not matching:
        raise ValueError("matching must name at least one head")
    if draws < 1 or keep_draws < 1:
        raise ValueError(f"draws and keep_draws must be positive, got {draws} and {keep_draws}")
    k, lower = len(matching), half_pool(layers, heads, Half.LOWER)
    lower_sets = random_lower_sets(layers, heads, matching, max(draws, keep_draws), seed)
    others = [h for h in all_heads(layers, heads) if h not in matching]
    return [
        baseline_spec(),
        *random_share_specs(layers, heads, [k / (layers * heads)], draws, seed, pool=others, kind=Condition.RANDOM),
        *[
            MaskSpec(f"random_lower-d{d}", s, Condition.RANDOM_LOWER, {"draw": d})
            for d, s in enumerate(lower_sets[:draws])
        ],
        MaskSpec(Condition.MATCHING, tuple(matching), Condition.MATCHING),
        MaskSpec(Condition.LOWER, tuple(lower), Condition.LOWER),
        MaskSpec(
            Condition.LOWER_BUT_MATCHING, tuple(h for h in lower if h not in matching), Condition.LOWER_BUT_MATCHING
        ),
        *[
            MaskSpec(
                f"lower_but_random-d{d}", tuple(h for h in lower if h not in s), Condition.LOWER_BUT_RANDOM, {"draw": d}
            )
            for d, s in enumerate(lower_sets[:keep_draws])
        ],
    ]
