"""multilingual-e5-small reading Chinese one character per token, as the study's BERT read it.

e5's own SentencePiece tokenizer (:mod:`headlab.inputs.e5`) cuts Chinese into pieces of one to several characters
(``▁一个人``), so where a piece ends a word mostly ends: the pieces give word ends away before any head attends.
Its vocabulary also holds a bare single-character piece for nearly every Chinese character, so the same weights can
read Chinese one character per token. :func:`character_tokenizer` keeps everything of e5's tokenizer (normalizer,
pieces, scores, ``<s> q </s></s> t </s>`` pairs, token type 0) and adds two pre-tokenizer steps after its
``▁`` marking: a ``▁`` run right before a CJK character is dropped (a space before Chinese text is no token, and a
character never takes the word-start form ``▁中``), and each CJK character is cut out as its own pre-token, which the
unigram model can only read as that character's bare piece, or ``<unk>`` when there is none
(:func:`unknown_characters` counts them). Other text (digits, Latin words, punctuation) keeps e5's pieces.

Decoding joins characters without spaces, so a space right before a Chinese character does not come back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from headlab.inputs.e5 import convert as convert_e5
from headlab.inputs.words import CJK_CHARACTER

MARK = "▁"


class CharacterTokenizerError(ValueError):
    """The tokenizer given is not e5's SentencePiece tokenizer (unigram pieces behind a ``▁`` Metaspace step)."""


def character_tokenizer(e5_tokenizer):
    """The fast tokenizer that reads ``e5_tokenizer``'s text with every CJK character its own bare piece.

    ``e5_tokenizer`` is the tokenizer of the ``e5-small`` asset (:func:`headlab.inputs.e5.build_tokenizer`); anything
    else (a WordPiece tokenizer, a slow tokenizer, another pre-tokenizer) raises :class:`CharacterTokenizerError`
    naming what was found."""
    from tokenizers import Regex, Tokenizer, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = getattr(e5_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise CharacterTokenizerError(
            f"character_tokenizer needs e5's fast tokenizer, got {type(e5_tokenizer).__name__} (no backend_tokenizer)"
        )
    spec = json.loads(backend.to_str())
    model, step = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    if model.get("type") != "Unigram" or step.get("type") != "Metaspace" or step.get("replacement") != MARK:
        raise CharacterTokenizerError(
            "character_tokenizer needs e5's SentencePiece tokenizer (a Unigram model after a Metaspace "
            f"pre-tokenizer marking spaces with {MARK!r}); got model {model.get('type')!r}, pre-tokenizer "
            f"{step.get('type')!r}"
        )
    characters = Tokenizer.from_str(backend.to_str())
    characters.pre_tokenizer = pre_tokenizers.Sequence(
        [
            backend.pre_tokenizer,
            pre_tokenizers.Split(Regex(f"{MARK}+(?={CJK_CHARACTER})"), "removed"),
            pre_tokenizers.Split(Regex(CJK_CHARACTER), "isolated"),
        ]
    )
    specials = {
        role: getattr(e5_tokenizer, role)
        for role in ("bos_token", "eos_token", "cls_token", "sep_token", "unk_token", "pad_token", "mask_token")
        if getattr(e5_tokenizer, role, None) is not None
    }
    return PreTrainedTokenizerFast(
        tokenizer_object=characters,
        model_max_length=e5_tokenizer.model_max_length,
        model_input_names=list(e5_tokenizer.model_input_names),
        **specials,
    )


def convert(source, folder) -> None:
    """The ``e5-small-char`` asset: the e5 model folder of ``source`` (:func:`headlab.inputs.e5.convert`: the same
    fp32 weights), with :func:`character_tokenizer` saved in place of e5's own."""
    from transformers import AutoTokenizer

    convert_e5(source, folder)
    e5_tokenizer = AutoTokenizer.from_pretrained(Path(folder), trust_remote_code=False)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (Path(folder) / name).unlink(missing_ok=True)
    character_tokenizer(e5_tokenizer).save_pretrained(folder)


def unknown_characters(tokenizer, texts) -> Counter:
    """How often each character of ``texts`` became the unknown token (``<unk>``): the characters the model cannot
    read (spaces an unknown piece carries are not counted). A text that is not a string raises TypeError naming its
    position."""
    unknown_id, counts = tokenizer.unk_token_id, Counter()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"unknown_characters: text {i} is {type(text).__name__}, not a string: {text!r}")
        encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        for token, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"]):
            if token == unknown_id:
                counts.update(c for c in text[start:end] if not c.isspace())
    return counts
