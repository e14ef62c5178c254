"""The claims the page modules declare (gathered in headlab.pages.claims): one verdict rule for every claim
(effect, no effect, a comparison), a smallest effect of interest for every claim, floor-aware accuracy effects, a
correction across a model's claims widened once with the right small-sample quantiles, and claims that quote the
study word for word."""

import dataclasses
import importlib
import math
import pkgutil
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from scipy import stats as sps

import headlab.pages
from headlab.judging.sizes import NO_CHANGE_MARGIN, readable_quote
from headlab.judging.units import ACCURACY_CHANGE as CHANGE
from headlab.judging.units import KAPPA_LOST, VERSUS_RANDOM, Kind, Unit, is_missing, unit_of, with_interval
from headlab.judging.verdicts import (
    ALPHA,
    FAMILIES,
    FAMILY,
    RULE_VERSION,
    VERDICTS,
    Claim,
    StudyClaim,
    claims_file,
    claims_table,
    judge,
    legend,
    quote_in,
    render,
    save_claims,
    verdict_table,
    with_mean_ablation,
)
from headlab.pages.claims import MODULES, STUDY_CLAIMS, check_families, registered

STUDY_TEXT = (Path(__file__).parents[1] / "docs" / "study.md").read_text(encoding="utf-8")


def _measured(claim_id="term_matching.lower_half_costs", **changes):
    """A row measured for ``claim_id``: a relative change of accuracy, or, for the lower half (judged on κ by the sizes
    policy), the share of κ lost with the relative change of accuracy beside it."""
    fields = dict(
        ours=-0.60,
        lo=-0.65,
        hi=-0.55,
        unit=CHANGE,
        method="paired bootstrap over test pairs",
        n_examples=1379,
        reason="The lower half masked",
    )
    if claim_id == "term_matching.lower_half_costs":
        fields |= dict(ours=0.60, lo=0.55, hi=0.65, unit=KAPPA_LOST, accuracy=LOWER_HALF_ACCURACY)
    return Claim.measured(registered(claim_id), **{**fields, **changes})


LOWER_HALF_ACCURACY = {"rel_change": -0.60, "lo": -0.65, "hi": -0.55}


@pytest.mark.parametrize("claim_id", sorted(STUDY_CLAIMS))
def test_every_registered_claim_quotes_the_study_word_for_word(claim_id):
    assert quote_in(STUDY_TEXT, STUDY_CLAIMS[claim_id].quote), STUDY_CLAIMS[claim_id].quote


def test_every_module_that_declares_claims_is_in_the_registry_and_owns_its_pages_claims():
    names = (f"headlab.pages.{m.name}" for m in pkgutil.iter_modules(headlab.pages.__path__))
    declaring = [m for m in map(importlib.import_module, names) if hasattr(m, "CLAIMS")]
    assert set(declaring) == set(MODULES) and len(MODULES) == len(set(MODULES))
    for module in MODULES:
        assert len({c.page for c in module.CLAIMS}) == 1, module.__name__  # one page's claims, beside its measurements


def test_quotes_are_checked_word_for_word_not_loosely():
    assert quote_in("a  b\n c", "a b c") and not quote_in("a b c", "a c")


def test_the_claims_the_study_does_not_make_are_gone():
    assert "word_order.case_is_typical" not in STUDY_CLAIMS and "two_tower.as_masking" not in STUDY_CLAIMS
    assert "layer_dependence.layer_10_head_hurts" not in STUDY_CLAIMS  # one verdict per sentence: 07's head
    assert "redundancy.gain_at_10" not in STUDY_CLAIMS  # it shared its number with no_loss_below_20
    assert FAMILY == FAMILIES["study"] and sum(FAMILIES.values()) == len(STUDY_CLAIMS)
    extra = StudyClaim("x.y", "01_redundancy", "c", "q", "effect", 1, 0.05, "because")
    with pytest.raises(ValueError, match="a changed family is a new verdict rule"):
        check_families({**STUDY_CLAIMS, "x.y": extra}, FAMILIES)
    ours = {c for c, spec in STUDY_CLAIMS.items() if spec.tally == "ours"}
    assert {"patching.cls_route_hands_on", "patching.matching_beyond_identity", "pruning.keep_low_heads"} <= ours
    assert "term_matching.matching_costs" not in ours


