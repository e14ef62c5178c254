from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_ENCODERS, tiny_bert

from headlab.core.evaluate import Encoded, predict
from headlab.core.grades import STUDY_SCALE
from headlab.core.gradients import gradient_importance
from headlab.core.masking import head_grid, keep_all, mask_heads, output_projections
from headlab.core.sweep import (
    baseline_spec,
    plan_table,
    random_share_specs,
    run_sweep,
    share_curve,
    single_head_specs,
    summarize,
)
from headlab.measures.grids import head_grid_table, layer_effects, rank_agreement
from headlab.measures.halves import collapse_shares, half_gap, half_pool, half_shares, half_specs, half_split


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run 100x slower when two torch threads fight other jobs for two shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_encoded(n: int, seed: int = 0, grades=None) -> Encoded:
    """Random token ids framed as [CLS] ... [SEP], no tokenizer needed."""
    rng = np.random.default_rng(seed)
    ids = [[1, *rng.integers(5, 50, size=rng.integers(4, 12)).tolist(), 2] for _ in range(n)]
    grades = rng.integers(1, 6, size=n) if grades is None else np.asarray(grades)
    return Encoded(ids, [[0] * len(i) for i in ids], grades.astype(np.int64), 0, STUDY_SCALE)


def as_read_back(table: pd.DataFrame) -> pd.DataFrame:
    """A table after a CSV round trip with keep_default_na=False, as sweep.load_sweep reads plans."""
    return pd.read_csv(pd.io.common.StringIO(table.to_csv(index=False)), keep_default_na=False)


# --- gradient importance -------------------------------------------------------------------------------


@pytest.mark.parametrize("make", TINY_ENCODERS, ids=lambda make: make.__name__)
def test_a_head_whose_output_is_zero_has_zero_importance(make):
    model = make()
    d = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        output_projections(model)[1].weight[:, 2 * d : 3 * d] = 0
    imp = gradient_importance(model, tiny_encoded(12), batch_size=5).set_index(["layer", "head"])
    assert imp.loc[(1, 2), "importance_raw"] == 0
    assert imp.loc[(1, 2), "importance"] == 0
    assert (imp.drop(index=(1, 2))["importance_raw"] > 0).all()


def _loss(model, encoded, i, mask):
    one = encoded.subset([i])
    with torch.no_grad(), mask_heads(model, mask):
        logits = model(input_ids=torch.tensor(one.input_ids), token_type_ids=torch.tensor(one.token_type_ids)).logits
    return torch.nn.functional.cross_entropy(logits, torch.tensor(one.grades - 1)).item()


def test_importance_is_the_mean_absolute_per_example_gradient_of_the_gold_loss():
    model = tiny_bert().double()
    encoded = tiny_encoded(6, seed=3)
    layers, heads = head_grid(model)
    eps = 1e-5
    expected = np.zeros((layers, heads))
    for i in range(len(encoded)):  # central finite differences of each example's own loss
        for l in range(layers):
            for h in range(heads):
                up, down = keep_all(model).double(), keep_all(model).double()
                up[l, h], down[l, h] = 1 + eps, 1 - eps
                expected[l, h] += abs(_loss(model, encoded, i, up) - _loss(model, encoded, i, down)) / (2 * eps)
    expected /= len(encoded)
    for batch_size in (1, 4):  # per-example absolute values: the batch size must not matter
        got = gradient_importance(model, encoded, batch_size=batch_size, normalize=False)
        np.testing.assert_allclose(got["importance_raw"].to_numpy().reshape(layers, heads), expected, rtol=1e-5)
        np.testing.assert_array_equal(got["importance"], got["importance_raw"])


def test_normalized_importance_has_unit_l2_norm_per_layer():
    imp = gradient_importance(tiny_bert(), tiny_encoded(8), batch_size=3)
    for _, layer in imp.groupby("layer"):
        assert np.isclose(np.sqrt((layer["importance"] ** 2).sum()), 1.0)
        ratio = layer["importance_raw"] / layer["importance"]
        assert np.allclose(ratio, ratio.iloc[0])  # one factor per layer: the ranking inside a layer is kept
    assert list(imp.columns) == ["layer", "head", "importance", "importance_raw"]
    assert list(zip(imp["layer"], imp["head"]))[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]


