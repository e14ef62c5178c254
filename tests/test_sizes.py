"""The sizes policy (issue #64, item 4): one versioned, dated file computes every claim's size from the study's numbers
and words alone, and the registry, the rows and ``docs/judging.md`` follow it."""

from __future__ import annotations

import builtins
import importlib
import io
import math
import re
import sys
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from headlab.book.sensitivity import censored_from, judged_again, on_policy_scale
from headlab.judging import sizes
from headlab.judging.sizes import NO_CHANGE_MARGIN, POLICY, STUDY_NUMBERS, Scale, Source
from headlab.judging.units import ACCURACY_CHANGE, KAPPA_LOST, LEGACY
from headlab.judging.verdicts import RULE_VERSION, StudyClaim, judge, quote_in
from headlab.pages.claims import STUDY_CLAIMS

REPO = Path(__file__).resolve().parents[1]


def test_the_policy_is_computed_without_reading_results(monkeypatch):
    """Importing the policy afresh with every file under results/ unreadable gives the same sizes: nothing in it
    could have been chosen from the data."""
    before = {k: (s.min_size, s.margin, s.why) for k, s in POLICY.items()}
    real_open = builtins.open
    read = []

    def guarded(file, *args, **kwargs):
        if "results" in Path(str(file)).parts:
            read.append(str(file))
            raise PermissionError(f"the sizes policy read {file}")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded)  # Path.read_text and friends open through io.open
    monkeypatch.delitem(sys.modules, "headlab.judging.sizes")
    fresh = importlib.import_module("headlab.judging.sizes")
    assert not read
    assert {k: (s.min_size, s.margin, s.why) for k, s in fresh.POLICY.items()} == before
    assert "results" not in (REPO / "headlab" / "judging" / "sizes.py").read_text(encoding="utf-8").replace(
        "results/", ""
    ).replace("``results/``", "")


def test_the_policy_is_versioned_dated_and_covers_every_claim_the_registry_takes_its_sizes_from():
    assert isinstance(sizes.POLICY_VERSION, int) and sizes.POLICY_VERSION >= 1
    assert date.fromisoformat(sizes.POLICY_DATE) <= date.today()
    assert set(POLICY) == set(STUDY_CLAIMS)
    for claim_id, claim in STUDY_CLAIMS.items():
        size = POLICY[claim_id]
        assert (claim.min_size, claim.margin, claim.size_why, claim.size_source) == (
            size.min_size,
            size.margin,
            size.why,
            size.source.value,
        ), claim_id
        assert (claim.kind == "no_effect") == (size.margin > 0) and (claim.kind == "no_effect") != (size.min_size > 0)


def test_every_study_number_is_quoted_from_the_study_and_the_study_sizes_are_half_of_them():
    study = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
    for key, number in STUDY_NUMBERS.items():
        assert quote_in(study, number.quote), key
        assert number.printed in number.quote, key
        printed = re.search(r"[-+]?\d+(\.\d+)?", number.printed)
        if number.printed.endswith("%"):
            assert math.isclose(float(printed[0]) / 100, number.value), key
    assert sizes.SMALLEST_CHANGE == pytest.approx(0.0115)
    assert POLICY["layer_dependence.layer_8_gain"].min_size == pytest.approx(0.023 / 2)
    assert POLICY["term_matching.matching_costs"].min_size == pytest.approx(0.524 / 2)
    assert POLICY["term_matching.lower_half_costs"].source is Source.WORDS  # the study gives no number on kappa
    for size in POLICY.values():
        if size.source is Source.STUDY_SCALE:
            assert (size.min_size or size.margin) == sizes.SMALLEST_CHANGE and size.scale is Scale.ACCURACY


def test_no_loss_size_lies_inside_the_no_change_margin_of_its_unit():
    """Per unit: every effect's size is at least every no-effect margin in that unit (the margin moved to 1.15%)."""
    by_unit: dict[str, dict[str, list[float]]] = {}
    for claim_id, size in POLICY.items():
        kind = "margin" if STUDY_CLAIMS[claim_id].kind == "no_effect" else "size"
        by_unit.setdefault(size.unit.label, {"margin": [], "size": []})[kind].append(size.margin or size.min_size)
    shared = {label: v for label, v in by_unit.items() if v["margin"] and v["size"]}
    assert shared, "the accuracy unit holds both margins and sizes"
    for label, v in shared.items():
        assert min(v["size"]) >= max(v["margin"]), label
    assert NO_CHANGE_MARGIN == sizes.SMALLEST_CHANGE
    from headlab.pages.layer_dependence import HEAD_MARGIN

    assert HEAD_MARGIN == NO_CHANGE_MARGIN


