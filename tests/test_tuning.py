"""Fine-tuning settings are chosen by dev accuracy over full runs, and the test split never counts."""

import numpy as np
import pandas as pd
import pytest
from conftest import WORDS, save_tiny_bert

from headlab.book import tuning
from headlab.core.evaluate import encode, predict
from headlab.core.grades import STUDY_SCALE
from headlab.inputs.data import get_split, load_data
from headlab.models.finetune import FinetuneConfig, checkpoint_dir, training_history
from headlab.models.loading import load_classifier, load_tokenizer

LRS, EPOCHS = (1e-4, 1e-2), (1, 3)


@pytest.fixture
def model_folder(tmp_path):
    """A tiny random BERT with large initial weights, so that settings end on different dev accuracies."""
    return save_tiny_bert(tmp_path / "tiny-bert", initializer_range=0.3)


def _write_pairs(path, test_labels=None):
    """Grade 5 when the title says "cat", else 1; 60% train, 20% dev, 20% test. ``test_labels`` replace the test
    grades."""
    rng = np.random.default_rng(0)
    words = WORDS
    rows = []
    for i in range(200):
        query, title = " ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 5))
        split = ["train", "train", "train", "dev", "test"][i % 5]
        rows.append({"query": query, "title": title, "label": 5 if "cat" in title.split() else 1, "split": split})
    frame = pd.DataFrame(rows)
    if test_labels is not None:
        frame.loc[frame["split"] == "test", "label"] = test_labels
    frame.to_csv(path, sep="\t", index=False)
    return path


def test_ties_go_to_fewer_epochs_then_the_smaller_learning_rate():
    table = pd.DataFrame(
        {
            "lr": [1e-4, 1e-4, 2e-4, 2e-4, 5e-5],
            "epochs": [2, 4, 2, 4, 4],
            "dev_accuracy": [0.40, 0.45, 0.45, 0.45, 0.45],
        }
    )
    assert table.loc[tuning.pick(table)].to_dict() == {"lr": 2e-4, "epochs": 2, "dev_accuracy": 0.45}
    table.loc[2, "epochs"] = 4
    assert table.loc[tuning.pick(table)].to_dict() == {"lr": 5e-5, "epochs": 4, "dev_accuracy": 0.45}


def test_the_chosen_setting_is_the_full_run_with_the_best_dev_accuracy(fresh_cache, model_folder, tmp_path):
    data = _write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "tuning.csv"
    table = tuning.choose_settings(str(model_folder), str(data), LRS, EPOCHS, seed=1, out=out, progress=False)
    assert list(table.columns) == ["lr", "epochs", "dev_accuracy", "dev_macro_f1", "chosen", "checkpoint"]
    assert sorted(zip(table["lr"], table["epochs"])) == sorted((lr, n) for lr in LRS for n in EPOCHS)
    pd.testing.assert_frame_equal(pd.read_csv(out), table, check_exact=False, rtol=1e-5)
    assert table["dev_accuracy"].nunique() > 1  # else any choice would pass
    for row in table.itertuples():
        # each row is its own run of that many epochs, the one the book loads for these settings, scored after its end
        folder = checkpoint_dir(
            FinetuneConfig(model=str(model_folder), data=str(data), epochs=row.epochs, lr=row.lr, seed=1)
        )
        assert folder.name == row.checkpoint
        history = training_history(folder)
        assert len(history) == row.epochs and history["dev_accuracy"].iloc[-1] == row.dev_accuracy
    chosen = table[table["chosen"]]
    assert len(chosen) == 1
    best = table[table["dev_accuracy"] == table["dev_accuracy"].max()]
    assert chosen.index[0] == best.sort_values(["epochs", "lr"]).index[0]


