"""Offline inputs: pinned assets, relevance pairs, corpora, words, the network guard.

from headlab.inputs import load_data, read_pair, word_segmenter
"""

from headlab.inputs.data import class_balance, grade_mapping, load_data
from headlab.inputs.pair import read_pair
from headlab.inputs.words import word_segmenter

__all__ = ["class_balance", "grade_mapping", "load_data", "read_pair", "word_segmenter"]