def test_one_criterion_puts_each_claim_about_masks_on_kappa_or_accuracy():
    """A claim about masks reads kappa exactly where its words say collapse or its condition removes 40% of all heads
    or more (the study's collapse point); its unit says the same scale. The lower half moved to kappa, and so did
    keeping 5 heads of it (67 of 144 removed)."""
    assert sizes.COLLAPSE_POINT == 0.4
    about_masks = {k: s for k, s in POLICY.items() if s.criterion_scale is not None}
    assert len(about_masks) >= 10
    for claim_id, size in about_masks.items():
        assert size.scale is size.criterion_scale, claim_id
        assert (size.scale is Scale.KAPPA) == (size.collapse_words or size.removes >= 0.4), claim_id
    assert POLICY["term_matching.matching_keep_lower_half"].scale is Scale.KAPPA
    assert not POLICY["layer_dependence.high_heads_cost_less"].collapse_words  # "far less" is not a collapse
    assert POLICY["term_matching.lower_half_costs"].scale is Scale.KAPPA
    assert POLICY["term_matching.lower_half_costs"].unit == KAPPA_LOST
    assert POLICY["layer_dependence.layer_8_gain"].scale is Scale.ACCURACY
    assert STUDY_CLAIMS["term_matching.lower_half_costs"].direction == 1  # kappa lost rises


def test_a_claim_whose_only_number_is_one_example_is_judged_for_its_direction_at_a_stated_precision():
    """The shuffled title's grade 4 -> 2 is one pair's argmax: it gives a direction, so a clear negative shift holds
    (default's -0.024 [-0.035, -0.013], e5-en's -0.066 [-0.079, -0.053]) and a shift astride zero does not."""
    shuffle = STUDY_CLAIMS["word_order.shuffle_lowers_grade"]
    assert POLICY[shuffle.claim_id].source is Source.DIRECTION
    assert shuffle.min_size == sizes.SHUFFLE_PRECISION < 1 / 1000 + 1e-12
    assert judge(shuffle, -0.024, -0.035, -0.013, n_examples=1379).verdict == "holds"
    assert judge(shuffle, -0.066, -0.079, -0.053, n_examples=1379).verdict == "holds"
    assert judge(shuffle, 0.004, -0.002, 0.010, n_examples=1379).verdict not in ("holds", "opposite")


def test_a_comparison_with_one_side_at_the_floor_keeps_only_the_verdicts_on_its_bounds_side():
    """Lower minus upper, claimed positive. The upper half at the floor lost at least what was measured, so the
    difference is at most as measured (-1): "opposite" and "does not hold" stand, "holds" cannot. The lower half at
    the floor (+1): the difference is at least as measured, so only "holds" stands."""
    spec = StudyClaim("x.far_less", "02_layer_dependence", "c", "q", "compare", direction=1, min_size=0.2, size_why="w")
    assert judge(spec, -0.18, -0.23, -0.13, censored=-1).verdict == "opposite"
    assert judge(spec, 0.5, 0.45, 0.55, censored=-1).verdict == "cannot tell"
    assert judge(spec, 0.5, 0.45, 0.55, censored=-1).why.startswith("Censored")
    assert judge(spec, 0.5, 0.45, 0.55, censored=1).verdict == "holds"
    upper_down = judge(spec, -0.18, -0.23, -0.13, censored=1)
    assert upper_down.verdict == "cannot tell" and "would read opposite" in upper_down.why
    high = StudyClaim("x.high", "02_layer_dependence", "c", "q", "compare", direction=-1, min_size=0.2, size_why="w")
    assert judge(high, -0.5, -0.55, -0.45, censored=-1).verdict == "holds"  # a bound in the claimed direction
    words = "lower half: κ interval above 0; 40% of pairs get the commonest grade; upper half: κ interval reaches 0; "
    assert censored_from(words + "100% of pairs get one grade", "layer_dependence.high_heads_cost_less") == -1
    assert censored_from(words + "100% of pairs get one grade", "pruning.keep_low_heads") == 1
    both = "lower half: κ interval reaches 0; upper half: 98% of pairs get one grade"
    assert censored_from(both, "layer_dependence.high_heads_cost_less") == 0
    assert censored_from("κ interval reaches 0", "layer_dependence.high_heads_cost_less") == 0
    with pytest.raises(KeyError, match="FIRST_SIDE"):
        censored_from(words + "100% of pairs get one grade", "x.unknown")


def _old_lower_half_row(**kw) -> pd.DataFrame:
    row = dict(
        preset="default",
        model="m",
        data="d",
        claim_id="term_matching.lower_half_costs",
        finding="f",
        claim="c",
        quote="q",
        kind="effect",
        study=-0.865,
        ours=-0.36,
        lo=-0.43,
        hi=-0.30,
        unit=ACCURACY_CHANGE.label,
        method="paired",
        n_examples=690,
        n_draws=1,
        p=None,
        verdict="cannot tell",
        reason="Old words.",
        rule="",
        min_size=0.4325,
        margin=0.0,
        size_why="old",
        level=0.998,
        lo_adj=-0.45,
        hi_adj=-0.28,
        kappa_lost=1.0,
        kappa_lost_lo=1.0,
        kappa_lost_hi=1.0,
        at_floor=False,
        floor_reason="",
        study_unit="",
        page="05_term_matching",
        mean_ablation="",
        df=math.inf,
        search=1,
        tally="study",
        size_source="study",
        rule_version=4,
        weakest_of=1,
        far_adj=math.nan,
        mde=0.56,
    )
    return pd.DataFrame([row | kw])


