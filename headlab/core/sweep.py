"""Sweeps over head masks: plan them, run them resumably (and in shards), summarize them.

A sweep is a list of named masks. Each mask's per-example results are written to their own file the moment
they are done (write to a temporary name, then rename), so a killed sweep resumes where it stopped and
shards run in separate processes or machines fill the same folder. Masks that remove the same heads are
evaluated once. Every sweep contains the unmasked model (mask ``none``), and every effect is measured against
that row: the baseline goes through the same engine, batches and precision as the masked runs.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from headlab.core.cluster import cluster_results, connect
from headlab.core.engine import MaskEngine, first_masked_layer
from headlab.core.evaluate import Encoded
from headlab.core.grades import GradeScale
from headlab.core.masking import head_grid
from headlab.core.stats import N_BOOT, at_floor, kappa_lost, mcnemar, mean_interval, modal_share, relative_change
from headlab.core.worklog import note_work

BASELINE = "none"
PRECISION_TOLERANCE = 0.01  # largest share of unmasked grades that reduced precision may change before a sweep stops


class SweepError(RuntimeError):
    """A sweep folder that does not match the sweep asked for, or is incomplete."""


class PrecisionError(RuntimeError):
    """Reduced precision (bf16 autocast) changes more unmasked grades than :data:`PRECISION_TOLERANCE` allows."""


@dataclass(frozen=True)
class MaskSpec:
    """A named set of removed heads, with the parameters that produced it (kept in the tables)."""

    mask_id: str
    dropped: tuple[tuple[int, int], ...]
    kind: str
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def keep(self, layers: int, heads: int) -> torch.Tensor:
        """(layers, heads) mask: 0 for removed heads, 1 elsewhere."""
        mask = torch.ones(layers, heads)
        for layer, head in self.dropped:
            if not (0 <= layer < layers and 0 <= head < heads):
                raise ValueError(
                    f"mask {self.mask_id}: head ({layer}, {head}) does not exist in a {layers}x{heads} model"
                )
            mask[layer, head] = 0.0
        return mask


def baseline_spec() -> MaskSpec:
    """The unmasked model (mask ``none``), which every sweep contains and every effect is measured against."""
    return MaskSpec(BASELINE, (), "none")


def all_heads(layers: int, heads: int) -> list[tuple[int, int]]:
    """Every (layer, head) of a layers x heads model, layer by layer."""
    return [(l, h) for l in range(layers) for h in range(heads)]


def random_share_specs(
    layers: int, heads: int, shares, draws: int, seed: int, pool=None, kind: str = "random"
) -> list[MaskSpec]:
    """``draws`` random masks per share; a share counts heads of the *whole* model, drawn from ``pool``.

    Each (share, draw) has its own seeded generator, so a mask does not depend on which other shares or
    draws are in the sweep (resuming or sharding never changes a mask). A share that removes no head or the
    whole pool has only one possible mask, so it gets one draw.
    """
    pool = list(pool) if pool is not None else all_heads(layers, heads)
    if draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws}")
    specs = []
    for share in shares:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"shares must lie in [0, 1], got {share}")
        n_drop = int(round(share * layers * heads))
        if n_drop > len(pool):
            raise ValueError(f"share {share} means {n_drop} heads but the pool has only {len(pool)}")
        for draw in range(draws if 0 < n_drop < len(pool) else 1):
            rng = np.random.default_rng([seed, draw, int(round(share * 10_000))])
            picked = sorted(pool[i] for i in rng.choice(len(pool), size=n_drop, replace=False))
            specs.append(MaskSpec(f"{kind}-s{share:.3f}-d{draw}", tuple(picked), kind, {"share": share, "draw": draw}))
    return specs


def layer_specs(layers: int, heads: int) -> list[MaskSpec]:
    """One mask per layer, removing all of its heads."""
    return [MaskSpec(f"layer-{l}", tuple((l, h) for h in range(heads)), "layer", {"layer": l}) for l in range(layers)]


def single_head_specs(layers: int, heads: int) -> list[MaskSpec]:
    """One mask per head."""
    return [MaskSpec(f"head-{l}-{h}", ((l, h),), "head", {"layer": l, "head": h}) for l, h in all_heads(layers, heads)]


def heads_key(dropped) -> str:
    """The plan's ``dropped`` column for a set of heads: ``"layer.head;layer.head"``, in the order given."""
    return ";".join(f"{int(l)}.{int(h)}" for l, h in dropped)