def test_gradient_importance_leaves_parameters_and_mode_as_they_were():
    model = tiny_bert().train()
    params = dict(model.named_parameters())
    params["bert.embeddings.word_embeddings.weight"].requires_grad_(False)
    old_grad = torch.randn_like(params["classifier.weight"])
    params["classifier.weight"].grad = old_grad.clone()
    flags = {name: p.requires_grad for name, p in params.items()}
    gradient_importance(model, tiny_encoded(6), batch_size=4)
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags
    assert torch.equal(params["classifier.weight"].grad, old_grad)
    assert all(p.grad is None for name, p in params.items() if name != "classifier.weight")
    assert model.training


# --- the single-head grid ------------------------------------------------------------------------------


def test_grid_singles_out_the_one_head_that_decides(tmp_path):
    model = tiny_bert(seed=1)
    layers, heads = head_grid(model)
    d = model.config.hidden_size // heads
    with torch.no_grad():  # head (2, 1) now dominates the last layer, and so the classifier
        output_projections(model)[2].weight[:, 1 * d : 2 * d] *= 50
    unlabeled = tiny_encoded(60)
    encoded = tiny_encoded(60, grades=STUDY_SCALE.predicted(predict(model, unlabeled)))  # baseline is 100% right
    specs = [baseline_spec(), *single_head_specs(layers, heads)]
    per_example = run_sweep(model, encoded, specs, tmp_path, batch_size=16, progress=False)
    plan = pd.read_csv(tmp_path / "plan.csv", keep_default_na=False)  # layer/head are strings here
    assert per_example[per_example["mask_id"] == "none"]["correct"].all()
    grid = head_grid_table(summarize(per_example, plan, n_boot=200), layers, heads)
    assert len(grid) == layers * heads
    worst = grid.loc[grid["rel_change"].idxmin()]
    assert (worst["layer"], worst["head"]) == (2, 1)
    assert worst["rel_change"] < -0.5 and worst["hi"] < 0
    assert worst["significant"] and worst["direction"] == "hurts"


def _head_summary(p_values, rel_changes, heads_tested):
    rows = [
        {
            "mask_id": "none",
            "kind": "none",
            "layer": "",
            "head": "",
            "accuracy": 0.5,
            "rel_change": 0.0,
            "lo": 0.0,
            "hi": 0.0,
            "lo90": 0.0,
            "hi90": 0.0,
            "p_mcnemar": 1.0,
        }
    ]
    for (l, h), p, r in zip(heads_tested, p_values, rel_changes):
        rows.append(
            {
                "mask_id": f"head-{l}-{h}",
                "kind": "head",
                "layer": l,
                "head": h,
                "accuracy": 0.5 * (1 + r),
                "rel_change": r,
                "lo": r - 0.1,
                "hi": r + 0.1,
                "lo90": r - 0.08,
                "hi90": r + 0.08,
                "p_mcnemar": p,
            }
        )
    return as_read_back(pd.DataFrame(rows))


def test_grid_holm_correction_matches_a_hand_computed_example():
    # sorted p: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    summary = _head_summary([0.01, 0.04, 0.03, 0.005], [-0.2, 0.1, 0.3, 0.25], [(0, 0), (0, 1), (1, 0), (1, 1)])
    grid = head_grid_table(summary, 2, 2)
    np.testing.assert_allclose(grid["p_holm"], [0.03, 0.06, 0.06, 0.02])
    assert (grid["p_holm"] >= grid["p_mcnemar"]).all()
    assert grid["significant"].tolist() == [True, False, False, True]
    assert grid["direction"].tolist() == ["hurts", "none", "none", "helps"]
    assert grid["layer"].dtype.kind == "i" and grid["head"].dtype.kind == "i"


def test_grid_keeps_untested_heads_out_of_the_correction():
    summary = _head_summary([0.02, 0.5], [-0.3, 0.0], [(1, 1), (0, 0)])
    grid = head_grid_table(summary, 2, 2).set_index(["layer", "head"])
    assert np.isclose(grid.loc[(1, 1), "p_holm"], 0.04)  # two heads tested, not four
    assert grid.loc[(0, 1), "direction"] == "untested" and not grid.loc[(0, 1), "significant"]
    assert np.isnan(grid.loc[(0, 1), "rel_change"])
    with pytest.raises(ValueError, match="outside"):
        head_grid_table(summary, 1, 2)


# --- rank agreement, layers, halves, curves ------------------------------------------------------------


