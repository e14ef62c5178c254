"""headlab: take apart the attention heads of a BERT fine-tuned to grade query–title relevance.

    import headlab
    lab = headlab.load(model="minilm", data="stsb-en", split="test")
    lab.evaluate(drop=[(3, 9), (4, 2)])

The package's folders are its layers, and imports only go down (``tests/test_layers.py``):
``core`` (masking, batching, prediction, the sweep engine, attention maps, statistics), ``inputs`` (pinned offline
assets, relevance pairs, corpora, words, the network guard), ``models`` (names, loading, one training skeleton for
fine-tuning and pretraining), ``lab`` (the notebook parameters and the :class:`Lab` they lead to), ``measures``
(numbers several pages use), ``judging`` (the claim type, the verdict rule, its rows), ``pages`` (one module per
page of the book, and the registry of their claims), ``report`` (charts, explorers, attention views), ``book``
(presets, the build, the scorecard and its audits). Each layer exports the names a notebook needs from it:
``from headlab.core import run_sweep``, ``from headlab.measures import matching_heads``, ``from headlab.report import
show`` (a finding's own names come from its module, ``headlab.pages.redundancy``).
"""

__version__ = "0.1.0"

import os as _os

if _os.environ.get("HEADLAB_NO_NETWORK") == "1":  # before anything can open a connection
    from headlab.inputs import netguard as _netguard

    _netguard.install()

# the public names, imported after the network guard (E402 is off for this file: pyproject.toml)
from headlab.core.attention import AttentionCache
from headlab.core.masking import mask_heads
from headlab.core.sweep import MaskSpec
from headlab.lab.lab import Evaluation, Lab, load
from headlab.lab.params import Params
from headlab.measures.order import order_heads
from headlab.measures.roles import cls_profile, role_scores

__all__ = [
    "AttentionCache",
    "Evaluation",
    "Lab",
    "MaskSpec",
    "Params",
    "cls_profile",
    "load",
    "mask_heads",
    "order_heads",
    "role_scores",
]
