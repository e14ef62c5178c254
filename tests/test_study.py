"""The public surface: ``headlab.load`` gives a Lab; evaluate, ablate, importance and attention work in memory, an
empty mask changes nothing, and a cached attention pass gives the same scores as a live one."""

import numpy as np
import pandas as pd
import pytest
from tiny_setup import tiny_setup

import headlab
from headlab.core.attention import AttentionCache, attention_maps
from headlab.core.grades import STUDY_SCALE
from headlab.core.masking import Ablation
from headlab.core.sweep import MaskSpec, random_share_specs
from headlab.lab.params import Params
from headlab.measures.order import order_heads
from headlab.measures.roles import cls_profile, role_scores


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("runs"), n_right=3)


def test_the_package_exports_a_small_public_surface():
    assert {"load", "Lab", "Params", "MaskSpec", "AttentionCache", "mask_heads"} <= set(headlab.__all__)
    assert all(hasattr(headlab, name) for name in headlab.__all__)


def test_evaluate_an_empty_mask_changes_nothing_and_a_mask_is_measured_against_the_engine_baseline(lab):
    none = lab.evaluate()
    assert none.rel_change == 0 and (none.lo, none.hi) == (0, 0) and none.p_mcnemar == 1
    assert none.accuracy == none.base_accuracy == pytest.approx(3 / 5)
    layer = lab.evaluate(drop=[(0, h) for h in range(4)])
    assert layer.dropped == tuple((0, h) for h in range(4)) and len(layer.correct) == len(lab.encoded)
    assert layer.accuracy == pytest.approx(layer.correct.mean())
    assert layer.rel_change == pytest.approx(layer.accuracy / layer.base_accuracy - 1)
    assert not np.allclose(layer.probs, none.probs)  # the hooks really removed the heads
    assert "4 heads removed" in repr(layer)
    again = lab.evaluate()
    np.testing.assert_array_equal(again.probs, none.probs)  # the intervention undid itself


def test_ablate_in_memory_equals_the_resumable_sweep_on_disk(lab):
    specs = random_share_specs(4, 4, [0.25, 0.5], draws=2, seed=0)
    memory = lab.ablate(specs)
    disk = lab.ablate(specs, name="api-test", progress=False)
    pd.testing.assert_frame_equal(memory, disk)
    assert "none" in set(memory["mask_id"]) and len(memory) == len(specs) + 1
    assert list(lab.params.table_dir.glob("sweeps/api-test-*/masks/*.csv"))  # saved mask by mask
    heads = lab.ablate_each_head()
    assert len(heads) == 16 + 1 and heads.loc[heads["mask_id"] == "none", "rel_change"].item() == 0


def test_importance_is_one_row_per_head(lab):
    table = lab.importance()
    assert len(table) == 16 and (table["importance_raw"] >= 0).all()


def test_attention_of_removed_heads_and_of_another_model(lab):
    ((example, maps),) = lab.attention([2])
    assert example == 2 and maps.shape[:2] == (4, 4)
    ((_, masked),) = lab.attention([2], drop=[(0, 0)])
    np.testing.assert_allclose(masked[0], maps[0], rtol=1e-5)  # a head's own map does not change in its layer
    assert not np.allclose(masked[1:], maps[1:])  # the layers above see the removal


def test_attention_of_another_encoding_and_the_pretrained_encoder(lab, monkeypatch):
    import headlab.lab.lab as lab_module

    other = lab.encoded.subset([3, 2])  # another encoding of pairs: example 0 is the lab's pair 3
    ((example, maps),) = lab.attention([0], encoded=other)
    ((_, same),) = lab.attention([3])
    assert example == 0 and np.array_equal(maps, same)
    loaded = []
    monkeypatch.setattr(lab_module, "load_encoder", lambda spec: loaded.append(spec) or lab.model.bert)
    encoder = lab.pretrained_encoder()
    assert loaded == [lab.params.model] and encoder is lab.model.bert
    ((_, bare),) = lab.attention([3], model=encoder)  # the bare encoder's maps, on the same pairs
    assert np.array_equal(bare, same)  # (here the same weights as the classifier's encoder)


