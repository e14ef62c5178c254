"""Verdict rule 4 (issue #64): underpowered rows, the MDE on every row, the weakest-of and existential widening, the
quantiles of rows over random draws, and the one decision both judge and the calibration call."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from headlab.book import sensitivity
from headlab.core.stats import draws_df, pairs_share
from headlab.judging.units import ACCURACY_CHANGE
from headlab.judging.verdicts import (
    RULE_VERSION,
    VERDICTS,
    Claim,
    claims_table,
    decide,
    each_level,
    judge,
    judged_quantile,
    minimum_detectable,
    quantile,
)
from headlab.pages.claims import STUDY_CLAIMS

LAYER_8 = STUDY_CLAIMS["layer_dependence.layer_8_gain"]  # an effect, +1, at least 1.15%
IMPROVE = STUDY_CLAIMS["layer_dependence.some_heads_improve"]  # existential, +1, at least 1.15%


def test_a_cannot_tell_reads_underpowered_only_where_the_design_could_not_decide_it():
    wide = judge(LAYER_8, 0.01, -0.04, 0.06, n_examples=1379)  # se about 0.026: MDE far beyond 2.3%
    assert wide.verdict == "underpowered" and wide.mde > 2 * LAYER_8.min_size
    assert "could not have decided it" in wide.why and "pairs (not 1379) would bring it to" in wide.why
    narrow = judge(LAYER_8, 0.0115, 0.0095, 0.0135, n_examples=1379)  # astride the size, precise: not the design
    assert narrow.verdict == "cannot tell" and narrow.mde < 2 * LAYER_8.min_size
    decided = judge(LAYER_8, -0.08, -0.12, -0.04, n_examples=1379)  # decisive verdicts keep their label
    assert decided.verdict == "opposite" and f"{decided.mde:.3g}" in decided.why


def test_a_saturated_row_stays_cannot_tell_and_says_when_its_design_could_not_have_decided_it_either():
    spec = STUDY_CLAIMS["two_tower.fails_on_shared_terms"]  # a comparison, at least 2 points
    wide = judge(spec, 0.19, 0.14, 0.24, at_floor=True, n_examples=225)
    assert wide.verdict == "cannot tell" and wide.why.startswith("Saturated")
    assert wide.mde > 2 * spec.min_size and "could not have decided it either" in wide.why
    assert "underpowered at this design as well as saturated" in wide.why  # it says so, as an underpowered row does
    narrow = judge(spec, -0.01, -0.012, -0.008, at_floor=True, n_examples=225)
    assert narrow.verdict == "cannot tell" and "could not have decided it" not in narrow.why


def test_the_mde_is_the_size_plus_the_adjusted_and_the_powers_quantiles_in_standard_errors():
    each = each_level(LAYER_8)
    se = 0.02 / sps.norm.ppf(0.975)
    expected = LAYER_8.min_size + (sps.norm.ppf(1 - each / 2) + sps.norm.ppf(0.8)) * se
    assert judge(LAYER_8, 0.0, -0.02, 0.02).mde == pytest.approx(expected)
    # every one of k conditions must hold: each at 0.8^(1/k); a row chosen among m candidates must find it in the
    # one that has it: 80% there, the search paid for by its widening alone
    k5 = minimum_detectable(LAYER_8, -0.02, 0.02, each=each, weakest_of=5)
    m72 = judge(LAYER_8, 0.0, -0.02, 0.02, search=72).mde
    assert k5 == pytest.approx(LAYER_8.min_size + (sps.norm.ppf(1 - each / 2) + sps.norm.ppf(0.8**0.2)) * se)
    assert m72 == pytest.approx(LAYER_8.min_size + (sps.norm.ppf(1 - each / 144) + sps.norm.ppf(0.8)) * se)


def test_a_row_shown_as_the_weakest_of_k_is_rejected_only_past_its_far_end_widened_for_k():
    one = judge(LAYER_8, -0.02, -0.03, -0.01)
    five = judge(LAYER_8, -0.02, -0.03, -0.01, weakest_of=5)
    assert one.verdict == "opposite" and five.far_adj > one.far_adj  # the far (upper) end reaches further
    assert (five.lo_adj, five.hi_adj) == (one.lo_adj, one.hi_adj)  # "holds" reads the same end
    edge = next(x for x in np.linspace(-0.04, 0.0, 4001) if judge(LAYER_8, x, x - 0.01, x + 0.01).verdict != "opposite")
    assert judge(LAYER_8, edge - 0.0005, edge - 0.0105, edge + 0.0095).verdict == "opposite"
    assert judge(LAYER_8, edge - 0.0005, edge - 0.0105, edge + 0.0095, weakest_of=5).verdict != "opposite"


def test_some_head_improves_fails_only_when_every_heads_interval_lies_short_of_the_size():
    """zh-char's old row: the chosen head changed nothing (+0.0% [0, 0]) and was read "does not hold" alone."""
    chosen = dict(ours=0.0, lo=0.0, hi=0.0)
    alone = judge(IMPROVE, **chosen, search=144)
    assert alone.verdict == "does not hold"
    other_reaches = judge(IMPROVE, **chosen, search=144, every_far=0.03)  # another head's far end past the size
    assert other_reaches.verdict != "does not hold" and other_reaches.far_adj == 0.03
    all_short = judge(IMPROVE, **chosen, search=144, every_far=0.005)
    assert all_short.verdict == "does not hold" and all_short.why.startswith("Every candidate's adjusted interval")
    assert judge(IMPROVE, -0.02, -0.03, -0.01, search=144, every_far=-0.001).verdict == "opposite"


