"""headlab.pages.two_tower: conditions against the cross-encoder, the two claims of the study (worse; worse where
terms are shared) and the comparisons shown without a verdict."""

import numpy as np
import pandas as pd
import pytest
from conftest import minilm_tokenizer

from headlab.core.evaluate import encode
from headlab.core.grades import STUDY_SCALE
from headlab.judging.verdicts import claims_file, render
from headlab.measures.roles import ENGLISH_STOPWORDS, shares_terms
from headlab.pages.two_tower import (
    BLOCKED,
    LEXICAL,
    REFERENCE,
    TWO_TOWERS,
    claims,
    comparisons_text,
    condition_table,
    difference,
    error_overlap,
    graded_conditions,
    masked_label,
    pretraining_note,
    shared_term_gap,
)

GRADES = np.array([1, 2, 3, 4, 5] * 40)


def _predictions(right_share: float, seed: int) -> np.ndarray:
    """Predictions right on about ``right_share`` of the pairs (wrong ones are off by one grade)."""
    rng = np.random.default_rng(seed)
    wrong = rng.random(len(GRADES)) > right_share
    return np.where(wrong, np.where(GRADES < 5, GRADES + 1, 1), GRADES)


def test_the_reference_row_changes_nothing_and_others_are_paired_against_it():
    predicted = {REFERENCE: _predictions(0.8, 0), "worse": _predictions(0.4, 1)}
    table = condition_table(predicted, GRADES, STUDY_SCALE, n_boot=300, study={"worse": -0.5}).set_index("label")
    assert table.loc[REFERENCE, "rel_change"] == 0 and np.isnan(table.loc[REFERENCE, "p_mcnemar"])
    worse = table.loc["worse"]
    assert worse.rel_change == pytest.approx(worse.accuracy / table.loc[REFERENCE, "accuracy"] - 1)
    assert worse.hi < 0 and worse.p_mcnemar < 0.001 and worse.study == -0.5
    assert worse.acc_lo < worse.accuracy < worse.acc_hi


def _gap(share_pairs, tower_wrong_on_sharing, tower_wrong_on_none, n=200, seed=0):
    """Per-pair answers: the cross-encoder right on every pair, the two towers wrong on the given share of each
    group."""
    rng = np.random.default_rng(seed)
    shares = np.arange(n) < share_pairs
    tower = np.where(shares, rng.random(n) >= tower_wrong_on_sharing, rng.random(n) >= tower_wrong_on_none)
    return tower.astype(int), np.ones(n, dtype=int), shares


def test_the_two_towers_claims_are_worse_and_worse_where_terms_are_shared():
    predicted = {REFERENCE: _predictions(0.8, 0), "two towers": _predictions(0.4, 1)}
    conditions = condition_table(predicted, GRADES, STUDY_SCALE, n_boot=300)
    tower, cross, shares = _gap(120, 0.5, 0.0)  # wrong only on pairs that share terms
    gap = shared_term_gap(tower, cross, shares, n_boot=500)
    rows = claims(conditions, gap, "two towers")
    assert [c.claim_id for c in rows] == ["two_tower.worse", "two_tower.fails_on_shared_terms"]
    assert "two_tower.as_masking" not in {c.claim_id for c in rows}
    worse, terms = rows
    assert (worse.kind, worse.verdict, worse.method) == ("effect", "holds", "paired bootstrap over test pairs")
    assert worse.p < 0.001 and worse.kappa_lost > 0 and not worse.at_floor and "McNemar p" in worse.reason
    assert terms.kind == "compare" and terms.verdict == "holds" and terms.hi < 0
    assert terms.ours == pytest.approx(gap["gap_sharing"] - gap["gap_none"]) and terms.n_examples == 200
    assert "points" in render([terms]) and "On the 120 pairs whose query and title share a term" in terms.reason
    assert claims_file(rows) == "claims_08_two_tower"
    even = shared_term_gap(*_gap(100, 0.3, 0.3, n=400, seed=3), n_boot=500)  # the towers lose as much everywhere
    assert even["lo"] < 0 < even["hi"]
    wide = claims(conditions, even, "two towers")[1]  # 400 pairs cannot show twice 2 points
    assert wide.verdict == "underpowered" and wide.mde > 2 * wide.min_size
    # on 4000 pairs, wrong on 3% and 2%: the adjusted interval reaches past 0 and past 2 points, a powered design
    close = shared_term_gap(*_gap(2000, 0.03, 0.02, n=4000, seed=1), n_boot=500)
    undecided = claims(conditions, close, "two towers")[1]
    assert undecided.verdict == "cannot tell" and undecided.lo_adj < -undecided.min_size and undecided.hi_adj > 0
    assert undecided.mde <= 2 * undecided.min_size
    # no pair without shared terms: nothing to compare with
    alone = claims(conditions, shared_term_gap(*_gap(200, 0.5, 0.0), n_boot=100), "two towers")[1]
    assert alone.verdict == "cannot tell" and "every test pair shares a term" in alone.reason
    assert claims(conditions, None, "two towers")[1].verdict == "cannot tell"