def plan_table(specs: list[MaskSpec]) -> pd.DataFrame:
    """One row per mask of ``specs``, in order: the sweep's plan (its ``plan.csv``).

    Columns: mask_id, kind, n_dropped, dropped (:func:`heads_key`), then the masks' meta keys (e.g. layer, head,
    share, draw; empty for the masks without them).
    """
    rows = []
    for s in specs:
        rows.append(
            {
                "mask_id": s.mask_id,
                "kind": s.kind,
                "n_dropped": len(s.dropped),
                "dropped": heads_key(s.dropped),
                **s.meta,
            }
        )
    return pd.DataFrame(rows)


def _check_plan(out_dir: Path, plan: pd.DataFrame) -> None:
    path = out_dir / "plan.csv"
    if path.exists():
        old = pd.read_csv(path, dtype=str, keep_default_na=False)
        new = pd.read_csv(StringIO(plan.to_csv(index=False)), dtype=str, keep_default_na=False)
        if not old.equals(new):
            raise SweepError(f"{path} describes a different sweep; use another folder or delete it to start over")
    else:
        write_atomically(path, plan.to_csv(index=False))


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary name beside ``path``, then rename: a killed run never leaves half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _mask_file(out_dir: Path, mask_id: str) -> Path:
    return out_dir / "masks" / f"{mask_id}.csv"


def per_example_table(mask_id: str, probs: np.ndarray, grades: np.ndarray, scale: GradeScale) -> pd.DataFrame:
    """One mask's run, one row per example: what a sweep folder keeps in ``masks/<mask_id>.csv``.

    Columns: mask_id, example (position in the split), grade (the label), predicted (the most probable grade),
    correct (1 or 0), and per grade g of ``scale`` p<g> (its probability: p1 ... p5 on the study's scale).
    """
    predicted = scale.predicted(probs)
    frame = pd.DataFrame(
        {
            "mask_id": mask_id,
            "example": np.arange(len(grades)),
            "grade": grades,
            "predicted": predicted,
            "correct": (predicted == grades).astype(int),
        }
    )
    for i, g in enumerate(scale.grades):
        frame[f"p{g}"] = probs[:, i]
    return frame


def with_baseline(specs: list[MaskSpec]) -> list[MaskSpec]:
    """``specs`` with the unmasked model first, where it is not there already (every effect is measured against it)."""
    return specs if any(s.mask_id == BASELINE for s in specs) else [baseline_spec(), *specs]


def check_precision(out_dir: Path, engine: MaskEngine, tolerance: float = PRECISION_TOLERANCE) -> dict | None:
    """Compare the engine's reduced precision with fp32 once per model and split (kept beside the sweep folders as
    ``precision/<key>.csv``, :meth:`MaskEngine.precision_key`) and copy it into each sweep folder's ``precision.csv``;
    stop above ``tolerance``.

    Masked runs and their baseline share the engine's precision, so a precision flip is never counted as an
    effect; this check says how far that precision is from fp32 and refuses to go on when too many grades move.
    """
    if not engine.autocast:
        return None
    if (out_dir / "precision.csv").exists():
        return record_precision(out_dir, None, tolerance)
    shared = out_dir.parent / "precision" / f"{engine.precision_key()}.csv"
    if shared.exists():
        check = pd.read_csv(shared).to_dict("records")[0]
    else:
        check = engine.precision_check()
        shared.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(shared, pd.DataFrame([check]).to_csv(index=False))
    return record_precision(out_dir, check, tolerance)


def record_precision(out_dir: Path, check: dict | None, tolerance: float = PRECISION_TOLERANCE) -> dict:
    """Write ``check`` as the folder's ``precision.csv`` unless one is there; raise :class:`PrecisionError` when
    the recorded check moves more than ``tolerance`` of the unmasked grades."""
    path = out_dir / "precision.csv"
    if not path.exists():
        write_atomically(path, pd.DataFrame([check]).to_csv(index=False))
    check = pd.read_csv(path).iloc[0].to_dict()
    changed = 1.0 - check["grade_agreement"]
    if changed > tolerance:
        raise PrecisionError(
            f"{path}: bf16 autocast changes {changed:.2%} of the {int(check['n_examples'])} unmasked "
            f"grades against fp32 (tolerance {tolerance:.2%}); run the sweep with autocast=False"
        )
    return check