def test_rank_agreement_on_identical_and_reversed_orderings():
    heads = [(l, h) for l in range(4) for h in range(5)]
    loss = np.random.default_rng(0).permutation(20) / 100
    grid = pd.DataFrame({"layer": [l for l, _ in heads], "head": [h for _, h in heads], "rel_change": -loss})
    same = rank_agreement(grid, grid.assign(importance=loss)[["layer", "head", "importance"]])
    assert np.isclose(same["spearman_rho"], 1.0) and same["p_value"] < 1e-6
    assert (same["n_heads"], same["k"], same["top_overlap"]) == (20, 2, 2)
    assert np.isclose(same["top_overlap_expected"], 0.2)
    assert same["top_ablation"] == [heads[i] for i in np.argsort(-loss)[:2]]
    reversed_ = rank_agreement(grid, grid.assign(importance=-loss)[["layer", "head", "importance"]])
    assert np.isclose(reversed_["spearman_rho"], -1.0) and reversed_["top_overlap"] == 0


def test_layer_effects_calls_a_layer_only_after_holm_across_layers():
    summary = as_read_back(
        pd.DataFrame(
            {
                "mask_id": ["none", "layer-1", "layer-0", "layer-2"],
                "kind": ["none", "layer", "layer", "layer"],
                "layer": ["", 1, 0, 2],
                "accuracy": [0.5, 0.4, 0.55, 0.5],
                "rel_change": [0, -0.2, 0.1, 0.0],
                "lo": [0, -0.3, 0.01, -0.05],
                "hi": [0, -0.1, 0.2, 0.05],
                "p_mcnemar": [1, 0.01, 0.04, 1],
            }
        )
    )
    table = layer_effects(summary)
    assert table["layer"].tolist() == [0, 1, 2]
    # layer 0's interval excludes zero and p = 0.04, but Holm over 3 layers makes it 0.08: not called
    np.testing.assert_allclose(table["p_holm"], [0.08, 0.03, 1.0])
    assert table["distinguishable"].tolist() == [False, True, False]
    assert table["rel_change"].tolist() == [0.1, -0.2, 0.0]


def test_half_split_pool_and_shares():
    assert half_split(6) == ([0, 1, 2], [3, 4, 5])
    assert half_split(12) == (list(range(6)), list(range(6, 12)))
    with pytest.raises(ValueError):
        half_split(3)
    assert half_pool(4, 2, "upper") == [(2, 0), (2, 1), (3, 0), (3, 1)]
    shares = half_shares(6, 12, 5)
    np.testing.assert_allclose(np.array(shares) * 72, [0, 7, 14, 22, 29, 36])
    assert shares[-1] == 0.5
    specs = random_share_specs(6, 12, [0.5], draws=2, seed=0, pool=half_pool(6, 12, "lower"), kind="lower")
    assert all(sorted(s.dropped) == half_pool(6, 12, "lower") for s in specs)  # 50% = the whole lower half


def with_grades(per_example: pd.DataFrame) -> pd.DataFrame:
    """A sweep's per-example table with the gold and predicted grades the summaries' kappa scale reads: gold grades 1
    to 5 by example, a wrong answer one grade off."""
    grade = per_example["example"] % 5 + 1
    return per_example.assign(grade=grade, predicted=np.where(per_example["correct"] == 1, grade, grade % 5 + 1))


def test_curve_gives_the_hand_computed_means_and_spreads():
    base = np.array([1, 1, 1, 0])  # accuracy 0.75
    correct = {
        "r-a0": [1, 1, 0, 0],
        "r-a1": [1, 0, 0, 0],  # share 0.1: 0.50 and 0.25
        "r-b0": [0, 0, 0, 0],
        "r-b1": [1, 1, 1, 1],  # share 0.2: 0.00 and 1.00
        "other": [0, 0, 0, 0],
        "none": base.tolist(),
    }
    per_example = with_grades(
        pd.DataFrame(
            [{"mask_id": m, "example": i, "correct": c} for m, cs in correct.items() for i, c in enumerate(cs)]
        )
    )
    plan = as_read_back(
        pd.DataFrame(
            {
                "mask_id": ["r-b1", "r-a0", "r-a1", "r-b0", "other"],
                "kind": ["random"] * 4 + ["layer"],
                "n_dropped": [2, 1, 1, 2, 3],
                "share": [0.2, 0.1, 0.1, 0.2, ""],
                "draw": [1, 0, 1, 0, ""],
            }
        )
    )
    table, _ = share_curve(per_example, plan, "random", n_boot=500)
    assert table["share"].tolist() == [0.1, 0.2]
    assert table["n_heads"].tolist() == [1, 2] and table["n_draws"].tolist() == [2, 2]
    np.testing.assert_allclose(table["rel_change"], [0.375 / 0.75 - 1, 0.5 / 0.75 - 1])
    np.testing.assert_allclose(table["draw_min"], [0.25 / 0.75 - 1, -1.0])
    np.testing.assert_allclose(table["draw_max"], [0.5 / 0.75 - 1, 1 / 0.75 - 1])
    # draws -1/3 and -2/3: sd = (1/3)/sqrt(2), half width = t(0.975, 1) * sd / sqrt(2) = t / 6
    np.testing.assert_allclose(table["draw_lo"].iloc[0], -0.5 - 12.7062047 / 6, rtol=1e-6)
    np.testing.assert_allclose(table["draw_hi"].iloc[0], -0.5 + 12.7062047 / 6, rtol=1e-6)
    assert (table["lo"] <= table["rel_change"]).all() and (table["rel_change"] <= table["hi"]).all()


