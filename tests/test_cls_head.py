import numpy as np
import pandas as pd
import pytest

from headlab import cls_head
from headlab.cls_head import (concentration, concentration_verdict, cls_rows, focus_head, single_head_grid, spread,
                              spread_under_masks, spread_verdict)
from headlab.roles import ENGLISH_STOPWORDS, cls_profile
from tiny_setup import tiny_setup


def test_single_head_grid_is_loaded_when_notebook_02_saved_it(tmp_path, monkeypatch):
    setup = tiny_setup(tmp_path)
    saved = pd.DataFrame({"layer": [0, 1], "head": [0, 0], "rel_change": [-0.1, 0.0]})
    setup.save_table(saved, cls_head.GRID_TABLE)

    def no_sweep(*args, **kwargs):
        raise AssertionError("should have been loaded")

    monkeypatch.setattr(cls_head, "run_sweep", no_sweep)
    grid, source = single_head_grid(setup)
    pd.testing.assert_frame_equal(grid, saved)
    assert source == "loaded from head_grid.csv, written by notebook 02"


def test_single_head_grid_is_computed_otherwise(tmp_path):
    setup = tiny_setup(tmp_path, n_right=3)
    grid, source = single_head_grid(setup, n_boot=50, progress=False)
    assert source == "computed (16 single-head masks)"
    assert len(grid) == 16 and grid["direction"].isin(["none", "hurts", "helps"]).all()
    assert not (setup.study.table_dir / "head_grid.csv").exists()  # notebook 02's file is left to notebook 02


def test_focus_head_is_the_costliest_upper_head():
    grid = pd.DataFrame({"layer": [0, 1, 2, 2, 3], "head": [0, 0, 0, 1, 0],
                         "rel_change": [-0.9, -0.5, -0.2, np.nan, -0.3]})
    row = focus_head(grid, layers=4)
    assert (row["layer"], row["head"]) == (3, 0)
    with pytest.raises(ValueError, match="upper-half"):
        focus_head(grid.assign(rel_change=[-0.1, -0.1, np.nan, np.nan, np.nan]), layers=4)


def test_focus_verdict_places_the_head_at_the_study_depth():
    row = pd.Series({"layer": 5, "head": 3, "rel_change": -0.08, "lo": -0.12, "hi": -0.04, "p_mcnemar": 1e-4,
                     "significant": True})
    text = cls_head.focus_verdict(row, layers=6)
    assert "**5.3**" in text and "-8.0% [-12.0%, -4.0%]" in text and "survives" in text
    assert "layer 10 of 12: the relative depth of our layer 5, this head's layer." in text
    assert "of our layer 10." in cls_head.focus_verdict(row, layers=12)


def profile_table(shared, chance, entropy=None, heads=((1, 0), (1, 1))):
    """A cls_profile-like table: per example and head; ``shared`` (examples, heads)."""
    rows = []
    for example in range(len(shared)):
        for j, (layer, head) in enumerate(heads):
            rows.append({"example": example, "layer": layer, "head": head, "shared_share": shared[example][j],
                         "chance": chance[example], "content_mass": 0.5,
                         "entropy": 1.0 if entropy is None else entropy[example][j]})
    return pd.DataFrame(rows)


def test_concentration_against_chance():
    shared = [[0.8, 0.2], [0.6, 0.2], [0.7, 0.3]] * 4 + [[np.nan, np.nan]]  # the last pair shares no term
    table = concentration(profile_table(shared, chance=[0.3, 0.2, 0.3] * 4 + [np.nan]), n_boot=200).set_index("head")
    assert table.loc[0, "excess"] == pytest.approx(np.mean([0.5, 0.4, 0.4]))
    assert table.loc[0, "n_examples"] == 12 and table.loc[0, "above_chance"] == 1 and table.loc[0, "p_sign"] < 0.001
    assert table.loc[1, "excess"] == pytest.approx(-0.1 / 3) and table.loc[0, "lo"] > 0
    assert table.loc[0, "ratio"] == pytest.approx(0.7 / (0.8 / 3))
    text = concentration_verdict(table.reset_index(), layer=1, head=0)
    assert "beyond chance" in text and "ranks 1 of 2" in text
    assert "no concentration" in concentration_verdict(table.reset_index(), layer=1, head=1)
    mixed = table.reset_index().assign(lo=-0.01, hi=0.02, p_sign=0.001, above_chance=0.3)
    assert "no consistent concentration" in concentration_verdict(mixed, layer=1, head=0)
    assert "below chance on most pairs" in concentration_verdict(mixed, layer=1, head=0)


def test_spread_and_its_verdict():
    rng = np.random.default_rng(0)
    n = 40
    shared = rng.uniform(0.3, 0.5, (n, 2))
    entropy = rng.uniform(1.0, 2.0, (n, 2))
    before = profile_table(shared, chance=[0.3] * n, entropy=entropy)
    after = profile_table(shared - 0.1, chance=[0.3] * n, entropy=entropy + np.log(2))
    change = spread(before, after, layer=1, head=0, n_boot=200)
    assert change["metric"].tolist() == ["entropy", "shared_share", "content_mass"]
    rows = change.set_index("metric")
    assert rows.loc["entropy", "delta"] == pytest.approx(np.log(2)) and rows.loc["shared_share", "hi"] < 0
    control = pd.DataFrame({"entropy_delta": [0.0, 0.1, -0.05] * 10})
    text = spread_verdict(change, control, layer=1, head=0, k=5)
    assert "**it spreads out**" in text and "factor 2.00" in text and "falls, as the study's reading implies" in text
    assert "0 of 30 change it by" in text and "more than random lower heads do" in text
    still = spread(before, before, layer=1, head=0, n_boot=50)
    assert "no change of spread distinguishable from zero" in spread_verdict(still, None, layer=1, head=0, k=5)


def test_spread_under_masks_and_cls_rows_on_a_tiny_model(tmp_path):
    setup = tiny_setup(tmp_path)
    before = cls_profile(setup.model, setup.encoded, setup.tokenizer, stopwords=ENGLISH_STOPWORDS)
    control = spread_under_masks(setup, 3, 1, [[], [(0, 0), (1, 2)]], before, stopwords=ENGLISH_STOPWORDS)
    assert control["heads"].tolist() == ["", "0.0;1.2"]
    assert control.loc[0, "entropy_delta"] == pytest.approx(0, abs=1e-6)
    assert control.loc[1, "entropy_delta"] != pytest.approx(0, abs=1e-6)
    mask = np.ones((4, 4), dtype=np.float32)
    mask[0, 0] = 0
    rows = cls_rows({"all": (setup.model, None), "masked": (setup.model, mask)}, setup.encoded, setup.tokenizer,
                    [0, 3], 3, 1, stopwords=ENGLISH_STOPWORDS)
    assert rows.groupby("example")[["all", "masked"]].sum().to_numpy() == pytest.approx(1, abs=1e-3)
    first = rows[rows["example"] == 0]
    assert first["token"].tolist() == ["01 red", "02 cat", "03 ,", "04 red", "06 the", "07 cat", "08 ,", "09 red",
                                       "10 !"]
    assert first["shared"].tolist() == [True, True, False, True, False, True, False, True, False]