def test_judging_again_moves_a_row_to_the_policys_scale_and_keeps_its_accuracy_beside():
    """e5-zh-char's lower half: -36% of accuracy (a constant answer's floor caps it short of the 43.25% size) but
    100% of kappa lost: on the policy's scale it holds, and the accuracy's verdict is kept as the other scale's."""
    again = judged_again(_old_lower_half_row(), {"default": 6}).iloc[0]
    assert again["rule_version"] == RULE_VERSION
    assert again["unit"] == KAPPA_LOST.label and again["study_unit"] == ACCURACY_CHANGE.label
    assert (again["ours"], again["lo"], again["hi"]) == (1.0, 1.0, 1.0)
    assert (again["accuracy"], again["accuracy_lo"], again["accuracy_hi"]) == (-0.36, -0.43, -0.30)
    assert again["verdict"] == "holds"
    assert again["other_scale"] == "claimed" and not again["scale_flip"]  # accuracy falls too: the same sign
    assert "sizes policy" in again["reason"] and "rule 4 said: cannot tell" in again["reason"]
    assert again["reason"].startswith("Old words.") and again["claim"] == STUDY_CLAIMS[again["claim_id"]].claim
    flipped = judged_again(_old_lower_half_row(ours=0.05, lo=0.02, hi=0.08), {"default": 6}).iloc[0]
    assert flipped["other_scale"] == "other" and flipped["scale_flip"]
    row = next(_old_lower_half_row().itertuples())
    assert on_policy_scale(row).ours == 1.0


def test_the_committed_rows_follow_the_policy():
    """Every row judged by the newest rule committed (the current one, or the one before it until the rebuild that
    judges by the current one) carries its registered claim's policy size, the policy's unit where the claim is
    judged, and a row whose verdict differs on the other scale says so."""
    table = pd.read_csv(REPO / "results" / "scorecard.csv")
    newest = int(table["rule_version"].max())
    assert newest in (RULE_VERSION, RULE_VERSION - 1)
    current = table[(table["rule_version"] == newest) & table["claim_id"].isin(list(POLICY))]
    assert len(current) > 100
    legacy = {unit.label for unit in LEGACY}
    for row in current.itertuples():
        size = POLICY[row.claim_id]
        if row.unit in legacy and row.rule_version < RULE_VERSION:
            continue  # measured in a unit the policy has since replaced: its size comes with the rebuild
        assert (row.min_size, row.margin) == pytest.approx((size.min_size, size.margin), rel=1e-5), row.claim_id
        if not pd.isna(row.ours) and size.scale is not Scale.OWN:
            assert row.unit.startswith("share of the unmasked") == (size.scale is Scale.KAPPA), row.claim_id
    lower = current[current["claim_id"] == "term_matching.lower_half_costs"]
    assert (lower["unit"] == KAPPA_LOST.label).all() and lower["accuracy"].notna().all()
    assert (current["other_scale"].fillna("") != "").sum() > 10
    existential = current[current["claim_id"] == "layer_dependence.some_heads_improve"]
    assert (existential["other_scale"].fillna("") == "").all()  # one head of many cannot speak for every head
    compares = current[(current["kind"] == "compare") & current["floor_reason"].fillna("").str.contains("; ")]
    for row in compares.itertuples():
        assert row.censored == censored_from(row.floor_reason, row.claim_id), (row.preset, row.claim_id)
    from headlab.book.sensitivity import REMEASURED

    kept = table[table["rule_version"] < newest]
    assert set(kept["claim_id"]) <= {*REMEASURED, "layer_dependence.some_heads_improve"}


def test_judging_md_carries_the_policy_block_generated_from_the_policy():
    from tools import readme

    text = (REPO / "docs" / "judging.md").read_text(encoding="utf-8")
    assert readme.block("sizes") in text
    assert f"v{sizes.POLICY_VERSION}" in readme.block("sizes") and sizes.POLICY_DATE in readme.block("sizes")
    for claim_id in POLICY:
        assert f"`{claim_id}`" in readme.block("sizes")


def test_a_quoted_row_of_the_studys_table_reads_as_its_cells_named_by_the_tables_head():
    study = (Path(__file__).parents[1] / "docs" / "study.md").read_text(encoding="utf-8")
    for row, (caption, head) in sizes.STUDY_TABLE_HEADS.items():
        assert quote_in(study, f"{caption}:\n\n{head}\n|---|---|---|---|---|---|\n{row}")  # that very table
        text = sizes.readable_quote(row)
        assert "|" not in text and "“" not in text  # no table row, and no quotation marks round a paraphrase
        assert text.startswith("its table, relative change of test accuracy by mask: none +0%, 5 random heads +0%")
        assert "the 5 matching heads -52.4%" in text
    assert sizes.readable_quote("Masking 5 random heads changes nothing") == "“Masking 5 random heads changes nothing”"
    quoted = [c for c in STUDY_CLAIMS.values() if c.quote in sizes.STUDY_TABLE_HEADS]
    assert quoted and all("|" not in sizes.readable_quote(c.quote) for c in quoted)
