"""headlab.report.compare_explorer: the live explorer of notebooks 05 to 07, on a tiny model."""

import pytest
from tiny_setup import masked_first_layer, tiny_setup

from headlab.report.compare_explorer import live_explorer


@pytest.fixture
def setup(tmp_path):
    return tiny_setup(tmp_path)


def test_live_explorer_builds_and_is_a_note_in_the_book(setup, monkeypatch):
    runs = {"all": (setup.model, None), "masked": (setup.model, masked_first_layer(setup))}
    widget = live_explorer(setup, runs, example=1, head=(2, 3))
    assert [box.value for box in widget.children[0].children] == [1, 2, 3]
    before = widget.children[2].spec
    widget.children[0].children[2].value = 1  # another head: the same chart widget gets that head's maps
    assert widget.children[2].spec != before
    monkeypatch.setenv("HEADLAB_BOOK", "1")
    note = live_explorer(setup, runs)
    assert "JupyterLab" in note.data
