"""A fine-tuned model on an encoded split, and everything a page does with it: :class:`Lab`.

    lab = headlab.load(model="minilm", data="stsb-en", split="test")
    lab.evaluate(drop=[(3, 9), (4, 2)])       # accuracy, relative change [95% interval], McNemar p
    lab.ablate_each_head()                    # one row per head: the sweep engine, in memory
    maps = lab.cache_attention(range(100))    # one model pass; role scores etc. read it
    lab.importance(), lab.attention([0])      # gradient importance; attention maps, streamed

Every intervention undoes itself (hooks live inside a ``with``), and a lab's baseline runs through the same engine,
batches and precision as its masked runs, so an empty mask changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from headlab.core.ablation import DONORS, Donors, class_outputs
from headlab.core.attention import AttentionCache, attention_maps
from headlab.core.device import precision
from headlab.core.engine import MaskEngine
from headlab.core.evaluate import Encoded, encode, length_batches, metrics, model_inputs
from headlab.core.grades import GradeScale
from headlab.core.gradients import gradient_importance
from headlab.core.masking import Ablation, head_grid, head_means
from headlab.core.patching import run_patching, single_head_patches
from headlab.core.pruning import prune_heads
from headlab.core.stats import Floor, bootstrap_weights, kappa_lost, mcnemar, relative_change
from headlab.core.sweep import (
    MaskSpec,
    SweepError,
    load_sweep,
    per_example_table,
    plan_table,
    run_sweep,
    single_head_specs,
    summarize,
    with_baseline,
    write_atomically,
)
from headlab.core.worklog import note_work
from headlab.inputs.pair import pair_classes
from headlab.lab.pages import artifact
from headlab.lab.params import Params
from headlab.models.loading import load_classifier, load_encoder, load_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MEAN_PAIRS = 512  # training pairs a head's mean output is taken over (mean-ablation)


def load(
    model: str = "minilm",
    data: str = "stsb-en",
    split: str = "test",
    limit: int | None = None,
    seed: int = 0,
    device: str = "auto",
    batch_size: int = 64,
    **settings,
) -> Lab:
    """A :class:`Lab` on ``model`` fine-tuned on ``data`` (cached; trained on first use), evaluated on ``split``.

    ``settings`` are the other :class:`Params` fields (``epochs``, ``lr``, ``train_limit``, ``run_dir``).
    """
    return Lab.from_params(
        Params(
            model=model,
            data=data,
            eval_split=split,
            eval_limit=limit,
            seed=seed,
            device=device,
            batch_size=batch_size,
            **settings,
        )
    )


@dataclass
class Evaluation:
    """One mask's effect on the split, against the unmasked model run the same way (same engine and precision)."""

    dropped: tuple
    accuracy: float
    base_accuracy: float
    rel_change: float
    lo: float
    hi: float
    p_mcnemar: float
    correct: np.ndarray
    probs: np.ndarray

    def __repr__(self) -> str:
        return (
            f"Evaluation({len(self.dropped)} heads removed: accuracy {self.accuracy:.4f} vs {self.base_accuracy:.4f}, "
            f"{self.rel_change:+.2%} [{self.lo:+.2%}, {self.hi:+.2%}], McNemar p = {self.p_mcnemar:.3g}, "
            f"n = {len(self.correct)})"
        )


