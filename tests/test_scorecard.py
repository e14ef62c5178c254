"""headlab.book.scorecard and the site's toc: claims saved by the notebooks of several presets become one table and
the book's first page, each cell linking to its evidence; models left out are named with the command that adds them."""

import json
import re

import pandas as pd
import pytest
from conftest import measured_claim

from headlab.book.presets import PRESETS
from headlab.book.scorecard import _strength, answer_lines, interval_rows, scorecard_markdown, scorecard_table
from headlab.book.site import not_built_commands, site_toc
from headlab.judging.units import STUDY_GRADE_SHIFT, TWO_TOWER_GAP, unit_of
from headlab.judging.verdicts import Claim, claims_file, claims_table
from headlab.lab.params import REPO
from headlab.pages.claims import STUDY_CLAIMS, registered
from headlab.report.bookjs import VEGA_PATH


def _claim(claim_id="redundancy.no_loss_below_20", ours=0.003, half=0.0015):
    return measured_claim(
        claim_id, ours, half, method="two-stage bootstrap over draws and test pairs", n_draws=10, study=0.01
    )


def _save(tmp_path, settings, claims):
    from headlab.book.scorecard import results_folder

    claims_table(claims).to_csv(results_folder(settings) / f"{claims_file(claims)}.csv", index=False)