@pytest.mark.parametrize("claim_id", sorted(STUDY_CLAIMS))
def test_every_claim_has_a_smallest_effect_of_interest_with_its_reason(claim_id):
    spec = STUDY_CLAIMS[claim_id]
    assert (spec.margin if spec.kind == "no_effect" else spec.min_size) > 0 and len(spec.size_why) > 20
    assert spec.kind in ("effect", "no_effect", "compare")  # no verdict by an empirical p over draws


def test_a_claim_without_a_smallest_effect_is_refused():
    with pytest.raises(ValueError, match="smallest effect of interest"):
        StudyClaim("x.y", "01_redundancy", "c", "q", "effect", direction=1, size_why="because")


def test_an_effect_holds_is_opposite_or_cannot_be_told_by_the_adjusted_interval():
    spec = STUDY_CLAIMS["cls_head.matching_heads_hurt"]  # an effect, direction -1, at least 1.15%
    assert judge(spec, -0.30, -0.35, -0.25).verdict == "holds"
    assert judge(spec, 0.30, 0.25, 0.35).verdict == "opposite"
    # the raw 95% interval excludes 0, the adjusted one does not: not decided after the correction, at a design
    # precise enough to decide the claim (its minimum detectable effect within twice the smallest effect)
    near = judge(spec, -0.007, -0.012, -0.002)
    assert near.verdict == "cannot tell" and near.lo_adj < -0.012 and near.hi_adj > 0
    assert near.lo_adj < -spec.min_size and near.mde <= 2 * spec.min_size
    assert near.why.endswith(f"At this design the minimum detectable effect (80% power) is {near.mde:.3g}.")
    # as undecided, but too wide to have decided it: its minimum detectable effect is past twice the size
    wide = judge(spec, -0.03, -0.055, -0.005)
    assert wide.verdict == "underpowered" and wide.lo_adj < -0.055 and wide.hi_adj > 0
    assert wide.mde > 2 * spec.min_size and "so this design could not have decided it" in wide.why
    assert VERDICTS == (
        "holds",
        "does not hold",
        "opposite",
        "cannot tell",
        "underpowered",
        "not comparable",
        "not judged",
    )


def test_the_adjusted_interval_is_the_95_interval_widened_to_the_bonferroni_level():
    spec = STUDY_CLAIMS["cls_head.matching_heads_hurt"]
    j = judge(spec, -0.30, -0.35, -0.25)
    assert j.level == 1 - ALPHA / FAMILY and j.lo_adj < -0.35 and j.hi_adj > -0.25
    assert math.isclose(-0.30 - j.lo_adj, j.hi_adj + 0.30)
    assert (j.hi_adj + 0.30) / 0.05 == pytest.approx(sps.norm.ppf(1 - ALPHA / FAMILY / 2) / sps.norm.ppf(0.975))
    alone = judge(spec, -0.30, -0.35, -0.25, family=1)  # a family of one, judged at 95%: the raw interval itself
    assert (alone.lo_adj, alone.hi_adj) == pytest.approx((-0.35, -0.25))


def test_a_claimed_size_is_part_of_the_verdict():
    spec = STUDY_CLAIMS["cls_head.spreads_without_matching"]  # "many more terms": at least a factor 1.5
    small = judge(spec, math.log(1.01), math.log(1.005), math.log(1.015))
    assert small.verdict == "does not hold" and "short of the smallest effect of interest" in small.why
    assert judge(spec, math.log(2.0), math.log(1.8), math.log(2.2)).verdict == "holds"


