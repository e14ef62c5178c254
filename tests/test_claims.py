"""headlab.findings.claims: one verdict rule for every claim (effect, no effect, more than a control, a comparison),
floor-aware accuracy effects, a correction across a model's claims, and claims that quote the study word for word."""

import math
from pathlib import Path

import pytest

from headlab.core.stats import Floor
from headlab.findings.claims import (
    ALPHA,
    FAMILY,
    STUDY_CLAIMS,
    VERDICTS,
    Claim,
    adjusted,
    claims_file,
    claims_table,
    judge,
    number_text,
    quote_in,
    render,
    with_mean_ablation,
)

STUDY_TEXT = (Path(__file__).parent / "data" / "study.md").read_text(encoding="utf-8")
CHANGE = "relative change of accuracy"


def _measured(claim_id="term_matching.lower_half_costs", **changes):
    fields = dict(
        ours=-0.30,
        lo=-0.35,
        hi=-0.25,
        unit=CHANGE,
        method="paired bootstrap over test pairs",
        n_examples=1379,
        reason="The lower half masked",
    )
    return Claim.measured(claim_id, **{**fields, **changes})


@pytest.mark.parametrize("claim_id", sorted(STUDY_CLAIMS))
def test_every_registered_claim_quotes_the_study_word_for_word(claim_id):
    assert quote_in(STUDY_TEXT, STUDY_CLAIMS[claim_id].quote), STUDY_CLAIMS[claim_id].quote


def test_quotes_are_checked_word_for_word_not_loosely():
    assert quote_in("a  b\n c", "a b c") and not quote_in("a b c", "a c")


def test_the_claims_the_study_does_not_make_are_gone():
    assert "word_order.case_is_typical" not in STUDY_CLAIMS and "two_tower.as_masking" not in STUDY_CLAIMS
    assert "layer_dependence.layer_10_head_hurts" not in STUDY_CLAIMS  # one verdict per sentence: 07's head
    assert "redundancy.gain_at_10" not in STUDY_CLAIMS  # it shared its number with no_loss_below_20
    assert FAMILY == len(STUDY_CLAIMS)


def test_an_effect_holds_is_opposite_or_cannot_be_told_by_the_adjusted_interval():
    spec = STUDY_CLAIMS["term_matching.lower_half_costs"]  # an effect, direction -1
    assert judge(spec, -0.30, -0.35, -0.25).verdict == "holds"
    assert judge(spec, 0.30, 0.25, 0.35).verdict == "opposite"
    # the raw 95% interval excludes 0, the adjusted one does not: not decided after the correction
    near = judge(spec, -0.03, -0.055, -0.005)
    assert near.verdict == "cannot tell" and near.lo_adj < -0.055 and near.hi_adj > 0
    assert VERDICTS == ("holds", "does not hold", "opposite", "cannot tell", "not comparable")


def test_the_adjusted_interval_is_the_95_interval_widened_to_the_bonferroni_level():
    lo, hi = adjusted(-0.30, -0.35, -0.25, 1 - ALPHA / FAMILY)
    assert lo < -0.35 and hi > -0.25 and math.isclose(-0.30 - lo, hi + 0.30)
    assert adjusted(-0.30, -0.35, -0.25, 0.95) == pytest.approx((-0.35, -0.25))


def test_a_claimed_size_is_part_of_the_verdict():
    spec = STUDY_CLAIMS["cls_head.spreads_without_matching"]  # "many more terms": at least a factor 1.5
    small = judge(spec, math.log(1.01), math.log(1.005), math.log(1.015))
    assert small.verdict == "does not hold" and "short of the claimed size" in small.why
    assert judge(spec, math.log(2.0), math.log(1.8), math.log(2.2)).verdict == "holds"


