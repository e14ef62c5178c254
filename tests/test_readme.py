"""The README and its pages in ``docs/``: the "Use it from Python" example runs as written (``headlab.load`` gives a
tiny random model here, so nothing is fine-tuned); every generated block (:mod:`tools.readme`) lives in one
document and is what ``results/`` gives; every picture was drawn from the latest ``results/`` tables; the text
states no result; every relative link leads somewhere; and the README's first screen says what, how and what you
get, with a picture."""

import re

import pandas as pd
import pytest
from tiny_setup import PAIRS, tiny_setup

import headlab
from headlab.judging.units import unit_of
from headlab.judging.verdicts import Claim, claims_table
from headlab.lab.params import REPO
from headlab.pages.claims import registered
from tools import readme


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it from Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_on_a_tiny_model(tmp_path, monkeypatch, capsys):
    code = readme_example()
    assert len(code.strip().splitlines()) == 5
    lab = tiny_setup(tmp_path, frame=pd.concat([PAIRS] * 40, ignore_index=True), layers=6, batch_size=100)
    asked = {}
    monkeypatch.setattr(headlab, "load", lambda **kwargs: asked.update(kwargs) or lab)
    names = {}
    exec(compile(code, "README.md", "exec"), names)
    assert asked == {"model": "minilm", "data": "stsb-en", "split": "test"}
    assert "2 heads removed" in capsys.readouterr().out
    assert len(names["grid"]) == 6 * 4 + 1 and "none" in set(names["grid"]["mask_id"])
    roles = names["roles"]
    assert len(roles) == 6 * 4 and (roles["n_examples"] == 200).all()


# --- the README's generated figures (tools.readme) -----------------------------------------------------------


def _claim_row(preset="default", verdict="holds", ours=0.003):
    """A scorecard row judged by the current rule; ``verdict`` picks numbers that give it (no_effect, margin ±1.15%;
    "cannot tell" moves the number to the margin, precise enough not to be underpowered)."""
    ours += 0.011 if verdict == "cannot tell" else 0.0
    lo, hi = {
        "holds": (ours - 0.004, ours + 0.004),
        "cannot tell": (ours - 0.004, ours + 0.004),
        "does not hold": (ours - 0.01, ours + 0.01),
    }[verdict]
    claim = Claim.measured(
        registered("redundancy.no_loss_below_20"),
        ours=ours,
        lo=lo,
        hi=hi,
        unit=unit_of("relative change of accuracy"),
        method="two-stage bootstrap over draws and test pairs",
        n_examples=1379,
        n_draws=10,
        reason="why",
        study=0.01,
    )
    assert claim.verdict == verdict
    return {"preset": preset, "model": "minilm", "data": "stsb-en", **claims_table([claim]).iloc[0].to_dict()}


def _timing(build, preset, state, step, seconds, computed=True):
    return {
        "build": build,
        "commit": "abc1234",
        "preset": preset,
        "state": state,
        "step": step,
        "seconds": seconds,
        "computed": computed,
        "load": 2.0,
        "machine": "a CPU, 2 cores, 2 torch threads",
        "device": "cpu",
    }


def _built_alone(build, preset, setup, whole, make_book):
    """A cold build of ``preset`` alone: its setup step, the whole build and the whole `make book` (seconds)."""
    return [
        _timing(build, preset, "cold", "00_setup", setup),
        _timing(build, "all", "cold", "build", whole),
        _timing(build, "all", "cold", "make book", make_book),
    ]


def test_every_generated_block_lives_in_exactly_one_document_and_is_what_results_gives():
    """A figure edited by hand in a block, a block copied into a second page, or a results/ table changed without
    regenerating the documents fails here."""
    paths = readme.documents()
    assert REPO / "README.md" in paths and any(path.parent.name == "docs" for path in paths)
    for name, where in readme.homes(paths).items():
        assert len(where) == 1, f"the {name} block is in {[str(p.relative_to(REPO)) for p in where]}, not one file"
        assert readme.end(name) in where[0].read_text(encoding="utf-8")
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert readme.rewrite(text) == text, (
            f"{path.relative_to(REPO)} differs from results/: run `python -m tools.readme --check`; regenerate with it"
        )
    assert readme.problems() == []


def test_the_readmes_first_screen_says_what_how_and_what_you_get_with_a_picture():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    first = "\n".join(lines[:40])
    assert lines[0] == "# headlab" and "Jupyter book" in first
    assert "make book" in first and "make test" in first
    assert "book/_build/html" in first and "`runs/`" in first
    assert "![" in "\n".join(lines[:45]) and "(results/scorecard.png)" in "\n".join(lines[:45])
    assert 100 <= len(lines) <= 250, f"the README has {len(lines)} lines: the long material belongs in docs/"


