"""The default preset's assets (minilm, stsb-en), small enough to travel to a GPU machine that has no network.

A GPU runner may take only a few tens of MB along (the device of issue #51: 64 MiB for the code, the wheels and the
assets together), and all-MiniLM-L6-v2 is 91 MB of fp32 weights, half of them the word-embedding matrix
(30522 x 384). Most of its rows are pieces that no STS-B sentence uses, so:

* ``prepare`` keeps the rows that some sentence of the data uses (every split, query and title) and every id up to
  the last special token (``[PAD]`` ... ``[MASK]``, which so keep their ids), renumbers the others in their old order
  (``vocab.txt``, ``tokenizer.json`` and ``config.json``'s ``vocab_size`` follow), then CHECKS the trimmed model
  against the full one: every pair, every sentence and every word of the data tokenizes to the same pieces (the
  renumbered ids), a seeded classifier head starts with the same weights, and on a sample of pairs the logits, the
  hidden states and every attention map are exactly equal. It then packs both asset folders into one ``.tar.xz``,
  the safetensors bytes split into byte planes first (the exponent bytes of fp32 weights compress, their mantissa
  bytes do not: lossless either way), with a manifest of every file's sha256.
* ``unpack`` (on the GPU machine: numpy and the standard library only) writes the folders into
  ``$HEADLAB_CACHE/assets`` byte for byte, checks every sha256 against the manifest, and marks each asset complete
  with its pinned hash, so ``asset_path(name, fetch=False)`` finds it as if fetched.

The trimmed model is the full model on every text of the data; a text with a piece outside the data would tokenize
differently, which is why this is for the default preset's own data only (``headlab-trimmed.json`` in the model
folder says what was kept).

    python benchmarks/gpu_carry.py prepare --out .gpu/assets        # here, where the assets are cached
    python benchmarks/gpu_carry.py unpack .gpu/assets/default-assets.tar.xz   # there, HEADLAB_CACHE set
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

PACK = "default-assets.tar.xz"
MANIFEST = "manifest.json"
PLANES = ".planes"  # suffix of a file stored as byte planes
TRIMMED = "headlab-trimmed.json"  # in the trimmed model folder: what was kept, and from what
MARKER = ".headlab-complete"  # headlab.inputs.assets.MARKER (not imported: unpack runs without headlab's needs)
WEIGHTS = "model.safetensors"
EMBEDDINGS = "embeddings.word_embeddings.weight"
PINS = {  # headlab.inputs.assets.ASSETS[name].sha256 (tests check they agree): unpack needs numpy and nothing else
    "minilm": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    "stsb-en": "b26ca4641a5474f09e53497fb49b090f78eabb3f2d31e10a24cbe85b32dbe25b",
}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- trimming -------------------------------------------------------------------------------------------------


def used_ids(tokenizer, texts) -> set[int]:
    """Every id the tokenizer gives the ``texts`` (specials aside)."""
    ids: set[int] = set()
    for row in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        ids.update(row)
    return ids


def kept_ids(tokenizer, texts) -> list[int]:
    """The ids the trimmed model keeps, in their old order: every id up to the last special token (so specials keep
    their ids) and every id the ``texts`` use."""
    last_special = max(tokenizer.all_special_ids)
    return sorted(set(range(last_special + 1)) | used_ids(tokenizer, texts))


def trim_model(source: Path, target: Path, keep: list[int]) -> dict[int, int]:
    """Copy the BERT folder ``source`` to ``target`` with only the word-embedding rows and vocabulary entries of
    ``keep`` (old ids, ascending), renumbered 0, 1, ...; return ``{old id: new id}``."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    source, target = Path(source), Path(target)
    if keep != sorted(set(keep)):
        raise ValueError("keep must be ascending old ids without repeats")
    new_id = {old: new for new, old in enumerate(keep)}
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(MARKER))
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    vocab = (source / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab = vocab[:-1]
    if config.get("model_type") != "bert" or len(vocab) != config["vocab_size"]:
        raise ValueError(f"{source} is not a BERT folder whose vocab.txt has vocab_size ({config['vocab_size']}) lines")
    (target / "vocab.txt").write_text("".join(vocab[i] + "\n" for i in keep), encoding="utf-8")
    config["vocab_size"] = len(keep)
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    fast = source / "tokenizer.json"
    if fast.exists():
        spec = json.loads(fast.read_text(encoding="utf-8"))
        model = spec["model"]
        if model.get("type") != "WordPiece":
            raise ValueError(f"{fast}: a {model.get('type')} model, not WordPiece")
        model["vocab"] = {token: new_id[i] for token, i in model["vocab"].items() if i in new_id}
        for token in spec.get("added_tokens", []):  # specials keep their ids (all ids up to them are kept)
            if new_id.get(token["id"]) != token["id"]:
                raise ValueError(f"{fast}: added token {token['content']!r} would move")
        (target / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    with safe_open(str(source / WEIGHTS), "pt") as weights:
        tensors = {name: weights.get_tensor(name) for name in weights.keys()}
        metadata = weights.metadata()
    rows = [name for name, t in tensors.items() if t.ndim == 2 and t.shape[0] == len(vocab)]
    if rows != [EMBEDDINGS] and rows != [f"bert.{EMBEDDINGS}"]:
        raise ValueError(f"{source / WEIGHTS}: expected one word-embedding matrix of {len(vocab)} rows, got {rows}")
    import torch

    tensors[rows[0]] = tensors[rows[0]][torch.as_tensor(keep)].contiguous()
    save_file(tensors, str(target / WEIGHTS), metadata=metadata)
    (target / TRIMMED).write_text(
        json.dumps(
            {
                "source_weights_sha256": hashlib.sha256((source / WEIGHTS).read_bytes()).hexdigest(),
                "source_vocab_size": len(vocab),
                "kept_rows": len(keep),
                "kept_ids": keep,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    return new_id


# --- checking -------------------------------------------------------------------------------------------------


def check_tokenization(full, trimmed, frame, new_id: dict[int, int]) -> dict:
    """Every pair (as :func:`headlab.core.evaluate.encode` tokenizes it), every sentence alone
    (:func:`~headlab.core.evaluate.encode_sentences`) and every whitespace word of ``frame`` tokenizes to the same
    pieces with both tokenizers, the full one's ids renumbered; raise AssertionError at the first that does not."""
    from headlab.core.evaluate import encode, encode_sentences
    from headlab.core.grades import STUDY_SCALE

    sentences = frame["query"].tolist() + frame["title"].tolist()
    words = sorted({w for text in sentences for w in str(text).split()})
    checks = {
        "pairs": (encode(full, frame, STUDY_SCALE).input_ids, encode(trimmed, frame, STUDY_SCALE).input_ids),
        "sentences": (
            encode_sentences(full, sentences, [1] * len(sentences), STUDY_SCALE).input_ids,
            encode_sentences(trimmed, sentences, [1] * len(sentences), STUDY_SCALE).input_ids,
        ),
        "words": (full(words)["input_ids"], trimmed(words)["input_ids"]),
    }
    for kind, (old, new) in checks.items():
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if [new_id.get(t, -1) for t in a] != b:
                raise AssertionError(f"{kind} {i} tokenizes differently after trimming: {a} -> {b}")
    for name in ("pad_token_id", "cls_token_id", "sep_token_id", "unk_token_id", "mask_token_id"):
        if new_id.get(getattr(full, name)) != getattr(trimmed, name):
            raise AssertionError(f"{name} moved: {getattr(full, name)} -> {getattr(trimmed, name)}")
    return {kind: len(old) for kind, (old, _) in checks.items()}


def check_outputs(full_dir: Path, trimmed_dir: Path, frame, sample: int = 256, seed: int = 0) -> dict:
    """On ``sample`` pairs of ``frame`` (a seeded draw, encoded by each model's own tokenizer), the seeded 5-grade
    classifiers of both folders (:func:`headlab.models.loading.load_classifier`) start with the same head and give
    exactly the same logits, and both encoders (:func:`~headlab.models.loading.load_encoder`, eager) the same
    hidden states and attention maps; raise AssertionError otherwise."""
    import torch

    from headlab.core.evaluate import encode, padded
    from headlab.core.grades import STUDY_SCALE
    from headlab.models.loading import load_classifier, load_encoder, load_tokenizer

    rows = np.sort(np.random.default_rng(seed).choice(len(frame), min(sample, len(frame)), replace=False))
    part = frame.iloc[rows].reset_index(drop=True)
    batches = []
    for folder in (full_dir, trimmed_dir):
        encoded = encode(load_tokenizer(str(folder)), part, STUDY_SCALE)
        batches.append(padded(encoded, list(range(len(encoded))), load_tokenizer(str(folder)).pad_token_id or 0))
    if not torch.equal(batches[0]["attention_mask"], batches[1]["attention_mask"]):
        raise AssertionError("the trimmed tokenizer gives the pairs other lengths")
    outputs = []
    for folder, batch in zip((full_dir, trimmed_dir), batches):
        torch.manual_seed(seed)
        classifier = load_classifier(str(folder), STUDY_SCALE)
        encoder = load_encoder(str(folder), attn="eager")
        with torch.no_grad():
            logits = classifier(**batch).logits
            out = encoder(**batch, output_hidden_states=True, output_attentions=True)
        head = {k: v for k, v in classifier.state_dict().items() if k.startswith("classifier.")}
        outputs.append({"logits": logits, "hidden": out.hidden_states, "attentions": out.attentions, "head": head})
    first, second = outputs
    for name in first["head"]:
        if not torch.equal(first["head"][name], second["head"][name]):
            raise AssertionError(f"the seeded classifier head starts differently: {name}")
    compared = {"logits": [first["logits"]], "hidden": first["hidden"], "attentions": first["attentions"]}
    for kind, tensors in compared.items():
        others = [second["logits"]] if kind == "logits" else second[kind]
        for a, b in zip(tensors, others, strict=True):
            if not torch.equal(a, b):
                raise AssertionError(f"{kind} differ after trimming: max |diff| {(a - b).abs().max().item():.3g}")
    return {"pairs": len(part), "tokens": int(batches[0]["attention_mask"].sum())}


# --- packing --------------------------------------------------------------------------------------------------


def to_planes(data: bytes) -> bytes:
    """A safetensors file with its tensor bytes regrouped: byte 0 of every 4-byte word, then byte 1, ... (its
    header and any tail of fewer than 4 bytes stay as they are). :func:`from_planes` undoes it exactly."""
    start = 8 + int.from_bytes(data[:8], "little")
    body = np.frombuffer(data, dtype=np.uint8, offset=start)
    n = len(body) // 4 * 4
    planes = body[:n].reshape(-1, 4).T.tobytes()
    return data[:start] + planes + bytes(body[n:])


def from_planes(data: bytes) -> bytes:
    """The safetensors file :func:`to_planes` regrouped."""
    start = 8 + int.from_bytes(data[:8], "little")
    body = np.frombuffer(data, dtype=np.uint8, offset=start)
    n = len(body) // 4 * 4
    words = body[:n].reshape(4, -1).T.tobytes()
    return data[:start] + words + bytes(body[n:])


def pack(folders: dict[str, Path], target: Path, preset: int = 9 | lzma.PRESET_EXTREME) -> dict:
    """One ``.tar.xz`` of the asset ``folders`` (``{asset name: folder}``, markers left out), safetensors files as
    byte planes, with a manifest of every file's size and sha256; returns the manifest."""
    manifest: dict = {"files": {}}
    with tarfile.open(target, "w:xz", preset=preset) as tar:
        for name, folder in folders.items():
            for path in sorted(Path(folder).rglob("*")):
                if not path.is_file() or path.name == MARKER:
                    continue
                rel = f"{name}/{path.relative_to(folder).as_posix()}"
                data = path.read_bytes()
                manifest["files"][rel] = {"bytes": len(data), "sha256": sha256_bytes(data)}
                stored = to_planes(data) if path.suffix == ".safetensors" else data
                info = tarfile.TarInfo(rel + (PLANES if path.suffix == ".safetensors" else ""))
                info.size, info.mode, info.mtime = len(stored), 0o644, 0
                tar.addfile(info, io.BytesIO(stored))
        body = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode, info.mtime = len(body), 0o644, 0
        tar.addfile(info, io.BytesIO(body))
    return manifest


def unpack(archive: Path, cache: Path, pins: dict[str, str]) -> list[Path]:
    """Write the assets of ``archive`` into ``cache/assets/<name>/``, each file checked against the manifest, each
    folder marked complete with ``pins[name]`` (the asset's pinned sha256) last; returns the folders."""
    with tarfile.open(archive, "r:xz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        manifest = json.loads(tar.extractfile(members.pop(MANIFEST)).read())
        files: dict[str, bytes] = {}
        for name, member in members.items():
            if not member.isfile() or name.startswith("/") or ".." in Path(name).parts:
                raise ValueError(f"{archive}: refusing member {name!r}")
            data = tar.extractfile(member).read()
            if name.endswith(PLANES):
                name, data = name[: -len(PLANES)], from_planes(data)
            files[name] = data
    if set(files) != set(manifest["files"]):
        raise ValueError(f"{archive}: files {sorted(set(files) ^ set(manifest['files']))} disagree with its manifest")
    for name, data in files.items():
        expected = manifest["files"][name]
        if len(data) != expected["bytes"] or sha256_bytes(data) != expected["sha256"]:
            raise ValueError(f"{archive}: {name} is not the file packed (size or sha256)")
    folders = []
    for asset in sorted({name.split("/", 1)[0] for name in files}):
        folder = Path(cache) / "assets" / asset
        shutil.rmtree(folder, ignore_errors=True)
        for name, data in files.items():
            if name.startswith(asset + "/"):
                path = folder / name.split("/", 1)[1]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        (folder / MARKER).write_text(pins[asset] + "\n")
        folders.append(folder)
    return folders


# --- the two commands -----------------------------------------------------------------------------------------


def prepare(out: Path, sample: int = 256) -> Path:
    """Trim the cached minilm to stsb-en's rows, check it against the full model, and pack it with stsb-en into
    ``out``/:data:`PACK` (plus ``checks.json``: what was checked); returns the pack."""
    from headlab.inputs import load_data
    from headlab.inputs.assets import asset_path
    from headlab.models.loading import load_tokenizer

    full_dir, data_dir = asset_path("minilm", fetch=False), asset_path("stsb-en", fetch=False)
    frame = load_data("stsb-en")
    full = load_tokenizer(str(full_dir))
    keep = kept_ids(full, frame["query"].tolist() + frame["title"].tolist())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="minilm-trimmed-") as tmp:
        trimmed_dir = Path(tmp) / "minilm"
        new_id = trim_model(full_dir, trimmed_dir, keep)
        checks = {
            "kept_rows": len(keep),
            "of_rows": full.vocab_size,
            "tokenized": check_tokenization(full, load_tokenizer(str(trimmed_dir)), frame, new_id),
            "outputs_equal_on": check_outputs(full_dir, trimmed_dir, frame, sample),
        }
        print(f"[gpu_carry] trimmed minilm checked: {checks}", flush=True)
        target = out / PACK
        pack({"minilm": trimmed_dir, "stsb-en": data_dir}, target)
    (out / "checks.json").write_text(json.dumps(checks, indent=1) + "\n", encoding="utf-8")
    print(f"[gpu_carry] {target}: {target.stat().st_size / 2**20:.1f} MiB", flush=True)
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="trim, check and pack the default preset's assets (HEADLAB_CACHE holds them)")
    p.add_argument("--out", type=Path, required=True, help="folder for the pack")
    p.add_argument("--sample", type=int, default=256, help="pairs on which the outputs must be equal")
    u = sub.add_parser("unpack", help="write a pack's assets into HEADLAB_CACHE, checked, marked complete")
    u.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.out, args.sample)
        return 0
    cache = Path(os.environ.get("HEADLAB_CACHE") or Path.home() / ".cache" / "headlab")
    for folder in unpack(args.archive, cache, PINS):
        print(f"[gpu_carry] {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
