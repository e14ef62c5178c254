"""Offline inputs: pinned assets, relevance pairs, corpora, words, the network guard.

from headlab.inputs import load_data, word_segmenter
"""

from headlab.core.exports import exports as _exports

_PUBLIC = {
    "class_balance": "headlab.inputs.data",
    "grade_mapping": "headlab.inputs.data",
    "load_data": "headlab.inputs.data",
    "word_segmenter": "headlab.inputs.words",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