@dataclass
class Lab:
    """A fine-tuned model on an encoded split, with the batch size, device and pad id every run uses."""

    params: Params
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    frame: pd.DataFrame
    encoded: Encoded
    _base_probs: np.ndarray | None = field(default=None, repr=False)
    _engine: MaskEngine | None = field(default=None, init=False, repr=False)
    _mean_engine: MaskEngine | None = field(default=None, init=False, repr=False)
    _means: torch.Tensor | None = field(default=None, init=False, repr=False)
    _class_outputs: tuple[torch.Tensor, Donors] | None = field(default=None, init=False, repr=False)

    def __repr__(self) -> str:
        """One line a notebook can print (the dataclass default would print the whole model and every pair)."""
        layers, heads = self.shape
        baseline = (
            f"unmasked accuracy {float(self.base_correct.mean()):.1%}"
            if self._base_probs is not None
            else "baseline not computed yet"
        )
        return (
            f"Lab({self.params.model} on {self.params.data}, {self.params.eval_split}: {len(self.encoded)} pairs "
            f"on {self.scale}, "
            f"{layers} x {heads} heads, {self.device}; {baseline})"
        )

    @classmethod
    def from_params(cls, params: Params) -> Lab:
        """The fine-tuned model (trained on first use, then read from the cache), its tokenizer and the evaluation
        split; the unmasked baseline is predicted when first asked for (most pages measure against their sweep's own
        unmasked row instead)."""
        folder = params.fine_tune()
        tokenizer = load_tokenizer(str(folder))
        model = load_classifier(str(folder), params.scale).to(params.torch_device)
        frame = params.eval_frame()
        return cls(params, model, tokenizer, frame, encode(tokenizer, frame, params.scale))

    @classmethod
    def from_globals(cls, names: dict) -> Lab:
        """A notebook's lab: ``Lab.from_globals(globals())`` reads its parameters (:meth:`Params.from_globals`)."""
        return cls.from_params(Params.from_globals(names))

    @property
    def base_probs(self) -> np.ndarray:
        """The unmasked model's grade probabilities on the split, through the sweep engine: the same precision and
        products as every masked run, so a mask's effect is never a difference of precision."""
        if self._base_probs is None:
            self._base_probs = self.engine.probabilities([torch.ones(self.shape)])[0]
        return self._base_probs

    @property
    def base_correct(self) -> np.ndarray:
        """1 where the unmasked model grades a pair right, else 0 (per pair of the split)."""
        return (self.scale.predicted(self.base_probs) == self.encoded.grades).astype(int)

    @property
    def floor(self) -> Floor:
        """The unmasked accuracy and that of always answering the majority grade: the ends of the floor scale."""
        return Floor.of(self.base_correct, self.encoded.grades)

    @property
    def scale(self) -> GradeScale:
        """The data's grades: the model's classes, in order."""
        return self.encoded.scale

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id (0 when it has none): every batch of this lab is padded with it."""
        return self.tokenizer.pad_token_id or 0

    @property
    def device(self) -> torch.device:
        """The torch device every run of this lab uses (``DEVICE`` resolved: "auto" is the GPU when there is one)."""
        return self.params.torch_device

    @property
    def batch_size(self) -> int:
        """Pairs per batch in every pass of this lab (``BATCH_SIZE``)."""
        return self.params.batch_size

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads per layer)."""
        return head_grid(self.model)

    @property
    def pair_texts(self) -> list[str]:
        """Each evaluated pair's raw text, query then title, as a page prints it (a showcase pair is checked on it)."""
        return (self.frame["query"].astype(str) + " " + self.frame["title"].astype(str)).tolist()

    @property
    def engine(self) -> MaskEngine:
        """The sweep engine on this split (built once: its batches and recorded layer outputs are reused)."""
        if self._engine is None:
            self._engine = MaskEngine(self.model, self.encoded, self.batch_size, self.device, self.pad_id)
        return self._engine

    def on_split(self, split: str, limit: int | None = None) -> Lab:
        """This model on another split of the same data (e.g. the dev pairs a head order is chosen on, so that no
        test pair chooses the heads it then measures), sharing the model and tokenizer; its tables go to that split's
        own folder."""
        params = replace(self.params, eval_split=split, eval_limit=limit)
        frame = params.eval_frame()
        return Lab(params, self.model, self.tokenizer, frame, encode(self.tokenizer, frame, self.scale))

    def with_model(self, model: PreTrainedModel) -> Lab:
        """The same pairs graded by another model of this tokenizer (a student distilled from this one): its own
        baseline, this lab's parameters (so it stores no tables of its own)."""
        return Lab(self.params, model.to(self.device), self.tokenizer, self.frame, self.encoded)

    def means(self) -> torch.Tensor:
        """(layers, hidden): each head's mean output over the real tokens of MEAN_PAIRS training pairs (seeded),
        computed once per Lab: what mean-ablation puts in place of a removed head. Training pairs, so the test pairs
        never shape an ablation."""
        if self._means is None:
            self._means = head_means(
                self.model,
                (
                    model_inputs(self.model, batch, self.device)
                    for _, batch in length_batches(self._mean_pairs(), self.batch_size, self.pad_id)
                ),
            )
        return self._means

    def class_means(self) -> torch.Tensor:
        """(layers, token classes, hidden): each head's mean output per token class ([CLS], query, title, separator)
        over the same training pairs as :meth:`means`: what a circuit's mean-ablated heads output (IOI's ablation,
        :mod:`headlab.measures.faithfulness`), computed once per Lab, in the pass that keeps :meth:`class_donors`."""
        return self._class_reference()[0]

    def class_donors(self) -> Donors:
        """DONORS of the same training pairs (seeded), their head outputs kept: what a resample-ablated head outputs
        instead of its mean (:func:`headlab.core.ablation.resample_ablated`)."""
        return self._class_reference()[1]

    def _class_reference(self) -> tuple[torch.Tensor, Donors]:
        if self._class_outputs is None:
            pairs = self._mean_pairs()
            classes = pair_classes(self.tokenizer, pairs)
            self._class_outputs = class_outputs(
                self.model, pairs, classes, DONORS, self.params.seed, self.batch_size, self.device, self.pad_id
            )
        return self._class_outputs

    def _mean_pairs(self) -> Encoded:
        """MEAN_PAIRS training pairs (seeded), within the model's positions: the pairs every mean a head is ablated
        to is taken over."""
        train = self.params.train_frame()
        sample = train.sample(n=min(MEAN_PAIRS, len(train)), random_state=self.params.seed)
        return encode(self.tokenizer, sample, self.scale, min(128, self.model.config.max_position_embeddings))

    def ablation_engine(self, ablation: Ablation | str = Ablation.ZERO) -> MaskEngine:
        """The sweep engine that zeroes removed heads (``"zero"``, the study's HEAD-MASK) or puts each one's mean over
        training pairs in its place (``"mean"``); built once each."""
        if Ablation.of(ablation) is Ablation.ZERO:
            return self.engine
        if self._mean_engine is None:
            self._mean_engine = MaskEngine(
                self.model, self.encoded, self.batch_size, self.device, self.pad_id, means=self.means()
            )
        return self._mean_engine

    def evaluate(self, drop=(), n_boot: int | None = None, ablation: Ablation | str = Ablation.ZERO) -> Evaluation:
        """Remove the heads in ``drop`` ((layer, head) pairs) and compare with the unmasked model, pair by pair;
        ``ablation="mean"`` replaces each removed head's output by its mean over training pairs instead of zero."""
        spec = MaskSpec("evaluate", tuple(sorted((int(l), int(h)) for l, h in drop)), "evaluate")
        engine = self.ablation_engine(ablation)
        base, probs = engine.probabilities([torch.ones(self.shape), spec.keep(*self.shape)])
        correct = (self.scale.predicted(probs) == self.encoded.grades).astype(int)
        base_correct = (self.scale.predicted(base) == self.encoded.grades).astype(int)
        effect = relative_change(
            correct, base_correct, n_boot=self.params.n_boot if n_boot is None else n_boot, seed=self.params.seed
        )
        return Evaluation(
            spec.dropped,
            float(correct.mean()),
            float(base_correct.mean()),
            effect.rel_change,
            effect.lo,
            effect.hi,
            mcnemar(correct, base_correct),
            correct,
            probs,
        )

    def ablate(
        self,
        specs: list[MaskSpec],
        name: str | None = None,
        n_boot: int | None = None,
        progress: bool = True,
        ablation: Ablation | str = Ablation.ZERO,
    ) -> pd.DataFrame:
        """One row per mask (:func:`headlab.core.sweep.summarize`), the unmasked model included.

        In memory by default; with a ``name`` the sweep is saved mask by mask under the lab's sweep folder
        and resumes there (:meth:`sweep`). ``ablation="mean"`` puts each removed head's mean output over training
        pairs in its place instead of zero (:meth:`ablation_engine`).
        """
        specs = with_baseline(list(specs))
        if name is not None:
            per_example = self.sweep(specs, name, progress=progress, ablation=ablation)
        else:
            probs = self.ablation_engine(ablation).probabilities([s.keep(*self.shape) for s in specs])
            per_example = pd.concat(
                [per_example_table(s.mask_id, p, self.encoded.grades, self.scale) for s, p in zip(specs, probs)],
                ignore_index=True,
            )
        return summarize(
            per_example,
            plan_table(specs),
            n_boot=self.params.n_boot if n_boot is None else n_boot,
            seed=self.params.seed,
        )

    def sweep(
        self,
        specs: list[MaskSpec],
        name: str,
        encoded: Encoded | None = None,
        progress: bool = True,
        ablation: Ablation | str = Ablation.ZERO,
    ) -> pd.DataFrame:
        """Per-example results of every mask (and the unmasked model) on this split, or on ``encoded``: saved mask by
        mask in the lab's results folder for ``name`` and resumed there, on the parameters' Dask cluster if they name
        one.

        ``ablation="mean"`` puts each removed head's mean output over training pairs (:meth:`head_means`) in its place
        instead of zero, in this process, saved apart (``<name>-mean``)."""
        mean = Ablation.of(ablation) is Ablation.MEAN
        return run_sweep(
            self.model,
            self.encoded if encoded is None else encoded,
            specs,
            self.params.sweep_dir(f"{name}-mean" if mean else name, specs),
            batch_size=self.batch_size,
            device=self.device,
            pad_id=self.pad_id,
            progress=progress,
            cluster=None if mean else self.params.cluster,
            means=self.means() if mean else None,
            engine=self.ablation_engine(ablation) if encoded is None else None,
        )

    def ablate_each_head(self, name: str | None = None, n_boot: int | None = None) -> pd.DataFrame:
        """Every head removed alone: one row per head (``layer``, ``head``), and the unmasked row."""
        return self.ablate(single_head_specs(*self.shape), name, n_boot)

    def patch(
        self,
        source: Encoded,
        target: Encoded,
        patches: dict | None = None,
        name: str = "patching",
        progress: bool = True,
    ) -> pd.DataFrame:
        """Activation patching: the ``target`` pairs' expected grades with each patch's heads (name -> ``(layer, head)``
        list; default every head alone) taken from the run of the ``source`` pairs, which have the same lengths
        (:func:`headlab.core.patching.run_patching`; the hooks undo themselves). Saved patch by patch under the
        lab's results folder (``patches/<name>-<key of the pairs, patches and precision>``) and resumed there."""
        patches = single_head_patches(*self.shape) if patches is None else patches
        key = json.dumps(
            [
                source.input_ids,
                target.input_ids,
                {k: sorted(map(list, v)) for k, v in patches.items()},
                precision(self.device),
            ]
        )
        folder = self.params.table_dir / "patches" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
        return run_patching(
            self.model, source, target, patches, folder, self.batch_size, self.device, self.pad_id, progress
        )

    def prune(self, drop, folder=None):
        """This model without the heads in ``drop`` ((layer, head) pairs), rebuilt with smaller layers
        (:func:`headlab.core.pruning.prune_heads`: no masks, the grades of masking them); with a ``folder``, saved
        there as safetensors with its tokenizer and the kept heads in its config, which ``headlab.load(model=folder)``
        loads back (already fine-tuned: nothing is trained)."""
        pruned = prune_heads(self.model, drop)
        if folder is not None:
            folder = Path(folder)
            pruned.save_pretrained(folder, safe_serialization=True)
            self.tokenizer.save_pretrained(folder)
        return pruned

    def importance(self, normalize: bool = True) -> pd.DataFrame:
        """Gradient head importance on this split (:func:`headlab.core.gradients.gradient_importance`), computed once
        and kept (:meth:`stored`)."""
        return self.stored(
            "head_importance",
            {"normalize": normalize},
            lambda: gradient_importance(self.model, self.encoded, self.batch_size, self.device, self.pad_id, normalize),
        )

    def stored(self, name: str, key, compute) -> pd.DataFrame:
        """The table ``compute()`` returns, computed once per ``key`` (what it depends on beyond this model and split,
        in JSON) and the precision, kept as ``stored/<name>-<hash>.csv`` in the lab's results folder: a rebuild reads it
        instead of recomputing. The table is always the one read back, so a first run and a rebuild show the same."""
        text = json.dumps({"key": key, "precision": precision(self.device)}, sort_keys=True)
        path = self.params.table_dir / "stored" / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}.csv"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            note_work(f"table {path.stem}")  # the build's records: this step computed something
            write_atomically(path, compute().to_csv(index=False, na_rep="NaN"))
        return pd.read_csv(path, keep_default_na=False, na_values=["NaN"])  # an empty string stays one

    def attention(self, examples=None, drop=(), model=None, encoded: Encoded | None = None):
        """Yield ``(example, maps)`` for the examples (all by default), heads in ``drop`` removed: one pass, streamed.

        ``model`` takes the maps of another model on the same split (e.g. the pretrained encoder, before fine-tuning,
        :meth:`pretrained_encoder`); ``encoded`` another encoding of it (e.g. shuffled titles, or a corpus's).
        """
        model = self.model if model is None else model
        encoded = self.encoded if encoded is None else encoded
        mask = MaskSpec("attention", tuple(drop), "attention").keep(*head_grid(model)) if drop else None
        return attention_maps(model, encoded, examples, mask, self.batch_size, self.device, self.pad_id)

    def pretrained_encoder(self):
        """The bare pretrained encoder this lab's model was fine-tuned from (no classifier), on the lab's device: the
        'before fine-tuning' model of the delta study (:func:`headlab.models.loading.load_encoder`)."""
        return load_encoder(self.params.model).to(self.device)

    def cache_attention(self, examples=None, drop=(), path=None) -> AttentionCache:
        """:meth:`attention` kept in memory (float16) for several scores; read from / saved to ``path`` if given."""
        if path is not None and Path(path).exists():
            cache = AttentionCache.load(path)
            wanted = np.arange(len(self.encoded)) if examples is None else np.unique(list(examples))
            if not np.array_equal(cache.examples, wanted) or cache.dropped != tuple(sorted(tuple(h) for h in drop)):
                raise ValueError(
                    f"{path} holds the attention of other examples or another mask; delete it or use another path"
                )
            return cache
        cache = AttentionCache.from_pass(self.attention(examples, drop), dropped=sorted(tuple(h) for h in drop))
        if path is not None:
            cache.save(path)
        return cache

    def baseline_metrics(self, n_boot: int | None = None) -> pd.DataFrame:
        """Accuracy and macro-F1 of the unmasked model with 95% bootstrap intervals, the majority-class rate, and its
        quadratic κ with its interval (the same resamples as the κ scale every claim is judged on)."""
        grades, predicted = self.encoded.grades, self.scale.predicted(self.base_probs)
        n_boot = self.params.n_boot if n_boot is None else n_boot
        w = bootstrap_weights(len(grades), n_boot, self.params.seed)
        correct = (grades == predicted).astype(float)
        boot_acc = w @ correct / len(grades)
        majority = np.bincount(grades).argmax()
        rows = [
            {
                "metric": "accuracy",
                "value": correct.mean(),
                "lo": np.quantile(boot_acc, 0.025),
                "hi": np.quantile(boot_acc, 0.975),
            },
            {"metric": "macro_f1", **_f1_interval(grades, predicted, w, self.scale)},
            {
                "metric": f"majority class (grade {majority}) accuracy",
                "value": float(np.mean(grades == majority)),
                "lo": np.nan,
                "hi": np.nan,
            },
        ]
        kappa = kappa_lost(predicted, predicted, grades, n_boot, self.params.seed)  # its kappa_base: page 08's too
        rows.append(
            {
                "metric": "quadratic_kappa",
                "value": kappa["kappa_base"],
                "lo": kappa["kappa_base_lo"],
                "hi": kappa["kappa_base_hi"],
            }
        )
        table = pd.DataFrame(rows)
        table["n_examples"] = len(grades)
        table["n_boot"] = n_boot
        return table

    def shared_path(self, name: str, key: str | None = None) -> Path:
        """Where the shared table ``name`` (:data:`headlab.lab.pages.artifacts`) lies in this lab's results."""
        return artifact(name).path(self.params.table_dir, key)

    def shared_table(self, name: str, compute, key: str | None = None) -> pd.DataFrame:
        """The shared table ``name``: read where the page that produces it saved it, else ``compute()``d and saved
        there (a page run alone), so every reader sees the same rows."""
        path = self.shared_path(name, key)
        if path.exists():
            return pd.read_csv(path)
        table = compute()
        self.save_table(table, path.stem)
        return table

    def finished_sweeps(self, name: str, wanted) -> Iterator[tuple[Path, pd.DataFrame]]:
        """``(folder, per-example table)`` of each finished folder of the shared sweep ``name`` in this lab's results
        whose plan holds every mask id in ``wanted`` (a sweep still running is skipped), loaded one at a time as the
        caller asks: a reader that needs one loads one."""
        for folder in artifact(name).folders(self.params.table_dir):
            plan = folder / "plan.csv"
            if plan.exists() and set(wanted) <= set(pd.read_csv(plan, keep_default_na=False)["mask_id"]):
                try:
                    per_example = load_sweep(folder)
                except SweepError:
                    continue
                yield folder, per_example

    def save_table(self, frame: pd.DataFrame, name: str) -> Path:
        """Write a tidy result table where the book and later notebooks read it."""
        path = self.params.table_dir / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        return path


def _f1_interval(grades, predicted, weights, scale: GradeScale) -> dict:
    """Macro-F1 and its bootstrap interval (resampling examples with the given multinomial weights)."""
    stats = []
    for w in weights:
        rows = np.repeat(np.arange(len(grades)), w.astype(int))
        stats.append(metrics(grades[rows], predicted[rows], scale)["macro_f1"])
    return {
        "value": metrics(grades, predicted, scale)["macro_f1"],
        "lo": float(np.quantile(stats, 0.025)),
        "hi": float(np.quantile(stats, 0.975)),
    }
