"""Offline inputs: pinned assets, relevance pairs, corpora, words, the network guard."""
