"""One module per finding of the study: the analysis, and the verdict it supports.

A notebook imports its own finding's names from that finding's module (``headlab.findings.redundancy``); the
tools that several findings share are exported here:

    from headlab.findings import compare_maps, matching_heads, role_scores
"""

from headlab.core.exports import exports as _exports

_PUBLIC = {
    "compare_maps": "headlab.findings.attention_compare",
    "claims_file": "headlab.findings.claims",
    "claims_table": "headlab.findings.claims",
    "render": "headlab.findings.claims",
    "with_mean_ablation": "headlab.findings.claims",
    "single_head_correct": "headlab.findings.cls_head",
    "half_split": "headlab.findings.importance",
    "order_heads": "headlab.findings.order",
    "ENGLISH_STOPWORDS": "headlab.findings.roles",
    "cls_profile": "headlab.findings.roles",
    "role_scores": "headlab.findings.roles",
    "pair_role_scores": "headlab.findings.roles",
    "showcase_examples": "headlab.findings.roles",
    "matching_heads": "headlab.findings.term_matching",
    "random_lower_sets": "headlab.findings.term_matching",
    "role_indices": "headlab.findings.term_matching",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
