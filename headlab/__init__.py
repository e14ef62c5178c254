"""headlab: take apart the attention heads of a BERT fine-tuned to grade query–title relevance.

One concept per module: ``assets`` (pinned offline downloads), ``data`` (relevance pairs), ``model``
(safe loading), ``masking`` (head masks as hooks), ``finetune`` (the classifier), ``evaluate`` (predictions
and scores), ``stats`` (intervals and tests), ``sweep`` (many masks, resumable), ``study`` (the notebook
parameters), ``charts`` (Altair figures), ``pretrain`` (the character-level Chinese BERT headlab trains), ``words``
(words of a text, Chinese included), ``tuning``
(fine-tuning settings chosen on the dev split).
"""
__version__ = "0.1.0"

import os as _os

if _os.environ.get("HEADLAB_NO_NETWORK") == "1":
    from headlab.inputs import netguard as _netguard

    _netguard.install()
