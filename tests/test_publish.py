"""Publishing: the GitHub workflows (checked by actionlint), the site on a gh-pages branch (make publish), one archive
of a build (make dist), and what the site offers a reader (download buttons, the repository link)."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from headlab.book.site import REPOSITORY_VARIABLE, site_config
from headlab.lab.params import REPO
from tools.publish import PublishError, branch_files, check_site, dist_archive, publish_pages, site_of

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = Path(sys.executable).with_name("actionlint")


def actionlint(*paths: Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACTIONLINT), "-no-color", *map(str, paths)], cwd=cwd, capture_output=True, text=True)


def test_the_workflows_pass_actionlint():
    assert [w.name for w in WORKFLOWS] == ["book.yml", "test.yml"]
    result = actionlint(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    """The check above can fail: an unknown runner expression and a missing required input are errors."""
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ${{ inputs.nothing }}\n    steps:\n      - uses: actions/cache@v5\n"
    )
    result = actionlint(broken, cwd=tmp_path)
    assert result.returncode != 0 and "key" in result.stdout


def test_the_book_workflow_builds_on_a_cpu_or_gpu_runner_and_deploys_pages():
    flow = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    triggers = flow[True]  # YAML reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"]
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"presets", "runner"}
    steps = flow["jobs"]["build"]["steps"]
    text = json.dumps(steps)
    assert "benchmarks/gpu_book.sh" in text and "make book" in text and "make dist" in text
    assert any(s.get("uses", "").startswith("actions/upload-pages-artifact@") for s in steps)
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps)
    assert flow["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages@")
    assert "gpu" in flow["jobs"]["build"]["runs-on"]
    test = yaml.safe_load((REPO / ".github" / "workflows" / "test.yml").read_text())
    assert "make test" in json.dumps(test["jobs"]["test"]["steps"])
    assert any(s.get("uses", "").startswith("actions/cache@") for s in test["jobs"]["test"]["steps"])


def test_gpu_book_sh_builds_only_the_presets_book_when_presets_is_set():
    script = (REPO / "benchmarks" / "gpu_book.sh").read_text()
    assert 'if [ -n "${PRESETS:-}" ]' in script
    assert '--presets $PRESETS --set DEVICE=cuda --work "$OUT/site" --run-dir "$OUT/runs"' in script
    assert '$([ "$SITE" = 0 ] && echo --no-site)' in script and "PY=${PY:-.venv/bin/python}" in script
    subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "gpu_book.sh")], check=True)


def fake_book(root: Path) -> Path:
    """A build folder shaped like `make book`'s: a site with the pages publishing checks, executed notebooks."""
    site = site_of(root)
    (site / "headlab-js").mkdir(parents=True)
    (site / "index.html").write_text("<html>index</html>")
    (site / "scorecard.html").write_text("<html>scorecard</html>")
    (site / "headlab-js" / "vega.js").write_text("// vega")
    (site / "_static").mkdir()
    (site / "_static" / "theme.css").write_text("body {}")
    (root / "executed" / "e5-en").mkdir(parents=True)
    for name in ("executed/00_setup.ipynb", "executed/e5-en/00_setup.ipynb"):
        (root / name).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return root


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for command in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *command], cwd=path, check=True)
    return path


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "headlab tests")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tests@headlab.invalid")


def test_publish_puts_the_site_on_gh_pages_and_pushes_only_when_asked(tmp_path):
    book, repo = fake_book(tmp_path / "book"), git_repo(tmp_path / "repo")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=repo, check=True)

    files = publish_pages(site_of(book), repo)
    assert files == [".nojekyll", "_static/theme.css", "headlab-js/vega.js", "index.html", "scorecard.html"]
    assert branch_files(repo) == files
    heads = subprocess.run(["git", "ls-remote", str(remote)], capture_output=True, text=True, check=True).stdout
    assert "gh-pages" not in heads  # not pushed

    publish_pages(site_of(book), repo, push=True)
    heads = subprocess.run(["git", "ls-remote", str(remote)], capture_output=True, text=True, check=True).stdout
    assert "refs/heads/gh-pages" in heads
    on_main = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert on_main == ""  # the working branch is untouched


def test_publishing_nothing_says_to_build_the_book_first(tmp_path):
    with pytest.raises(PublishError, match=r"no index.html, scorecard.html, headlab-js\): run `make book` first"):
        check_site(tmp_path)
    book = fake_book(tmp_path / "book")
    (site_of(book) / "scorecard.html").unlink()
    with pytest.raises(PublishError, match="no scorecard.html"):
        publish_pages(site_of(book), git_repo(tmp_path / "repo"))