def test_draws_rows_read_each_part_of_their_variance_at_its_own_quantile():
    p, n, d = 0.999, 690, 15
    assert judged_quantile(p, 14.0, d, n) == pytest.approx(sps.t.ppf(p, d - 1))  # the draws carry it all
    assert judged_quantile(p, 689.0, d, n) == pytest.approx(sps.t.ppf(p, n - 1))  # the pairs do
    mixed = draws_df(1.0, 0.5, d, n)
    assert sps.t.ppf(p, n - 1) < judged_quantile(p, mixed, d, n) < sps.t.ppf(p, d - 1)
    assert sps.t.ppf(p, mixed) < judged_quantile(p, mixed, d, n)  # more cautious than the Welch df
    assert judged_quantile(p, mixed, d) == pytest.approx(sps.t.ppf(p, d - 1))  # pairs unknown: the most cautious
    assert judged_quantile(p, math.inf, 1, n) == pytest.approx(sps.norm.ppf(p))  # one mask: pairs alone
    for f in (0.0, 0.2, 0.9):
        assert pairs_share(draws_df(1.0, f, d, n), d, n) == pytest.approx(f, abs=1e-6)


def _by_hand(spec, ours: float, lo: float, hi: float) -> str:
    """Rule 4 for a row over pairs alone, written out from its words: each side of the 95% interval widened to half
    the claim's error by the ratio of normal quantiles; "holds" past the size on the near end, "opposite" past no
    effect on the far end, "does not hold" short of the size (no effect: within / outside the margin)."""
    each = 0.05 / spec.family
    scale = sps.norm.ppf(1 - each / 2) / sps.norm.ppf(0.975)
    a, b = ours - (ours - lo) * scale, ours + (hi - ours) * scale
    if spec.kind == "no_effect":
        m = spec.margin
        return "holds" if -m < a and b < m else "does not hold" if a > m or b < -m else "cannot tell"
    near, far = (a, b) if spec.direction > 0 else (b, a)
    near, far = spec.direction * (near - spec.null), spec.direction * (far - spec.null)
    if near > spec.min_size:
        return "holds"
    return "opposite" if far < 0 else "does not hold" if far < spec.min_size else "cannot tell"


def test_judge_and_the_array_decision_both_give_the_rule_as_written():
    rng = np.random.default_rng(0)
    for claim_id in ("layer_dependence.layer_8_gain", "term_matching.random_no_change", "cls_head.matching_heads_hurt"):
        spec = STUDY_CLAIMS[claim_id]
        ours = rng.normal(0, 0.05, 300)
        half = rng.uniform(0.001, 0.05, 300)
        code = decide(spec, ours, ours - half, ours + half, each=each_level(spec))[0]
        seen = set()
        for o, h, c in zip(ours, half, code):
            expected = _by_hand(spec, o, o - h, o + h)
            verdict = judge(spec, o, o - h, o + h).verdict
            assert VERDICTS[c] == expected, (claim_id, o, h)
            assert verdict == expected or (verdict, expected) == ("underpowered", "cannot tell"), (claim_id, o, h)
            seen.add(expected)
        assert len(seen) >= 3, claim_id  # the draws reach several verdicts, so the comparison means something