def test_no_effect_is_an_equivalence_test_with_a_stated_margin():
    spec = STUDY_CLAIMS["term_matching.random_no_change"]
    assert judge(spec, 0.001, -0.009, 0.011).verdict == "holds"
    assert judge(spec, -0.10, -0.14, -0.06).verdict == "does not hold"
    # a loss distinguishable from zero but not beyond the margin is not "does not hold": the data do not exclude it
    assert judge(spec, -0.049, -0.087, -0.014).verdict == "cannot tell"
    assert "margin" in judge(spec, 0.0, -0.01, 0.01).why and spec.size_why


def test_a_comparison_of_two_conditions_at_the_floor_is_saturated_not_evidence():
    spec = STUDY_CLAIMS["layer_dependence.high_heads_cost_less"]
    at_floor = judge(spec, -0.20, -0.25, -0.15, at_floor=True)
    assert at_floor.verdict == "cannot tell" and "Saturated" in at_floor.why
    assert judge(spec, -0.20, -0.25, -0.15).verdict == "opposite"  # the same numbers above the floor decide
    assert judge(spec, 0.05, 0.0, 0.10).verdict == "does not hold"  # short of "far less" (20 points)


def test_an_empirical_p_that_cannot_reach_the_adjusted_level_says_so():
    spec = STUDY_CLAIMS["term_matching.matching_costs"]
    twenty = judge(spec, -0.5, -0.55, -0.45, p=1 / 21, n_draws=20)
    assert twenty.verdict == "cannot tell" and "Cannot be decided at 20 draws" in twenty.why
    many = judge(spec, -0.5, -0.55, -0.45, p=1 / 1001, n_draws=1000)
    assert many.verdict == "holds" and many.p_adj == pytest.approx(FAMILY / 1001)
    reverse = judge(spec, 0.1, 0.05, 0.15, p=1.0, p_reverse=1 / 1001, n_draws=1000)
    assert reverse.verdict == "opposite"


def test_the_floor_scale_and_a_condition_at_the_floor():
    floor = Floor(base=0.546, majority=0.245, n=1379)
    assert floor.lost(0.0) == 0 and floor.lost(-(0.546 - 0.245) / 0.546) == pytest.approx(1.0)
    assert floor.at_floor(0.241) and floor.at_floor(0.26) and not floor.at_floor(0.30)
    assert math.isnan(Floor(0.30, 0.31, 100).lost(-0.1))


def test_a_measured_accuracy_effect_carries_the_floor_scale_and_the_mark():
    row = _measured(ours=-0.559, lo=-0.60, hi=-0.516, floor=Floor(0.546, 0.245, 1379), accuracies=(0.241,))
    assert row.at_floor and row.lost == pytest.approx(1.014, abs=0.01) and row.lost_lo < row.lost < row.lost_hi
    assert "at the model's floor" in render([row])
    assert not _measured(floor=Floor(0.546, 0.245, 1379), accuracies=(0.40,)).at_floor


def test_rows_carry_the_quote_the_rule_and_both_intervals():
    row = _measured()
    assert row.quote == STUDY_CLAIMS["term_matching.lower_half_costs"].quote and row.kind == "effect"
    assert row.verdict == "holds" and row.lo_adj < row.lo and row.page == "05_term_matching"
    text = render([row])
    assert "adjusted [" in text and f"“{row.quote}”" in text and "The rule (effect)" in text
    assert "paired bootstrap over test pairs" in text


def test_a_tokenizer_that_gives_the_answer_away_is_not_comparable():
    row = Claim.measured(
        "word_segmentation.single_head",
        ours=0.1,
        lo=0.05,
        hi=0.15,
        unit="share of tokens right, above the majority class",
        method="bootstrap over sentences",
        n_examples=150,
        reason="x",
        not_comparable="WordPiece marks every word end with ##",
    )
    assert row.verdict == "not comparable" and "WordPiece" in row.reason