def test_no_effect_is_an_equivalence_test_with_a_stated_margin():
    spec = STUDY_CLAIMS["term_matching.random_no_change"]
    assert spec.margin == NO_CHANGE_MARGIN == pytest.approx(0.0115)  # the sizes policy's no-change margin, ±1.15%
    assert judge(spec, 0.0005, -0.005, 0.006).verdict == "holds"
    assert judge(spec, 0.001, -0.009, 0.011).verdict == "underpowered"  # within the old ±2%, not within ±1.15%
    assert judge(spec, -0.10, -0.14, -0.06).verdict == "does not hold"
    # a loss distinguishable from zero but not beyond the margin is not "does not hold": the data do not exclude it
    assert judge(spec, -0.0086, -0.0121, -0.0052).verdict == "cannot tell"
    # as much, at a design too wide to show a true null within the margin: underpowered
    loss = judge(spec, -0.049, -0.087, -0.014)
    assert loss.verdict == "underpowered" and loss.mde > spec.margin and "beyond the margin" in loss.why
    assert "margin" in judge(spec, 0.0, -0.01, 0.01).why and spec.size_why
    # undecided at this precision: it says how many pairs would decide it
    undecided = judge(spec, 0.007, 0.0035, 0.0105, n_examples=1379)
    assert undecided.verdict == "cannot tell" and undecided.mde <= spec.margin
    needed = int(re.search(r"about (\d+) pairs \(not 1379\) would decide it", undecided.why).group(1))
    room = spec.margin - 0.007
    assert needed == math.ceil(1379 * ((undecided.hi_adj - undecided.lo_adj) / 2 / room) ** 2) > 1379
    # too wide for the design to show a true null within the margin: how many pairs would bring the MDE to it
    wide = judge(spec, 0.0, -0.03, 0.03, n_examples=1379)
    assert wide.verdict == "underpowered" and "pairs (not 1379) would decide it" in wide.why
    needed = int(re.search(r"about (\d+) pairs \(not 1379\) would bring it to 0\.0115\.$", wide.why).group(1))
    assert needed == math.ceil(1379 * (wide.mde / spec.margin) ** 2) > 1379


def test_a_comparison_of_two_conditions_at_the_floor_is_saturated_not_evidence():
    spec = STUDY_CLAIMS["layer_dependence.high_heads_cost_less"]
    at_floor = judge(spec, -0.20, -0.25, -0.15, at_floor=True)
    assert at_floor.verdict == "cannot tell" and "Saturated" in at_floor.why
    assert judge(spec, -0.20, -0.25, -0.15).verdict == "opposite"  # the same numbers above the floor decide
    assert judge(spec, 0.05, 0.0, 0.10).verdict == "does not hold"  # short of "far less" (20 points)


def test_an_undecided_effect_says_how_many_pairs_would_show_twice_its_smallest_size():
    spec = STUDY_CLAIMS["layer_dependence.layer_8_gain"]  # at least 1.15%: half the study's +2.3%
    wide = judge(spec, 0.01, -0.04, 0.06, n_examples=1379)
    # the minimum detectable effect (80% power) at this design: the size plus the adjusted and the power quantiles
    # times the standard error, far beyond twice the size, so the design could not have decided it
    each = ALPHA / FAMILIES[spec.tally]
    se = 0.05 / sps.norm.ppf(0.975)
    assert wide.mde == pytest.approx(spec.min_size + (sps.norm.ppf(1 - each / 2) + sps.norm.ppf(0.8)) * se)
    assert wide.verdict == "underpowered" and wide.mde > 2 * spec.min_size
    twice = f"beyond twice the smallest effect of interest ({2 * spec.min_size:.3g})"  # no unit: 3 digits
    assert twice in wide.why and "so this design could not have decided it" in wide.why
    found = re.search(r"about (\d+) pairs \(not 1379\) would bring it to (\S+)\.$", wide.why)
    needed, target = int(found.group(1)), found.group(2)
    assert target == f"{2 * spec.min_size:.3g}"
    assert needed == math.ceil(1379 * ((wide.mde - spec.min_size) / spec.min_size) ** 2) > 1379
    # beyond no effect but astride the size: the direction is shown, the size not decided
    astride = judge(STUDY_CLAIMS["word_order.order_heads_carry_order"], -0.028, -0.034, -0.022, n_examples=1379)
    assert astride.verdict == "cannot tell" and "an effect is shown, not its size" in astride.why
    needed = int(re.search(r"about (\d+) pairs \(not 1379\) would decide it", astride.why).group(1))  # below 0.8 points
    assert needed == math.ceil(1379 * ((astride.hi_adj - astride.lo_adj) / 2 / 0.008) ** 2) > 1379
    assert "by at least 2.0" in astride.why or "by at least 0.02" in astride.why
    assert astride.mde <= 2 * 0.02 and astride.why.endswith(f"(80% power) is {astride.mde:.3g}.")