def _links(text: str) -> list[str]:
    """The targets of a markdown text's links and pictures, code left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _anchors(text: str) -> set[str]:
    """GitHub's anchors for a markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file_and_heading_that_exist():
    for path in readme.documents():
        text = path.read_text(encoding="utf-8")
        for link in _links(text):
            if re.match(r"[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            target = (path.parent / target).resolve() if target else path
            assert target.exists(), f"{path.relative_to(REPO)} links to {link}, which does not exist"
            if anchor:
                assert anchor in _anchors(target.read_text(encoding="utf-8")), (
                    f"{path.relative_to(REPO)} links to {link}: no such heading"
                )


def test_every_picture_is_drawn_from_the_latest_results_and_shown_in_the_readme():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for name in readme.FIGURES:
        picture = readme.RESULTS / f"{name}.png"
        assert picture.exists(), f"no {picture.name}: run `python -m tools.readme`"
        assert picture.stat().st_size < 300_000, f"{picture.name} is too large to commit"
        assert readme.drawn_from()[name] == readme.fingerprint(name), (
            f"{picture.name} was drawn from older results/ tables: run `python -m tools.readme`"
        )
        assert f"](results/{name}.png)" in text
    assert readme.stale_figures() == []


def test_a_picture_is_locked_to_its_tables_and_goes_stale_when_they_change(tmp_path):
    pd.DataFrame(
        [
            {"preset": preset, "label": label, "accuracy": acc, "acc_lo": acc - 0.02, "acc_hi": acc + 0.02}
            for preset in ("default", "e5-en")
            for label, acc in (("cross-encoder", 0.55), ("two towers", 0.43))
        ]
    ).to_csv(tmp_path / "two_tower.csv", index=False)
    assert readme.stale_figures(tmp_path) == ["scorecard", "two_tower"]
    assert readme.draw_figure("scorecard", tmp_path) is None  # no table, no picture
    picture = readme.draw_figure("two_tower", tmp_path)
    assert picture.read_bytes()[:8] == readme.PNG_SIGNATURE
    assert (
        readme.drawn_from(tmp_path)["two_tower"]
        == readme.fingerprint("two_tower", tmp_path)
        == (
            "results/two_tower.csv sha256:"
            + __import__("hashlib").sha256((tmp_path / "two_tower.csv").read_bytes()).hexdigest()
        )
    )
    assert readme.stale_figures(tmp_path) == ["scorecard"]
    assert readme.recompressed(picture.read_bytes()) == picture.read_bytes()  # already at zlib's best level
    with pytest.raises(ValueError, match="not a PNG"):
        readme.recompressed(b"GIF89a")
    with open(tmp_path / "two_tower.csv", "a") as table:
        table.write("zh-char,cross-encoder,0.4,0.38,0.42\n")
    assert readme.stale_figures(tmp_path) == ["scorecard", "two_tower"]


def test_the_command_rewrites_each_block_where_it_lives_and_draws_the_stale_pictures(tmp_path, monkeypatch, capsys):
    repo, runs = tmp_path / "repo", tmp_path / "runs"
    (repo / "docs").mkdir(parents=True)
    runs.mkdir()
    blocks = {name: f"{readme.begin(name)}\nold\n{readme.end(name)}\n" for name in readme.BLOCKS}
    (repo / "README.md").write_text("# x\n" + "".join(b for n, b in blocks.items() if n != "two_tower"))
    (repo / "docs" / "findings.md").write_text("# y\n" + blocks["two_tower"] + "end\n")
    monkeypatch.setattr(readme, "REPO", repo)
    monkeypatch.setattr(readme, "RESULTS", repo / "results")
    pd.DataFrame(
        [
            {
                "preset": "default",
                "label": "cross-encoder",
                "n_examples": 1379,
                "n_draws": 1,
                "accuracy": 0.55,
                "acc_lo": 0.52,
                "acc_hi": 0.57,
                "macro_f1": 0.53,
                "rel_change": 0.0,
                "lo": 0.0,
                "hi": 0.0,
                "p_mcnemar": None,
                "study": None,
                "n_boot": 2000,
            }
        ]
    ).to_csv(runs / "two_tower.csv", index=False)
    assert readme.main(["--check"]) == 1  # nothing generated yet
    assert readme.main([str(runs)]) == 0
    assert "drawn: results/two_tower.png" in capsys.readouterr().out
    findings = (repo / "docs" / "findings.md").read_text()
    assert "| default | cross-encoder | 55.0% [52.0%, 57.0%] |" in findings and "old" not in findings
    assert "No `results/scorecard.csv` yet" in (repo / "README.md").read_text()
    assert readme.stale_figures(repo / "results") == ["scorecard"]  # no table to draw it from yet
    (repo / "results" / "two_tower.csv").write_text((repo / "results" / "two_tower.csv").read_text() + "\n")
    readme.main(["--check"])
    assert "results/two_tower.png: not drawn from the latest" in capsys.readouterr().out


# numbers the README's and docs' own text may state: versions, sizes and settings they document are not results, but
# a percentage or a duration is one, and those come only from the generated blocks (a method's levels aside)
METHOD_PERCENTAGES = {"1%", "2%", "5%", "90%", "95%", "10%", "20%"}


def test_the_text_of_the_readme_and_docs_outside_their_blocks_states_no_result_or_timing():
    study = set(re.findall(r"[+−-]?\d+(?:\.\d+)?%", (REPO / "docs" / "study.md").read_text(encoding="utf-8")))
    for path in readme.documents():
        text = path.read_text(encoding="utf-8")
        for name in readme.BLOCKS:
            if readme.begin(name) in text:
                before, rest = text.split(readme.begin(name), 1)
                text = before + rest.split(readme.end(name), 1)[1]
        text = re.sub(r"```.*?```|`[^`]*`", "", text, flags=re.S)  # commands, code and messages, not statements
        text = re.sub(r"at most \d+\s+(?:minutes|min)\b", "", text)  # a budget is a requirement, not a measurement
        percentages = set(re.findall(r"(?<![\w.])[+−-]?\d+(?:\.\d+)?%", text)) - METHOD_PERCENTAGES - study
        assert not percentages, (
            f"{path.relative_to(REPO)} states {sorted(percentages)}: generate them from results/ instead"
        )
        durations = re.findall(r"\b\d+(?:\.\d+)?\s?(?:min|minutes|h|hours|s)\b(?! *\()", text)
        assert not durations, (
            f"{path.relative_to(REPO)} states the durations {durations}: they belong in the timings block"
        )


def test_a_builds_tables_merge_into_results_by_preset(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    runs.mkdir()
    pd.DataFrame([_claim_row("default"), _claim_row("zh-char", "does not hold", -0.05)]).to_csv(
        runs / "scorecard.csv", index=False
    )
    pd.DataFrame([_timing("2026-12-01T20:00:00Z", "default", "cold", "00_setup", 239.0)]).to_csv(
        runs / "timings.csv", index=False
    )
    pd.DataFrame(
        [{"lr": 2e-4, "epochs": 4, "dev_accuracy": 0.378, "dev_macro_f1": 0.217, "chosen": True, "checkpoint": "x"}]
    ).to_csv(runs / "tuning-zh-char.csv", index=False)
    assert readme.collect(runs, results) == ["scorecard", "tuning", "timings"]
    # a later build of the default preset alone: its rows replace the old ones, zh-char's stay; timings add up
    pd.DataFrame([_claim_row("default", "cannot tell", 0.0)]).to_csv(runs / "scorecard.csv", index=False)
    pd.DataFrame([_timing("2026-12-02T08:00:00Z", "default", "cached", "00_setup", 20.0)]).to_csv(
        runs / "timings.csv", index=False
    )
    readme.collect(runs, results)
    scorecard = pd.read_csv(results / "scorecard.csv")
    assert list(zip(scorecard["preset"], scorecard["verdict"])) == [
        ("default", "cannot tell"),
        ("zh-char", "does not hold"),
    ]
    pd.DataFrame([_claim_row("zh-char", "holds", 0.002)]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)  # built last, zh-char still comes in the presets' order, after the default
    scorecard = pd.read_csv(results / "scorecard.csv")
    assert list(zip(scorecard["preset"], scorecard["verdict"])) == [("default", "cannot tell"), ("zh-char", "holds")]
    assert len(pd.read_csv(results / "timings.csv")) == 2
    readme.collect(runs, results)  # the same build copied twice is kept once
    assert len(pd.read_csv(results / "timings.csv")) == 2


def test_a_build_of_a_few_pages_replaces_those_pages_rows_alone(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    runs.mkdir()
    first, later = _claim_row("zh-char", "does not hold", -0.05), _claim_row("zh-char", "holds", 0.002)
    other = {**_claim_row("zh-char", "cannot tell", 0.0), "page": "09_patching", "claim_id": "x"}
    pd.DataFrame([other, first]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)
    pd.DataFrame([later]).to_csv(runs / "scorecard.csv", index=False)  # --pages 01_redundancy
    readme.collect(runs, results)
    scorecard = pd.read_csv(results / "scorecard.csv")
    assert list(zip(scorecard["page"], scorecard["verdict"])) == [("01_redundancy", "holds")]  # x: not registered
    kept = {**other, "claim_id": "patching.matching_heads_carry_replaced_words"}
    pd.DataFrame([kept, first]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)
    pd.DataFrame([later]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)
    scorecard = pd.read_csv(results / "scorecard.csv")
    assert list(zip(scorecard["page"], scorecard["verdict"])) == [
        ("01_redundancy", "holds"),
        ("09_patching", "cannot tell"),
    ]


def test_rows_judged_by_an_older_rule_are_dropped_not_shown_beside_the_new(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    runs.mkdir()
    results.mkdir()
    old = {
        "preset": "zh-char",
        "model": "zh-char",
        "data": "stsb-zh",
        "page": "01_redundancy",
        "claim_id": "redundancy.gain_at_10",
        "finding": "01 redundancy",
        "claim": "x",
        "study": 0.01,
        "ours": 0.0,
        "lo": -0.02,
        "hi": 0.02,
        "unit": "relative change of accuracy",
        "n_examples": 1361,
        "n_draws": 10,
        "p": None,
        "verdict": "cannot tell",
        "reason": "why",
    }
    pd.DataFrame([old]).to_csv(results / "scorecard.csv", index=False)
    pd.DataFrame([_claim_row("default")]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)
    assert list(pd.read_csv(results / "scorecard.csv")["preset"]) == ["default"]
    pd.DataFrame(
        [
            {"preset": p, "model": "m", "accuracy": 0.5, "accuracy_lo": 0.45, "accuracy_hi": 0.55, "majority": 0.25}
            for p in ("default", "zh-char")
        ]
    ).to_csv(results / "models.csv", index=False)
    block = readme.block("scorecard", results)
    assert (
        "Not judged by the current verdict rule yet (built before it; their models are in the models table): "
        'zh-char. Rebuild with `make book PRESETS="default zh-char"`' in block
    )


def test_older_rows_the_current_rule_could_not_have_reached_are_dropped_and_named(capsys):
    row = dict(preset="zh-char", claim_id="layer_dependence.low_heads_collapse", kind="effect", verdict="holds")
    rows = pd.DataFrame(
        [
            {**row, "lo": 0.54, "hi": 1.09, "lo_adj": 0.37, "hi_adj": 1.0},  # rule 2 clipped it: narrower than raw
            {**row, "claim_id": "term_matching.matching_costs", "kind": "beats_control", "verdict": "cannot tell"},
            {**row, "claim_id": "redundancy.falls_steadily", "lo": 0.5, "hi": 0.9, "lo_adj": 0.4, "hi_adj": 1.0},
            {**row, "claim_id": "word_order.clean_diagonal", "lo": 0.9, "hi": 0.99},  # no adjusted interval: kept
        ]
    )
    kept = readme.judged_by_this_rule(rows)
    assert list(kept["claim_id"]) == ["redundancy.falls_steadily", "word_order.clean_diagonal"]
    err = capsys.readouterr().err
    assert "a kind the rule no longer has dropped: zh-char:term_matching.matching_costs" in err
    assert "narrower than the raw one dropped: zh-char:layer_dependence.low_heads_collapse" in err


def test_the_blocks_render_the_tables(tmp_path):
    pd.DataFrame([_claim_row()]).to_csv(tmp_path / "scorecard.csv", index=False)
    rows = [
        _timing("2026-12-01T20:00:00Z", "default", "cold", "00_setup", 239.0),
        _timing("2026-12-01T20:00:00Z", "default", "cold", "01_redundancy", 332.0),
        _timing("2026-12-01T20:00:00Z", "all", "cold", "site", 61.0),
        _timing("2026-12-01T20:00:00Z", "all", "cold", "build", 1500.0),
        _timing("2026-12-01T20:00:00Z", "all", "cold", "make book", 1700.0),
        _timing("2026-12-02T08:00:00Z", "default", "cached", "00_setup", 20.0),  # an unfinished warm build
        _timing("2026-12-03T08:00:00Z", "default", "cached", "00_setup", 19.0, computed=False),
        _timing("2026-12-03T08:00:00Z", "all", "warm", "build", 250.0),
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "timings.csv", index=False)
    text = readme.rewrite(
        f"intro\n{readme.begin('scorecard')}\nstale rows\n{readme.end('scorecard')}\n"
        f"{readme.begin('claims')}\n{readme.end('claims')}\n"
        f"{readme.begin('timings')}\n{readme.end('timings')}\n"
        f"{readme.begin('models')}\n{readme.end('models')}\nend\n",
        tmp_path,
    )
    row = next(line for line in text.splitlines() if line.startswith("| Masking fewer than 20%"))
    assert row.endswith("| +1.0% | **holds** +0.3% [-0.1%, +0.7%], adjusted [-0.5%, +1.1%]; MDE 1.01% |")
    assert ">no_effect</abbr>" in row
    assert "two-stage bootstrap over draws and test pairs" in row and "Bonferroni" in text
    summary, claims = readme.block("scorecard", tmp_path), readme.block("claims", tmp_path)
    assert "| model | the study's claims |" in summary and "| Masking fewer" not in summary  # the verdicts counted
    assert "| Masking fewer" in claims and "| model | the study's claims |" not in claims  # the claims themselves
    assert "from results/scorecard.csv" in claims.splitlines()[0]
    assert "stale rows" not in text and text.startswith("intro\n") and text.endswith("\nend\n")
    cold = next(line for line in text.splitlines() if line.startswith("| 2026-12-01T20:00:00Z"))
    assert "| default | cold | 3 min 59 s | 5 min 32 s | 1 min 01 s | 25 min 00 s | 28 min 20 s |" in cold
    assert sum(line.startswith("| 2026-12-0") for line in text.splitlines()) == 3  # one row per build kind
    warm = next(line for line in text.splitlines() if line.startswith("| 2026-12-03"))
    assert "| default | warm | (19 s) |" in warm  # a step that computed nothing is in parentheses
    # the budgets: the cold build ran default alone (its whole `make book`), the warm one is judged the same way
    assert (
        "* default, cold (2026-12-01T20:00:00Z): 28 min 20 s (`make book`); within its budget of 30 min 00 s." in text
    )
    assert "No `results/models.csv` yet" in text
    assert readme.duration(3725) == "1 h 02 min" and readme.duration(27) == "27 s"


def test_a_build_over_its_budget_says_by_how_much_and_a_shared_build_is_judged_on_its_own_steps():
    rows = [
        *_built_alone("2026-12-02T00:00:00Z", "default", 2000.0, 2010.0, 2107.0),
        _timing("2026-12-03T00:00:00Z", "default", "cached", "00_setup", 100.0, computed=False),
        _timing("2026-12-03T00:00:00Z", "e5-zh", "cached", "00_setup", 700.0, computed=False),
        _timing("2026-12-03T00:00:00Z", "all", "warm", "build", 900.0),
        _timing("2026-12-03T00:00:00Z", "all", "warm", "make book", 910.0),
    ]
    lines = readme.timings_block(pd.DataFrame(rows))
    assert (
        "* default, cold (2026-12-02T00:00:00Z): 35 min 07 s (`make book`); over its budget of 30 min 00 s by "
        "5 min 07 s." in lines
    )
    assert (
        "* default, warm (2026-12-03T00:00:00Z): 1 min 40 s (its steps, in a build of default e5-zh); within its "
        "budget of 5 min 00 s."
    ) in lines
    assert (
        "* e5-zh, warm (2026-12-03T00:00:00Z): 11 min 40 s (its steps, in a build of default e5-zh); over its "
        "budget of 10 min 00 s by 1 min 40 s."
    ) in lines
    assert not any(line.startswith("* e5-zh, cold") for line in lines)  # never built cold: no line


def test_a_preset_that_shared_a_pool_with_others_is_no_budget_figure_and_its_latest_own_build_keeps_the_verdict():
    """In one pool with other presets (its preset total recorded), a preset's steps run interleaved with theirs,
    last when the pool puts its chain last: that build says so, with its lane time, and the budget is judged on its
    latest build of its own."""
    own, pool = "2026-12-02T00:00:00Z", "2026-12-05T00:00:00Z"
    rows = _built_alone(own, "default", 1100.0, 1150.0, 1162.0)
    rows += [
        _timing(pool, "default", "cold", "00_setup", 2071.0),
        _timing(pool, "default", "cold", "preset total", 5365.0),
        _timing(pool, "e5-en", "cold", "00_setup", 4830.0),
        _timing(pool, "e5-en", "cold", "preset total", 5304.0),
        _timing(pool, "all", "cold", "build", 5380.0),
        _timing(pool, "all", "cold", "make book", 5447.0),
    ]
    lines = readme.timings_block(pd.DataFrame(rows))
    assert (
        "* default, cold (2026-12-05T00:00:00Z): built in one pool with e5-en (1 h 30 min for all of them), its steps "
        "34 min 31 s of lane time, interleaved with theirs: not a budget figure."
    ) in lines
    judged = "* default, cold (2026-12-02T00:00:00Z): 19 min 22 s (`make book`); within its budget of 30 min 00 s."
    assert judged in lines
    assert not any("over its budget" in line for line in lines)


def test_a_build_beside_other_work_is_no_budget_figure_and_the_latest_alone_keeps_the_verdict():
    """A build whose load passed its cores (other work on the machine) is said to be that, and the budget is judged
    on the latest build that ran alone."""
    alone, beside = "2026-12-02T00:00:00Z", "2026-12-05T00:00:00Z"
    rows = _built_alone(alone, "e5-zh", 3000.0, 3050.0, 3100.0)
    rows += [
        {**_timing(beside, "e5-zh", "cold", "00_setup", 9000.0), "load": 5.2},
        {**_timing(beside, "all", "cold", "build", 9050.0), "load": 3.1},
        {**_timing(beside, "all", "cold", "make book", 9100.0), "load": 3.1},
    ]
    lines = readme.timings_block(pd.DataFrame(rows))
    assert (
        "* e5-zh, cold (2026-12-05T00:00:00Z): measured beside other work (highest load 5.2 on 2 cores), so not a "
        "budget figure."
    ) in lines
    assert "* e5-zh, cold (2026-12-02T00:00:00Z): 51 min 40 s (`make book`); within its budget of 2 h 00 min." in lines
    assert readme.shared(pd.DataFrame(rows[3:])) and not readme.shared(pd.DataFrame(rows[:3]))


def test_a_shared_build_that_ran_notebooks_side_by_side_is_no_budget_figure_for_a_preset_with_a_total():
    """Notebooks run two at a time overlap, so a preset's seconds add up to more than it took, and in one pool with
    another preset its total is the pool's order as much as its own work: no budget figure. A preset without a total
    (a build that ran one notebook at a time) is judged on its steps."""
    build = "2026-12-04T00:00:00Z"
    rows = [
        _timing(build, "default", "cold", "fine-tuning", 500.0),
        *[_timing(build, "default", "cold", step, 700.0) for step in ("01_redundancy", "02_layer_dependence")],
        _timing(build, "default", "cold", "preset total", 1250.0),
        _timing(build, "e5-en", "cold", "00_setup", 3000.0),
        _timing(build, "all", "cold", "build", 4300.0),
        _timing(build, "all", "cold", "make book", 4400.0),
    ]
    lines = readme.timings_block(pd.DataFrame(rows))
    assert (
        "* default, cold (2026-12-04T00:00:00Z): built in one pool with e5-en (1 h 13 min for all of them), its steps "
        "31 min 40 s of lane time, interleaved with theirs: not a budget figure."
    ) in lines
    assert "* e5-en, cold (2026-12-04T00:00:00Z): 50 min 00 s (its steps, in a build of default e5-en)" in "\n".join(
        lines
    )
    header = lines[0]
    assert (
        header.index("fine-tuning")
        < header.index("01_redundancy")
        < header.index("preset total")
        < header.index("site")
    )


def test_the_pruning_block_reads_each_presets_page_and_the_benchmarks_speedups(tmp_path):
    from headlab.book.records import pruning_table
    from headlab.lab.params import Params

    built = {
        "default": {"RUN_DIR": str(tmp_path / "runs")},
        "e5-en": {"RUN_DIR": str(tmp_path / "runs"), "MODEL": "e5-small", "FREEZE_WORD_EMBEDDINGS": True},
    }
    for preset, share in (("default", 0.2), ("e5-en", 0.3)):
        folder = Params.from_globals(built[preset]).table_dir
        pd.DataFrame(
            [
                {
                    "kind": "importance-all",
                    "share": share,
                    "n_heads": 14,
                    "margin": 0.02,
                    "dev_kappa_lost": 0.015,
                    "n_dev": 1500,
                    "kappa_lost": 0.031,
                    "kappa_lost_lo": 0.012,
                    "kappa_lost_hi": 0.05,
                    "rel_change": -0.02,
                    "lo": -0.04,
                    "hi": 0.0,
                    "within": False,
                    "n_examples": 1379,
                    "n_boot": 2000,
                },
            ]
        ).to_csv(folder / "pruning_safe_share.csv", index=False)
        pd.DataFrame(
            [
                {
                    "heads_removed": 14,
                    "heads_kept": 58,
                    "parameters": 22.0e6,
                    "parameters_unpruned": 22.7e6,
                    "file_mb": 84.0,
                    "file_mb_unpruned": 86.7,
                    "accuracy": 0.54,
                    "accuracy_masked": 0.54,
                    "accuracy_unpruned": 0.55,
                    "grades_as_masking": 0.999,
                    "n_examples": 1379,
                }
            ]
        ).to_csv(folder / "pruning_model.csv", index=False)
    table = pruning_table(built)
    assert list(table["preset"]) == ["default", "e5-en"] and list(table["model"]) == ["minilm", "e5-small"]
    assert list(table["importance_share"]) == [0.2, 0.3] and list(table["kappa_lost_hi"]) == [0.05, 0.05]
    row = dict(
        model="minilm",
        data="stsb-en",
        share_removed=0.2,
        machine="AMD EPYC",
        device="cpu",
        batch_size=64,
        precision="bf16",
        heads_removed=14,
        repeats=5,
        pairs_per_s_min=1.0,
        pairs_per_s_max=1.0,
        parameters=1,
        file_mb=1.0,
    )  # the columns benchmarks/prune_speed.py writes
    pd.DataFrame(
        [
            dict(row, variant="unpruned", pairs_per_s=100.0),
            dict(row, variant="pruned", pairs_per_s=125.0),
            dict(row, variant="pruned", share_removed=0.5, pairs_per_s=300.0),
        ]
    ).to_csv(tmp_path / "prune_speed.csv", index=False)
    lines = readme.pruning_block(table, tmp_path)
    default, e5 = (next(line for line in lines if line.startswith(f"| {p} |")) for p in ("default", "e5-en"))
    assert "**20%** (14 heads; 1.5% lost on 1500 dev pairs) | 3.1% [1.2%, 5.0%]" in default
    assert "1.25x at batch 64 (cpu, AMD EPYC)" in default and "99.9% of 1379" in default and "0.50" not in default
    assert "not measured yet" in e5 and "58, 22.0M of 22.7M, 84 of 87 MB" in e5
    assert any("at most 2% of the unmasked quadratic κ on the dev pairs" in line for line in lines)
    assert not any(line.startswith("Serving") for line in lines)  # no serve_speed.csv beside: nothing said
    pd.DataFrame(
        [
            dict(
                model="minilm",
                data="stsb-en",
                variant="int8",
                budget=1.0,
                flop_ceiling=1.0,
                machine="AMD EPYC",
                speedup_64=1.4,
                speedup_64_lo=1.35,
                speedup_64_hi=1.45,
                speedup_1=1.5,
                p50_ms=9.0,
                p95_ms=11.0,
                base_p50_ms=13.0,
                base_p95_ms=15.0,
                change=-0.02,
                change_lo=-0.04,
                change_hi=0.0,
                test_pairs=1379,
            )
        ]
    ).to_csv(tmp_path / "serve_speed.csv", index=False)
    serving = [line for line in readme.pruning_block(table, tmp_path) if line.startswith("Serving")]
    assert len(serving) == 1 and "`minilm`" in serving[0] and "int8 x1.40-1.40" in serving[0]
    assert "**not reached**" in serving[0]


def test_the_first_screen_gives_the_default_books_and_the_sites_latest_times_and_machines():
    table = pd.read_csv(readme.RESULTS / "timings.csv")
    lines = readme.cold_block(table)
    assert [line.split(" (")[0] for line in lines] == ["* default, cold", "* default, warm", "* the site"]
    assert all("budget of" in line and ", on " in line for line in lines)
    assert readme.cold_block(table[table["preset"] != "default"]) == ["No default build is recorded yet."]


def test_the_roofline_block_gives_each_processors_latest_share_of_its_own_peak():
    row = {
        "workload": "single-head grid",
        "masks": 20,
        "seconds": 10.0,
        "engine_gflops": 40.0,
        "engine_precision": "fp32 peak through oneDNN",
        "share_of_own_peak": 0.5,
        "share_of_bf16_peak": float("nan"),
        "native_bf16": False,
        "fp32_at_the_feed-forwards_shape_gflops": 60.0,
        "fp32_at_the_feed-forwards_shape_through_oneDNN_gflops": 55.0,
        "machine": "AMD EPYC (family 25, model 1)",
    }
    newer = {**row, "engine_gflops": 48.0, "share_of_own_peak": 0.6}
    native = {**row, "machine": "Xeon", "engine_precision": "bf16 peak", "native_bf16": True}
    native["share_of_bf16_peak"] = 0.25
    lines = readme.roofline_block(pd.DataFrame([row, newer, native]))
    body = [line for line in lines if line.startswith("| AMD") or line.startswith("| Xeon")]
    assert len(body) == 2  # the latest run of each processor and workload
    assert "| 48.0 GFLOP/s | fp32 through oneDNN | 80.0 GFLOP/s | 60.0% | no native bf16" in body[0]
    assert "| 60.0 GFLOP/s / 55.0 GFLOP/s |" in body[0]
    assert "| bf16 | 80.0 GFLOP/s | 50.0% | 25.0% |" in body[1]


def test_a_build_of_a_few_pages_on_another_model_is_refused_whole(tmp_path, capsys, monkeypatch):
    """A column is one model: pages rebuilt on another fine-tune (another precision, say) may not join the rows the
    first one gave; the same model, or every page, may."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    runs.mkdir()
    patching = {
        **_claim_row("e5-zh"),
        "page": "09_patching",
        "claim_id": "patching.matching_heads_carry_replaced_words",
    }
    pd.DataFrame([_claim_row("e5-zh"), patching]).to_csv(runs / "scorecard.csv", index=False)
    pd.DataFrame([{"preset": "e5-zh", "accuracy": 0.529023}]).to_csv(runs / "models.csv", index=False)  # no checkpoint
    readme.collect(runs, results)
    pd.DataFrame([patching]).to_csv(runs / "scorecard.csv", index=False)  # --pages 09_patching
    pd.DataFrame([{"preset": "e5-zh", "accuracy": 0.528288, "checkpoint": "e5-fp32"}]).to_csv(
        runs / "models.csv", index=False
    )
    with pytest.raises(ValueError, match=r"e5-zh: .*test accuracy 52.8288%.* rows of 01_redundancy .*52.9023%"):
        readme.collect(runs, results)
    monkeypatch.setattr(readme, "REPO", tmp_path)
    monkeypatch.setattr(readme, "RESULTS", results)
    assert readme.main([str(runs)]) == 1 and "nothing copied into results/" in capsys.readouterr().err
    pd.DataFrame([{"preset": "e5-zh", "accuracy": 0.529023, "checkpoint": "e5-bf16"}]).to_csv(
        runs / "models.csv", index=False
    )
    assert "scorecard" in readme.collect(runs, results)  # the same model: its pages replace their rows
    pd.DataFrame([{"preset": "e5-zh", "accuracy": 0.529023, "checkpoint": "e5-fp32"}]).to_csv(
        runs / "models.csv", index=False
    )
    with pytest.raises(ValueError, match="checkpoint e5-fp32"):
        readme.collect(runs, results)  # both named: the checkpoints differ
    pd.DataFrame([_claim_row("e5-zh"), patching]).to_csv(runs / "scorecard.csv", index=False)
    readme.collect(runs, results)  # every page on the new model: the column is that model's
    assert pd.read_csv(results / "models.csv")["checkpoint"].tolist() == ["e5-fp32"]


def _site_build(build, make_book, load=2.0, presets=readme.SITE, state="cold"):
    """A build of ``presets`` in one pool (each preset's setup step and total, the whole build and `make book`)."""
    rows = []
    for preset in presets:
        rows += [_timing(build, preset, state, "00_setup", 600.0), _timing(build, preset, state, "preset total", 900.0)]
    rows += [
        _timing(build, "all", state, "build", make_book - 60.0),
        _timing(build, "all", state, "make book", make_book),
    ]
    return [{**row, "load": load} for row in rows]


def test_the_site_built_cold_by_one_command_is_held_to_its_two_hours_on_the_first_screen():
    """Only a cold build of the site's presets, all of them and no other, is judged against the site's budget, on its
    whole `make book`; a later one beside other work is said to be that and the one alone keeps the verdict."""
    alone, site, beside = "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"
    five, partial = "2026-12-04T00:00:00Z", "2026-12-05T00:00:00Z"
    rows = _built_alone(alone, "default", 1100.0, 1150.0, 1162.0)
    rows += _site_build(site, 6960.0) + _site_build(beside, 9000.0, load=4.5)
    rows += _site_build(five, 100.0, presets=(*readme.SITE, "e5-zh-char")) + _site_build(partial, 90.0, state="cached")
    table = pd.DataFrame(rows)
    lines = readme.timings_block(table)
    command = '`make book PRESETS="default zh-char e5-zh e5-en"`'
    judged = (
        f"* the site (default zh-char e5-zh e5-en), cold ({site}): 1 h 56 min ({command}); within its budget of "
        "2 h 00 min."
    )
    assert judged in lines
    assert (
        f"* the site (default zh-char e5-zh e5-en), cold ({beside}): measured beside other work (highest load 4.5 on "
        "2 cores), so not a budget figure."
    ) in lines
    assert sum(line.startswith("* the site") for line in lines) == 2  # five presets, or one not cold: no site build
    assert readme.cold_block(table)[-1] == f"{judged[:-1]}, on a CPU, 2 cores, 2 torch threads."
    slow = pd.DataFrame(_site_build(site, 7320.0))
    over = readme.site_rows(slow, readme.builds_of(slow))
    assert over[0][1].endswith("2 h 02 min (" + command + "); over its budget of 2 h 00 min by 2 min 00 s.")