def test_a_rule_4_row_keeps_what_the_sensitivity_table_needs_and_is_judged_again_the_same():
    spec = STUDY_CLAIMS["term_matching.matching_costs"]
    row = Claim.measured(
        spec,
        ours=-0.4,
        lo=-0.46,
        hi=-0.34,
        unit=ACCURACY_CHANGE,
        method="m",
        n_examples=690,
        reason="r",
        n_draws=15,
        df=300.0,
    )
    assert row.rule_version == RULE_VERSION == 6 and row.mde > 0 and row.weakest_of == 1 and not math.isnan(row.far_adj)
    table = claims_table([row]).assign(preset="default")
    again = next(table.itertuples())
    assert sensitivity.rejudged(again, 1.0, 6) == row.verdict
    assert sensitivity.rejudged(again, 2.0, 6) != row.verdict  # twice 26.2 points is beyond -40 [-46, -34]


def test_the_sensitivity_table_judges_every_committed_row_at_three_sizes():
    table = sensitivity.sensitivity_table()
    committed = pd.read_csv(sensitivity.REPO / "results" / "sensitivity.csv")
    pd.testing.assert_frame_equal(table.reset_index(drop=True), committed, check_dtype=False)
    assert set(sensitivity.SCALES) <= set(table.columns) and table["moves"].any()


def test_a_no_effect_claim_errs_at_most_its_share_at_the_margin():
    """Equivalence, like an effect at its size: a truth at the margin is wrongly "holds" or "does not hold" at most
    `each` of the time in all (each side at half of it)."""
    spec = STUDY_CLAIMS["term_matching.random_no_change"]
    each = each_level(spec)
    rng = np.random.default_rng(1)
    se, n = 0.002, 400_000  # narrow enough that "holds" is reachable at the 1.15% margin
    ours = spec.margin + rng.normal(0, se, n)
    half = quantile(0.975, math.inf) * se
    code = decide(spec, ours, ours - half, ours + half, each=each)[0]
    wrong = np.isin(code, [VERDICTS.index("holds"), VERDICTS.index("does not hold")]).mean()
    assert each * 0.8 < wrong < each * 1.1


def test_an_older_row_is_judged_again_from_its_own_numbers_and_says_so():
    wide = Claim.measured(
        LAYER_8, ours=0.01, lo=-0.04, hi=0.06, unit=ACCURACY_CHANGE, method="m", n_examples=1379, reason="Why."
    )
    gone = Claim.measured(
        IMPROVE, ours=0.0, lo=0.0, hi=0.0, unit=ACCURACY_CHANGE, method="m", n_examples=1379, reason=""
    )
    mean = " With each removed head's output replaced by its mean over training pairs instead of zero (mean-ablation): "
    old = claims_table([wide, gone]).assign(preset="default", rule_version=3, mde=math.nan, far_adj=math.nan)
    old.loc[0, ["verdict", "mean_ablation"]] = ["cannot tell", "cannot tell"]
    old.loc[0, "reason"] = (
        f"Why. The adjusted interval reaches both sides (rule 3's words).{mean}the same verdict, "
        + ("+0.5% [-4.0%, +5.0%].")
    )
    old.loc[1, "verdict"] = "does not hold"
    again = sensitivity.judged_again(old, {"default": 6})
    row = again.iloc[0]
    assert (row.verdict, row.rule_version, row.mean_ablation) == ("underpowered", RULE_VERSION, "underpowered")
    assert row.mde == pytest.approx(wide.mde) and "(rule 3 said: cannot tell)" in row.reason
    assert row.reason.startswith(f"Why. Judged again by rule {RULE_VERSION} and sizes policy")  # rule 3's reading gone
    assert row.reason.endswith(f"{mean}the same verdict, +0.5% [-4.0%, +5.0%].")  # compared with the new verdict
    # "some head improves" rejected on the one head an old row kept: the other heads are needed, so it stays as it was
    assert (again.iloc[1].verdict, again.iloc[1].rule_version) == ("does not hold", 3)