def test_a_collapse_that_reaches_the_floor_holds_only_comparisons_saturate():
    collapse = STUDY_CLAIMS["layer_dependence.low_heads_collapse"]  # an effect: reaching the floor is the claim
    assert judge(collapse, 0.95, 0.85, 1.05, at_floor=True).verdict == "holds"
    assert judge(collapse, 0.1, 0.05, 0.15, at_floor=True).verdict == "does not hold"


def test_a_comparison_with_random_draws_is_an_effect_read_with_t_quantiles_for_few_draws():
    spec = STUDY_CLAIMS["term_matching.matching_costs"]  # named heads minus the mean of random sets
    many = judge(spec, -0.45, -0.49, -0.41, df=math.inf)
    few = judge(spec, -0.45, -0.49, -0.41, df=2)
    assert many.verdict == "holds" and few.lo_adj < many.lo_adj and few.hi_adj > many.hi_adj
    # t with 2 degrees of freedom at the adjusted level: about 23 / 4.3 wider, astride the size, still powered
    assert few.verdict == "cannot tell" and few.mde <= 2 * spec.min_size and "not its size" in few.why
    # a little wider, the two draws' design could not have shown twice the size
    wider = judge(spec, -0.5, -0.55, -0.45, df=2)
    assert wider.verdict == "underpowered" and wider.mde > 2 * spec.min_size
    assert judge(spec, -0.5, -0.55, -0.45, df=math.inf).verdict == "holds"
    # a row over 3 random draws is read at their 2 degrees of freedom, not its Welch df of 19
    drawn = judge(spec, -0.45, -0.49, -0.41, df=19, n_draws=3)
    assert judge(spec, -0.45, -0.49, -0.41, df=19).verdict == "holds" and drawn.verdict == "underpowered"
    assert drawn.lo_adj < few.lo_adj
    assert judge(spec, 0.1, 0.05, 0.15, df=19).verdict == "opposite"
    assert judge(spec, -0.1, -0.12, -0.08, df=19).verdict == "does not hold"  # short of half the study's 52.4 points


@pytest.mark.parametrize("df", [1, 2, 4, 19, math.inf])
@pytest.mark.parametrize("search", [1, 72, 144])
def test_an_adjusted_interval_is_never_narrower_than_the_raw_one(df, search):
    for claim_id, spec in STUDY_CLAIMS.items():
        j = judge(spec, 0.3, 0.1, 0.4, df=df, search=search)
        assert j.lo_adj <= 0.1 and j.hi_adj >= 0.4, claim_id


def test_a_chosen_head_is_widened_once_for_the_heads_and_the_claims_together():
    spec = STUDY_CLAIMS["layer_dependence.some_heads_improve"]
    once = judge(spec, 0.0, -0.01, 0.01, search=72)
    assert once.level == pytest.approx(1 - ALPHA / (FAMILY * 72))
    z = 1.959963984540054
    twice = (-0.01 * sps.norm.ppf(1 - 0.025 / 72) / z) * sps.norm.ppf(1 - ALPHA / FAMILY / 2) / z
    assert twice < once.lo_adj < -0.01  # narrower than widening for the heads, then again for the claims
    assert "72 candidates" in judge(spec, 0.05, 0.045, 0.055, search=72).why


def test_a_sub_row_is_shown_but_not_judged():
    sub = _measured("term_matching.lower_half_costs", part="part", claim="a part")
    assert sub.claim_id == "term_matching.lower_half_costs/part" and sub.verdict == "not judged"
    assert "not judged" in sub.reason and sub.lo_adj < sub.lo


