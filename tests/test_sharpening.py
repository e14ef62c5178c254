import math

import numpy as np
import pandas as pd
import pytest

from headlab.core.grades import STUDY_SCALE
from headlab.judging.units import ATTENTION_CHANGE, unit_of
from headlab.judging.verdicts import claims_file
from headlab.pages.finetune_delta import (
    CHANGES,
    Choice,
    choose_heads,
    claims,
    deltas,
    no_op_table,
    scope_changes,
    verdict,
)

IDS = [
    "sharpening.match_rises",
    "sharpening.match_rises/matching_heads",
    "sharpening.match_rises/excess_all_heads",
    "sharpening.match_rises/excess_matching_heads",
    "sharpening.self_falls",
    "sharpening.self_falls/matching_heads",
    "sharpening.sep_falls",
    "sharpening.sep_falls/matching_heads",
]


def role_table(rng, examples=30, heads=3, shift=None):
    """A per-example role table of a 1-layer model with every change's metric; ``shift`` adds to metrics."""
    table = pd.DataFrame(
        {"example": np.repeat(np.arange(examples), heads), "layer": 0, "head": np.tile(np.arange(heads), examples)}
    )
    for change in CHANGES:
        table[change.metric] = rng.uniform(0.2, 0.3, len(table))
    for metric, value in (shift or {}).items():
        table[metric] += value
    return table


def a_choice(heads, n_pairs=15):
    """The :class:`Choice` of ``heads``, as if chosen on ``n_pairs`` dev pairs (the claims only describe it)."""
    ranking = pd.DataFrame([(l, h, 0.5) for l, h in heads], columns=["layer", "head", "match_excess"])
    return Choice(list(heads), ranking, "match_excess", "dev", n_pairs, "test")


def _by_id(changes, heads=((0, 0),)):
    return {c.claim_id: c for c in claims(changes, a_choice(heads))}


def test_claims_hold_when_the_shares_move_as_the_study_says():
    rng = np.random.default_rng(0)
    before = role_table(rng)
    after = before.copy()
    after[["match", "match_excess"]] += 0.1
    after[["self", "sep"]] -= 0.05
    after["cls"] += 0.001
    delta = deltas(before, after, heads=[(0, 0), (0, 1)], n_boot=200)
    assert delta.loc[delta["matching"], "head"].tolist() == [0, 1] * len(CHANGES)
    changes = scope_changes(delta)
    assert changes["scope"].tolist() == ["all heads", "term-matching heads"] * len(CHANGES)
    row = changes.set_index(["metric", "scope"]).loc[("self", "all heads")]
    assert row["delta"] == pytest.approx(-0.05) and row["relative"] == pytest.approx(-0.05 / row["before"])
    rows = claims(changes, a_choice([(0, 0), (0, 1)], n_pairs=12))
    found = {c.claim_id: c for c in rows}
    # one row per claimed change and scope, all heads first: [CLS] is context, not a claim of the study
    assert list(found) == IDS
    assert {c.verdict for c in found.values() if "/" not in c.claim_id} == {"holds"}
    assert {c.verdict for c in found.values() if "/" in c.claim_id} == {"not judged"}  # evidence, outside the family
    claim = found["sharpening.self_falls"]  # the registered claim's own row is the all-heads mean
    assert (claim.ours, claim.lo, claim.hi, claim.n_examples) == (row["delta"], row["lo"], row["hi"], 30)
    assert claim.study is None and claim.page == "06_finetune_delta" and claim.method.endswith("over test pairs")
    assert claims_file(rows) == "claims_06_finetune_delta"
    assert (
        "The 2 heads were chosen by their mean `match_excess` on the pretrained model (before fine-tuning) over 12 "
        "dev pairs, none of them among the test pairs" in found["sharpening.match_rises/matching_heads"].reason
    )
    assert "no choice of heads" in found["sharpening.match_rises"].reason
    assert "points" in ATTENTION_CHANGE.number(0.1) and "-5.0 points" in unit_of(claim.unit).number(claim.ours)


