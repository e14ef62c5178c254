"""Models: names, loading from safetensors, fine-tuning and pretraining."""
