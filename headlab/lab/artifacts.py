"""What one page writes and later pages read, in one place: the name, the page that produces it, the pages that read
it, and where it lies in a lab's results folder.

:class:`headlab.lab.lab.Lab` finds an artifact through it (:meth:`~headlab.lab.lab.Lab.shared_table`,
:meth:`~headlab.lab.lab.Lab.finished_sweeps`), and the book's build runs a reader after the pages that produce what it
reads (:func:`page_needs`), so a new page that reads another's table adds one row here and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TABLE, SWEEP = "table", "sweep"


@dataclass(frozen=True)
class Artifact:
    """A table (``<results>/<name>.csv``, or ``<name>-<key>.csv`` for one per setting) or a sweep (the folders
    ``<results>/sweeps/<name>-<plan hash>/``, whose masks later sweeps of the same split reuse)."""

    name: str
    kind: str
    page: str
    readers: tuple[str, ...]
    what: str

    def path(self, folder: Path, key: str | None = None) -> Path:
        """Where the table lies in the results ``folder`` (a sweep has folders instead: :meth:`folders`)."""
        if self.kind != TABLE:
            raise ValueError(f"{self.name!r} is a {self.kind}, not a table: use its folders")
        return Path(folder) / (f"{self.name}.csv" if key is None else f"{self.name}-{key}.csv")

    def folders(self, folder: Path) -> list[Path]:
        """The sweep's folders in the results ``folder`` (one per plan that ran), sorted by name."""
        if self.kind != SWEEP:
            raise ValueError(f"{self.name!r} is a {self.kind}, not a sweep: use its path")
        return sorted((Path(folder) / "sweeps").glob(f"{self.name}-*"))


ARTIFACTS = {
    a.name: a
    for a in (
        Artifact(
            "redundancy",
            SWEEP,
            "01_redundancy",
            ("10_pruning",),
            "the random-share masks; 10's random pruning curve reuses their results",
        ),
        Artifact(
            "layer_dependence",
            SWEEP,
            "02_layer_dependence",
            ("07_cls_head", "09_patching", "10_pruning"),
            "every head masked alone, and the halves: 07 and 09 read the single-head masks, 10 reuses the halves",
        ),
        Artifact(
            "head_roles",
            TABLE,
            "05_term_matching",
            ("06_finetune_delta", "07_cls_head", "08_two_tower", "09_patching"),
            "every head's role scores, one table per choice of pairs, seed and stopwords (key)",
        ),
        Artifact(
            "term_matching_heads",
            TABLE,
            "05_term_matching",
            ("06_finetune_delta", "07_cls_head", "08_two_tower", "09_patching"),
            "the term-matching heads and the settings that chose them",
        ),
        Artifact(
            "term_matching",
            SWEEP,
            "05_term_matching",
            ("08_two_tower", "09_patching"),
            "the term-matching heads masked, and the random sets they are set against",
        ),
    )
}


def artifact(name: str) -> Artifact:
    """The registered artifact ``name``; an unregistered one is an error that lists the registry."""
    if name not in ARTIFACTS:
        raise KeyError(
            f"no shared artifact {name!r} in headlab.lab.artifacts.ARTIFACTS ({', '.join(ARTIFACTS)}): "
            "a table or sweep another page reads must be registered there"
        )
    return ARTIFACTS[name]


def page_needs() -> dict[str, tuple[str, ...]]:
    """Each reading page and the pages whose artifacts it reads (sorted): what the build waits for before a page."""
    needs: dict[str, set[str]] = {}
    for a in ARTIFACTS.values():
        for reader in a.readers:
            needs.setdefault(reader, set()).add(a.page)
    return {page: tuple(sorted(pages)) for page, pages in sorted(needs.items())}
