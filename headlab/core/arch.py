"""One adapter per encoder architecture: where its heads are and what headlab can do with it.

Every other module asks :func:`architecture` rather than reading ``model_type``, so an encoder is supported
everywhere by one entry of :data:`ARCHITECTURES` (and its tiny model in the tests' :data:`conftest.TINY_ENCODERS`).

- Masking, attention maps, sweeps and patching need the paths: the self-attention, its query, key and value
  projections, and the Linear that mixes the heads back into the residual stream.
- ``score_bias``: the architecture adds a per-head position bias to the attention scores (MPNet's relative bias),
  so a head's scores are not its query times its keys alone; one head's map is read from the full maps and patching
  passes the bias on.
- ``bert_layers``: the layers are BERT's (``attention.self``, ``attention.output``, ``intermediate``, ``output``;
  RoBERTa, XLM-R and ELECTRA share them), so the sweep engine computes them itself, pruning rebuilds them smaller and
  compression finds its matrices.
- ``first_token_head``: the sequence classifier reads the last layer at the first token only (BERT's pooler and
  classifier; RoBERTa's, XLM-R's and ELECTRA's dense layer and output projection: the same matrix shapes), so that
  layer is computed at ``[CLS]`` alone.

DeBERTa's disentangled attention adds content-to-position and position-to-content terms to every score: a head
patched from its query and keys alone would be computed wrong with no error, so it is refused by name, as is any
architecture not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Architecture:
    """What headlab needs to know of one encoder family (see the module's docstring for each capability)."""

    name: str
    self_attention: str  # path from a layer to its self-attention module
    projections: tuple[str, str, str]  # the self-attention's query, key and value Linear attributes
    output_projection: str  # path from a layer to the Linear whose input is the concatenated head outputs
    score_bias: bool = False
    bert_layers: bool = False
    first_token_head: bool = False


_BERT_PATHS = ("attention.self", ("query", "key", "value"), "attention.output.dense")
ARCHITECTURES = {
    "bert": Architecture("BERT", *_BERT_PATHS, bert_layers=True, first_token_head=True),
    "roberta": Architecture("RoBERTa", *_BERT_PATHS, bert_layers=True, first_token_head=True),
    "xlm-roberta": Architecture("XLM-R", *_BERT_PATHS, bert_layers=True, first_token_head=True),
    "electra": Architecture("ELECTRA", *_BERT_PATHS, bert_layers=True, first_token_head=True),
    "mpnet": Architecture("MPNet", "attention.attn", ("q", "k", "v"), "attention.attn.o", score_bias=True),
}
REFUSED = {  # model_type -> why headlab does not take it apart
    "deberta": "DeBERTa's disentangled attention adds position terms to every score",
    "deberta-v2": "DeBERTa-v2's disentangled attention adds position terms to every score",
}


def supported() -> list[str]:
    """The model types headlab takes apart, sorted."""
    return sorted(ARCHITECTURES)


def architecture_of(model_type: str | None) -> Architecture:
    """The adapter of ``model_type``; an architecture headlab cannot take apart is an error that names it and why."""
    if model_type in ARCHITECTURES:
        return ARCHITECTURES[model_type]
    why = REFUSED.get(str(model_type), "no adapter describes where its heads are")
    raise ValueError(
        f"headlab cannot take apart model_type={model_type!r}: {why} (supported: {', '.join(supported())})"
    )


def architecture(model_or_config: Any) -> Architecture:
    """The adapter of a model or of its config (``.config.model_type`` or ``.model_type``)."""
    config = getattr(model_or_config, "config", model_or_config)
    return architecture_of(getattr(config, "model_type", None))