def test_curve_with_real_sweep_specs_matches_plan_table():
    specs = random_share_specs(2, 2, [0.25, 0.5], draws=3, seed=0)
    plan = plan_table(specs)
    base = np.ones(3, dtype=int)
    per_example = with_grades(
        pd.DataFrame(
            [
                {"mask_id": s.mask_id, "example": i, "correct": int(i < 3 - len(s.dropped))}
                for s in specs
                for i in range(3)
            ]
            + [{"mask_id": "none", "example": i, "correct": c} for i, c in enumerate(base)]
        )
    )
    table, _ = share_curve(per_example, plan, "random", n_boot=100)
    np.testing.assert_allclose(table["rel_change"], [-1 / 3, -2 / 3])
    np.testing.assert_allclose(table["draw_min"], table["draw_max"])


# --- low versus high halves ----------------------------------------------------------------------------


def test_half_specs_draw_only_from_their_half_with_one_draw_at_the_fixed_ends():
    specs = half_specs(6, 12, steps=5, draws=3, seed=0)
    lower, upper = set(half_pool(6, 12, "lower")), set(half_pool(6, 12, "upper"))
    for which, pool in (("lower", lower), ("upper", upper)):
        mine = [s for s in specs if s.kind == which]
        assert len(mine) == 1 + 4 * 3 + 1  # share 0 and the whole half once, the 4 shares between 3 times
        assert all(set(s.dropped) <= pool for s in mine)
        assert sorted({len(s.dropped) for s in mine}) == [0, 7, 14, 22, 29, 36]
    assert len({s.mask_id for s in specs}) == len(specs)
    assert half_specs(6, 12, steps=5, draws=3, seed=0) == specs  # seeded: a rerun resumes the same sweep


def test_half_gap_gives_hand_computed_changes_and_agrees_with_the_curves():
    base = np.array([1, 1, 1, 1, 0, 0])  # accuracy 4/6
    correct = {
        "lower-a": [1, 0, 0, 0, 0, 0],
        "lower-b": [1, 1, 0, 0, 0, 0],  # mean 1.5/6
        "upper-a": [1, 1, 1, 1, 0, 0],
        "upper-b": [1, 1, 1, 0, 0, 1],  # mean 4/6
        "none": base.tolist(),
    }
    per_example = with_grades(
        pd.DataFrame(
            [{"mask_id": m, "example": i, "correct": c} for m, cs in correct.items() for i, c in enumerate(cs)]
        )
    )
    plan = as_read_back(
        pd.DataFrame(
            {
                "mask_id": list(correct)[:4],
                "kind": ["lower", "lower", "upper", "upper"],
                "n_dropped": [2] * 4,
                "share": [0.25] * 4,
                "draw": [0, 1, 0, 1],
            }
        )
    )
    gap = half_gap(per_example, plan, n_boot=400, seed=1)
    row = gap.iloc[0]
    assert np.isclose(row["lower_change"], 1.5 / 4 - 1) and np.isclose(row["upper_change"], 0.0)
    assert np.isclose(row["gap"], 1 - 1.5 / 4)
    assert row["gap_lo"] <= row["gap"] <= row["gap_hi"]
    assert (row["lower_draws"], row["upper_draws"], row["n_heads"]) == (2, 2, 2)
    for which in ("lower", "upper"):
        curve, _ = share_curve(per_example, plan, which, n_boot=400, seed=1)
        np.testing.assert_allclose(
            curve[["rel_change", "lo", "hi"]].to_numpy()[0],
            [row[f"{which}_change"], row[f"{which}_lo"], row[f"{which}_hi"]],
        )