def test_no_bound_prints_as_a_number_when_it_was_not_measured():
    row = Claim.measured(
        registered("cls_head.concentrates_on_shared"),
        ours=0.05,
        lo=math.nan,
        hi=math.nan,
        unit=unit_of("share of the [CLS] row on shared terms, minus a uniform row's"),
        method="none",
        n_examples=10,
        reason="x",
    )
    text = render([row])
    assert row.verdict == "cannot tell" and "adjusted [" not in text and "nan" not in text.lower()


def test_a_measured_accuracy_effect_carries_the_share_of_kappa_lost_and_the_floor_mark():
    kappa = {"kappa_lost": 1.02, "kappa_lost_lo": 0.97, "kappa_lost_hi": 1.08}
    on_accuracy = "cls_head.masking_hurts"  # a claim the sizes policy judges on accuracy
    row = _measured(
        on_accuracy,
        ours=-0.559,
        lo=-0.60,
        hi=-0.516,
        kappa=kappa,
        at_floor=True,
        floor_reason="98% of pairs get one grade",
    )
    assert (row.kappa_lost, row.kappa_lost_lo, row.kappa_lost_hi) == (1.02, 0.97, 1.08) and row.at_floor
    # never clipped: a share above 100% is printed as measured, with what decided the floor
    assert "(102% [97%, 108%] of the unmasked quadratic κ lost; at the floor: 98% of pairs get one grade)" in render(
        [row]
    )
    beside = _measured(on_accuracy, kappa=kappa)
    assert not beside.at_floor and "at the floor" not in render([beside])
    assert "κ lost" not in render([_measured(on_accuracy)])  # a number without its kappa prints no kappa
    undefined = _measured(
        on_accuracy, kappa={"kappa_lost": math.nan, "kappa_lost_lo": math.nan, "kappa_lost_hi": math.nan}
    )
    assert "nan" not in render([undefined]).lower()  # no NaN is ever printed as a number


def test_rows_carry_the_quote_the_rule_and_both_intervals():
    row = _measured()
    assert row.quote == STUDY_CLAIMS["term_matching.lower_half_costs"].quote and row.kind == "effect"
    assert row.verdict == "holds" and row.lo_adj < row.lo and row.page == "05_term_matching"
    text = render([row])
    assert "adjusted [" in text and readable_quote(row.quote) in text and "The rule (effect)" in text
    assert "paired bootstrap over test pairs" in text


def test_a_tokenizer_that_gives_the_answer_away_is_not_comparable():
    row = Claim.measured(
        registered("word_segmentation.single_head"),
        ours=0.1,
        lo=0.05,
        hi=0.15,
        unit=unit_of("share of tokens right, above the majority class"),
        method="bootstrap over sentences",
        n_examples=150,
        reason="x",
        not_comparable="WordPiece marks every word end with ##",
    )
    assert row.verdict == "not comparable" and "WordPiece" in row.reason


def test_unknown_claims_are_refused_and_sub_rows_belong_to_their_claim():
    with pytest.raises(KeyError, match="not in headlab.pages.claims.STUDY_CLAIMS"):
        _measured("x.made_up")
    sub = _measured(
        "sharpening.match_rises",
        part="all_heads",
        claim="all heads",
        unit=unit_of("change of attention share, after minus before"),
        ours=0.01,
        lo=0.009,
        hi=0.011,
    )
    assert sub.study_claim == "sharpening.match_rises" and sub.claim == "all heads" and sub.verdict == "not judged"


def test_not_measured_is_cannot_tell_with_the_reason():
    row = Claim.not_measured(registered("redundancy.falls_steadily"), reason="No share was masked")
    assert row.verdict == "cannot tell" and row.reason == "No share was masked." and math.isnan(row.ours)
    assert "not measured" in render([row])


