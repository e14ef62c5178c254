"""headlab: take apart the attention heads of a BERT fine-tuned to grade query–title relevance.

    import headlab
    lab = headlab.load(model="minilm", data="stsb-en", split="test")
    lab.evaluate(drop=[(3, 9), (4, 2)])

The package's folders are its layers, and imports only go down (``tests/test_layers.py``):
``core`` (masking, batching, prediction, the sweep engine, attention maps, statistics), ``inputs`` (pinned offline
assets, relevance pairs, corpora, words, the network guard), ``models`` (names, loading, one training skeleton for
fine-tuning and pretraining), ``lab`` (the notebook parameters and the :class:`Lab` they lead to), ``findings`` (one
module per finding of the study), ``report`` (charts, explorers, attention views), ``book`` (presets, the build,
fine-tuning settings chosen on dev). Each layer exports the names a notebook needs from it, loaded on first use:
``from headlab.core import run_sweep``, ``from headlab.findings import matching_heads``, ``from headlab.report import
show`` (a finding's own names come from its module, ``headlab.findings.redundancy``).
"""

__version__ = "0.1.0"

import os as _os

if _os.environ.get("HEADLAB_NO_NETWORK") == "1":  # before anything can open a connection
    from headlab.inputs import netguard as _netguard

    _netguard.install()

from headlab.core.exports import exports as _exports  # noqa: E402  (after the network guard)

# The public names, imported on first use (headlab.core.exports); each layer exports its own (headlab.core, ...).
_PUBLIC = {
    "AttentionCache": "headlab.core.attention",
    "mask_heads": "headlab.core.masking",
    "MaskSpec": "headlab.core.sweep",
    "order_heads": "headlab.findings.order",
    "cls_profile": "headlab.findings.roles",
    "role_scores": "headlab.findings.roles",
    "Evaluation": "headlab.lab.lab",
    "Lab": "headlab.lab.lab",
    "Params": "headlab.lab.params",
    "load": "headlab.lab.lab",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
