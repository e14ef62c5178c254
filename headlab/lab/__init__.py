"""The notebook parameters and what they lead to: a fine-tuned model, an encoded split, its baseline."""
