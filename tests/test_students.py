"""headlab.findings.students: three students of the same size (low heads kept, high heads kept, the most important
kept) and the distillation temperature chosen on dev."""

import numpy as np
import pandas as pd
import pytest

from headlab.findings.students import KINDS, choose_temperature, student_drops


def _importance(layers=4, heads=3):
    rng = np.random.default_rng(0)
    layer, head = np.divmod(np.arange(layers * heads), heads)
    return pd.DataFrame({"layer": layer, "head": head, "importance": rng.permutation(layers * heads) / 10})


def test_every_student_lacks_half_the_heads_and_each_its_own_half():
    importance = _importance()
    drops = student_drops(importance, 4, 3)
    assert list(drops) == list(KINDS) and {len(d) for d in drops.values()} == {6}
    assert all(l >= 2 for l, _ in drops["low heads kept"]) and all(l < 2 for l, _ in drops["high heads kept"])
    least = importance.sort_values("importance").head(6)
    assert drops["important heads kept"] == sorted(zip(least["layer"], least["head"]))
    with pytest.raises(ValueError, match="importance table has 12 heads, the model 16"):
        student_drops(importance, 4, 4)


def test_the_temperature_is_the_best_on_dev_ties_to_the_lower():
    assert choose_temperature({1.0: 0.50, 2.0: 0.55, 4.0: 0.53}) == 2.0
    assert choose_temperature({4.0: 0.55, 1.0: 0.55}) == 1.0
    with pytest.raises(ValueError, match="no temperature"):
        choose_temperature({})