def test_the_table_and_its_file_name_come_from_the_rows():
    rows = [_measured(), _measured("term_matching.random_no_change", ours=0.0, lo=-0.01, hi=0.01)]
    table = claims_table(rows)
    assert list(table["claim_id"]) == ["term_matching.lower_half_costs", "term_matching.random_no_change"]
    assert {
        "quote",
        "kind",
        "method",
        "lo_adj",
        "kappa_lost",
        "at_floor",
        "floor_reason",
        "rule",
        "df",
        "search",
        "tally",
    } <= set(table.columns)
    assert set(table["rule_version"]) == {RULE_VERSION} and "p_adj" not in table.columns
    assert claims_file(rows) == "claims_05_term_matching"
    with pytest.raises(ValueError, match="claims of one page"):
        claims_file([rows[0], Claim.not_measured(registered("redundancy.falls_steadily"), reason="x")])


def test_differences_of_relative_changes_and_of_shares_print_in_points():
    assert CHANGE.number(-0.5) == "-50.0%" and CHANGE.size(0.02) == "2.0%"
    assert VERSUS_RANDOM.number(0.044) == "+4.4 points" and VERSUS_RANDOM.size(0.044) == "4.4 points"
    assert unit_of("share of tokens right, above the majority class").number(0.116) == "+11.6 points"
    assert unit_of("share of a token's attention on one neighbour, clearest head").number(0.95) == "95.0%"
    assert Unit("x", Kind.SIGNED).number(0.5) == "+0.5" and Unit("x", Kind.NUMBER).number(0.5) == "0.5"
    with pytest.raises(KeyError, match="no unit is labelled 'furlongs'"):
        unit_of("furlongs")


def test_a_verdict_that_changes_with_mean_ablation_is_marked_and_an_unmeasured_one_is_left_alone():
    zeroed = [_measured(), _measured("term_matching.matching_costs", ours=-0.5, lo=-0.55, hi=-0.45, n_draws=20)]
    mean = [
        _measured(ours=-0.30, lo=-0.35, hi=-0.25),  # the opposite under mean-ablation: κ gained, not lost
        Claim.not_measured(
            registered("term_matching.matching_costs"), reason="its random controls were not mean-ablated"
        ),
    ]
    checked = with_mean_ablation(zeroed, mean)
    assert checked[0].mean_ablation == "opposite" and "(the verdict changes)" in checked[0].reason
    assert checked[1].mean_ablation == "" and checked[1] == zeroed[1]
    same = with_mean_ablation(zeroed[:1], zeroed[:1])[0]
    assert same.mean_ablation == "holds" and "the same verdict" in same.reason


def test_a_margin_is_written_in_its_claims_unit_and_no_interval_is_clipped():
    spec = STUDY_CLAIMS["term_matching.random_no_change"]
    assert "±1.15%" in judge(spec, 0.0, -0.01, 0.01, unit=unit_of("relative change of accuracy")).why
    assert "±0.0115" in judge(spec, 0.0, -0.01, 0.01).why  # no unit: the bare number
    row = Claim.measured(
        registered("word_segmentation.single_head"),
        ours=0.02,
        lo=0.005,
        hi=0.035,
        unit=unit_of("share of a token's attention on one neighbour, clearest head"),
        method="exact binomial",
        n_examples=500,
        reason="A head.",
    )
    assert row.lo_adj < 0.0 < row.hi_adj < 1  # widened past 0 and printed so: never narrower than the raw interval


def test_a_share_of_a_difference_restored_is_not_clipped_to_0_1():
    row = Claim.measured(
        registered("patching.cls_route_hands_on"),
        ours=1.8,
        lo=1.5,
        hi=2.2,
        unit=unit_of("share of the source-target difference that comes back through the [CLS] head alone"),
        method="paired bootstrap",
        n_examples=200,
        reason="A path.",
    )
    assert row.lo_adj < 1.5 and row.hi_adj > 2.2 and row.verdict == "holds"


