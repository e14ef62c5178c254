"""headlab.book.moves: a rebuild's moved verdicts told apart by cause, the rule's or the data's."""

import pandas as pd
import pytest
from conftest import measured_claim

from headlab.book.moves import moves_text, verdict_moves
from headlab.judging.verdicts import RULE_VERSION, claims_table


def _table(rows, **kept) -> pd.DataFrame:
    table = claims_table(rows).assign(preset="a", model="minilm", data="stsb-en")
    for claim_id, (verdict, rule) in kept.items():  # a verdict an older rule gave from the same numbers
        table.loc[table["claim_id"] == claim_id, ["verdict", "rule_version"]] = [verdict, rule]
    return table


def test_each_moved_verdict_says_whether_the_rule_or_the_data_moved_it():
    worse = measured_claim("two_tower.worse", -0.30, 0.02)  # far past its size: holds by any rule
    layer = measured_claim("layer_dependence.layer_8_gain", 0.0, 0.03)
    gone = measured_claim("redundancy.no_loss_below_20", 0.0, 0.002)
    before = _table([worse, layer, gone], **{"layer_dependence.layer_8_gain": ("cannot tell", RULE_VERSION - 1)})
    assert layer.verdict != "cannot tell"  # the current rule reads these numbers otherwise
    worse_now = measured_claim("two_tower.worse", 0.001, 0.002)  # the rebuild's number: no loss any more
    new = measured_claim("two_tower.fails_on_shared_terms", -0.05, 0.01)
    after = _table([worse_now, layer, new])
    moves = verdict_moves(before, after, {"a": 12}).set_index("claim_id")
    assert moves.loc["two_tower.worse", ["before", "rule", "after", "cause"]].tolist() == [
        "holds",
        "holds",
        worse_now.verdict,
        "data",
    ]
    assert moves.loc["layer_dependence.layer_8_gain", ["before", "rule", "cause"]].tolist() == [
        "cannot tell",
        layer.verdict,
        "rule",
    ]
    assert moves.loc["layer_dependence.layer_8_gain", "before_rule"] == RULE_VERSION - 1
    assert moves.loc["redundancy.no_loss_below_20", "cause"] == "dropped"
    assert moves.loc["two_tower.fails_on_shared_terms", "cause"] == "new claim"
    text = moves_text(moves.reset_index())
    assert text.startswith("**a**: 4 of 4 rows moved (") and "- `two_tower.worse`: holds → holds → " in text
    assert "by the rule: 1" in text and "by the data: 1" in text and "new claims: 1" in text
    assert "`two_tower.fails_on_shared_terms`: — → — → " in text  # no verdict before: a dash, never "nan"


def test_a_rebuild_judged_by_an_older_rule_or_a_claim_twice_is_refused():
    worse = measured_claim("two_tower.worse", -0.30, 0.02)
    old = _table([worse], **{"two_tower.worse": ("holds", RULE_VERSION - 1)})
    with pytest.raises(ValueError, match=f"must be judged by rule {RULE_VERSION}: two_tower.worse"):
        verdict_moves(old, old, {"a": 12})
    twice = pd.concat([_table([worse]), _table([worse])])
    with pytest.raises(ValueError, match="holds two_tower.worse twice"):
        verdict_moves(twice, _table([worse]), {"a": 12})
