"""The repository's upkeep, outside the installed package: run from the repository root as ``python -m tools.NAME``.

``pages`` writes the files derived from the page registry (``headlab.lab.pages``); ``readme`` merges a build's tables
into ``results/`` and regenerates the README's and docs' blocks and pictures; ``publish`` puts a built site on the
gh-pages branch or into an archive.
"""
