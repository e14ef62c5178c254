"""Choose a preset's fine-tuning learning rate and number of epochs on the dev split, never on the test split.

Every (lr, epochs) of the grid is a fine-tune of its own, cached like any other, so the chosen one is the very
checkpoint the book then loads. Epoch k of a longer run is not a candidate: the learning rate decays linearly
to zero at a run's last epoch, so the weights after epoch 2 of a 4-epoch run are not those of a 2-epoch run.
A run's score is its dev accuracy after its last epoch (fine-tuning records it); ties go to fewer epochs, then
to the smaller learning rate. Nothing here loads the test split.

    python -m headlab.book.tuning zh-char                             # the preset's grid (GRIDS)
    python -m headlab.book.tuning zh-char --lrs 1e-4 2e-4 --epochs 3 4
    python -m headlab.book.tuning e5-zh-char                          # the grid for each model it names, too

A grid may name several models (``models``: e5-small-char with and without a continued masked-LM pass); each runs
the whole grid, and the choice is made over all their runs, ties going to the model listed first.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from headlab.book.presets import PRESETS
from headlab.core.device import resolve_device
from headlab.lab.params import Params, results_root
from headlab.models.finetune import FinetuneConfig, finetune, training_history
from headlab.models.names import is_pretrained_name
from headlab.models.pretrain import ensure_named

# The grid searched for a preset, fixed before looking at any result. zh-char: learning rates from 1e-4 to 4e-4
# (a small model pretrained briefly from scratch may want more than the 5e-5 of published BERTs) and 2 or 4
# epochs: 6 runs, 18 epochs in all (about an hour on 2 cores); a grid of 4 x 3 would take 48 epochs.
# e5-zh, e5-en: e5-small is a fully pretrained model, so the rates published BERTs fine-tune with (2e-5 to 1e-4)
# and 2 or 3 epochs, its word embeddings frozen as in the presets: 6 runs, 15 epochs in all.
# e5-zh-char: e5-zh's grid, once on e5-small reading characters as it is and once after a short masked-LM pass over
# People's Daily's characters (headlab.models.names.MODELS["e5-small-char-mlm"]): 12 runs, 30 epochs in all.
E5_GRID = {"lrs": (2e-5, 5e-5, 1e-4), "epochs": (2, 3)}
GRIDS = {
    "zh-char": {"lrs": (1e-4, 2e-4, 4e-4), "epochs": (2, 4)},
    "e5-zh": E5_GRID,
    "e5-en": E5_GRID,
    "e5-zh-char": {**E5_GRID, "models": ("e5-small-char", "e5-small-char-mlm")},
}


def pick(table: pd.DataFrame):
    """Index of the run with the best dev accuracy; ties go to fewer epochs, then to the smaller learning rate (then,
    with a ``model`` column, to the model of the earlier rows)."""
    return table.sort_values(["dev_accuracy", "epochs", "lr"], ascending=[False, True, True], kind="stable").index[0]


def choose_over_models(models, out=None, **grid) -> pd.DataFrame:
    """:func:`choose_settings` for each of ``models`` (``grid``: its other arguments), one table with a ``model``
    column and one run ``chosen`` over all of them; written as CSV to ``out`` when given."""
    if not models:
        raise ValueError("choose_over_models needs at least one model")
    tables = [choose_settings(model, **grid).assign(model=model) for model in models]
    table = pd.concat(tables, ignore_index=True)
    table = table[["model", *[c for c in table.columns if c != "model"]]]
    table["chosen"] = table.index == pick(table)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, index=False, float_format="%.6g")
    return table


def choose_settings(
    model: str,
    data: str,
    lrs,
    epochs,
    seed: int = 0,
    device="cpu",
    train_limit: int | None = None,
    out=None,
    progress: bool = True,
    freeze_word_embeddings: bool = False,
) -> pd.DataFrame:
    """Fine-tune every (lr, epochs) of the grid and mark the one :func:`pick` chooses by dev accuracy.

    One row per run: ``lr, epochs, dev_accuracy, dev_macro_f1`` (after its last epoch), ``chosen`` and the
    cached ``checkpoint`` it names; written as CSV to ``out`` when given.
    """
    lrs, epochs = sorted(set(lrs)), sorted(set(epochs))
    if not lrs or not epochs:
        raise ValueError("the grid needs at least one learning rate and one number of epochs")
    rows = []
    for lr, n in tqdm(list(itertools.product(lrs, epochs)), desc="fine-tuning settings", disable=not progress):
        config = FinetuneConfig(
            model=model,
            data=data,
            epochs=n,
            lr=lr,
            train_limit=train_limit,
            seed=seed,
            freeze_word_embeddings=freeze_word_embeddings,
        )
        folder = finetune(config, device=device, progress=progress)
        last = training_history(folder).iloc[-1]
        rows.append(
            {
                "lr": lr,
                "epochs": n,
                "dev_accuracy": last["dev_accuracy"],
                "dev_macro_f1": last["dev_macro_f1"],
                "checkpoint": folder.name,
            }
        )
    table = pd.DataFrame(rows)
    table.insert(4, "chosen", table.index == pick(table))
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, index=False, float_format="%.6g")
    return table


def _edges(value, grid) -> str:
    """A warning when the choice sits at an end of a grid that could be widened."""
    grid = sorted(grid)
    if len(grid) > 1 and value in (grid[0], grid[-1]):
        return f" (at the {'low' if value == grid[0] else 'high'} end of the grid: a wider grid may choose otherwise)"
    return ""


def main(argv=None) -> int:
    """``python -m headlab.book.tuning PRESET``: fine-tune the grid, print and write the choice; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("--lrs", type=float, nargs="+", help="learning rates (default: the preset's grid)")
    parser.add_argument("--epochs", type=int, nargs="+", help="numbers of epochs (default: the preset's grid)")
    parser.add_argument("--device", help="cpu, cuda, cuda:N or auto (default: the preset's DEVICE, else auto)")
    parser.add_argument("--out", type=Path, help="where the table goes (default: runs/tuning-PRESET.csv)")
    args = parser.parse_args(argv)

    settings = PRESETS[args.preset]
    grid = GRIDS.get(args.preset, {})
    lrs, epochs = args.lrs or grid.get("lrs"), args.epochs or grid.get("epochs")
    if not lrs or not epochs:
        parser.error(f"preset {args.preset} has no grid in headlab.book.tuning.GRIDS: give --lrs and --epochs")
    # the same fine-tuning settings as the book's Params, but for the learning rate and the epochs
    base = {
        name: settings.get(name.upper(), getattr(Params, name))
        for name in ("model", "data", "seed", "train_limit", "freeze_word_embeddings")
    }
    device = resolve_device(args.device or str(settings.get("DEVICE", "auto")))
    out = args.out or results_root(Params.run_dir) / f"tuning-{args.preset}.csv"
    print(
        f"[tuning] {args.preset}: {base}; learning rates {list(lrs)} x epochs {list(epochs)}"
        f"{' x models ' + str(list(grid['models'])) if 'models' in grid else ''}, scored on the dev split",
        flush=True,
    )
    models = list(grid.get("models", [base["model"]]))
    for model in models:
        if is_pretrained_name(model):
            ensure_named(model, device)
    if len(models) == 1:
        table = choose_settings(**base, lrs=lrs, epochs=epochs, device=device, out=out)
    else:
        others = {name: value for name, value in base.items() if name != "model"}
        table = choose_over_models(models, **others, lrs=lrs, epochs=epochs, device=device, out=out)
    print(table.to_string(index=False))
    best = table[table["chosen"]].iloc[0]
    print(
        f"[tuning] chosen on dev: {f'MODEL={best.model}, ' if len(models) > 1 else ''}"
        f"LR={best['lr']:g}, EPOCHS={int(best['epochs'])} "
        f"(dev accuracy {best['dev_accuracy']:.4f}){_edges(best['lr'], lrs)}{_edges(best['epochs'], epochs)}"
    )
    print(
        f"[tuning] the preset has LR={settings.get('LR', Params.lr):g}, EPOCHS={settings.get('EPOCHS', Params.epochs)}"
        f"{', MODEL=' + str(base['model']) if len(models) > 1 else ''}; table: {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