def test_claims_of_each_preset_are_stacked_with_their_page_and_model(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADLAB_CACHE", str(tmp_path / "cache"))
    first = {"RUN_DIR": str(tmp_path / "runs")}
    second = {**first, "MODEL": "minilm", "EPOCHS": 1}  # another checkpoint, so another results folder
    _save(tmp_path, first, [_claim(), Claim.not_measured(registered("redundancy.falls_steadily"), reason="no share")])
    _save(tmp_path, second, [_claim(ours=-0.10, half=0.02)])
    two_tower = Claim.measured(
        registered("two_tower.worse"),
        ours=-0.2,
        lo=-0.25,
        hi=-0.15,
        unit=unit_of("relative change of accuracy"),
        method="paired bootstrap over test pairs",
        n_examples=1379,
        reason="why",
    )
    _save(
        tmp_path,
        second,
        [
            two_tower,
            Claim.measured(
                registered("two_tower.worse"),
                part="at_floor",
                claim="with the floor",
                ours=-0.5,
                lo=-0.55,
                hi=-0.45,
                unit=unit_of("relative change of accuracy"),
                method="paired bootstrap over test pairs",
                n_examples=1379,
                reason="why",
                kappa={"kappa_lost": 1.0, "kappa_lost_lo": 0.96, "kappa_lost_hi": 1.04},
                at_floor=True,
                floor_reason="κ interval reaches 0",
            ),
        ],
    )
    table = scorecard_table({"a": first, "b": second})
    assert list(table["preset"]) == ["a", "a", "b", "b", "b"]
    assert list(table["page"]) == ["01_redundancy", "01_redundancy", "01_redundancy", "08_two_tower", "08_two_tower"]
    assert set(table["model"]) == {"minilm"} and table.loc[2, "verdict"] == "does not hold"

    page = scorecard_markdown(table, {"a": "executed", "b": "executed/b"}, {"e5-zh": 'make book PRESETS="a b e5-zh"'})
    assert page.startswith("# Scorecard") and "Bonferroni" in page
    row = next(line for line in page.splitlines() if line.startswith("| Masking fewer than 20%"))
    # the adjusted intervals are the rule's (verdicts.judge, over 10 draws), each wider than the raw one
    a, b = _claim(), _claim(ours=-0.10, half=0.02)
    assert a.lo_adj < a.lo < a.hi < a.hi_adj and b.lo_adj < b.lo < b.hi < b.hi_adj
    # each cell says its design's minimum detectable effect (80% power), in the claim's unit
    size = unit_of("relative change of accuracy").size
    assert a.mde < a.margin < b.mde and size(a.mde) in row and size(b.mde) in row
    assert row.endswith(
        f"| +1.0% | {{doc}}`holds <executed/01_redundancy>` +0.3% [+0.1%, +0.5%], adjusted [{a.lo_adj:+.1%}, "
        f"{a.hi_adj:+.1%}]; MDE {size(a.mde)} | {{doc}}`does not hold <executed/b/01_redundancy>` -10.0% [-12.0%, "
        f"-8.0%], adjusted [{b.lo_adj:+.1%}, {b.hi_adj:+.1%}]; MDE {size(b.mde)} |"
    )
    assert "<abbr title=" in row and "(two-stage bootstrap over draws and test pairs)" in row
    unmeasured = next(line for line in page.splitlines() if "cannot tell" in line and line.startswith("| Past"))
    assert "{doc}`cannot tell <executed/01_redundancy>` | not run |" in unmeasured  # no number, b has no such row
    # the tally counts the study's claims, not the sub-row under "two_tower.worse"
    assert "| a (minilm, stsb-en) | 2 | 1 | 0 | 0 | 1 | 0 |" in page
    assert "| b (minilm, stsb-en) | 2 | 1 | 1 | 0 | 0 | 0 |" in page
    sub = next(line for line in page.splitlines() if line.startswith("| ↳ with the floor"))
    assert "⌊floor⌋" in sub and "100% of κ lost" in sub
    assert "### 08 two towers" in page and '- e5-zh: `make book PRESETS="a b e5-zh"`' in page


def test_the_study_number_is_shown_only_in_our_unit():
    row = Claim.measured(
        registered("word_order.shuffle_lowers_grade"),
        ours=-0.025,
        lo=-0.036,
        hi=-0.014,
        study=-2,
        study_unit=STUDY_GRADE_SHIFT,
        unit=unit_of("grades, change of the expected grade"),
        method="paired bootstrap over test pairs",
        n_examples=1379,
        reason="why",
    )
    table = claims_table([row]).assign(preset="a", model="minilm", data="stsb-en")
    line = next(x for x in scorecard_markdown(table, {"a": "executed"}, {}).splitlines() if x.startswith("| Shuffling"))
    assert f"-2 ({STUDY_GRADE_SHIFT.label}; not our unit)" in line


def test_each_model_shows_its_accuracy_floor_and_lexical_grader_with_a_warning_near_the_floor():
    models = pd.DataFrame(
        [
            {
                "preset": "a",
                "model": "minilm",
                "accuracy": 0.546,
                "accuracy_lo": 0.52,
                "accuracy_hi": 0.57,
                "majority": 0.245,
            },
            {
                "preset": "b",
                "model": "zh-char",
                "accuracy": 0.394,
                "accuracy_lo": 0.369,
                "accuracy_hi": 0.42,
                "majority": 0.319,
            },
        ]
    )
    two_tower = pd.DataFrame(
        [
            {"preset": "a", "label": "lexical overlap grader", "accuracy": 0.453},
            {"preset": "b", "label": "lexical overlap grader", "accuracy": 0.496},
        ]
    )
    table = claims_table([_claim()]).assign(preset="a", model="minilm", data="stsb-en")
    page = scorecard_markdown(table, {"a": "executed", "b": "executed/b"}, {}, models, two_tower)
    first = next(line for line in page.splitlines() if line.startswith("| a (`minilm`)"))
    second = next(line for line in page.splitlines() if line.startswith("| b (`zh-char`)"))
    assert first.endswith("| 54.6% [52.0%, 57.0%] | 24.5% | 45.3% | none |")
    assert "near its floor: 7.5 points above the majority grade" in second and "lexical grader (49.6%)" in second


def test_the_tallies_count_the_studys_claims_and_our_predictions_apart_and_mark_an_older_rule():
    ours = Claim.measured(
        registered("patching.cls_route_hands_on"),
        ours=0.3,
        lo=0.25,
        hi=0.35,
        unit=unit_of("share of the source-target difference that comes back through the [CLS] head alone"),
        method="paired bootstrap",
        n_examples=600,
        reason="why",
    )
    new = claims_table([_claim(), ours]).assign(preset="a", model="minilm", data="stsb-en")
    old = claims_table([_claim(ours=-0.10, half=0.02)]).assign(preset="b", model="e5-small", data="stsb-zh")
    old = old.drop(columns=["rule_version", "tally"]).assign(kind="beats_control")  # written by rule 2
    page = scorecard_markdown(pd.concat([new, old]), {"a": "executed", "b": "executed/b"}, {})
    lines = page.splitlines()
    study = lines.index(next(line for line in lines if line.startswith("| model | the study's claims |")))
    predictions = lines.index(next(line for line in lines if line.startswith("| model | our own predictions |")))
    assert lines[study].startswith(
        "| model | the study's claims | holds | does not hold | opposite | cannot tell | underpowered | "
        "not comparable |"
    )
    assert lines[study + 2].startswith("| a (minilm, stsb-en) | 1 | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 0 |")
    assert lines[study + 3].startswith("| b (e5-small, stsb-zh) ⟨rule v2⟩ | 1 | 0 | 1 |")
    assert lines[predictions + 2].startswith("| a (minilm, stsb-en) | 1 | 1 |")
    assert "## Our own predictions" in page and "⟨rule v2⟩" in page and "judged at 5% / 26" in page


def test_a_build_with_no_claims_says_so():
    empty = scorecard_markdown(pd.DataFrame(columns=["preset", "finding", "verdict"]), {"default": "executed"}, {})
    assert "No notebook of this build saved any claim." in empty


def test_the_site_toc_puts_the_scorecard_first_and_each_preset_in_its_folder():
    one = site_toc(REPO / "book" / "_toc.yml", {"default": "executed"})
    assert one.splitlines()[:2] == ["format: jb-book", "root: scorecard"]
    assert "file: intro" in one and "file: executed/01_redundancy" in one and "(default)" not in one
    two = site_toc(REPO / "book" / "_toc.yml", {"default": "executed", "zh-char": "executed/zh-char"})
    assert two.count("file: executed/01_redundancy") == 1 and "file: executed/zh-char/01_redundancy" in two
    assert "caption: Findings (zh-char)" in two and "caption: Findings (default)" in two


def test_models_not_built_are_named_with_the_command_that_adds_them():
    commands = not_built_commands(["default", "zh-char"])
    assert "tiny" not in commands and "default" not in commands and "zh-char" not in commands
    assert commands["e5-zh"] == 'make book PRESETS="default zh-char e5-zh"'
    assert "needs a GPU" in commands["mpnet"] and set(commands) == set(PRESETS) - {"tiny", "default", "zh-char"}


def test_the_page_opens_on_a_grid_with_one_cell_per_claim_and_model_drawn_by_the_shipped_vega():
    """The grid leads the page (above the tables) and is drawn by the book's own Vega bundle: its spec has one cell
    per study claim and model (sub-rows left out), a tooltip with the number, intervals and rule, and a link to the
    claim's page on each model."""
    sub = Claim.measured(
        registered("redundancy.no_loss_below_20"),
        part="part",
        claim="a part",
        ours=0.5,
        lo=0.4,
        hi=0.6,
        unit=unit_of("relative change of accuracy"),
        method="paired bootstrap over test pairs",
        n_examples=1379,
        reason="why",
    )
    rows = [_claim(), sub, Claim.not_measured(registered("redundancy.falls_steadily"), reason="no share")]
    table = pd.concat(
        [
            claims_table(rows).assign(preset="a", model="minilm", data="stsb-en"),
            claims_table(rows[:2]).assign(preset="b", model="zh-char", data="stsb-zh"),
        ],
        ignore_index=True,
    )
    page = scorecard_markdown(table, {"a": "executed", "b": "executed/b"}, {})
    block = page[page.index("````{raw} html") : page.index("````\n", page.index("````{raw} html") + 4)]
    assert page.index("````{raw} html") < page.index("| model |")  # the grid opens the page, the tables follow
    assert VEGA_PATH in block and "cdn" not in block and "<noscript><svg" in block
    spec = json.loads(re.search(r"vegaEmbed\(el, (\{.*\}), \{actions", block).group(1))
    (cells,) = spec["datasets"].values()
    a, b = "a (minilm, stsb-en)", "b (zh-char, stsb-zh)"
    assert sorted((c["claim"], c["model"]) for c in cells) == sorted(
        [(rows[0].claim, a), (rows[2].claim, a), (rows[0].claim, b)]
    )
    first = next(c for c in cells if c["claim"] == rows[0].claim and c["model"] == a)
    assert first["verdict"] == rows[0].verdict and first["href"] == "executed/01_redundancy.html"
    assert (first["our number"], first["95% interval"], first["adjusted"]) == (
        "+0.3%",
        "[+0.1%, +0.5%]",
        f"[{rows[0].lo_adj:+.1%}, {rows[0].hi_adj:+.1%}]",  # widened by the rule of claims.judge
    )
    assert first["rule"] == f"{rows[0].kind}: {rows[0].rule}" and first["size or margin"] == rows[0].size_why
    unmeasured = next(c for c in cells if c["claim"] == rows[2].claim)
    assert (unmeasured["our number"], unmeasured["95% interval"], unmeasured["adjusted"]) == (
        "not measured",
        "none",
        "none",
    )
    assert next(c for c in cells if c["model"] == b)["href"] == "executed/b/01_redundancy.html"
    for layer in spec["layer"]:  # the cell and its label both answer the pointer
        tooltip = [t["field"] for t in layer["encoding"]["tooltip"]]
        assert tooltip == [
            "claim",
            "model",
            "verdict",
            "our number",
            "95% interval",
            "adjusted",
            "rule",
            "size or margin",
        ]
        assert layer["encoding"]["href"]["field"] == "href"


def test_the_published_rows_of_this_rule_never_print_an_interval_narrower_adjusted_or_a_nan_bound():
    from headlab.judging.units import in_current_units
    from headlab.judging.verdicts import KINDS, RULE_VERSION

    table = pd.read_csv(REPO / "results" / "scorecard.csv")
    current = table[table["rule_version"] == RULE_VERSION] if "rule_version" in table else table.iloc[0:0]
    if current.empty:  # a new rule before its rebuild: its verdicts on the committed numbers are published instead
        rejudged = pd.read_csv(REPO / "results" / "sensitivity.csv")
        measured = in_current_units(table)  # a row in a unit since replaced waits for its rebuild
        assert (rejudged["rule"] == RULE_VERSION).all() and len(rejudged) == sum(
            measured["claim_id"].isin(list(STUDY_CLAIMS)) & ~measured["verdict"].isin(["not comparable", "not judged"])
        ), "results/scorecard.csv holds no row of the current rule, and results/sensitivity.csv not its verdicts"
    assert table["kind"].isin(KINDS).all()  # no row of any rule judged by a kind that cannot reach a verdict
    both = table.dropna(subset=["lo", "hi", "lo_adj", "hi_adj"])  # older rules' rows too
    assert ((both["lo_adj"] <= both["lo"] + 1e-12) & (both["hi_adj"] >= both["hi"] - 1e-12)).all()
    judged = current[current["verdict"].isin(["holds", "does not hold", "opposite"])]
    assert judged[["ours", "lo", "hi", "lo_adj", "hi_adj"]].notna().all().all()  # a decided row has every number
    for page in ("README.md", "docs/scorecard.md"):
        text = (REPO / page).read_text()
        assert not re.search(r"\bnan\b", text, re.IGNORECASE), f"{page} prints a NaN"


def _judged(claim_id, ours, half, unit):
    return Claim.measured(
        registered(claim_id),
        ours=ours,
        lo=ours - half,
        hi=ours + half,
        unit=unit_of(unit),
        method="paired",
        n_examples=900,
        reason="why",
    )


def test_the_page_opens_on_the_answer_per_model_the_study_shaped_one_first_with_its_firmest_hold_and_contradiction():
    accuracy = "relative change of accuracy"
    rows = [
        _judged("redundancy.no_loss_below_20", 0.0, 0.001, accuracy),
        _judged("layer_dependence.layer_8_gain", -0.40, 0.05, accuracy),  # far the other way: opposite
        _judged("layer_dependence.layers_5_9_gain", -0.10, 0.02, accuracy),  # opposite, less firmly
        _judged("two_tower.worse", -0.30, 0.05, accuracy),  # a loss far beyond its size: holds
    ]
    table = claims_table(rows)
    both = pd.concat(
        [
            table.assign(preset="default", model="minilm", data="stsb-en"),
            table.assign(preset="e5-zh-char", model="e5-small-char", data="stsb-zh"),
        ]
    )
    models = pd.DataFrame(
        {
            "preset": ["default", "e5-zh-char"],
            "model": ["minilm", "e5-small-char"],
            "layers": [6, 12],
            "heads": [12, 12],
        }
    ).assign(accuracy=0.55, accuracy_lo=0.52, accuracy_hi=0.58, majority=0.25)
    page = scorecard_markdown(both, {"default": "executed/default", "e5-zh-char": "executed/e5-zh-char"}, {}, models)
    answer = page[: page.index("Hover a cell")]
    first, second = (line for line in answer.splitlines() if line.startswith("- **"))
    assert first.startswith("- **e5-zh-char**: multilingual-e5-small reading one character a token, 12 layers x 12")
    assert second.startswith("- **default**: MiniLM") and "English" in second and "6 layers x 12 heads" in second
    verdicts = table.set_index("claim_id")["verdict"]
    assert verdicts["layer_dependence.layer_8_gain"] == "opposite" and verdicts["two_tower.worse"] == "holds"
    assert "Firmest hold: *A two-tower model grades worse than one cross-encoder*, -30.0%" in first
    assert "Firmest contradiction: *Masking all of layer 8 (of 12) raises accuracy by 2.3%*, -40.0%" in first
    counts = verdicts.value_counts()
    assert (
        "opposite, its far end" in first
        and first.rstrip(".").endswith("sizes beyond no effect the other way)")
        and f"Of the study's 4 claims: {counts['holds']} hold," in first
    )
    assert f"{counts['opposite']} opposite" in first


def test_firmness_is_measured_from_the_claims_null_in_sizes_and_no_effect_claims_in_margins():
    share = "share of heads shown to change nothing"
    nothing = _judged("layer_dependence.most_heads_change_nothing", 0.9, 0.02, share)  # null 0.5, size 0.1
    shown = claims_table([nothing]).iloc[0]
    assert shown.verdict == "holds"
    # from the null (0.5), its near end 0.9 - 0.02 - widening lies about 3.x sizes past the size, not 8.x
    assert _strength(shown) == pytest.approx((shown.lo_adj - 0.5 - 0.1) / 0.1)
    loss = _judged("redundancy.no_loss_below_20", -0.08, 0.01, "relative change of accuracy")  # margin 1.15%
    lost = claims_table([loss]).iloc[0]
    assert lost.verdict == "does not hold"
    assert _strength(lost) == pytest.approx((min(abs(lost.lo_adj), abs(lost.hi_adj)) - lost.margin) / lost.margin)
    table = claims_table([loss]).assign(preset="default", model="minilm", data="stsb-en")
    (line,) = [x for x in answer_lines(table, ["default"]) if x.startswith("- **")]
    assert "Firmest hold: none." in line and "Firmest contradiction: *Masking fewer than 20%" in line
    assert (
        ": does not hold, its near end" in line and "margins beyond the margin)" in line and "1 does not hold" in line
    )


def _route_row():
    """A row of our own predictions (patching.cls_route_hands_on), decided."""
    unit = "share of the grade-logit difference that comes back through the head's output at [CLS] alone (path "
    return _judged("patching.cls_route_hands_on", 0.3, 0.05, unit + "patching from the matching heads)")


def test_the_study_and_our_predictions_have_a_grid_each_and_an_undecided_cell_says_which_way_it_leans():
    leaning_away = _judged("two_tower.worse", 0.004, 0.03, "relative change of accuracy")  # the claim: worse
    ours = _route_row()
    table = claims_table([leaning_away, ours]).assign(preset="a", model="minilm", data="stsb-en")
    assert table.set_index("claim_id").loc["two_tower.worse", "verdict"] in ("cannot tell", "underpowered")
    page = scorecard_markdown(table, {"a": "executed"}, {})
    blocks = [json.loads(b) for b in re.findall(r"vegaEmbed\(el, (\{.*\}), \{actions", page)]
    grids = [b for b in blocks if "params" not in b]  # the claims' intervals on one model carry the model menu
    assert len(grids) == 2 and page.index("The study's claims (rows)") < page.index("Our own predictions (rows)")
    (study,), (predictions,) = (g["datasets"].values() for g in grids)
    assert [c["claim"] for c in study] == [leaning_away.claim] and [c["claim"] for c in predictions] == [ours.claim]
    assert study[0]["label"] == f"{study[0]['verdict']} (−)"  # +0.4% where the claim expects a loss
    assert predictions[0]["label"] == predictions[0]["verdict"]  # decided: no leaning shown


def test_the_claims_stand_on_one_axis_in_multiples_of_their_size_turned_to_the_claimed_direction():
    worse = _judged("two_tower.worse", -0.03, 0.01, "relative change of accuracy")  # direction -1
    nothing = _judged("layer_dependence.most_heads_change_nothing", 0.9, 0.02, "share of heads shown to change nothing")
    no_loss = _judged("redundancy.no_loss_below_20", 0.0, 0.001, "relative change of accuracy")  # no effect: left out
    ours = _route_row()
    table = claims_table([worse, nothing, no_loss, ours]).assign(preset="a", model="minilm", data="stsb-en")
    rows = interval_rows(table, {"a": "executed"}).set_index("claim")
    assert list(rows.index) == [worse.claim, nothing.claim]  # no-effect claims and our predictions left out
    w, n = (
        table.set_index("claim_id").loc["two_tower.worse"],
        table.set_index("claim_id").loc["layer_dependence.most_heads_change_nothing"],
    )
    assert rows.loc[worse.claim, "estimate"] == pytest.approx(0.03 / w.min_size)  # a loss, the claim's way: positive
    assert rows.loc[worse.claim, ["lo", "hi"]].tolist() == pytest.approx(
        sorted([-w.hi_adj / w.min_size, -w.lo_adj / w.min_size])
    )
    assert rows.loc[nothing.claim, "estimate"] == pytest.approx((0.9 - 0.5) / n.min_size)  # from the null, 0.5
    page = scorecard_markdown(table, {"a": "executed"}, {})
    assert "The same claims on one model" in page and '"name": "column"' in page.replace(
        '"name":"column"', '"name": "column"'
    )


def test_a_finding_in_both_tallies_is_one_contents_entry_per_tally_with_distinct_headings():
    worse = _judged("two_tower.worse", -0.03, 0.01, "relative change of accuracy")
    shared = _judged("two_tower.fails_on_shared_terms", -0.05, 0.01, TWO_TOWER_GAP.label)
    page = scorecard_markdown(claims_table([worse, shared]).assign(preset="a", model="minilm", data="stsb-en"), {}, {})
    headings = [line for line in page.splitlines() if line.startswith("#")]
    assert len(headings) == len(set(headings))  # the site's contents list every heading once
    assert f"### {worse.finding}" in headings and f"### {worse.finding}: our own predictions" in headings
