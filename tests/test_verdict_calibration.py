"""The verdict rule's error rates at the book's own settings, by simulation (headlab.findings.calibration; issue #46,
items 2 and 12): on scorecards where nothing is true, a wrong "holds" or "opposite" in at most 5% of them per tally;
"holds" in at least 80% at twice the smallest effect of interest where that size is the study's own number; and every
decisive verdict reachable by some data. Fast (seconds): the real judge on ~60 000 simulated rows. `pytest -s` prints
the per-claim table."""

import math

import pandas as pd
import pytest
from scipy import stats as sps

from headlab.findings import calibration
from headlab.findings.claims import STUDY_CLAIMS
from headlab.findings.verdicts import ALPHA, FAMILIES

POWER = calibration.POWER  # "holds" at twice the smallest effect of interest, for sizes from the study's own number


@pytest.fixture(scope="module")
def designs():
    return calibration.book_designs()


@pytest.fixture(scope="module")
def table(designs):
    table = calibration.calibration_table(designs, n_sim=calibration.N_SIM, seed=calibration.SEED)
    shown = table[["claim_id", "truth", "n_sim", "holds", "does_not_hold", "opposite", "cannot_tell", "wrong"]]
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_colwidth", 45):
        print("\n" + shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return table


def test_a_scorecard_with_nothing_true_gets_a_wrong_decisive_verdict_at_most_5_percent_of_the_time(table):
    for tally in FAMILIES:
        row = table[table["claim_id"] == f"familywise ({tally})"].iloc[0]
        assert row["n_sim"] >= 500
        assert row["wrong"] <= ALPHA, f"{tally}: familywise rate of a wrong verdict {row['wrong']:.3f} > {ALPHA}"


def test_a_claim_sized_by_the_study_holds_at_twice_its_smallest_effect(table):
    sized = table[
        (table["size_source"] == "study") & (table["kind"] != "no_effect") & (table["truth"] == "twice the smallest")
    ]
    assert len(sized) == sum(c.size_source == "study" and c.kind != "no_effect" for c in STUDY_CLAIMS.values()), (
        "every such claim simulated"
    )
    weak = [f"{r.claim_id}: holds {r.holds:.3f}" for r in sized.itertuples() if r.resolvable and r.holds < POWER]
    assert not weak, f"'holds' below {POWER:.0%} at twice the smallest effect of interest: " + "; ".join(weak)
    # where the textbook power sum says the pairs cannot resolve the study's size, the simulation agrees (so the
    # power sum that the docs and rows rest on is no excuse), and it is only the study's +2.3% for layer 8 here
    beyond = sized[~sized["resolvable"].astype(bool)]
    assert (beyond["holds"] < POWER).all() and set(beyond["claim_id"]) <= {"layer_dependence.layer_8_gain"}


def test_every_decisive_verdict_is_reachable_at_the_defaults(designs):
    assert calibration.unreachable(designs) == []


def test_the_rates_are_the_same_from_the_same_seed(designs):
    claim_id = "term_matching.matching_costs"
    a = calibration.simulate(claim_id, "no effect", designs[claim_id], n_sim=50, seed=3)
    b = calibration.simulate(claim_id, "no effect", designs[claim_id], n_sim=50, seed=3)
    assert (a == b).all()


def test_the_designs_follow_the_pages_parameters(designs):
    redundancy = calibration.page_parameters("01_redundancy")
    assert designs["redundancy.falls_steadily"].n_draws == redundancy["REDUNDANCY_DRAWS"]
    assert (
        designs["layer_dependence.high_heads_cost_less"].n_draws
        == calibration.page_parameters("02_layer_dependence")["DECIDING_DRAWS"]
    )
    assert (
        designs["word_order.order_heads_carry_order"].n_draws
        == calibration.page_parameters("04_word_order")["ORDER_DRAWS"]
    )
    assert (
        designs["patching.matching_heads_carry_matching"].n_draws
        == calibration.page_parameters("09_patching")["PATCH_DRAWS"]
    )
    assert designs["layer_dependence.some_heads_improve"].search == 72  # all heads of the 6 x 12 default model
    assert designs["cls_head.matching_heads_hurt"].weakest_of == 5  # each of notebook 05's heads alone
    assert all(d.se > 0 and d.family == FAMILIES[STUDY_CLAIMS[k].tally] for k, d in designs.items())


def test_the_fast_quantiles_are_scipys_to_the_last_bit():
    for p in (0.975, 1 - 0.05 / 26 / 2, 1 - 0.05 / (26 * 72) / 2, 0.999):
        assert calibration.FAST_STATS.norm.ppf(p) == pytest.approx(sps.norm.ppf(p), rel=1e-13)
        for df in (2.0, 4.0, 11.0, 19.0, 37.3, 1378.0):
            assert calibration.FAST_STATS.t.ppf(p, df) == pytest.approx(sps.t.ppf(p, df), rel=1e-13)
    assert not math.isnan(calibration.FAST_STATS.t.ppf(0.975, 2.5))
