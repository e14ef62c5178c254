"""headlab.lab.study: the notebook parameters are checked when the study is made."""
import pytest

from headlab.lab.study import Study


def test_out_of_range_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="EVAL_LIMIT"):
        Study(eval_limit=0, device="cpu")