def test_dist_packs_site_tables_notebooks_and_a_manifest(tmp_path):
    book, runs = fake_book(tmp_path / "book"), tmp_path / "runs"
    runs.mkdir()
    (runs / "timings.csv").write_text(
        "build,commit,preset,state,step,seconds,computed,load,machine,device\n"
        "b1,abc,default,cold,00_setup,5.0,True,1.0,old machine,cpu\n"
        'b2,def,default,cold,00_setup,3.0,True,1.0,"AMD EPYC, 2 cores",cpu\n'
        'b2,def,all,cold,make book,30.0,,,"AMD EPYC, 2 cores",cpu\n'
    )
    (runs / "models.csv").write_text(
        "preset,model,data,accuracy,majority\ndefault,minilm,stsb-en,0.6,0.24\ne5-en,e5-small,stsb-en,0.59,0.24\n"
    )
    (runs / "scorecard.csv").write_text("preset,claim_id\ndefault,x\n")
    archive = dist_archive(book, runs, tmp_path / "dist")
    assert archive.name.startswith("headlab-book-") and archive.suffix == ".zip"
    with zipfile.ZipFile(archive) as packed:
        names = set(packed.namelist())
        manifest = json.loads(packed.read("manifest.json"))
    assert {
        "site/index.html",
        "site/scorecard.html",
        "site/headlab-js/vega.js",
        "notebooks/00_setup.ipynb",
        "notebooks/e5-en/00_setup.ipynb",
        "runs/timings.csv",
        "runs/models.csv",
        "runs/scorecard.csv",
        "manifest.json",
    } <= names
    assert manifest["presets"] == ["default", "e5-en"]
    assert manifest["build"] == "b2" and manifest["machine"] == "AMD EPYC, 2 cores"  # the last build's, not the first
    assert [t["step"] for t in manifest["timings"]] == ["00_setup", "make book"]
    shutil.rmtree(runs)
    with pytest.raises(PublishError, match="result tables"):
        dist_archive(book, runs, tmp_path / "dist")


def test_site_config_links_the_repository_only_when_one_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv(REPOSITORY_VARIABLE, raising=False)
    plain = yaml.safe_load(site_config(REPO / "_config.yml", tmp_path / "a.yml").read_text())
    assert "repository" not in plain and plain["html"]["use_repository_button"] is False
    monkeypatch.setenv(REPOSITORY_VARIABLE, "https://github.com/someone/headlab")
    linked = yaml.safe_load(site_config(REPO / "_config.yml", tmp_path / "b.yml").read_text())
    assert linked["repository"]["url"] == "https://github.com/someone/headlab"
    assert linked["html"]["use_repository_button"] is True
    assert linked["sphinx"] == plain["sphinx"]  # everything else as _config.yml has it


def test_make_publish_and_dist_pass_their_options():
    def dry(*args):
        return subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    assert "tools.publish pages --book book --push" in dry("publish", "PUSH=1")
    assert "--push" not in dry("publish")
    assert "tools.publish dist --book gpu-out/site --runs gpu-out/runs" in dry(
        "dist", "BOOK_DIR=gpu-out/site", "RUN_DIR=gpu-out/runs"
    )


@pytest.mark.slow
def test_a_tiny_book_publishes_and_packs(tiny_book, tmp_path):
    """The tiny book's real site: on gh-pages in a clone of this repository, with its scorecard, offline JavaScript
    and each page's executed notebook for download; and in one archive with its tables and notebooks."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    files = publish_pages(tiny_book.html, clone)
    assert {".nojekyll", "index.html", "scorecard.html"} <= set(files)
    assert any(f.startswith("headlab-js/") and f.endswith(".js") for f in files)
    assert "_sources/executed/01_redundancy.ipynb" in files
    page = (tiny_book.html / "executed" / "01_redundancy.html").read_text()
    # the download menu's source is the executed notebook itself
    assert "download-source-button" in page and "_sources/executed/01_redundancy.ipynb" in page
    notebook = json.loads((tiny_book.html / "_sources" / "executed" / "01_redundancy.ipynb").read_text())
    assert any(c.get("outputs") for c in notebook["cells"] if c["cell_type"] == "code")  # the executed copy
    archive = dist_archive(tiny_book.work, tiny_book.runs, tmp_path / "dist")
    with zipfile.ZipFile(archive) as packed:
        names = set(packed.namelist())
        manifest = json.loads(packed.read("manifest.json"))
    assert {"site/index.html", "site/scorecard.html", "notebooks/10_pruning.ipynb", "runs/scorecard.csv"} <= names
    assert manifest["presets"] == ["tiny"]
