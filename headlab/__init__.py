"""headlab: take apart the attention heads of a BERT fine-tuned to grade query–title relevance.

One concept per module: ``assets`` (pinned offline downloads), ``data`` (relevance pairs), ``model``
(safe loading), ``masking`` (head masks as hooks), ``finetune`` (the classifier), ``evaluate`` (predictions
and scores), ``stats`` (intervals and tests), ``sweep`` (many masks, resumable), ``study`` (the notebook
parameters), ``charts`` (Altair figures).
"""
__version__ = "0.1.0"