def test_the_shared_term_gap_on_a_small_example_by_hand():
    # sharing pairs: towers 1 of 4 right, cross 4 of 4 (gap -0.75); no shared term: towers 2 of 2, cross 1 of 2 (+0.5)
    tower = np.array([1, 0, 0, 0, 1, 1])
    cross = np.array([1, 1, 1, 1, 1, 0])
    shares = np.array([True, True, True, True, False, False])
    gap = shared_term_gap(tower, cross, shares, n_boot=200)
    assert (gap["n_sharing"], gap["n_none"], gap["tower_sharing"], gap["cross_none"]) == (4, 2, 0.25, 0.5)
    assert gap["gap_sharing"] == pytest.approx(-0.75) and gap["gap_none"] == pytest.approx(0.5)
    assert gap["difference"] == pytest.approx(-1.25) and gap["lo"] <= gap["difference"] <= gap["hi"]
    with pytest.raises(ValueError, match="differ in length"):
        shared_term_gap(tower, cross[:3], shares)


def test_pairs_share_terms_as_whole_words_without_stopwords():
    frame = pd.DataFrame(
        {
            "query": ["a dog runs", "the cat", "red cat, red", "playing"],
            "title": ["dogs run a lot", "the moon", "the cat, red!", "running"],
            "label": [1, 1, 1, 1],
        }
    )
    tokenizer = minilm_tokenizer()
    encoded = encode(tokenizer, frame, STUDY_SCALE)
    assert shares_terms(encoded, tokenizer, ENGLISH_STOPWORDS).tolist() == [False, False, True, False]
    assert shares_terms(encoded, tokenizer).tolist() == [True, True, True, False]  # "a", "the" count as terms


def test_comparisons_between_conditions_carry_no_verdict():
    cross = _predictions(0.8, 0)
    same = difference({REFERENCE: cross, "a": cross, "b": cross}, GRADES, "a", "b", n_boot=300)
    assert same["difference"] == 0 and "verdict" not in same
    apart = difference({REFERENCE: cross, "a": cross, "b": _predictions(0.3, 2)}, GRADES, "a", "b", n_boot=300)
    assert apart["lo"] > 0
    text = comparisons_text([same, apart])
    assert "- a against b: +0.0 [" in text and "points of the cross-encoder's accuracy" in text
    assert "holds" not in text and "cannot" not in text


def test_error_overlap_counts_every_pair_once():
    cross = np.array([1, 1, 0, 0, 0], dtype=bool)
    lexical = np.array([1, 0, 1, 0, 0], dtype=bool)
    table = error_overlap(cross, lexical).set_index("outcome")
    assert table["pairs"].tolist() == [1, 1, 1, 2] and table["share"].sum() == pytest.approx(1)
    assert table.attrs["lexical_right_on_cross_errors"] == pytest.approx(1 / 3)


def test_the_pretraining_confound_is_named_per_model():
    assert "two-tower" in pretraining_note("minilm") and "never as a two-tower" in pretraining_note("zh-char")
    assert "not recorded" in pretraining_note("/some/folder")
    assert all("one character per token" in pretraining_note(m) for m in ("e5-small-char", "e5-small-char-mlm"))


