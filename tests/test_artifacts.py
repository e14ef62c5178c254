"""What pages share (headlab.lab.pages: each page's `produces` and `reads`): every read is produced by an earlier
page, the build waits for it, and a lab finds shared tables and sweeps only through the registry."""

import json
import re

import pandas as pd
import pytest
from tiny_setup import tiny_setup

from headlab.book.records import stacked
from headlab.book.steps import step_needs
from headlab.core.sweep import baseline_spec, single_head_specs
from headlab.lab.pages import PAGES as REGISTRY
from headlab.lab.pages import SWEEP, TABLE, artifact, artifacts, page_ids, page_needs
from headlab.lab.params import REPO

PAGES = page_ids()
ARTIFACTS = artifacts()


def _code(page: str) -> str:
    """A page's code: its notebook's code cells and its module in headlab/pages (where the notebook's steps live)."""
    cells = json.loads((REPO / "notebooks" / f"{page}.ipynb").read_text(encoding="utf-8"))["cells"]
    module = REPO / "headlab" / "pages" / f"{page.split('_', 1)[1]}.py"
    own = module.read_text(encoding="utf-8") if module.exists() else ""
    return "\n".join([*("".join(c["source"]) for c in cells if c["cell_type"] == "code"), own])


@pytest.mark.parametrize("name", sorted(ARTIFACTS))
def test_every_artifact_is_produced_by_a_page_before_its_readers(name):
    a = ARTIFACTS[name]
    readers = [p.id for p in REGISTRY if name in p.reads]
    assert a.kind in (TABLE, SWEEP) and a.page in PAGES and (readers or a.for_build)
    assert all(PAGES.index(a.page) < PAGES.index(reader) for reader in readers), (a.page, readers)


@pytest.mark.parametrize("name", sorted(n for n, a in ARTIFACTS.items() if a.kind == SWEEP))
def test_a_shared_sweep_is_run_by_the_page_that_produces_it(name):
    assert re.search(rf'\.sweep\([^)]*"{name}"', _code(ARTIFACTS[name].page))


def test_the_build_waits_for_every_page_a_page_reads():
    needs = step_needs(PAGES)
    for reader, producers in page_needs().items():
        assert set(producers) <= set(needs[reader])
    assert page_needs()["10_pruning"] == ("01_redundancy", "02_layer_dependence")


def test_an_unregistered_artifact_is_an_error_naming_the_registry(tmp_path):
    with pytest.raises(KeyError, match="headlab.lab.pages.PAGES"):
        artifact("no_such_table")
    with pytest.raises(ValueError, match="is a sweep, not a table"):
        ARTIFACTS["layer_dependence"].path(tmp_path)
    with pytest.raises(ValueError, match="is a table, not a sweep"):
        ARTIFACTS["term_matching_heads"].folders(tmp_path)


def test_a_lab_computes_a_shared_table_once_then_reads_it(tmp_path):
    lab = tiny_setup(tmp_path)
    calls = []
    first = lab.shared_table("head_roles", lambda: calls.append(1) or pd.DataFrame({"x": [1.5, 2.0]}), key="k1")
    again = lab.shared_table("head_roles", lambda: calls.append(1) or pd.DataFrame({"x": [9.0]}), key="k1")
    assert calls == [1] and again["x"].tolist() == first["x"].tolist() == [1.5, 2.0]
    assert lab.shared_path("head_roles", "k1") == lab.params.table_dir / "head_roles-k1.csv"


def test_a_lab_finds_only_finished_sweeps_that_hold_the_masks(tmp_path):
    lab = tiny_setup(tmp_path)
    layers, heads = lab.shape
    specs = [baseline_spec(), *single_head_specs(layers, heads)]
    wanted = {s.mask_id for s in specs}
    assert list(lab.finished_sweeps("layer_dependence", wanted)) == []
    lab.sweep(specs[:3], "layer_dependence", progress=False)  # a sweep that lacks most heads
    assert list(lab.finished_sweeps("layer_dependence", wanted)) == []
    lab.sweep(specs, "layer_dependence", progress=False)
    [(folder, per_example)] = lab.finished_sweeps("layer_dependence", wanted)
    assert folder.parent.name == "sweeps" and set(per_example["mask_id"]) == wanted


def test_a_lab_prints_as_one_line_with_its_model_data_split_and_baseline(tmp_path):
    lab = tiny_setup(tmp_path, n_right=3)
    assert repr(lab) == "Lab(minilm on stsb-en, test: 5 pairs on grades 1-5, 4 x 4 heads, cpu; unmasked accuracy 60.0%)"


@pytest.mark.parametrize("name", sorted(n for n, a in ARTIFACTS.items() if a.for_build))
def test_a_table_the_build_stacks_is_saved_by_its_page_under_that_name(name):
    assert re.search(rf'save_table\([^\n]*"{name}"\)', _code(ARTIFACTS[name].page))


def test_the_build_stacks_only_tables_a_page_declares_for_it(tmp_path):
    built = {"tiny": {"RUN_DIR": str(tmp_path)}}
    with pytest.raises(KeyError, match="no shared artifact 'two_tower_condition'"):
        stacked(built, "two_tower_condition")  # a typo of a declared name
    with pytest.raises(KeyError, match="not a table a page declares for the build"):
        stacked(built, "head_roles")  # a table pages share, not one the build stacks
    assert stacked(built, "two_tower_conditions").columns.tolist() == ["preset"]  # declared, not built: empty
