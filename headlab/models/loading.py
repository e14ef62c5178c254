"""Load encoders and tokenizers from an asset name, a local folder or (online) a Hugging Face id.

Weights come from safetensors only (pickled ``.bin`` weights can run code when loaded, so they are refused
unless the caller opts in with ``allow_pickle=True``), and ``trust_remote_code`` is never set.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from headlab.core.arch import architecture_of
from headlab.core.grades import GradeError, GradeScale
from headlab.core.pruning import KEPT_HEADS, KEPT_NEURONS, shape_for_kept_heads
from headlab.inputs.assets import ASSETS, asset_path, is_asset
from headlab.models.names import MODELS, is_pretrained_name, named_model_dir
from headlab.models.training import is_complete


class ModelError(ValueError):
    """A model spec that headlab cannot load, with the reason and what to do."""


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1 or "\\" in spec


def resolve_model(spec: str, allow_pickle: bool = False) -> str:
    """Turn a model spec into something ``from_pretrained`` can load: an asset, a model headlab pretrains
    (``zh-char``), a local folder, else a hub id."""
    if is_asset(spec):
        return str(asset_path(spec))
    if is_pretrained_name(spec):
        folder = named_model_dir(spec)
        if not is_complete(folder):
            raise ModelError(
                f"model {spec!r} is pretrained by headlab and is not in the cache yet: "
                f"`python -m headlab.models {spec}` trains it (`make book PRESET={spec}` does so first)"
            )
        return str(folder)
    folder = Path(spec).expanduser()
    if folder.exists():
        _check_folder(folder, allow_pickle)
        return str(folder)
    if _looks_like_path(spec):
        raise ModelError(
            f"model folder {spec!r} does not exist (MODEL may be an asset name {sorted(ASSETS)}, "
            f"a model headlab pretrains {sorted(MODELS)}, a local model folder, or a Hugging Face id when online)"
        )
    return spec  # a hub id; loading it needs the network unless it is in the local HF cache


def is_pruned_folder(spec: str) -> bool:
    """True when ``spec`` is a local folder holding a model :func:`headlab.core.pruning.prune_heads` made and
    :meth:`headlab.lab.Lab.prune` saved (its config names the kept heads): a fine-tuned grader, used as it is."""
    config = Path(str(spec)).expanduser() / "config.json"
    try:
        return config.is_file() and bool(
            {KEPT_HEADS, KEPT_NEURONS} & set(json.loads(config.read_text(encoding="utf-8")))
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False


def _check_folder(folder: Path, allow_pickle: bool) -> None:
    config = folder / "config.json"
    if not folder.is_dir() or not config.is_file():
        raise ModelError(f"model folder {folder} has no config.json: it is not a transformers model folder")
    try:
        settings = json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelError(f"{config} is not valid JSON: {err}") from None
    if "auto_map" in settings:
        raise ModelError(f"{config} asks for remote code (auto_map); headlab never sets trust_remote_code")
    try:
        architecture_of(settings.get("model_type"))
    except ValueError as err:
        raise ModelError(f"{config}: {err}") from None
    has_safetensors = any(folder.glob("*.safetensors"))
    has_pickle = any(folder.glob("*.bin"))
    if not has_safetensors and has_pickle and not allow_pickle:
        raise ModelError(
            f"model folder {folder} has only pickle (.bin) weights, which can run code when loaded; "
            "convert them to safetensors or pass allow_pickle=True if you trust the source"
        )
    if not has_safetensors and not has_pickle:
        raise ModelError(f"model folder {folder} has no weights (*.safetensors)")


def _load(
    loader,
    spec: str,
    allow_pickle: bool,
    attn: str,
    new: re.Pattern | None = None,
    scale: GradeScale | None = None,
):
    path = resolve_model(spec, allow_pickle)
    config = AutoConfig.from_pretrained(path, trust_remote_code=False)
    try:
        architecture_of(config.model_type)
    except ValueError as err:
        raise ModelError(f"model {spec!r}: {err}") from None
    kwargs = {} if scale is None else _grade_head(spec, config, scale)

    def load(implementation: str):
        if _keeps_heads(config):
            return _load_pruned(loader, Path(path), config, implementation)
        with _transformers_quiet():
            model, info = loader.from_pretrained(
                path,
                trust_remote_code=False,
                use_safetensors=None if allow_pickle else True,
                attn_implementation=implementation,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # refused below, with the weights named (the report is off)
                **kwargs,
            )
        mismatched = [
            str(entry[0]) if isinstance(entry, tuple) else str(entry) for entry in info.get("mismatched_keys", ())
        ]
        if mismatched:
            raise ModelError(
                f"could not load model {spec!r}: {len(mismatched)} weights of its checkpoint do not fit this model's "
                f"shapes ({', '.join(sorted(mismatched)[:4])}{', ...' if len(mismatched) > 4 else ''}); a classifier "
                f"trained for another number of grades has such a head (the data's are {scale or 'not given'})"
            )
        missing = unexpected_missing(info.get("missing_keys", ()), new)
        if missing:
            raise ModelError(
                f"could not load model {spec!r}: {len(missing)} weights are missing from its checkpoint "
                f"({', '.join(sorted(missing)[:4])}{', ...' if len(missing) > 4 else ''}); the folder does not hold "
                "the encoder asked for"
            )
        return model

    try:
        try:
            return load(attn)
        except ValueError as err:  # transformers refuses sdpa for encoders without it (MPNet): eager is the same
            if attn != "sdpa" or isinstance(err, ModelError):
                raise
            return load("eager")
    except (OSError, RuntimeError) as err:  # RuntimeError: transformers could not convert or fit the weights
        raise ModelError(f"could not load model {spec!r}: {err}") from None


# weights a checkpoint may lack by design: an encoder put under a new grade head lacks the head and the pooler that
# feeds it (both trained by fine-tuning); a bare encoder may lack the pooler alone (e5 and MLM checkpoints have none,
# and no attention reads it)
NEW_HEAD = re.compile(r"(?:^|\.)(?:classifier|pooler)\.")
POOLER = re.compile(r"(?:^|\.)pooler\.")


def unexpected_missing(missing_keys, new: re.Pattern | None = None) -> list[str]:
    """The weights a checkpoint should have held but did not: every missing key but those ``new`` matches (weights
    the caller is about to train, :data:`NEW_HEAD`, or does not use, :data:`POOLER`); None allows none."""
    return [key for key in missing_keys if new is None or not new.search(key)]


@contextlib.contextmanager
def _transformers_quiet():
    """transformers' load report off while a model loads: headlab reads the loading info itself and refuses what is
    unexpectedly missing (:func:`unexpected_missing`) or does not fit, naming the weights. (Its progress bars are the
    hub's, off in the build by ``HF_HUB_DISABLE_PROGRESS_BARS``.)"""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def _load_pruned(loader, folder: Path, config, attn: str) -> torch.nn.Module:
    """A model :func:`headlab.core.pruning.prune_heads` saved: built from its config with the smaller layers its kept
    heads need, then its safetensors weights loaded into it (every tensor, with its shape, must match)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelError(f"pruned model folder {folder} has no weights (*.safetensors)")
    model = shape_for_kept_heads(loader.from_config(config, attn_implementation=attn))
    weights = {}
    for file in files:
        weights.update(load_file(str(file)))
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        raise ModelError(
            f"{folder}: the weights do not fit the heads and neurons its config keeps ({KEPT_HEADS}, {KEPT_NEURONS}): "
            f"{err}"
        ) from None
    return model


def _keeps_heads(config) -> bool:
    """True for the config of a model :func:`headlab.core.pruning.prune_heads` made (it names the kept heads)."""
    return any(getattr(config, field, None) is not None for field in (KEPT_HEADS, KEPT_NEURONS))


def _named_scale(spec: str, config) -> GradeScale | None:
    """The grades a checkpoint's class names say it learned (:meth:`GradeScale.of_checkpoint`), as a model error."""
    try:
        return GradeScale.of_checkpoint(config.id2label, config.num_labels)
    except GradeError as err:
        raise ModelError(f"model {spec!r}: {err}") from None


def _grade_head(spec: str, config, scale: GradeScale) -> dict:
    """The keywords that give a classifier one class per grade of ``scale``, named by its grade (so the checkpoint
    says which grades it learned); a checkpoint that names other grades is refused, not silently re-read."""
    trained = _named_scale(spec, config)
    if trained is not None and trained != scale:
        raise ModelError(
            f"model {spec!r} was fine-tuned on {trained}, the data's are {scale}: its classes are not them"
        )
    if _keeps_heads(config):
        if config.num_labels != scale.count:  # a pruned model is built from its config as saved
            raise ModelError(f"pruned model {spec!r} grades in {config.num_labels} classes, the data's are {scale}")
        return {}
    id2label = scale.id2label()
    return {"num_labels": scale.count, "id2label": id2label, "label2id": {g: i for i, g in id2label.items()}}


def fine_tuned_scale(spec: str, data: GradeScale) -> GradeScale:
    """The grades of an already fine-tuned folder (a pruned model: nothing is trained again) evaluated on a file of
    ``data``'s grades: those its classes are named by, else its number of classes counted from the data's first
    grade (transformers' default names say nothing more); refused where the data has a grade the model lacks."""
    config = AutoConfig.from_pretrained(resolve_model(spec), trust_remote_code=False)
    try:
        scale = _named_scale(spec, config) or GradeScale(data.first, config.num_labels)
    except GradeError as err:
        raise ModelError(f"model {spec!r}: {err}") from None
    if data.first < scale.first or data.last > scale.last:
        raise ModelError(f"model {spec!r} has classes for {scale}; the data has {data}, which it cannot give")
    return scale


def load_classifier(spec: str, scale: GradeScale, attn: str = "sdpa", allow_pickle: bool = False) -> torch.nn.Module:
    """The encoder with a classifier on ``[CLS]`` of one class per grade of ``scale`` (new and untrained unless the
    folder has one: the head and its pooler may be missing, nothing else).

    sdpa is the fast default; an encoder that has no sdpa path gets eager attention instead.
    """
    return _load(AutoModelForSequenceClassification, spec, allow_pickle, attn, NEW_HEAD, scale).eval()


def load_encoder(spec: str, attn: str = "eager", allow_pickle: bool = False) -> torch.nn.Module:
    """The bare pretrained encoder (no classifier): the 'before fine-tuning' model of the delta study; its pooler
    may be missing (nothing reads it)."""
    return _load(AutoModel, spec, allow_pickle, attn, POOLER).eval()


def load_tokenizer(spec: str, allow_pickle: bool = False):
    """The tokenizer stored with the model."""
    return AutoTokenizer.from_pretrained(resolve_model(spec, allow_pickle), trust_remote_code=False)
