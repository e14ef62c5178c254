"""The character-level Chinese BERT headlab pretrains: vocabulary, masking, batches, held-out text, the run."""

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from headlab.core.device import PRECISION
from headlab.core.evaluate import encode
from headlab.core.grades import STUDY_SCALE
from headlab.inputs import pku
from headlab.models.loading import ModelError, load_classifier, load_encoder, load_tokenizer, resolve_model
from headlab.models.names import model_dir
from headlab.models.pretrain import (
    SPECIALS,
    PretrainConfig,
    PretrainCorpus,
    build_vocab,
    char_tokenizer,
    describe,
    make_batch,
    mask_tokens,
    model_note,
    pretrain,
    pretraining_report,
)

# a tiny newspaper: sentences "subject verb object 。" from fixed two-character words, so a model can learn to
# fill a gap inside a word, and held-out sentences are new combinations of words seen in training
SUBJECTS, VERBS, OBJECTS = (
    ["我们", "他们", "学生", "工人", "老师"],
    ["喜欢", "研究", "参观", "支持", "发展"],
    ["中文", "经济", "北京", "工厂", "文化", "１９９８年"],
)
_rng = np.random.default_rng(0)
PARAGRAPHS = tuple(
    tuple(
        w
        for _ in range(5)
        for w in (SUBJECTS[_rng.integers(5)], VERBS[_rng.integers(5)], OBJECTS[_rng.integers(6)], "。")
    )
    for _ in range(80)
)
TINY = dict(
    layers=2,
    heads=2,
    hidden=32,
    max_length=32,
    batch_size=16,
    min_char_count=1,
    eval_sentences=1000,
    held_out_share=0.25,
    lr=3e-3,
    warmup=0.05,
)


@pytest.fixture
def tiny_corpus(monkeypatch, tmp_path):
    """The pku asset replaced by PARAGRAPHS, and an empty cache."""
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pku, "_asset_paragraphs", lambda: PARAGRAPHS)
    monkeypatch.setattr(
        pku, "_asset_sentences", lambda: tuple(tuple(s) for p in PARAGRAPHS for s in pku._sentences(list(p)) if s)
    )


def test_vocab_is_specials_then_characters_by_frequency_and_every_token_is_one_character():
    vocab = build_vocab(["今天天气好。", "1998年ab", "今天"], min_count=1)
    assert vocab[: len(SPECIALS)] == SPECIALS
    assert vocab[len(SPECIALS)] == "天" and vocab.index("今") < vocab.index("好")  # seen 3, 2 and 1 times
    assert "##9" in vocab and "##b" in vocab and "9" not in vocab  # digits after the first continue a word
    tokens = char_tokenizer(vocab).tokenize("1998年AB今天")
    assert tokens == ["1", "##9", "##9", "##8", "年", "a", "##b", "今", "天"]
    assert "好" not in build_vocab(["今天天气好。", "今天"], min_count=2)  # rarer characters become [UNK]


def test_masking_never_touches_special_tokens_and_follows_80_10_10():
    rng = np.random.default_rng(0)
    ids = torch.randint(len(SPECIALS), 100, (200, 50))
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = True
    inputs, labels = mask_tokens(ids, special, 0.15, 100, rng)
    targets = labels != -100
    assert not targets[:, 0].any()
    assert abs(targets.float().mean().item() - 0.15 * 49 / 50) < 0.01
    assert torch.equal(labels[targets], ids[targets])
    assert torch.equal(inputs[~targets], ids[~targets])
    as_mask = (inputs[targets] == SPECIALS.index("[MASK]")).float().mean().item()
    unchanged = (inputs[targets] == ids[targets]).float().mean().item()
    assert abs(as_mask - 0.8) < 0.03 and 0.08 < unchanged < 0.14  # 10% kept, plus random draws of the same id


def test_batches_are_a_function_of_seed_and_step_and_nsp_pairs_true_neighbours(tiny_corpus):
    runs = pku.training_runs(0.25, 0)
    tokenizer = char_tokenizer(build_vocab([s for r in runs for s in r], 1))
    corpus = PretrainCorpus.from_runs(runs, tokenizer, 32)
    config = PretrainConfig(**TINY)
    first, again, other = make_batch(corpus, config, 3), make_batch(corpus, config, 3), make_batch(corpus, config, 4)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(first["input_ids"], other["input_ids"])
    assert 0 < first["next_sentence_label"].sum() < config.batch_size  # about half are random second sentences
    mlm_only = make_batch(corpus, PretrainConfig(**{**TINY, "objective": "mlm"}), 3)
    assert mlm_only["next_sentence_label"].sum() == 0
    # with the masks undone, an MLM-only row is [CLS] sentence [SEP] the sentence that follows it [SEP]
    ids = torch.where(mlm_only["labels"] != -100, mlm_only["labels"], mlm_only["input_ids"])[0]
    text = "".join(tokenizer.convert_ids_to_tokens(ids[ids != 0].tolist())).replace("##", "")
    first_sentence, second_sentence = text[len("[CLS]") : -len("[SEP]")].split("[SEP]")
    following = {(a, b) for run in runs for a, b in zip(run, run[1:])}
    assert (first_sentence, second_sentence) in {(a.lower(), b.lower()) for a, b in following}


