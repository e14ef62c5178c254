"""String enums whose members are their words (:class:`Words`): verdicts, kinds, tallies, halves, conditions."""

from __future__ import annotations

from enum import Enum


class Words(str, Enum):
    """An enum whose members are their words wherever a string goes: printed, formatted, written to CSV or JSON, and
    repr'd (altair writes a comparison into a Vega expression with ``repr``; an error message shows ``'holds'``, not
    ``<Verdict.HOLDS: 'holds'>``), on Python 3.10 on. A word read back from a table compares equal to its member."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)

    def __repr__(self) -> str:
        return repr(self.value)