def test_a_cache_gives_the_same_scores_as_a_live_pass_and_survives_disk(lab, tmp_path):
    cache = lab.cache_attention(path=tmp_path / "attention.npz")
    assert len(cache) == len(lab.encoded) and cache.maps[0].dtype == np.float16
    loaded = lab.cache_attention(path=tmp_path / "attention.npz")
    for (a, x), (b, y) in zip(cache, loaded):
        assert a == b and np.array_equal(x, y)
    live = role_scores(lab.attention(), lab.encoded, lab.tokenizer)
    cached = role_scores(cache, lab.encoded, lab.tokenizer)
    pd.testing.assert_frame_equal(live, cached, atol=2e-3)  # float16: three decimals
    live_order, cached_order = (order_heads(maps, lab.encoded, lab.tokenizer) for maps in (lab.attention(), cache))
    bounds = ["score_lo", "score_hi"]  # bootstrap quantiles of a few pairs: rounding can pick a neighbouring value
    pd.testing.assert_frame_equal(live_order.drop(columns=bounds), cached_order.drop(columns=bounds), atol=2e-3)
    pd.testing.assert_frame_equal(live_order[bounds], cached_order[bounds], atol=1e-2)
    profile = cls_profile(cache.subset([3, 1]), lab.encoded, lab.tokenizer, heads=[(1, 2)])
    assert profile["example"].tolist() == [1, 3]
    with pytest.raises(ValueError, match="other examples or another mask"):
        lab.cache_attention(examples=[0, 1], path=tmp_path / "attention.npz")
    with pytest.raises(KeyError, match="example 99"):
        cache[99]


def test_a_cache_round_trips_ragged_maps_exactly():
    maps = [np.random.default_rng(i).random((2, 3, n, n)).astype(np.float16) for i, n in enumerate((4, 7, 1))]
    cache = AttentionCache([5, 0, 9], maps, dropped=[(1, 2)])
    path = "/tmp/headlab-cache-roundtrip.npz"
    cache.save(path)
    back = AttentionCache.load(path)
    assert back.examples.tolist() == [5, 0, 9] and back.dropped == ((1, 2),)
    assert all(np.array_equal(a, b) for a, b in zip(back.maps, maps)) and back[9].dtype == np.float32


def test_attention_maps_and_a_cache_of_them_agree(lab):
    live = dict(attention_maps(lab.model, lab.encoded))
    cache = AttentionCache.from_pass(attention_maps(lab.model, lab.encoded), dtype=np.float32)
    assert all(np.array_equal(cache[e], live[e]) for e in live)


def test_a_mask_spec_names_heads_that_exist(lab):
    with pytest.raises(ValueError, match=r"head \(9, 0\) does not exist"):
        lab.evaluate(drop=[(9, 0)])
    assert MaskSpec("m", ((0, 1),), "k").keep(4, 4)[0, 1] == 0


def test_out_of_range_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="EVAL_LIMIT"):
        Params(eval_limit=0, device="cpu")
    with pytest.raises(ValueError, match="N_BOOT must be a positive integer"):
        Params(n_boot=0, device="cpu")


def test_the_lab_bootstraps_as_many_times_as_its_parameters_say(tmp_path):
    lab = tiny_setup(tmp_path, n_right=3)
    lab.params.n_boot = 50
    assert lab.baseline_metrics()["n_boot"].eq(50).all() and lab.baseline_metrics(n_boot=20)["n_boot"].eq(20).all()
    assert Params.from_globals({"N_BOOT": 300}).n_boot == 300


def test_the_baseline_gives_the_quadratic_kappa_every_claim_is_judged_on(tmp_path):
    from headlab.core.stats import kappa_lost, quadratic_kappa

    lab = tiny_setup(tmp_path, n_right=3)
    kappa = lab.baseline_metrics().set_index("metric").loc["quadratic_kappa"]
    predicted = STUDY_SCALE.predicted(lab.base_probs)
    assert kappa["value"] == pytest.approx(quadratic_kappa(predicted, lab.encoded.grades))
    same = kappa_lost(predicted, predicted, lab.encoded.grades, lab.params.n_boot, lab.params.seed)
    assert (kappa["lo"], kappa["hi"]) == (same["kappa_base_lo"], same["kappa_base_hi"])  # page 08's interval
    assert kappa["lo"] < kappa["hi"]


