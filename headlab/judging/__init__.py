"""How a claim is judged: the claim type (:class:`~headlab.judging.verdicts.StudyClaim`), the one verdict rule, the
rows a page saves and renders (:mod:`headlab.judging.verdicts`), what a number measures and how it prints
(:mod:`headlab.judging.units`) and the sizes policy every smallest effect comes from (:mod:`headlab.judging.sizes`).
It knows no page: a page declares its claims and judges its numbers with these.

    from headlab.judging import render, save_claims, verdict_table
"""

from headlab.judging.verdicts import (
    claims_file,
    claims_table,
    folded,
    render,
    save_claims,
    verdict_table,
    with_mean_ablation,
)

__all__ = ["claims_file", "claims_table", "folded", "render", "save_claims", "verdict_table", "with_mean_ablation"]
