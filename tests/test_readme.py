"""The README's "Use it from Python" example runs as written (``headlab.load`` gives a tiny random model here, so
nothing is fine-tuned): every name it uses exists and does what the text says."""
import re

import pandas as pd
from tiny_setup import PAIRS, tiny_setup

import headlab
from headlab.book.build import REPO


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it from Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_on_a_tiny_model(tmp_path, monkeypatch, capsys):
    code = readme_example()
    assert len(code.strip().splitlines()) == 5
    lab = tiny_setup(tmp_path, frame=pd.concat([PAIRS] * 40, ignore_index=True), layers=6,
                     batch_size=100)
    asked = {}
    monkeypatch.setattr(headlab, "load", lambda **kwargs: asked.update(kwargs) or lab)
    names = {}
    exec(compile(code, "README.md", "exec"), names)
    assert asked == {"model": "minilm", "data": "stsb-en", "split": "test"}
    assert "2 heads removed" in capsys.readouterr().out
    assert len(names["grid"]) == 6 * 4 + 1 and "none" in set(names["grid"]["mask_id"])
    roles = names["roles"]
    assert len(roles) == 6 * 4 and (roles["n_examples"] == 200).all()
