"""Every claim the book tests, in the book's order (:data:`STUDY_CLAIMS`), for the scorecard, the README, the
calibration and the tests. Each page module declares its page's claims beside the code that measures them
(:class:`headlab.judging.verdicts.StudyClaim` constants, listed in its ``CLAIMS``; a new module goes in
:data:`MODULES`); the tallies must hold the stated families (:data:`headlab.judging.verdicts.FAMILIES`), checked
when this module loads."""

from __future__ import annotations

import headlab.pages.cls_head as cls_head
import headlab.pages.finetune_delta as finetune_delta
import headlab.pages.layer_dependence as layer_dependence
import headlab.pages.objectives as objectives
import headlab.pages.patching as patching
import headlab.pages.pruning as pruning
import headlab.pages.redundancy as redundancy
import headlab.pages.term_matching as term_matching
import headlab.pages.two_tower as two_tower
import headlab.pages.word_order as word_order
import headlab.pages.word_segmentation as word_segmentation
from headlab.judging.verdicts import FAMILIES, TALLIES, StudyClaim, study_claim_id

MODULES = (  # the modules that declare claims, in the book's order (the objectives, on no one page, last)
    redundancy,
    layer_dependence,
    word_segmentation,
    word_order,
    term_matching,
    finetune_delta,
    cls_head,
    two_tower,
    patching,
    pruning,
    objectives,
)
STUDY_CLAIMS: dict[str, StudyClaim] = {c.claim_id: c for module in MODULES for c in module.CLAIMS}


def check_families(claims: dict[str, StudyClaim], families: dict[str, int]) -> None:
    """Refuse a registry whose tallies do not hold the stated families (checked when this module loads)."""
    registered = {tally: sum(c.tally == tally for c in claims.values()) for tally in TALLIES}
    if registered != families:
        raise ValueError(
            f"the tallies hold {registered} claims but FAMILIES states {families}: a changed family is a new verdict "
            "rule (state it in headlab.judging.verdicts.FAMILIES and raise RULE_VERSION)"
        )


check_families(STUDY_CLAIMS, FAMILIES)


def registered(claim_id: str) -> StudyClaim:
    """The registered claim of a row's id (``<id>`` or ``<id>/<part>``); an unknown id is refused by name."""
    key = study_claim_id(claim_id)
    if key not in STUDY_CLAIMS:
        raise KeyError(
            f"claim {claim_id!r} is not in headlab.pages.claims.STUDY_CLAIMS; declare it in its page module's CLAIMS"
        )
    return STUDY_CLAIMS[key]
