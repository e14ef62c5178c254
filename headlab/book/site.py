"""The static site: its table of contents (the scorecard, then each preset's pages), its configuration, and the
commands that would build the pages a partial build left out."""

from __future__ import annotations

import os
import re
from pathlib import Path

from headlab.book.presets import PRESETS

REPOSITORY_VARIABLE = "HEADLAB_REPOSITORY_URL"  # the repository the site links to, over _config.yml's repository.url


def site_toc(template: Path, folders: dict[str, str]) -> str:
    """The site's table of contents: the scorecard as the first page, the introduction, then the template's parts
    once per preset, each pointing at that preset's executed pages (``executed/NAME`` becomes ``<folder>/NAME``)
    and captioned with the preset when there are several."""
    text = template.read_text(encoding="utf-8")
    parts = text[text.index("parts:") :].splitlines()[1:]
    lines = [
        "format: jb-book",
        "root: scorecard",
        "parts:",
        "  - caption: Introduction",
        "    chapters:",
        "      - file: intro",
    ]
    for preset, folder in folders.items():
        for line in parts:
            line = re.sub(r"file:\s*executed/", f"file: {folder}/", line)
            if len(folders) > 1:
                line = re.sub(r"caption:\s*(.*)", rf"caption: \1 ({preset})", line)
            lines.append(line)
    return "\n".join(lines) + "\n"


def site_config(template: Path, target: Path) -> Path:
    """The site's jupyter-book config: ``template`` (``_config.yml``) with ``repository.url`` from
    :data:`REPOSITORY_VARIABLE` where it is set, and the repository button on exactly when there is a URL, written
    to ``target``."""
    import yaml

    config = yaml.safe_load(template.read_text(encoding="utf-8"))
    url = os.environ.get(REPOSITORY_VARIABLE) or config.get("repository", {}).get("url") or ""
    if url:
        config["repository"] = {**config.get("repository", {}), "url": url}
    else:
        config.pop("repository", None)  # an empty URL would still reach the theme
    config.setdefault("html", {})["use_repository_button"] = bool(url)
    target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


def not_built_commands(built: list[str]) -> dict[str, str]:
    """For every preset of :data:`PRESETS` left out of this build (the tiny test preset aside), the command that
    builds the site with it added."""

    def command(preset: str) -> str:
        gpu = str(PRESETS[preset].get("DEVICE", "")).startswith("cuda")
        return f'make book PRESETS="{" ".join([*built, preset])}"' + (
            ' TORCH="torch==2.14.1"  (needs a GPU)' if gpu else ""
        )

    return {p: command(p) for p in PRESETS if p not in built and p != "tiny"}