def test_the_test_split_never_counts(fresh_cache, model_folder, tmp_path):
    """Test grades rewritten so that a setting the dev split rejects is perfect on test: the choice stays the same."""
    first = _write_pairs(tmp_path / "pairs.tsv")
    table = tuning.choose_settings(str(model_folder), str(first), LRS, EPOCHS, progress=False)
    rejected = table[~table["chosen"]].sort_values("dev_accuracy").iloc[0]
    test = get_split(load_data(str(first)), "test")

    def test_predictions(checkpoint):
        folder = fresh_cache / "finetuned" / checkpoint
        encoded = encode(load_tokenizer(str(folder)), test, STUDY_SCALE)
        return STUDY_SCALE.predicted(predict(load_classifier(str(folder), STUDY_SCALE), encoded))

    second = _write_pairs(tmp_path / "rigged.tsv", test_labels=test_predictions(rejected["checkpoint"]))
    chosen = table[table["chosen"]].iloc[0]
    test_grades = get_split(load_data(str(second)), "test")["label"].to_numpy()
    assert np.mean(test_predictions(chosen["checkpoint"]) == test_grades) < 1.0  # the test split now prefers another

    again = tuning.choose_settings(str(model_folder), str(second), LRS, EPOCHS, progress=False)
    assert not set(again["checkpoint"]) & set(table["checkpoint"])  # other data, so really fine-tuned again
    pd.testing.assert_frame_equal(again.drop(columns="checkpoint"), table.drop(columns="checkpoint"))


def test_the_command_prints_the_table_and_the_choice(fresh_cache, model_folder, tmp_path, monkeypatch, capsys):
    data = _write_pairs(tmp_path / "pairs.tsv")
    monkeypatch.setitem(
        tuning.PRESETS,
        "tiny-tuning",
        {"MODEL": str(model_folder), "DATA": str(data), "DEVICE": "cpu", "LR": 1e-3, "EPOCHS": 3},
    )
    monkeypatch.setitem(tuning.GRIDS, "tiny-tuning", {"lrs": (1e-3, 1e-2), "epochs": (1,)})
    out = tmp_path / "runs" / "tuning.csv"
    assert tuning.main(["tiny-tuning", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    best = table[table["chosen"]].iloc[0]
    printed = capsys.readouterr().out
    assert f"chosen on dev: LR={best['lr']:g}, EPOCHS=1" in printed
    assert "the preset has LR=0.001, EPOCHS=3" in printed
    with pytest.raises(SystemExit):
        tuning.main(["tiny"])  # no grid stated for it


def test_a_grid_over_models_chooses_over_all_their_runs(fresh_cache, model_folder, tmp_path):
    """e5-zh-char's grid names two models (with and without a continued masked-LM pass): one table, one choice."""
    data = _write_pairs(tmp_path / "pairs.tsv")
    other = save_tiny_bert(tmp_path / "other-bert", initializer_range=0.02)
    out = tmp_path / "tuning.csv"
    models = [str(model_folder), str(other)]
    table = tuning.choose_over_models(models, data=str(data), lrs=LRS, epochs=(1,), seed=1, out=out, progress=False)
    assert list(table["model"]) == [m for m in models for _ in LRS] and table["chosen"].sum() == 1
    pd.testing.assert_frame_equal(pd.read_csv(out), table, check_exact=False, rtol=1e-5)
    for model in models:  # each model's runs are those choose_settings makes for it alone
        alone = tuning.choose_settings(model, str(data), LRS, (1,), seed=1, progress=False)
        assert list(table.loc[table["model"] == model, "checkpoint"]) == list(alone["checkpoint"])
    best = table[table["dev_accuracy"] == table["dev_accuracy"].max()].sort_values(["epochs", "lr"], kind="stable")
    assert table.index[table["chosen"]][0] == best.index[0]
    assert tuning.GRIDS["e5-zh-char"]["models"] == ("e5-small-char", "e5-small-char-mlm")
    with pytest.raises(ValueError, match="at least one model"):
        tuning.choose_over_models([], data=str(data), lrs=LRS, epochs=(1,))