ENGINE_KEY = "engine.txt"  # in a sweep folder: the results key of the engine that evaluated its masks
MIXED = "mixed"  # the key of a folder whose masks two engines evaluated (a resume on another): no engine's key


def reuse_evaluated(out_dir: Path, key: str, groups: list) -> list:
    """Copy into ``out_dir`` every mask of ``groups`` (lists of specs removing the same heads, with their keep mask)
    that a sweep folder beside it already evaluated with an engine of the same results key
    (:meth:`headlab.core.engine.MaskEngine.results_key`: same weights, inputs, precision and ablation), so no mask
    is evaluated twice across a model's sweeps; return the groups left to evaluate. The folder records its key; one
    resumed on an engine of another key (another product library, say) records :data:`MIXED`, so no sweep copies
    masks from it as if one engine had evaluated them all."""
    marker = out_dir / ENGINE_KEY
    if not marker.exists():
        write_atomically(marker, key)
    elif marker.read_text() != key:
        write_atomically(marker, MIXED)
    done: dict[tuple, Path] = {}
    for folder in sorted(p for p in out_dir.parent.iterdir() if p != out_dir and (p / ENGINE_KEY).is_file()):
        if (folder / ENGINE_KEY).read_text() != key or not (folder / "plan.csv").is_file():
            continue
        plan = pd.read_csv(folder / "plan.csv", keep_default_na=False, dtype=str)
        for mask_id, dropped in zip(plan["mask_id"], plan["dropped"]):
            heads = tuple(sorted(tuple(int(x) for x in h.split(".")) for h in dropped.split(";") if h))
            if heads not in done and _mask_file(folder, mask_id).is_file():
                done[heads] = _mask_file(folder, mask_id)
    left = []
    for group, keep in groups:
        source = done.get(tuple(sorted(group[0].dropped)))
        if source is None:
            left.append((group, keep))
            continue
        table = pd.read_csv(source)
        for spec in group:
            write_atomically(
                _mask_file(out_dir, spec.mask_id),
                table.assign(mask_id=spec.mask_id).to_csv(index=False, float_format="%.6f"),
            )
    return left