def test_training_text_never_contains_a_held_out_sentence_and_runs_break_at_them(tiny_corpus):
    held_out = {"".join(s) for s in pku.held_out_sentences(None, 0.25, 0)}
    runs = pku.training_runs(0.25, 0)
    assert held_out and runs
    assert not held_out & {s for run in runs for s in run}
    # each run is consecutive text of one paragraph
    for run in runs:
        assert any("".join(run) in "".join(p) for p in PARAGRAPHS)


def test_pretraining_learns_and_saves_a_model_every_notebook_can_load(tiny_corpus):
    config = PretrainConfig(**TINY, steps=200)  # learns as much as in 400 steps (held-out accuracy 0.34 in both)
    folder = pretrain(config, "tiny-zh", progress=False)
    report = pretraining_report(folder)
    assert report["steps"] == 200 and report["tokens_seen"] > 200 * 16 * 8
    # the sentences are fixed phrases, so a model that learned anything beats guessing the commonest character
    assert report["masked_token_accuracy_lo"] > report["unigram_baseline_hi"]
    assert "200 steps" in describe(report) and "held-out" in describe(report)
    assert model_note(str(folder)) == describe(report)

    assert resolve_model(str(folder)) == str(folder)
    tokenizer = load_tokenizer(str(folder))
    assert tokenizer.tokenize("我们喜欢１９９８年") == ["我", "们", "喜", "欢", "１", "##９", "##９", "##８", "年"]
    long_pair = pd.DataFrame({"query": ["我们喜欢学习中文" * 3], "title": ["他们研究经济" * 3], "label": [3]})
    with pytest.warns(UserWarning, match="longer than max_length=32"):  # the model has 32 positions, not 128
        assert len(encode(tokenizer, long_pair, STUDY_SCALE).input_ids[0]) == 32
    classifier, encoder = load_classifier(str(folder), STUDY_SCALE), load_encoder(str(folder))
    assert classifier.config.num_hidden_layers == 2 and encoder.config.num_attention_heads == 2
    pretrained = load_file(folder / "model.safetensors")
    assert torch.equal(
        classifier.bert.embeddings.word_embeddings.weight, pretrained["bert.embeddings.word_embeddings.weight"]
    )  # the encoder is the pretrained one


def test_a_run_stopped_after_a_checkpoint_resumes_where_it_stopped(tiny_corpus, monkeypatch):
    import headlab.models.pretrain as pt

    config = PretrainConfig(**TINY, steps=30)
    calls, crashed = [], []
    real = pt.make_batch

    def crash_at_step_20(corpus, cfg, step):
        calls.append(step)
        if step == 20 and not crashed:
            crashed.append(step)
            raise KeyboardInterrupt
        return real(corpus, cfg, step)

    monkeypatch.setattr(pt, "make_batch", crash_at_step_20)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config, "crash", progress=False, save_every=10)
    assert calls[-1] == 20
    calls.clear()
    folder = pretrain(config, "crash", progress=False, save_every=10)
    assert calls[0] == 20  # steps 0-19 were restored from the checkpoint, not retrained
    monkeypatch.setattr(pt, "make_batch", real)
    reference = pretrain(config, "reference", progress=False, save_every=1000)
    a, b = load_file(folder / "model.safetensors"), load_file(reference / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("chosen", ["fp32", "bf16"])
def test_pretraining_runs_on_one_thread_in_the_precision_of_its_key(tiny_corpus, monkeypatch, chosen):
    """Whatever threads the process has, every step trains on one (its weights do not depend on the machine's cores,
    and the build runs it in a lane), under bf16 autocast exactly where the precision says so; the report says which,
    and a bf16 and an fp32 pretraining of one config are two cache entries."""
    import headlab.models.pretrain as pt

    monkeypatch.setenv(PRECISION, chosen)
    seen, real = [], pt.pretraining_losses

    def noting(model, batch, objective):
        seen.append((torch.get_num_threads(), torch.is_autocast_enabled("cpu")))
        return real(model, batch, objective)

    monkeypatch.setattr(pt, "pretraining_losses", noting)
    config = PretrainConfig(**TINY, steps=3)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        folder = pretrain(config, "threads", progress=False)
        assert torch.get_num_threads() == 2  # given back afterwards
    finally:
        torch.set_num_threads(threads)
    assert seen == [(1, chosen == "bf16")] * 3
    report = pretraining_report(folder)
    assert report["precision"] == chosen and "1 torch threads" in report["hardware"]
    monkeypatch.setenv(PRECISION, "bf16" if chosen == "fp32" else "fp32")
    assert model_dir(config, "threads") != folder


def test_a_named_model_that_was_never_trained_says_how_to_train_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path))
    with pytest.raises(ModelError, match=r"python -m headlab.models zh-char"):
        resolve_model("zh-char")


def test_bad_configs_are_refused_with_the_parameter_named():
    with pytest.raises(ValueError, match="objective"):
        PretrainConfig(objective="nsp")
    with pytest.raises(ValueError, match="multiple of heads"):
        PretrainConfig(hidden=100, heads=12)
    with pytest.raises(ValueError, match="mask_share"):
        PretrainConfig(mask_share=0)