def test_the_cross_encoder_conditions_come_from_05s_sweep_in_its_precision(tmp_path, monkeypatch):
    from tiny_setup import tiny_setup

    from headlab.core import device as device_module
    from headlab.core.engine import MaskEngine
    from headlab.core.evaluate import predict
    from headlab.core.masking import head_grid
    from headlab.measures.matching import term_matching_specs
    from headlab.pages.two_tower import cross_encoder_grades

    monkeypatch.setenv(device_module.PRECISION, "bf16")
    setup = tiny_setup(tmp_path, n_right=3)
    layers, heads = head_grid(setup.model)
    matching = [(0, 1), (1, 2)]
    swept = setup.sweep(
        term_matching_specs(layers, heads, matching, 2, 2, setup.params.seed), "term_matching", progress=False
    )
    evaluated = []
    real = MaskEngine.probabilities
    monkeypatch.setattr(MaskEngine, "probabilities", lambda self, masks: evaluated.extend(masks) or real(self, masks))
    grades = cross_encoder_grades(setup, matching, 2, 2)
    assert not evaluated  # 05's masks are read, not run again
    by_mask = swept.pivot(index="example", columns="mask_id", values="predicted")
    np.testing.assert_array_equal(grades["masked"], by_mask["matching"])
    np.testing.assert_array_equal(grades["unmasked"], by_mask["none"])
    sep = setup.tokenizer.sep_token_id
    run = dict(batch_size=setup.batch_size, pad_id=setup.pad_id, block_across=sep)
    bf16 = predict(setup.model, setup.encoded, precision="bf16", **run)
    fp32 = predict(setup.model, setup.encoded, **run)
    assert np.abs(bf16 - fp32).max() > 1e-4  # the precisions differ, and the condition takes the sweeps' one
    np.testing.assert_array_equal(grades["within sentence"], STUDY_SCALE.predicted(bf16))


def test_two_tower_probs_fine_tune_on_the_labs_settings_and_grade_its_pairs(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import save_file
    from tiny_setup import tiny_setup

    from headlab.models.two_tower import HEAD_FILE, TwoTower, load_two_tower, pair_encodings, predict_two_tower
    from headlab.pages import two_tower

    lab = tiny_setup(tmp_path / "run")
    folder = tmp_path / "two-tower"  # what fine-tuning would leave: the encoder, its grading head, the tokenizer
    torch.manual_seed(0)
    trained = TwoTower(lab.model.bert, 5)
    trained.encoder.save_pretrained(folder, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in trained.head.state_dict().items()}, folder / HEAD_FILE)
    lab.tokenizer.save_pretrained(folder)
    asked = []
    monkeypatch.setattr(
        two_tower, "finetune_two_tower", lambda config, device: asked.append((config, device)) or folder
    )

    found, probs = two_tower.two_tower_probs(lab)
    assert found == folder and asked == [(lab.params.finetune_config, lab.device)]
    queries, titles = pair_encodings(lab.tokenizer, lab.frame, lab.scale)
    assert probs.shape == (len(lab.frame), 5) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    expected = predict_two_tower(load_two_tower(folder), queries, titles, batch_size=len(lab.frame))
    np.testing.assert_allclose(probs, expected, atol=1e-5)  # the lab's (ragged) batches grade as one batch does


def test_graded_conditions_names_every_grader_as_its_row_and_the_floor_by_the_training_majority():
    """Notebook 08's graders, assembled by the page: the rows' names the scorecard's claims read (the two towers, 05's
    k heads masked), the lexical grader fitted on training pairs only, and the floor at the training pairs' commonest
    grade, not the test split's."""
    from types import SimpleNamespace

    words = ["cat", "dog", "bird", "fish", "tree", "rock"]
    train = pd.DataFrame(
        {
            "query": [f"{words[i % 6]} {words[(i + 1) % 6]}" for i in range(30)],
            "title": [f"{words[i % 6]} {words[(i + 2) % 6]}" for i in range(30)],
            "label": [4] * 20 + [1] * 10,
        }
    )
    test = train.iloc[:8].assign(label=[1] * 8)  # the test split's commonest grade is 1: the floor must say 4
    lab = SimpleNamespace(
        params=SimpleNamespace(train_frame=lambda: train), frame=test, encoded=[0] * len(test), scale=STUDY_SCALE
    )
    cross = {name: np.full(8, grade) for name, grade in (("unmasked", 3), ("masked", 2), ("within sentence", 5))}
    tower = np.eye(5)[np.full(8, 1)]  # probabilities: grade 2 everywhere
    graded = graded_conditions(lab, cross, tower, k=5)
    assert list(graded) == [REFERENCE, "5 term-matching heads masked", BLOCKED, TWO_TOWERS, LEXICAL, "always grade 4"]
    assert masked_label(5) in graded and graded[TWO_TOWERS].tolist() == [2] * 8
    assert graded["always grade 4"].tolist() == [4] * 8 and graded[BLOCKED].tolist() == [5] * 8
    assert set(graded[LEXICAL]) <= {1, 2, 3, 4, 5} and len(graded[LEXICAL]) == 8
