r"""How much of the model's behaviour a circuit of heads accounts for on its own: faithfulness, completeness and
minimality, the three criteria of Wang et al. 2023 (IOI, "Interpretability in the wild"), on contrast pairs.

The behaviour F(X) of a set X of heads kept is the mean over pairs of the gap between an original pair's and its
contrast's :func:`headlab.core.patching.grade_logit` (linear in the logits), with every head outside X mean-ablated
on both runs: :mod:`headlab.core.ablation`, each head's mean per token class ([CLS], query, title, separator) over the
reference (training) pairs. F(M) is the full model, nothing ablated; F(∅) has every head ablated. Resample ablation
beside it (:func:`headlab.core.ablation.resample_ablated`): each ablated head outputs what it output on one real
reference pair (a donor), at the position of the same class and rank, instead of the mean.

- :func:`faithfulness`: F(C) / F(M), set against random circuits of C's size and layer makeup.
- :func:`completeness`: |F(C \ K) - F(M \ K)| for subsets K of the circuit, greedy and random: removing part of a
  complete circuit costs the circuit what it costs the model.
- :func:`minimality`: each head's share inside the circuit, F(C) - F(C \ {v}).

Every share is of F(M), with a 95% paired bootstrap interval over the pairs (ratios of resampled means).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from headlab.core.ablation import Donors, mean_ablated, padded_classes, resample_ablated
from headlab.core.device import autocast, precision
from headlab.core.engine import computed_heads, reads_cls_only
from headlab.core.evaluate import Encoded, length_batches, model_inputs
from headlab.core.masking import head_grid
from headlab.core.patching import grade_logit
from headlab.core.stats import N_BOOT, bootstrap_weights, draw_counts, draws_ratio_of_means, ratio_of_means
from headlab.inputs.pair import pair_classes

Head = tuple[int, int]


class AblationEngine:
    """Grade-logit gaps of original and contrast pairs (one to one, token for token the same lengths) with every head
    outside a kept set ablated on both sides: mean-ablated (``reference``: the means of
    :func:`headlab.core.ablation.class_outputs`) or resample-ablated (``reference``: its :class:`Donors`; each pair
    reads one donor drawn for it by ``seed`` and its index, the same on both sides and for every set, so a gap
    compares like with like and no batching changes it; the pairs' bootstrap then covers the draw of donors, the bank
    of donors being fixed as the means' pairs are). Batches built once, and no set computed twice."""

    def __init__(
        self,
        model,
        original: Encoded,
        contrast: Encoded,
        reference: torch.Tensor | Donors,
        tokenizer,
        batch_size: int = 64,
        device="cpu",
        pad_id: int = 0,
        autocast: bool | None = None,
        last_at_cls: bool = True,
        seed: int = 0,
    ):
        if len(original) != len(contrast) or any(
            len(a) != len(b) for a, b in zip(original.input_ids, contrast.input_ids)
        ):
            raise ValueError("original and contrast pairs must match one to one, each pair's two sides of one length")
        self.model = model.eval()
        self.device = torch.device(device)
        self.n = len(original)
        self.shape = head_grid(model)
        self.heads: list[Head] = [(l, h) for l in range(self.shape[0]) for h in range(self.shape[1])]
        self.reference = reference.to(self.device)
        self.autocast = precision(self.device) == "bf16" if autocast is None else autocast
        self.last_at_cls = last_at_cls and reads_cls_only(model)
        # one order of the pairs (sorted by length, stable) makes both sides' batches: the same lengths
        batches = zip(length_batches(original, batch_size, pad_id), length_batches(contrast, batch_size, pad_id))
        classes = pair_classes(tokenizer, original), pair_classes(tokenizer, contrast)
        donors = self.reference if isinstance(self.reference, Donors) else None
        # one donor a pair, drawn by seed and the pair's index: no batching changes it
        chosen = np.random.default_rng([seed, 0xD1]).integers(len(donors.classes), size=self.n) if donors else None
        self.batches = [
            (
                idx,
                [self._side(batch, side, idx) for batch, side in zip((o, c), classes)],
                None if chosen is None else self._donors(classes[0], idx, chosen[idx]),
            )
            for (idx, o), (_, c) in batches
        ]
        self._gaps: dict[frozenset, np.ndarray] = {}

    def _side(self, batch: dict, classes: list[np.ndarray], idx) -> tuple[dict, torch.Tensor]:
        return model_inputs(self.model, batch, self.device), padded_classes(classes, idx).to(self.device)

    def _donors(self, classes: list[np.ndarray], idx, chosen: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Per pair of the batch at ``idx``, its donor (``chosen``) and the donor position each of its positions
        reads."""
        donors = self.reference
        assert isinstance(donors, Donors)
        positions = torch.zeros(len(idx), max(len(classes[i]) for i in idx), dtype=torch.long)
        for row, (i, d) in enumerate(zip(idx, chosen)):
            positions[row, : len(classes[i])] = torch.as_tensor(donors.positions(classes[i], int(d)))
        return torch.as_tensor(chosen, device=self.device), positions.to(self.device)

    def gaps(self, kept_sets, progress: bool = False) -> np.ndarray:
        """(sets, pairs): per pair, grade_logit(original) - grade_logit(contrast) with every head outside the set (of
        ``(layer, head)``) ablated on both; a set computed before is read back, not computed again."""
        keys = [self._key(kept) for kept in kept_sets]
        new = [k for k in dict.fromkeys(keys) if k not in self._gaps]
        for kept in tqdm(new, desc="circuits", disable=not progress):
            self._gaps[kept] = self._gap(kept)
        return np.stack([self._gaps[k] for k in keys]) if keys else np.zeros((0, self.n))

    def _key(self, kept) -> frozenset:
        key = frozenset((int(l), int(h)) for l, h in kept)
        if not key <= set(self.heads):
            raise ValueError(f"heads {sorted(key - set(self.heads))} are not in the model's {len(self.heads)} heads")
        return key

    @torch.inference_mode()
    def _gap(self, kept: frozenset) -> np.ndarray:
        ablated = [h for h in self.heads if h not in kept]
        # a BERT classifier's grade reads the last layer at [CLS]: computed there alone, as the patching engine does
        last = (
            computed_heads(self.model, torch.ones(self.shape), self.shape[0] - 1, cls_only=True)
            if self.last_at_cls
            else nullcontext()
        )
        gap = np.zeros(self.n)
        with autocast(self.device, "bf16" if self.autocast else "fp32"), last:
            for idx, sides, donors in self.batches:
                original, contrast = (self._grade_logits(inputs, classes, donors, ablated) for inputs, classes in sides)
                gap[idx] = original - contrast
        return gap

    def _grade_logits(self, inputs: dict, classes: torch.Tensor, donors, ablated: list[Head]) -> np.ndarray:
        if isinstance(self.reference, Donors):
            ablation = resample_ablated(self.model, ablated, self.reference, *donors)
        else:
            ablation = mean_ablated(self.model, ablated, self.reference, classes)
        with ablation:
            return grade_logit(self.model(**inputs).logits.float().cpu().numpy())


def _interval(boot: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float(lo), float(hi)


def _heads(heads) -> list[Head]:
    return sorted({(int(l), int(h)) for l, h in heads})


def _text(heads) -> str:
    return ", ".join(f"{l}.{h}" for l, h in _heads(heads))


def random_circuits(circuit, heads, n: int, seed: int = 0) -> list[list[Head]]:
    """``n`` seeded random circuits of the circuit's layer makeup: in each layer as many heads as the circuit has
    there, drawn among that layer's other heads (a random circuit of low heads and one of high heads keep different
    shares whatever they do); drawn among all the other heads where a layer holds too few (a toy model)."""
    circuit = _heads(circuit)
    others = [h for h in heads if h not in circuit]
    if n and len(others) < len(circuit):
        raise ValueError(
            f"a circuit of {len(circuit)} heads leaves {len(others)}: too few for random circuits its size"
        )
    layers = {l: sum(1 for c, _ in circuit if c == l) for l, _ in circuit}
    pools = {l: [h for h in others if h[0] == l] for l in layers}
    rng = np.random.default_rng([seed, len(circuit)])
    if all(len(pools[l]) >= k for l, k in layers.items()):
        return [
            sorted(pools[l][i] for l, k in layers.items() for i in rng.choice(len(pools[l]), k, replace=False))
            for _ in range(n)
        ]
    return [sorted(others[i] for i in rng.choice(len(others), len(circuit), replace=False)) for _ in range(n)]


def faithfulness(
    engine: AblationEngine, circuit, n_random: int = 20, seed: int = 0, n_boot: int = N_BOOT, progress: bool = False
) -> pd.DataFrame:
    """The full model F(M), the circuit F(C) and the empty circuit F(∅) (grade-logit gaps, with 95% intervals over
    pairs); the circuit's faithfulness F(C) / F(M); the mean faithfulness of ``n_random`` random circuits of its size
    and layer makeup (:func:`random_circuits`), and the circuit's minus theirs, both with a two-stage interval
    that resamples the pairs and the draws (:func:`headlab.core.stats.draw_counts`).

    Columns: what, value, lo, hi, n_examples, n_draws, size.
    """
    circuit = _heads(circuit)
    draws = random_circuits(circuit, engine.heads, n_random, seed)
    full, kept, empty, *random = engine.gaps([engine.heads, circuit, [], *draws], progress)
    weights = bootstrap_weights(engine.n, n_boot, seed)
    sides = [("full model", full, len(engine.heads)), ("circuit", kept, len(circuit)), ("empty circuit", empty, 0)]
    rows = [(what, float(gap.mean()), *_interval(weights @ gap / engine.n), 1, size) for what, gap, size in sides]
    value, lo, hi = ratio_of_means(kept, full, weights)
    rows.append(("faithfulness", value, lo, hi, 1, len(circuit)))
    if draws:
        boot_circuit = (weights @ kept) / (weights @ full)
        counts = draw_counts(len(draws), n_boot, [seed, len(circuit)])
        random_mean, boot_random = draws_ratio_of_means(np.asarray(random), full, weights, counts)
        rows.append(("random circuits", random_mean, *_interval(boot_random), len(draws), len(circuit)))
        difference = _interval(boot_circuit - boot_random)
        rows.append(("circuit minus random", value - random_mean, *difference, len(draws), len(circuit)))
    table = pd.DataFrame(rows, columns=["what", "value", "lo", "hi", "n_draws", "size"]).assign(n_examples=engine.n)
    return table[["what", "value", "lo", "hi", "n_examples", "n_draws", "size"]]


def _incompleteness(engine: AblationEngine, circuit: list[Head], subsets, progress: bool = False) -> np.ndarray:
    r"""(subsets, pairs): per pair, the gap of C \ K minus that of M \ K for each K of ``subsets``: what removing K
    costs the circuit and not the model."""
    gaps = engine.gaps([[h for h in kept if h not in k] for k in subsets for kept in (circuit, engine.heads)], progress)
    return gaps[0::2] - gaps[1::2]


def greedy_subsets(engine: AblationEngine, circuit, max_greedy: int, progress: bool = False) -> list[list[Head]]:
    r"""IOI's greedy search for the subset K of the circuit that shows it most incomplete: K grows one head at a time,
    each step adding the head that most raises |F(C \ K) - F(M \ K)| on ``engine``'s pairs; one K per step."""
    circuit, found = _heads(circuit), []
    chosen: list[Head] = []
    for _ in range(min(max_greedy, len(circuit))):
        candidates = [h for h in circuit if h not in chosen]
        scores = np.abs(_incompleteness(engine, circuit, [{*chosen, v} for v in candidates], progress).mean(axis=1))
        chosen.append(candidates[int(np.argmax(scores))])
        found.append(list(chosen))
    return found


def completeness(
    engine: AblationEngine,
    circuit,
    n_random_subsets: int = 10,
    max_greedy: int = 3,
    seed: int = 0,
    n_boot: int = N_BOOT,
    chosen_on: AblationEngine | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    r"""IOI's incompleteness of the circuit: for subsets K of it, (F(C \ K) - F(M \ K)) / F(M) with a 95% paired
    bootstrap interval, and its absolute value. K: the greedy ones (:func:`greedy_subsets`, one per step up to
    ``max_greedy``) and ``n_random_subsets`` random ones (each head in with probability 1/2, never empty).

    The greedy K maximises the score on the pairs it is chosen on, so scored there it overstates the incompleteness:
    give ``chosen_on``, an engine on other pairs (the same model and means; e.g. one half, ``Encoded.subset``), to
    choose K there and score it on ``engine``'s pairs.

    Columns: subset, heads, value, lo, hi, incompleteness.
    """
    circuit = _heads(circuit)
    if not circuit:
        raise ValueError("an empty circuit has no subsets to remove")
    greedy = greedy_subsets(chosen_on or engine, circuit, max_greedy, progress)
    subsets = {f"greedy-{i + 1}": k for i, k in enumerate(greedy)}
    rng = np.random.default_rng([seed, len(circuit), n_random_subsets])
    for r in range(n_random_subsets):
        drawn: list[Head] = []
        while not drawn:
            drawn = [h for h in circuit if rng.random() < 0.5]
        subsets[f"random-{r}"] = drawn
    full = engine.gaps([engine.heads])[0]
    weights = bootstrap_weights(engine.n, n_boot, seed)
    rows = []
    for (name, removed), moved in zip(subsets.items(), _incompleteness(engine, circuit, subsets.values(), progress)):
        value, lo, hi = ratio_of_means(moved, full, weights)
        rows.append((name, _text(removed), value, lo, hi, abs(value)))
    return pd.DataFrame(rows, columns=["subset", "heads", "value", "lo", "hi", "incompleteness"])


def minimality(
    engine: AblationEngine, circuit, seed: int = 0, n_boot: int = N_BOOT, progress: bool = False
) -> pd.DataFrame:
    r"""Per head v of the circuit, what it adds inside it: (F(C) - F(C \ {v})) / F(M), with a 95% paired bootstrap
    interval; a head of a minimal circuit adds something.

    Columns: layer, head, value, lo, hi.
    """
    circuit = _heads(circuit)
    sets = [engine.heads, circuit, *([h for h in circuit if h != v] for v in circuit)]
    full, kept, *without = engine.gaps(sets, progress)
    weights = bootstrap_weights(engine.n, n_boot, seed)
    rows = [(layer, head, *ratio_of_means(kept - gap, full, weights)) for (layer, head), gap in zip(circuit, without)]
    return pd.DataFrame(rows, columns=["layer", "head", "value", "lo", "hi"])