def test_unknown_claims_are_refused_and_sub_rows_belong_to_their_claim():
    with pytest.raises(KeyError, match="not in headlab.findings.claims.STUDY_CLAIMS"):
        _measured("x.made_up")
    sub = _measured(
        "sharpening.match_rises/all_heads",
        claim="all heads",
        unit="change of attention share, after minus before",
        ours=0.01,
        lo=0.009,
        hi=0.011,
    )
    assert sub.study_claim == "sharpening.match_rises" and sub.claim == "all heads" and sub.verdict == "holds"


def test_not_measured_is_cannot_tell_with_the_reason():
    row = Claim.not_measured("redundancy.falls_steadily", reason="No share was masked")
    assert row.verdict == "cannot tell" and row.reason == "No share was masked." and math.isnan(row.ours)
    assert "not measured" in render([row])


def test_the_table_and_its_file_name_come_from_the_rows():
    rows = [_measured(), _measured("term_matching.random_no_change", ours=0.0, lo=-0.01, hi=0.01)]
    table = claims_table(rows)
    assert list(table["claim_id"]) == ["term_matching.lower_half_costs", "term_matching.random_no_change"]
    assert {"quote", "kind", "method", "lo_adj", "p_adj", "lost", "at_floor", "rule"} <= set(table.columns)
    assert claims_file(rows) == "claims_05_term_matching"
    with pytest.raises(ValueError, match="claims of one page"):
        claims_file([rows[0], Claim.not_measured("redundancy.falls_steadily", reason="x")])


def test_differences_of_relative_changes_and_of_shares_print_in_points():
    assert number_text(-0.5, CHANGE) == "-50.0%"
    assert number_text(0.044, f"{CHANGE}, upper half minus lower half") == "+4.4 points"
    assert number_text(0.116, "share of tokens right, above the majority class") == "+11.6 points"
    assert number_text(0.95, "share of a token's attention on one neighbour") == "95.0%"


def test_a_verdict_that_changes_with_mean_ablation_is_marked_and_an_unjudged_one_is_left_alone():
    zeroed = [_measured(), _measured("term_matching.matching_costs", p=1 / 1001, n_draws=1000)]
    mean = [
        _measured(ours=0.30, lo=0.25, hi=0.35),  # the opposite under mean-ablation
        _measured("term_matching.matching_costs"),
    ]  # no draws: not judged the same way, so not compared
    checked = with_mean_ablation(zeroed, mean)
    assert checked[0].mean_ablation == "opposite" and "(the verdict changes)" in checked[0].reason
    assert checked[1].mean_ablation == "" and checked[1].verdict == zeroed[1].verdict
    assert checked[1].reason.endswith(
        "-30.0% [-35.0%, -25.0%]; not judged, as its random controls were not mean-ablated."
    )
    same = with_mean_ablation(zeroed[:1], zeroed[:1])[0]
    assert same.mean_ablation == "holds" and "the same verdict" in same.reason


def test_a_margin_is_written_in_its_claims_unit_and_a_shares_interval_stays_in_0_1():
    spec = STUDY_CLAIMS["term_matching.random_no_change"]
    assert "±2.0%" in judge(spec, 0.0, -0.01, 0.01, unit="relative change of accuracy").why
    row = Claim.measured(
        "word_segmentation.single_head",
        ours=0.02,
        lo=0.005,
        hi=0.035,
        unit="share of characters",
        method="exact binomial",
        n_examples=500,
        reason="A head.",
    )
    assert row.lo_adj == 0.0 and row.hi_adj < 1  # widened past 0, clipped there


def test_a_share_of_a_difference_restored_is_not_clipped_to_0_1():
    row = Claim.measured(
        "patching.cls_head_hands_on",
        ours=1.8,
        lo=1.5,
        hi=2.2,
        unit="share of the source-target difference that comes back through the [CLS] head alone",
        method="paired bootstrap",
        n_examples=200,
        reason="A path.",
    )
    assert row.lo_adj < 1.5 and row.hi_adj > 2.2 and row.verdict == "holds"
