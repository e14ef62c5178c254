"""What term matching alone buys: a grader that sees only which words the query and the title share.

No neural encoder: a pair becomes a few overlap features (shared terms, their shares of each side, Jaccard,
BM25 of the title given the query, lengths), and a multinomial logistic regression trained on the train split maps
them to the data's grades. Its accuracy says how much of the task is term matching at all; the errors it shares with
the cross-encoder show where attention adds something. Terms are lower-cased words where the language uses spaces
and single characters of Chinese (the unit the Chinese models read), so the baseline needs no segmenter.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from headlab.core.grades import GradeScale

_TERM = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

FEATURES = [
    "query_terms",
    "title_terms",
    "shared",
    "shared_of_query",
    "shared_of_title",
    "jaccard",
    "bm25",
    "length_ratio",
]


def terms(text: str) -> list[str]:
    """Lower-cased words (letters and digits), and each Chinese character as a term of its own; no punctuation."""
    return _TERM.findall(str(text).lower())


def document_frequencies(texts) -> tuple[Counter, int, float]:
    """How many texts hold each term, the number of texts, and their mean length in terms (for BM25)."""
    counts: Counter[str] = Counter()
    total = 0
    texts = list(texts)
    for text in texts:
        words = terms(text)
        counts.update(set(words))
        total += len(words)
    return counts, len(texts), total / max(1, len(texts))


def bm25(
    query: list[str], title: list[str], frequencies: tuple[Counter, int, float], k1: float = 1.2, b: float = 0.75
) -> float:
    """Okapi BM25 of ``title`` as a document for ``query`` (each distinct query term once; Lucene's IDF, never < 0)."""
    df, n_docs, mean_length = frequencies
    tf = Counter(title)
    norm = k1 * (1 - b + b * len(title) / max(mean_length, 1e-9))
    score = 0.0
    for term in set(query):
        if tf[term]:
            idf = np.log(1 + (n_docs - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * tf[term] * (k1 + 1) / (tf[term] + norm)
    return float(score)


def pair_features(frame: pd.DataFrame, frequencies) -> pd.DataFrame:
    """One row of :data:`FEATURES` per (query, title) pair; ``frequencies`` come from the training texts only."""
    rows = []
    for query, title in zip(frame["query"], frame["title"]):
        q, t = terms(query), terms(title)
        shared = set(q) & set(t)
        union = set(q) | set(t)
        rows.append(
            {
                "query_terms": len(q),
                "title_terms": len(t),
                "shared": len(shared),
                "shared_of_query": len(shared) / max(1, len(set(q))),
                "shared_of_title": len(shared) / max(1, len(set(t))),
                "jaccard": len(shared) / max(1, len(union)),
                "bm25": bm25(q, t, frequencies),
                "length_ratio": min(len(q), len(t)) / max(1, len(q), len(t)),
            }
        )
    return pd.DataFrame(rows, columns=FEATURES)


@dataclass
class LexicalGrader:
    """A multinomial logistic regression on standardised overlap features (fit by :func:`fit_lexical`)."""

    frequencies: tuple
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray  # features x grades
    bias: np.ndarray
    scale: GradeScale

    def probabilities(self, frame: pd.DataFrame) -> np.ndarray:
        """Grade probabilities (pairs, grades of the scale)."""
        z = (pair_features(frame, self.frequencies).to_numpy(dtype=np.float64) - self.mean) / self.std
        logits = z @ self.weights + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        return probs / probs.sum(axis=1, keepdims=True)

    def grades(self, frame: pd.DataFrame) -> np.ndarray:
        """The most probable grade of each pair."""
        return self.scale.predicted(self.probabilities(frame))


def fit_lexical(train: pd.DataFrame, scale: GradeScale, l2: float = 1e-3, max_iter: int = 500) -> LexicalGrader:
    """Fit the grader on the training pairs, one class per grade of ``scale`` (the data's): mean log-loss plus
    ``l2`` times the squared weights, by L-BFGS.

    Document frequencies for BM25 come from the training queries and titles; nothing of the test split is used."""
    frequencies = document_frequencies(list(train["query"]) + list(train["title"]))
    x = pair_features(train, frequencies).to_numpy(dtype=np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = torch.tensor((x - mean) / std)
    target = torch.as_tensor(scale.classes(train["label"].to_numpy()))
    weights = torch.zeros((x.shape[1], scale.count), dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(scale.count, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights, bias], max_iter=max_iter, line_search_fn="strong_wolfe")

    def objective():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z @ weights + bias, target) + l2 * weights.square().sum()
        loss.backward()
        return loss

    optimizer.step(objective)
    return LexicalGrader(frequencies, mean, std, weights.detach().numpy().copy(), bias.detach().numpy().copy(), scale)
