"""Every claim the book tests, in the book's order (:data:`STUDY_CLAIMS`), for the scorecard, the README, the
calibration and the tests. Each page module declares its page's claims beside the code that measures them
(:class:`headlab.judging.verdicts.StudyClaim` constants, listed in its ``CLAIMS``); the modules are found from the page
registry (:func:`claim_modules`: a page ``NN_name`` is measured in ``headlab.pages.name``), so a page's claims reach the
scorecard with the page. The tallies must hold the stated families (:data:`headlab.judging.verdicts.FAMILIES`),
checked when this module loads: a family is the correction's size, a rule stated before the results, so a new claim
states it there too."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from types import ModuleType

import headlab.pages.objectives as objectives
from headlab.judging.verdicts import FAMILIES, TALLIES, StudyClaim, Tally, study_claim_id
from headlab.lab.pages import PAGES, Page


def page_module(p: Page) -> str:
    """The module that measures page ``p`` (``04_word_order``: ``headlab.pages.word_order``)."""
    return f"headlab.pages.{p.id.split('_', 1)[1]}"


def claim_modules(pages: Sequence[Page] = PAGES) -> tuple[ModuleType, ...]:
    """The modules that declare claims, in the book's order: each registered page's own, where it has one (the setup
    page measures nothing), then the objectives' (on no one page) last."""
    modules = []
    for p in pages:
        try:
            modules.append(import_module(page_module(p)))
        except ModuleNotFoundError as err:
            if err.name != page_module(p):
                raise
    return (*modules, objectives)


def study_claims(modules: Sequence[ModuleType]) -> dict[str, StudyClaim]:
    """Every claim the ``modules`` declare, by id; a module of a page without ``CLAIMS`` is an error naming it."""
    missing = [m.__name__ for m in modules if not hasattr(m, "CLAIMS")]
    if missing:
        raise AttributeError(f"{', '.join(missing)}: a page module lists its claims in CLAIMS (an empty tuple: none)")
    return {c.claim_id: c for module in modules for c in module.CLAIMS}


MODULES = claim_modules()
STUDY_CLAIMS: dict[str, StudyClaim] = study_claims(MODULES)


def check_families(claims: dict[str, StudyClaim], families: dict[Tally, int]) -> None:
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