def run_sweep(
    model,
    encoded: Encoded,
    specs: list[MaskSpec],
    out_dir,
    batch_size: int = 64,
    device="cpu",
    shard: int = 0,
    n_shards: int = 1,
    pad_id: int = 0,
    progress: bool = True,
    masks_per_pass: int = 1,
    autocast: bool | None = None,
    cluster=None,
    chunk_size: int = 8,
    means: torch.Tensor | None = None,
    engine: MaskEngine | None = None,
) -> pd.DataFrame | None:
    """Evaluate every mask of ``specs`` (this shard's share of them), saving each as soon as it is done.

    Masks run through :class:`headlab.core.engine.MaskEngine` (layer reuse, several masks per pass, bf16 autocast
    where :func:`headlab.core.device.precision` chooses it unless ``autocast`` says otherwise, checked by
    :func:`check_precision`). The unmasked model is
    added to the sweep where ``specs`` lacks it, and masks removing the same heads are evaluated once. With a
    ``cluster`` (``"local:N"``, a Dask scheduler address or client: :func:`headlab.core.cluster.connect`), Dask
    workers evaluate chunks of ``chunk_size`` masks and this process saves their results as they arrive.
    Returns the per-example table of the whole sweep once every shard has finished, else None. With ``means``
    (:func:`headlab.core.masking.head_means`) removed heads are mean-ablated instead of zeroed, in this process.
    ``engine``, one already built on ``model`` and ``encoded`` (e.g. a :class:`headlab.lab.Lab`'s), is used in this
    process instead of a new one, so its recorded unmasked layers serve every sweep of the split.

    Columns: those of :func:`per_example_table` (mask_id, example, grade, predicted, correct, p<g> per grade), one row
    per mask and example, the masks in plan order (:func:`load_sweep`).
    """
    if means is not None and cluster is not None:
        raise ValueError("a mean-ablation sweep runs in this process: leave cluster=None")
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in [0, n_shards), got shard={shard}, n_shards={n_shards}")
    specs = with_baseline(specs)
    out_dir = Path(out_dir)
    (out_dir / "masks").mkdir(parents=True, exist_ok=True)
    _check_plan(out_dir, plan_table(specs))
    layers, heads = head_grid(model)
    todo = [s for i, s in enumerate(specs) if i % n_shards == shard and not _mask_file(out_dir, s.mask_id).exists()]
    if todo:
        same_heads: dict[tuple, list[MaskSpec]] = {}
        for spec in todo:
            same_heads.setdefault(tuple(sorted(spec.dropped)), []).append(spec)
        groups = [(group, group[0].keep(layers, heads)) for group in same_heads.values()]
        groups.sort(key=lambda g: first_masked_layer(g[1]))  # so a chunk shares its reusable layers
        if cluster is None:
            engine = engine or MaskEngine(
                model,
                encoded,
                batch_size,
                device,
                pad_id,
                masks_per_pass=masks_per_pass,
                autocast=autocast,
                means=means,
            )
            check_precision(out_dir, engine)
            groups = reuse_evaluated(out_dir, engine.results_key(), groups)
        if groups:
            note_work(f"sweep {out_dir.name}: {len(groups)} masks")
        if cluster is None:
            assert engine is not None  # made above, on this process
            chunks = [groups[i : i + engine.masks_per_pass] for i in range(0, len(groups), engine.masks_per_pass)]
            results = ((i, engine.probabilities([keep for _, keep in chunk]), None) for i, chunk in enumerate(chunks))
        else:
            chunks = [groups[i : i + chunk_size] for i in range(0, len(groups), chunk_size)]
            results = cluster_results(
                connect(cluster),
                model,
                encoded,
                [[keep for _, keep in c] for c in chunks],
                batch_size,
                pad_id,
                masks_per_pass,
                autocast,
            )
        with tqdm(total=len(groups), desc=f"masks ({out_dir.name})", disable=not progress) as bar:
            for i, probabilities, check in results:
                if check is not None:
                    record_precision(out_dir, check)
                for (group, _), probs in zip(chunks[i], probabilities):
                    for spec in group:
                        table = per_example_table(spec.mask_id, probs, encoded.grades, encoded.scale)
                        write_atomically(
                            _mask_file(out_dir, spec.mask_id), table.to_csv(index=False, float_format="%.6f")
                        )
                bar.update(len(chunks[i]))
    elif cluster is None and not (out_dir / ENGINE_KEY).exists():  # a folder finished before folders kept their key
        engine = engine or MaskEngine(
            model, encoded, batch_size, device, pad_id, masks_per_pass=masks_per_pass, autocast=autocast, means=means
        )
        write_atomically(out_dir / ENGINE_KEY, engine.results_key())
    return load_sweep(out_dir) if all(_mask_file(out_dir, s.mask_id).exists() for s in specs) else None


def load_sweep(out_dir) -> pd.DataFrame:
    """Merge the per-mask files of a finished sweep, in plan order (identical however it was sharded).

    Columns: those of :func:`per_example_table` (mask_id, example, grade, predicted, correct, p<g> per grade).
    """
    out_dir = Path(out_dir)
    plan = pd.read_csv(out_dir / "plan.csv", keep_default_na=False)
    missing = [m for m in plan["mask_id"] if not _mask_file(out_dir, m).exists()]
    if missing:
        raise SweepError(
            f"sweep {out_dir} is incomplete: {len(missing)} of {len(plan)} masks missing (e.g. {missing[0]})"
        )
    return pd.concat([pd.read_csv(_mask_file(out_dir, m)) for m in plan["mask_id"]], ignore_index=True)


def correct_matrix(per_example: pd.DataFrame) -> pd.DataFrame:
    """Right (1) or wrong (0) per mask (rows) and example (columns, in order).

    Columns: the examples (0 ... n-1); index: mask_id.
    """
    return per_example.pivot(index="mask_id", columns="example", values="correct").sort_index(axis=1)


def predicted_matrix(per_example: pd.DataFrame) -> pd.DataFrame:
    """Predicted grade per mask (rows) and example (columns, in order), for the kappa scale.

    Columns: the examples (0 ... n-1); index: mask_id.
    """
    return per_example.pivot(index="mask_id", columns="example", values="predicted").sort_index(axis=1)