def test_an_undecided_row_over_random_draws_asks_for_more_draws_not_only_more_pairs():
    collapse = STUDY_CLAIMS["layer_dependence.low_heads_collapse"]  # more than half of the kappa lost
    over_draws = judge(collapse, 0.525, 0.332, 0.717, df=11.5, n_examples=1379, unit=KAPPA_LOST)
    assert over_draws.verdict == "cannot tell" and "by at least 50.0%" in over_draws.why  # a share prints as a share
    assert re.search(r"about [\d.]+ times the evidence \(random draws and pairs alike; df 11\.5\)", over_draws.why)
    assert "pairs (not 1379)" not in over_draws.why  # more pairs alone would not narrow the draws' part
    over_pairs = judge(collapse, 0.525, 0.332, 0.717, n_examples=1379)
    assert "pairs (not 1379) would decide it" in over_pairs.why


def test_a_page_ends_on_a_table_of_its_verdicts_and_saves_its_claims_once(tmp_path):
    rows = [
        _measured(),
        Claim.not_measured(registered("term_matching.matching_costs"), reason="Not measured: no sweep"),
    ]
    text = verdict_table(rows)
    table = text.split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(rows) and "| **cannot tell** | not measured |" in table[-1]
    assert text.endswith(legend()) and all(f"**{v}**" in legend() for v in VERDICTS)  # the words once, under it
    assert f"| **{rows[0].verdict}** | 60.0% [55.0%, 65.0%] |" in table[2]  # the lower half's κ lost
    saved = []
    save_claims(SimpleNamespace(save_table=lambda frame, name: saved.append((name, len(frame)))), rows)
    assert saved == [("claims_05_term_matching", 2)]


def test_a_number_with_its_interval_is_written_one_way():
    assert with_interval(CHANGE, -0.5, -0.6, -0.4) == "-50.0% [-60.0%, -40.0%]"
    assert with_interval(CHANGE, 0.1, math.nan, math.nan) == "+10.0%" and is_missing(None) and not is_missing(0.0)


def test_a_number_that_rounds_to_zero_prints_without_a_sign():
    from headlab.judging.units import Kind, Unit, no_negative_zero

    assert [Unit("u", k).number(-0.0001) for k in (Kind.RELATIVE, Kind.POINTS, Kind.SHARE)] == [
        "0.0%",
        "0.0 points",
        "0.0%",
    ]
    assert Unit("u", Kind.RELATIVE).number(0.0001) == "+0.0%"  # only the minus goes
    assert Unit("u", Kind.RELATIVE).number(-0.05) == "-5.0%" and Unit("u", Kind.POINTS).number(0.05) == "+5.0 points"
    assert no_negative_zero("-0%") == "0%" and no_negative_zero("-0.05") == "-0.05"


def test_a_claim_row_is_built_by_keyword_only():
    """Forty-odd fields, many of them floats: a row built by position would put a number in the wrong column."""
    row = Claim.not_measured(STUDY_CLAIMS["redundancy.falls_steadily"], reason="not run")
    fields = [getattr(row, f.name) for f in dataclasses.fields(Claim)]
    with pytest.raises(TypeError, match="positional"):
        Claim(*fields)
    assert Claim(**{f.name: getattr(row, f.name) for f in dataclasses.fields(Claim)}) == row


def test_a_verdict_prints_and_saves_as_its_words_and_reads_back_equal(tmp_path):
    """Verdict is an enum whose members are their words: a row saved to CSV holds "does not hold", never
    "Verdict.DOES_NOT_HOLD", and the word read back is the member."""
    from headlab.judging.verdicts import Verdict

    assert [str(v) for v in Verdict] == list(VERDICTS) == [f"{v}" for v in Verdict]
    path = tmp_path / "rows.csv"
    pd.DataFrame({"verdict": list(Verdict)}).to_csv(path, index=False)
    read = pd.read_csv(path)["verdict"].tolist()
    assert read == [v.value for v in Verdict] and all(Verdict(w) == w for w in read)
    assert {Verdict.DOES_NOT_HOLD: 1}["does not hold"] == 1  # a word looks its member up, and back
    assert repr(Verdict.OPPOSITE) == "'opposite'"  # altair writes a comparison into a Vega expression with repr
    import altair as alt

    assert str(alt.datum.verdict == Verdict.OPPOSITE) == "(datum.verdict === 'opposite')"
