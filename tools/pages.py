"""Write, or check, every file derived from the page registry (headlab.lab.pages): book/_toc.yml, each notebook's
``parameters`` cell, the page tables of README.md and book/intro.md, and the book's glossary of units.

    python -m tools.pages           # write them
    python -m tools.pages --check   # exit 1, naming each file that differs (tests/test_pages.py runs this)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from headlab.judging.units import glossary_table
from headlab.lab import pages as registry
from headlab.lab.params import REPO


def with_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``<!-- name: ... -->`` and ``<!-- /name -->`` replaced by ``body``."""
    pattern = re.compile(rf"(<!-- {name}:[^\n]*-->\n).*?(\n<!-- /{name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"no <!-- {name}: ... --> block to fill")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def notebook_with_cell(path: Path, page_id: str) -> str:
    """The notebook's JSON with its ``parameters`` cell replaced by the registry's (the one cell papermill reads)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{path}: {len(cells)} cells tagged 'parameters'; papermill reads exactly one")
    cells[0]["source"] = registry.parameters_cell(page_id).splitlines(keepends=True)
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def derived_files(repo: Path = REPO) -> dict[Path, str]:
    """Every derived file and the text it should hold."""
    files = {repo / "book" / "_toc.yml": registry.toc_yaml()}
    for p in registry.PAGES:
        path = repo / "notebooks" / f"{p.id}.ipynb"
        files[path] = notebook_with_cell(path, p.id)
    for path, table in (("README.md", registry.readme_table), ("book/intro.md", registry.intro_table)):
        files[repo / path] = with_block((repo / path).read_text(encoding="utf-8"), "pages", table())
    intro = repo / "book" / "intro.md"
    files[intro] = with_block(files[intro], "units", glossary_table())
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; fail naming each file that differs")
    args = parser.parse_args(argv)
    stale = [path for path, text in derived_files().items() if path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(REPO)} differs from the page registry: run python -m tools.pages", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in derived_files().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