def baseline_correct(per_example: pd.DataFrame) -> np.ndarray:
    """The sweep's own unmasked row: the baseline every effect of the sweep is measured against."""
    return _baseline(per_example, "correct")


def baseline_grades(per_example: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The sweep's unmasked predicted grades and the gold grades, example by example: the kappa scale's two ends."""
    return _baseline(per_example, "predicted"), _baseline(per_example, "grade")


def _baseline(per_example: pd.DataFrame, column: str) -> np.ndarray:
    rows = per_example[per_example["mask_id"] == BASELINE]
    if rows.empty:
        raise SweepError(f"the sweep has no unmasked row (mask {BASELINE!r}) to measure effects against")
    return rows.sort_values("example")[column].to_numpy()


KAPPA_SHOWN = ["kappa_lost", "kappa_lost_lo", "kappa_lost_hi", "at_floor", "floor_reason"]  # beside an accuracy


def kappa_columns(
    predicted: np.ndarray, base: np.ndarray, gold: np.ndarray, n_boot: int, seed: int, draws=None
) -> dict:
    """kappa_* (:func:`headlab.core.stats.kappa_lost`, resampling the pairs and draws of the accuracy interval),
    modal_share, at_floor and floor_reason (:func:`headlab.core.stats.at_floor`) of one condition's predictions."""
    kappa = kappa_lost(predicted, base, gold, n_boot=n_boot, seed=seed, draw_seed=draws)
    floor, reason = at_floor(predicted, kappa["kappa_masked_lo"])
    return {**kappa, "modal_share": modal_share(predicted), "at_floor": floor, "floor_reason": reason}


def summarize(per_example: pd.DataFrame, plan: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """One row per mask: accuracy, relative change vs the sweep's unmasked row with its paired bootstrap interval,
    McNemar p, and the chance-corrected scale (quadratic kappa against the gold grades), resampling the same pairs.

    Columns: the plan's (mask_id, kind, n_dropped, dropped, meta), accuracy, rel_change, lo, hi (the 95% interval),
    lo90, hi90, n_examples, n_draws, n_boot, df, interval (:func:`headlab.core.stats.relative_change`), p_mcnemar
    (exact McNemar test against the unmasked row), kappa_base, kappa_base_lo, kappa_base_hi, kappa_masked,
    kappa_masked_lo, kappa_masked_hi, kappa_lost, kappa_lost_lo, kappa_lost_hi, kappa_lost_se, kappa_df, kappa_reason
    (:func:`headlab.core.stats.kappa_lost`), modal_share, at_floor, floor_reason (:func:`headlab.core.stats.at_floor`).
    """
    base = baseline_correct(per_example)
    base_predicted, gold = baseline_grades(per_example)
    rows = []
    for mask_id, group in per_example.groupby("mask_id", sort=False):
        group = group.sort_values("example")
        correct = group["correct"].to_numpy()
        effect = relative_change(correct, base, n_boot=n_boot, seed=seed)
        kappa = kappa_columns(group["predicted"].to_numpy(), base_predicted, gold, n_boot, seed)
        rows.append(
            {
                "mask_id": mask_id,
                "accuracy": correct.mean(),
                **effect.columns(),
                "p_mcnemar": mcnemar(correct, base),
                **kappa,
            }
        )
    return plan.merge(pd.DataFrame(rows), on="mask_id", how="right")


def masks_of_kind(table: pd.DataFrame, kind: str, int_columns: list[str]) -> pd.DataFrame:
    """Rows of one mask kind, with their meta columns as numbers.

    A plan read back from ``plan.csv`` holds several kinds, so a meta column such as ``layer`` is empty for
    the other kinds and comes back as strings; within one kind it is always filled.

    Columns: those of ``table``, the ``int_columns`` as integers.
    """
    rows = table[table["kind"] == kind].copy()
    if rows.empty:
        raise ValueError(f"no masks of kind {kind!r} in the table (kinds: {sorted(table['kind'].unique())})")
    for column in int_columns:
        rows[column] = pd.to_numeric(rows[column]).astype(int)
    return rows


def draw_seed(seed: int, kind: str, share: float) -> list[int]:
    """The seed that resamples one share's random draws in the two-stage bootstrap: its own per kind and share."""
    return [seed, zlib.crc32(kind.encode()), round(share * 10_000)]


def share_masks(
    per_example: pd.DataFrame, plan: pd.DataFrame, kind: str, meta: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The masks of ``kind`` that remove a share of the heads, and the sweep's right/wrong matrix: ``(specs,
    correct)``, specs with ``mask_id``, a float ``share`` and the ``meta`` columns, correct indexed by ``mask_id``
    (masks, examples). A mask of the plan with no result in the sweep is an error naming it.

    Columns of specs: the plan's (mask_id, kind, n_dropped, dropped, meta), share as a float.
    Columns of correct: the examples (0 ... n-1), 1 right and 0 wrong; index: mask_id.
    """
    specs = masks_of_kind(plan, kind, meta)
    specs["share"] = pd.to_numeric(specs["share"]).astype(float)
    correct = correct_matrix(per_example)
    missing = sorted(set(specs["mask_id"]) - set(correct.index))
    if missing:
        raise ValueError(f"{len(missing)} masks of kind {kind!r} have no results (e.g. {missing[0]})")
    return specs, correct


def share_curve(
    per_example: pd.DataFrame, plan: pd.DataFrame, kind: str, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Random masks of one ``kind`` (meta: share, draw) summarized per share: ``(curve, draws)``.

    curve: ``rel_change`` is that of the accuracy averaged over draws, with ``lo``/``hi`` its two-stage
    bootstrap interval (draws, then test pairs: :func:`headlab.core.stats.relative_change`), ``lo90``/``hi90``
    the 90% one for equivalence checks; ``draw_lo``/``draw_hi`` (t-interval of the draws' mean) and
    ``draw_min``/``draw_max`` show how much the choice of heads alone matters; the kappa columns put the same
    draws on the chance-corrected scale, resampling the same draws and pairs. draws: one row per mask with its own
    relative change, so every draw can be shown.

    Columns of curve: kind, share, n_heads, rel_change, lo, hi, lo90, hi90, n_examples, n_draws, n_boot, df, interval,
    kappa_base, kappa_base_lo, kappa_base_hi, kappa_masked, kappa_masked_lo, kappa_masked_hi, kappa_lost,
    kappa_lost_lo, kappa_lost_hi, kappa_lost_se, kappa_df, kappa_reason (:func:`headlab.core.stats.kappa_lost`),
    modal_share, at_floor, floor_reason (:func:`headlab.core.stats.at_floor`), draw_lo, draw_hi, draw_min, draw_max.
    Columns of draws: mask_id, kind, share, draw, n_dropped, accuracy, rel_change.
    """
    specs, correct = share_masks(per_example, plan, kind, ["draw", "n_dropped"])
    predicted = predicted_matrix(per_example)
    base = baseline_correct(per_example).astype(np.float64)
    base_predicted, gold = baseline_grades(per_example)
    specs = specs.sort_values(["share", "draw"])
    specs["accuracy"] = correct.loc[specs["mask_id"]].to_numpy(dtype=np.float64).mean(axis=1)
    specs["rel_change"] = specs["accuracy"] / base.mean() - 1.0
    rows = []
    for share, group in specs.groupby("share", sort=True):
        n_heads = group["n_dropped"].unique()
        if len(n_heads) != 1:
            raise ValueError(f"share {share} of kind {kind!r} masks different numbers of heads: {sorted(n_heads)}")
        seeds = draw_seed(seed, kind, share)
        effect = relative_change(
            correct.loc[group["mask_id"]].to_numpy(dtype=np.float64),
            base,
            n_boot=n_boot,
            seed=seed,
            draw_seed=seeds,
        )
        masked = predicted.loc[group["mask_id"]].to_numpy()
        kappa = kappa_columns(masked, base_predicted, gold, n_boot, seed, seeds)
        _, draw_lo, draw_hi = mean_interval(group["rel_change"])
        rows.append(
            {
                "kind": kind,
                "share": share,
                "n_heads": int(n_heads[0]),
                **effect.columns(),
                **kappa,
                "draw_lo": draw_lo,
                "draw_hi": draw_hi,
                "draw_min": float(group["rel_change"].min()),
                "draw_max": float(group["rel_change"].max()),
            }
        )
    draws = specs[["mask_id", "kind", "share", "draw", "n_dropped", "accuracy", "rel_change"]].reset_index(drop=True)
    return pd.DataFrame(rows), draws
