"""The study's layer map: its BERT has 12 layers, and where it names a layer (the gains of layers 5-9, the
term-matching heads in 2-4, the high head of layer 10) a model of another depth is read at the same relative depth."""

from __future__ import annotations

STUDY_LAYERS = 12


STUDY_GAIN_LAYERS = range(5, 10)  # masking any one of these whole layers improved accuracy


STUDY_MATCHING_LAYERS = range(2, 5)  # where the five term-matching heads sit


STUDY_HIGH_HEAD_LAYER = 10  # the high head that hands the matching features to the classifier


def study_layer_to_ours(layer: int, layers: int) -> int:
    """Our layer at the relative depth of the middle of the study's ``layer`` (of 12)."""
    if not 0 <= layer < STUDY_LAYERS:
        raise ValueError(f"the study's layers are 0..{STUDY_LAYERS - 1}, got {layer}")
    return (2 * layer + 1) * layers // (2 * STUDY_LAYERS)


def study_layers_to_ours(study_layers, layers: int) -> list[int]:
    """Our layers at the relative depth of a set of the study's layers."""
    return sorted({study_layer_to_ours(k, layers) for k in study_layers})
