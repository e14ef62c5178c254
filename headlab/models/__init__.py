"""Models: names, loading from safetensors, fine-tuning (one tower or two) and pretraining.

from headlab.models import load_encoder, training_history
"""

from headlab.core.exports import exports as _exports

_PUBLIC = {
    "training_history": "headlab.models.finetune",
    "load_encoder": "headlab.models.loading",
    "model_note": "headlab.models.pretrain",
    "finetune_two_tower": "headlab.models.two_tower",
    "load_two_tower": "headlab.models.two_tower",
    "pair_encodings": "headlab.models.two_tower",
    "predict_two_tower": "headlab.models.two_tower",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