def test_half_gap_refuses_halves_masked_at_different_shares():
    plan = as_read_back(
        pd.DataFrame(
            {
                "mask_id": ["l", "u"],
                "kind": ["lower", "upper"],
                "n_dropped": [1, 2],
                "share": [0.25, 0.5],
                "draw": [0, 0],
            }
        )
    )
    per_example = pd.DataFrame(
        {"mask_id": ["l", "u", "none"], "example": [0, 0, 0], "correct": [1, 1, 1], "predicted": 3, "grade": 3}
    )
    with pytest.raises(ValueError, match="different shares"):
        half_gap(per_example, plan, n_boot=10)


def test_halves_sweep_on_a_tiny_model_runs_end_to_end(tmp_path):
    model = tiny_bert(seed=2)
    model.bert.encoder.layer = model.bert.encoder.layer[:2]  # halves need an even number of layers
    model.config.num_hidden_layers = 2
    layers, heads = head_grid(model)
    encoded = tiny_encoded(20)
    specs = [baseline_spec(), *half_specs(layers, heads, steps=2, draws=2, seed=0)]
    per_example = run_sweep(model, encoded, specs, tmp_path, batch_size=8, progress=False)
    gap = half_gap(per_example, pd.read_csv(tmp_path / "plan.csv", keep_default_na=False), n_boot=50)
    assert gap["share"].tolist() == [0.0, 0.25, 0.5]  # of 8 heads: 0, 2 and 4 (the whole half) masked
    assert np.allclose(gap.loc[0, ["lower_change", "upper_change", "gap"]].astype(float), 0.0)


def test_the_deciding_share_gets_its_own_draws_and_keeps_the_first_ones():
    few, many = (
        half_specs(6, 12, steps=5, draws=3, seed=0),
        half_specs(6, 12, steps=5, draws=3, seed=0, deciding_draws=12),
    )
    deciding = collapse_shares(half_shares(6, 12, 5))
    assert deciding == [29 / 72, 36 / 72]  # the shares nearest 40% and 50% of all heads
    per_share = lambda specs: Counter((s.kind, s.meta["share"]) for s in specs)  # noqa: E731
    assert per_share(many)[("lower", 29 / 72)] == 12 and per_share(many)[("upper", 29 / 72)] == 12
    assert per_share(many)[("lower", 36 / 72)] == 1  # the whole half: one possible mask
    assert per_share(many)[("lower", 14 / 72)] == 3  # a share that decides nothing keeps its draws
    assert set(few) <= set(many)  # more draws add masks: the first three are the same heads (reused, not run again)
    more = half_specs(
        6, 12, steps=5, draws=30, seed=0, deciding_draws=12
    )  # a GPU's HALF_DRAWS above the deciding count
    assert Counter((s.kind, s.meta["share"]) for s in more)[("lower", 29 / 72)] == 30


def test_half_gap_puts_both_halves_and_their_difference_on_the_kappa_scale():
    rng = np.random.default_rng(0)
    gold = rng.integers(1, 6, 200)
    base = np.where(rng.random(200) < 0.7, gold, rng.integers(1, 6, 200))  # a model that agrees well beyond chance
    predicted = {"none": base, "l0": np.full(200, 3), "l1": np.full(200, 3), "u0": base, "u1": base}
    per_example = pd.concat(
        pd.DataFrame({"mask_id": m, "example": range(200), "grade": gold, "predicted": p, "correct": (p == gold) * 1})
        for m, p in predicted.items()
    )
    plan = as_read_back(
        pd.DataFrame(
            {"mask_id": ["l0", "l1", "u0", "u1"], "kind": ["lower"] * 2 + ["upper"] * 2, "n_dropped": 2, "share": 0.25}
        )
    )
    [row] = half_gap(per_example, plan, n_boot=200).to_dict("records")
    # a constant answer has no agreement beyond chance: all of the kappa lost, in every replicate, and at the floor
    assert (row["lower_kappa_lost"], row["lower_kappa_lo"], row["lower_kappa_hi"]) == (1.0, 1.0, 1.0)
    assert row["lower_at_floor"] and "100% of pairs get one grade" in row["lower_floor_reason"]
    assert row["upper_kappa_lost"] == 0.0 and not row["upper_at_floor"]
    assert (row["kappa_gap"], row["kappa_gap_lo"], row["kappa_gap_hi"], row["kappa_reason"]) == (1.0, 1.0, 1.0, "")
    # the accuracy scale beside it: the lower half's relative change of accuracy is not -100% (3 is right 1 in 5)
    assert -1.0 < row["lower_change"] < -0.5