def test_all_heads_lead_and_the_term_matching_heads_are_sub_rows():
    rng = np.random.default_rng(3)
    before = role_table(rng)
    after = before.copy()
    after.loc[after["head"] == 0, "match"] += 0.3  # the chosen head rises far more than the mean over heads
    found = _by_id(scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=100)))
    assert {c.study_claim for c in found.values()} == {
        "sharpening.match_rises",
        "sharpening.self_falls",
        "sharpening.sep_falls",
    }
    main, chosen = found["sharpening.match_rises"], found["sharpening.match_rises/matching_heads"]
    assert main.claim == "Attention between identical query/title terms rises with fine-tuning"
    assert main.ours == pytest.approx(0.1) and chosen.ours == pytest.approx(0.3)
    assert chosen.claim.endswith("(term-matching heads)") and chosen.quote == main.quote and chosen.kind == "effect"
    excess = found["sharpening.match_rises/excess_all_heads"]
    assert "identity-blind" in excess.claim and excess.claim.endswith("(all heads)")
    assert found["sharpening.match_rises/excess_matching_heads"].claim.endswith("(term-matching heads)")
    assert found["sharpening.sep_falls/matching_heads"].study_claim == "sharpening.sep_falls"


def _chooser(tmp_path, tokenizer, fine_tuned):
    """``choose(test, dev, pretrained)``: the choice of :func:`choose_heads` on a lab whose data file holds the pairs
    ``test`` and ``dev`` (a fresh file and results folder each time, so no stored table is shared)."""
    from headlab.core.evaluate import encode
    from headlab.lab.lab import Lab
    from headlab.lab.params import Params

    def choose(test, dev, pretrained, model=fine_tuned, limit=None):
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        data = folder / "pairs.csv"
        pd.concat([test.assign(split="test"), dev.assign(split="dev")]).to_csv(data, index=False)
        params = Params(data=str(data), device="cpu", run_dir=str(folder / "runs"), batch_size=4)
        frame = params.eval_frame()
        lab = Lab(params, model, tokenizer, frame, encode(tokenizer, frame, STUDY_SCALE))
        return choose_heads(lab, pretrained, k=2, by="match_excess", limit=limit)

    return choose


DEV = pd.DataFrame(
    {
        "query": ["green apple pie", "the old man walks", "a cold blue lake", "fast red car", "kids play ball"],
        "title": ["apple pie recipe", "an old man walks home", "blue lake in winter", "a red car, fast", "ball kids"],
        "label": [4, 3, 4, 5, 2],
    }
)


def test_the_heads_are_chosen_on_dev_pairs_by_the_pretrained_model(tmp_path):
    """Only the dev pairs and the pretrained model choose the heads: other test pairs or another fine-tuned model
    leave the choice as it is; other dev pairs or another pretrained model change it."""
    from conftest import minilm_tokenizer
    from tiny_setup import PAIRS, tiny_classifier

    tokenizer = minilm_tokenizer()
    fine_tuned, pretrained = (tiny_classifier(len(tokenizer), seed=s) for s in (0, 1))
    choose = _chooser(tmp_path, tokenizer, fine_tuned)
    choice = choose(PAIRS, DEV, pretrained)
    assert (choice.split, choice.measured_on, choice.n_pairs, len(choice.heads)) == ("dev", "test", len(DEV), 2)
    assert all(layer < 2 for layer, _ in choice.heads)  # the lower half of 4 layers, as notebook 05
    assert choice.ranking["match_excess"].is_monotonic_decreasing
    assert "over 5 dev pairs, none of them among the test pairs" in choice.describe()
    other_test = PAIRS.iloc[::-1].assign(title=PAIRS["query"])
    assert choose(other_test, DEV, pretrained).heads == choice.heads
    assert choose(PAIRS, DEV, pretrained, model=tiny_classifier(len(tokenizer), seed=2)).heads == choice.heads
    assert choose(PAIRS, PAIRS, pretrained).heads != choice.heads
    assert choose(PAIRS, DEV, tiny_classifier(len(tokenizer), seed=3)).heads != choice.heads
    assert choose(PAIRS, DEV, pretrained, limit=3).n_pairs == 3  # a seeded sample of the dev pairs


def test_the_heads_are_never_chosen_on_the_split_they_are_measured_on(tmp_path):
    from dataclasses import replace

    from tiny_setup import tiny_setup

    lab = tiny_setup(tmp_path / "runs")
    on_dev = replace(lab, params=replace(lab.params, eval_split="dev"))
    with pytest.raises(ValueError, match="chosen on the dev pairs"):
        choose_heads(on_dev, lab.model, k=1)


def test_every_change_is_measured_on_every_pair_of_the_tables():
    rng = np.random.default_rng(4)
    before = role_table(rng, examples=40, heads=4)
    after = before.copy()
    after.loc[after["example"] < 10, "match"] += 0.4  # a rise on a quarter of the pairs
    delta = deltas(before, after, [(0, 1)], n_boot=100)
    assert set(delta["n_examples"]) == {40}
    own = delta[(delta["metric"] == "match") & (delta["scope"] == "subset")].iloc[0]
    assert own["delta"] == pytest.approx(0.1)


