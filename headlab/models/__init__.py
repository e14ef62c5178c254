"""Models: names, loading from safetensors, fine-tuning (one tower or two) and pretraining.

from headlab.models import load_encoder, training_history
"""

from headlab.models.finetune import training_history
from headlab.models.loading import load_encoder
from headlab.models.pretrain import model_note
from headlab.models.two_tower import finetune_two_tower, load_two_tower, pair_encodings, predict_two_tower

__all__ = [
    "finetune_two_tower",
    "load_encoder",
    "load_two_tower",
    "model_note",
    "pair_encodings",
    "predict_two_tower",
    "training_history",
]