def test_mean_ablation_sweeps_apart_from_zeroing_against_the_same_unmasked_model(tmp_path, monkeypatch):
    """Removed heads take their mean output over training pairs: the unmasked row is the zero sweep's, a masked row
    differs from zeroing, the sweep is saved apart, and a bad name for the method is refused by name."""
    from tiny_setup import PAIRS

    monkeypatch.setattr(Params, "train_frame", lambda self: PAIRS)  # the tiny lab's "training pairs"
    lab = tiny_setup(tmp_path, n_right=3)
    specs = [MaskSpec("layer0", tuple((0, h) for h in range(4)), "layer"), MaskSpec("one", ((1, 2),), "head")]
    zero, mean = (
        lab.sweep(specs, "method-test", progress=False),
        lab.sweep(specs, "method-test", ablation="mean", progress=False),
    )
    probs = [f"p{g}" for g in range(1, 6)]
    for table in (zero, mean):
        assert list(dict.fromkeys(table["mask_id"])) == ["none", "layer0", "one"]
    np.testing.assert_allclose(zero[zero.mask_id == "none"][probs], mean[mean.mask_id == "none"][probs], atol=1e-6)
    assert not np.allclose(zero[zero.mask_id == "layer0"][probs], mean[mean.mask_id == "layer0"][probs], atol=1e-4)
    assert {p.name.split("-")[:-1][-1] for p in lab.params.table_dir.glob("sweeps/method-test*")} == {"test", "mean"}
    assert lab.means().shape == (4, 16) and lab.means() is lab.means()
    one = lab.evaluate([(1, 2)], ablation="mean")
    np.testing.assert_allclose(one.probs, mean[mean.mask_id == "one"][probs].to_numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="ablation must be 'zero' or 'mean'"):
        lab.sweep(specs, "method-test", ablation="resample")
    saved = lab.ablate(specs, name="ablate-mean", progress=False, ablation=Ablation.MEAN)  # saved, not in memory
    pd.testing.assert_frame_equal(saved, lab.ablate(specs, ablation="mean"))
    assert list(lab.params.table_dir.glob("sweeps/ablate-mean-mean-*/masks/*.csv"))


def test_a_stored_table_is_computed_once_per_key_and_read_back(tmp_path):
    lab = tiny_setup(tmp_path, n_right=3)
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"x": [0.1 + 0.2, 1 / 3], "name": ["a", "b"]})

    first = lab.stored("thing", {"k": 1}, compute)
    again = lab.stored("thing", {"k": 1}, compute)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, again)
    assert first["x"].tolist() == [0.1 + 0.2, 1 / 3]  # floats come back exactly
    lab.stored("thing", {"k": 2}, compute)
    assert len(calls) == 2  # another key: computed again
    assert len(list((lab.params.table_dir / "stored").glob("thing-*.csv"))) == 2


def test_importance_is_computed_once_per_lab_folder(tmp_path, monkeypatch):
    from headlab.lab import lab as lab_module

    lab = tiny_setup(tmp_path, n_right=3)
    calls = []
    real = lab_module.gradient_importance
    monkeypatch.setattr(lab_module, "gradient_importance", lambda *a, **k: calls.append(1) or real(*a, **k))
    first, again = lab.importance(), lab.importance()
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, again)


def test_a_stored_table_keeps_empty_strings_and_missing_numbers_apart(tmp_path):
    lab = tiny_setup(tmp_path, n_right=3)
    table = lab.stored("mixed", {}, lambda: pd.DataFrame({"heads": ["", "0.1"], "value": [np.nan, 2.0]}))
    assert table["heads"].tolist() == ["", "0.1"] and np.isnan(table["value"][0]) and table["value"][1] == 2.0


def test_a_stored_table_computed_is_noted_in_the_work_log_and_a_read_one_is_not(tmp_path):
    from headlab.core.worklog import logging_work, work_noted

    lab = tiny_setup(tmp_path, n_right=3)
    with logging_work(tmp_path / "first.log") as log:
        lab.stored("noted", {}, lambda: pd.DataFrame({"x": [1]}))
    assert len(work_noted(log)) == 1 and work_noted(log)[0].startswith("table noted-")
    with logging_work(tmp_path / "again.log") as log:
        lab.stored("noted", {}, lambda: pd.DataFrame({"x": [1]}))
    assert work_noted(log) == []
