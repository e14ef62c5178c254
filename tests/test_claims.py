"""headlab.findings.claims: a claim's verdict comes from a fixed vocabulary, the table keeps every field, and the
prose names the verdict, our interval and the study's number."""
import pytest

from headlab.findings.claims import VERDICTS, Claim, claims_table, render


def _claim(**changes):
    fields = dict(claim_id="x.masking", finding="05 term matching", claim="Masking them costs accuracy", study=-0.524,
                  ours=-0.559, lo=-0.6, hi=-0.516, unit="relative change of accuracy", n_examples=1379, n_draws=1,
                  p=1e-70, verdict="holds", reason="The interval lies below 0.")
    return Claim(**{**fields, **changes})


def test_a_verdict_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="x.masking: verdict 'maybe'"):
        _claim(verdict="maybe")
    assert VERDICTS == ("holds", "does not hold", "opposite", "cannot tell")


def test_the_table_has_one_row_per_claim_with_every_field():
    table = claims_table([_claim(), _claim(claim_id="x.random", study=None, verdict="cannot tell")])
    assert list(table["claim_id"]) == ["x.masking", "x.random"] and table.loc[0, "n_examples"] == 1379
    assert list(table.columns)[:3] == ["claim_id", "finding", "claim"]


def test_the_prose_names_the_verdict_our_interval_and_the_studys_number():
    text = render([_claim(), _claim(study=None, verdict="opposite", reason="Why.")])
    first, second = text.splitlines()
    assert first == ("- *Masking them costs accuracy* **holds** here: -55.9% [-60.0%, -51.6%] (relative change of "
                     "accuracy); the study: -52.4%. The interval lies below 0.")
    assert "the **opposite** holds here" in second and "the study" not in second


def test_a_number_measured_without_an_interval_is_written_without_one():
    line = render([_claim(ours=0.9, lo=float("nan"), hi=float("nan"), unit="share of attention", study=None)])
    assert line == ("- *Masking them costs accuracy* **holds** here: 90.0% (share of attention). The interval lies "
                    "below 0.")
    assert "not measured" in render([_claim(ours=float("nan"), lo=float("nan"), hi=float("nan"))])