def test_claims_opposite_and_unclear():
    rng = np.random.default_rng(1)
    before = role_table(rng)
    after = before.copy()
    after["match"] -= 0.1  # the opposite
    after["self"] -= 0.001  # sure, but short of half a point of attention: the smallest effect of interest
    after["sep"] += rng.normal(0, 0.05, len(after))  # noise
    found = _by_id(scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=200)))
    assert found["sharpening.match_rises"].verdict == "opposite"
    small = found["sharpening.self_falls"]
    assert small.verdict == "does not hold" and "smallest effect of interest" in small.reason
    unclear = found["sharpening.sep_falls/matching_heads"]
    assert unclear.verdict == "not judged" and unclear.lo < 0 < unclear.hi


def test_the_verdict_is_the_adjusted_interval_s():
    """A hand-made table: the verdict follows the adjusted interval (Bonferroni over the model's claims), whatever
    the point estimate or the raw interval says."""
    changes = pd.DataFrame(
        {
            "claim": "x",
            "metric": "sep",
            "scope": ["term-matching heads", "all heads"],
            "expected": "falls",
            "before": [0.5, 0.5],
            "after": [0.4, 0.52],
            "delta": [-0.1, 0.02],
            "lo": [-0.2, 0.001],
            "hi": [0.01, 0.04],
            "relative": [-0.2, 0.04],
            "n_examples": [40, 40],
        }
    )
    found = _by_id(changes)
    assert found["sharpening.sep_falls/matching_heads"].verdict == "not judged"  # a sub-row: shown, not judged
    raw_only = found["sharpening.sep_falls"]  # the raw interval above 0, the adjusted one not
    # not "opposite": the adjusted interval reaches past the smallest fall, on a design too wide to show twice it
    assert raw_only.verdict == "underpowered" and raw_only.lo_adj < -raw_only.min_size and 0 < raw_only.lo
    assert raw_only.mde > 2 * raw_only.min_size
    # the same raw interval above 0, narrow: the adjusted one reaches 0 but not the smallest fall, which it rules out
    narrow = _by_id(changes.assign(delta=[-0.1, 0.002], lo=[-0.2, 0.0005], hi=[0.01, 0.0035]))["sharpening.sep_falls"]
    assert narrow.verdict == "does not hold" and -narrow.min_size < narrow.lo_adj < 0 < narrow.lo
    assert (raw_only.ours, raw_only.lo, raw_only.hi, raw_only.n_examples) == (0.02, 0.001, 0.04, 40)
    opposite = _by_id(changes.assign(lo=[-0.2, 0.01], hi=[0.01, 0.03]))["sharpening.sep_falls"]
    assert opposite.verdict == "opposite" and opposite.lo_adj > 0


def test_a_change_not_measured_cannot_be_told():
    found = _by_id(
        scope_changes(pd.DataFrame(columns=["metric", "scope", "before", "after", "delta", "lo", "hi", "n_examples"]))
    )
    assert list(found) == IDS
    claim = found["sharpening.match_rises"]
    assert claim.verdict == "cannot tell" and math.isnan(claim.ours) and claim.reason.startswith("Not measured")


def test_no_op_table_and_verdict_name_the_sink():
    rng = np.random.default_rng(2)
    before = role_table(rng)
    after = before.copy()
    after["cls"] = 0.6  # every head parks on [CLS] after fine-tuning
    no_op = no_op_table(before, after)
    assert no_op["model"].tolist() == ["pretrained", "fine-tuned"]
    assert no_op.loc[1, "heads_cls_over_sep"] == 3 and no_op.loc[1, "cls"] == pytest.approx(0.6)
    changes = scope_changes(deltas(before, after, heads=[(0, 0)], n_boot=100))
    rows = claims(changes, a_choice([(0, 0)]))
    text = verdict(rows, changes, no_op)
    assert "[CLS] plays the no-op role" in text and "3 of 3 heads" in text
    # a line per claim and scope (rendered from the rows given), one on [CLS] and one on the no-op token
    assert text.count("\n> **") + text.startswith("> **") == len(rows)  # a callout per claim
    assert len([line for line in text.splitlines() if line.startswith("- ")]) == 2
    assert text.count("**does not hold** ·") == 3  # no change: shown short of the smallest effect of interest
    assert text.count("**not judged** ·") == len(rows) - 3
    assert "- Attention to [CLS] (not in the study): all heads:" in text
