"""One module per finding of the study: the analysis, and the verdict it supports.

A notebook imports its own finding's names from that finding's module (``headlab.findings.redundancy``); the
tools that several findings share are exported here:

    from headlab.findings import compare_maps, matching_heads, role_scores
"""

from headlab.findings.attention_compare import compare_maps, identical_takeaway
from headlab.findings.cls_head import single_head_correct
from headlab.findings.importance import half_split
from headlab.findings.order import order_heads
from headlab.findings.roles import (
    ENGLISH_STOPWORDS,
    cls_profile,
    first_showcase,
    pair_role_scores,
    role_scores,
    showcase_examples,
)
from headlab.findings.term_matching import matching_heads, random_lower_sets, role_indices
from headlab.findings.verdicts import (
    claims_file,
    claims_table,
    folded,
    render,
    save_claims,
    verdict_table,
    with_mean_ablation,
)

__all__ = [
    "ENGLISH_STOPWORDS",
    "claims_file",
    "claims_table",
    "cls_profile",
    "compare_maps",
    "identical_takeaway",
    "half_split",
    "matching_heads",
    "order_heads",
    "pair_role_scores",
    "random_lower_sets",
    "folded",
    "render",
    "save_claims",
    "role_indices",
    "role_scores",
    "first_showcase",
    "showcase_examples",
    "single_head_correct",
    "verdict_table",
    "with_mean_ablation",
]
