"""headlab.book.build runs a preset's notebooks side by side: each after the pages it reads, a failure stops what has
not started and is raised once the running ones finish."""

import json
import os
import re

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import random_encoded
from lane_steps import timed_step
from test_book import code_cells
from transformers import BertConfig, BertForSequenceClassification

from headlab.book.lanes import critical_path_first, in_lanes, lanes_and_threads
from headlab.book.notebooks import BookError
from headlab.book.records import recorded_seconds
from headlab.book.steps import step_needs
from headlab.core.engine import MaskEngine
from headlab.lab.pages import CROSS_ENCODER, STUDENTS, TWO_TOWER, page_ids, page_needs, training_needs
from headlab.lab.params import REPO

PAGES = page_ids()
NEEDS = page_needs()  # what each page reads of the others, from the page registry (headlab.lab.pages)


def _times(folder):
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


def test_steps_run_two_at_a_time_each_after_what_it_needs(tmp_path):
    # "a" runs long enough for the second worker to start beside it on a loaded machine (a worker's start imports
    # torch: at 1.5 s, a CI run once saw "b" start 0.4 ms after "a" ended)
    steps = {name: (name, 4.0 if name == "a" else 1.5, str(tmp_path)) for name in ["a", "b", "c", "d"]}
    needs = {"c": ("a",), "d": ("b", "c"), "b": ("not run here",)}  # a step not in this run is taken as done
    finished = [name for name, result in in_lanes(steps, needs, lanes=2, run=timed_step) if result == name]
    times = _times(tmp_path)
    assert sorted(finished) == ["a", "b", "c", "d"] and finished[-1] == "d"
    assert times["a"]["start"] < times["b"]["end"] and times["b"]["start"] < times["a"]["end"]  # side by side
    assert times["c"]["start"] >= times["a"]["end"]
    assert times["d"]["start"] >= max(times["b"]["end"], times["c"]["end"])
    assert len({t["pid"] for t in times.values()}) == 2  # two worker processes, each used again


def test_a_failure_lets_the_running_step_finish_starts_nothing_new_and_is_raised(tmp_path, capsys):
    steps = {
        "slow": ("slow", 3.0, str(tmp_path)),
        "broken": ("broken", 0, str(tmp_path), True),
        "later": ("later", 0, str(tmp_path)),
    }
    finished = []
    with pytest.raises(ValueError, match="broken failed on purpose"):
        for name, _ in in_lanes(steps, {}, lanes=2, run=timed_step):
            finished.append(name)
    assert finished == ["slow"] and set(_times(tmp_path)) == {"slow"}  # "later" never started
    assert "waiting for ['slow'] to finish" in capsys.readouterr().err


def test_steps_that_wait_on_each_other_are_refused(tmp_path):
    steps = {name: (name, 0, str(tmp_path)) for name in ["a", "b"]}
    with pytest.raises(BookError, match=r"wait on each other"):
        list(in_lanes(steps, {"a": ("b",), "b": ("a",)}, lanes=2, run=timed_step))


# the cold default build's seconds per page (9380b2a); 10_pruning was not in it: its 170 s are its first run (papermill,
# beside a running build, on a 2-core AMD EPYC)
COLD = {
    "00_setup": 37,
    "01_redundancy": 609,
    "02_layer_dependence": 604,
    "03_word_segmentation": 41,
    "04_word_order": 488,
    "05_term_matching": 456,
    "06_finetune_delta": 62,
    "07_cls_head": 165,
    "08_two_tower": 84,
    "09_patching": 435,
    "10_pruning": 170,
}


def test_the_longest_chain_of_work_starts_first():
    """With the cold default build's seconds (9380b2a), 02 (its own 604 s, then 09's 435) and 05 (456 + 435) start
    first, then the long pages nobody waits on, 01 and 04, before 09: no lane is left alone with 09 at the end."""
    cold = dict(COLD)
    order = critical_path_first(PAGES, NEEDS, cold)
    assert order[:5] == ["02_layer_dependence", "05_term_matching", "01_redundancy", "04_word_order", "09_patching"]
    # without timings every step counts alike: the pages others wait on go first, the rest keep the toc's order
    order = critical_path_first(PAGES, NEEDS)
    assert set(order[:3]) == {"05_term_matching", "02_layer_dependence", "01_redundancy"}
    assert order[3:] == [p for p in PAGES if p not in order[:3]]
    # followed through: c waits on b, which waits on a; a step without seconds counts as the median of the others
    assert critical_path_first(["c", "b", "a", "d"], {"c": ("b",), "b": ("a",)}) == ["a", "b", "c", "d"]
    assert critical_path_first(["x", "y", "z"], {}, {"y": 5, "z": 1}) == ["y", "x", "z"]


def test_the_expected_seconds_are_the_latest_build_of_the_preset_in_that_state(tmp_path):
    rows = [
        ("b1", "default", "cold", "01", 600),
        ("b2", "default", "cold", "01", 500),
        ("b3", "default", "cached", "01", 40),
        ("b3", "e5-en", "cold", "01", 900),
    ]
    table = tmp_path / "timings.csv"
    pd.DataFrame(rows, columns=["build", "preset", "state", "step", "seconds"]).to_csv(table, index=False)
    assert recorded_seconds("default", "cold", [tmp_path / "missing.csv", table]) == {"01": 500.0}
    assert recorded_seconds("default", "cached", [table]) == {"01": 40.0}
    assert recorded_seconds("zh-char", "cold", [table]) == {}
    assert recorded_seconds("e5-en", "cached", [table]) == {"01": 900.0}  # no build in that state: the latest


def _simulated_end(order, needs, seconds, lanes=2):
    """When the last step ends if ``lanes`` take, each time one is free, the first step of ``order`` that is ready."""
    free, done, pending = [0.0] * lanes, {}, list(order)
    while pending:
        lane = int(np.argmin(free))
        now = free[lane]
        ready = [n for n in pending if all(d in done and done[d] <= now for d in needs.get(n, ()) if d in order)]
        if not ready:
            free[lane] = min(t for t in done.values() if t > now)
            continue
        name = ready[0]
        pending.remove(name)
        done[name] = free[lane] = now + seconds[name]
    return max(done.values())


def test_the_order_shortens_the_cold_default_build_against_dependents_first():
    cold = dict(COLD)
    measured = [p for p in PAGES if p != "10_pruning"]  # the pages of that build
    for pages in (measured, PAGES):
        by_count = ["05_term_matching", "02_layer_dependence"] + [
            p for p in pages if p not in ("05_term_matching", "02_layer_dependence")
        ]
        before, after = (
            _simulated_end(by_count, NEEDS, cold),
            _simulated_end(critical_path_first(pages, NEEDS, cold), NEEDS, cold),
        )
        if pages is measured:
            assert before == pytest.approx(1683, abs=2)  # what the cold build measured: 09 alone at the end
            assert after < before - 150
        else:  # 10_pruning waits on 01 and 02, so it ends the build: 89 s after the others
            assert after == pytest.approx(1589, abs=2) and after < before


def test_the_fine_tunes_are_steps_the_pages_wait_for_and_train_side_by_side():
    """Every page waits for the cross-encoder, page 08 for the two towers too and page 10 for its students (trained
    from the cross-encoder), on top of what it reads; both fine-tunes start first, side by side, and the pages start
    as soon as the cross-encoder is trained (seconds: the cold default build of 9380b2a, the fine-tunes' as estimated
    one thread each beside the other on a 2-core AMD EPYC)."""
    needs = step_needs(PAGES)
    assert all(CROSS_ENCODER in needs[p] and set(NEEDS.get(p, ())) <= set(needs[p]) for p in PAGES)
    assert [p for p in PAGES if TWO_TOWER in needs[p]] == ["08_two_tower"]
    assert [p for p in PAGES if STUDENTS in needs[p]] == ["10_pruning"] and needs[STUDENTS] == (CROSS_ENCODER,)
    assert list(training_needs([p for p in PAGES if p not in ("08_two_tower", "10_pruning")])) == [CROSS_ENCODER]
    seconds = {**COLD, CROSS_ENCODER: 300, TWO_TOWER: 405, STUDENTS: 150}
    steps = [*training_needs(PAGES), *PAGES]
    order = critical_path_first(steps, needs, seconds)
    assert order[0] == CROSS_ENCODER
    assert [n for n in order if not set(needs.get(n, ())) & set(steps)] == [CROSS_ENCODER, TWO_TOWER]  # start at once
    side_by_side = _simulated_end(order, needs, seconds)
    # against both trained one after the other on both cores first (a step took 0.39 s on two threads, 0.55 s on one)
    first_then_pages = (seconds[CROSS_ENCODER] + seconds[TWO_TOWER] + seconds[STUDENTS]) * 0.39 / 0.55 + _simulated_end(
        critical_path_first(PAGES, NEEDS, COLD), NEEDS, COLD
    )
    assert side_by_side < first_then_pages - 100


def test_lanes_share_out_the_cores():
    cores = os.cpu_count() or 1
    assert lanes_and_threads() == (min(2, cores), max(1, cores // min(2, cores)))
    assert lanes_and_threads(1) == (1, cores)
    with pytest.raises(BookError, match="--lanes must be a positive integer, got 0"):
        lanes_and_threads(0)


def _calls(page: str, function: str) -> list[str]:
    """The calls of ``function`` in a page's code, as written: its notebook's cells and its module in headlab/pages."""
    module = REPO / "headlab" / "pages" / f"{page.split('_', 1)[1]}.py"
    code = "\n".join(
        [
            *(c["source"] for c in code_cells(REPO / "notebooks" / f"{page}.ipynb")),
            module.read_text(encoding="utf-8") if module.exists() else "",
        ]
    )
    return re.findall(rf"\b{function}\((.*?)\)", code, flags=re.S)


def _before(page: str) -> set[str]:
    """Every page that finishes before ``page`` starts (the registry's :data:`NEEDS`, followed through)."""
    found, todo = set(), list(NEEDS.get(page, ()))
    while todo:
        other = todo.pop()
        if other not in found:
            found.add(other)
            todo.extend(NEEDS.get(other, ()))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_a_page_runs_after_the_pages_whose_tables_it_reads(page):
    """Pages that read the term-matching heads notebook 05 chooses, or masks of notebook 02's sweeps (its single heads,
    or its whole halves, which pruning within a half reaches), wait for them (else they would choose or sweep again,
    side by side with the page that does it)."""
    reads_heads = any("choose=True" not in call for call in _calls(page, "matching_heads"))
    assert reads_heads == ("05_term_matching" in _before(page))
    within_halves = any('"lower"' in call or "where" in call for call in _calls(page, "importance_specs")) or bool(
        _calls(page, "pruning_specs")  # page 10's sweep: the least important heads within each half among its masks
    )
    assert (bool(_calls(page, "single_head_correct")) or within_halves) == ("02_layer_dependence" in _before(page))
    assert page not in _before(page)
    assert set(NEEDS) <= set(PAGES) and all(set(n) <= set(PAGES) for n in NEEDS.values())


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to compare one thread with two")
def test_grades_do_not_depend_on_the_thread_count():
    """A notebook in a lane runs with fewer threads than one run alone: its sweeps must grade every pair the same
    (the matrices here are large enough that torch splits them over threads)."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=256,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=64,
        num_labels=5,
    )
    model, encoded = BertForSequenceClassification(config).eval(), random_encoded(n=96, longest=40)
    masks = [torch.ones(3, 4), torch.tensor([[1.0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 0]])]
    probs = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        probs[threads] = MaskEngine(model, encoded, batch_size=48).probabilities(masks)
    for one, two in zip(probs[1], probs[2]):
        np.testing.assert_array_equal(one.argmax(1), two.argmax(1))
        np.testing.assert_allclose(one, two, atol=1e-5)


@pytest.mark.slow  # its two worker processes import headlab's build (torch, transformers) to unpickle the steps
def test_several_presets_share_one_pool_each_step_after_its_own_presets_needs(tmp_path, monkeypatch):
    """One build of two presets: their fine-tunes run side by side (one pool, not one preset after the other), each
    page after its own preset's model, every step recorded under its preset, and a preset total for each."""
    from lane_steps import labelled_step

    from headlab.book.build import execute_presets
    from headlab.book.presets import PRESETS
    from headlab.book.records import BuildClock

    monkeypatch.setenv("HEADLAB_TEST_STEPS", str(tmp_path))
    monkeypatch.setenv("HEADLAB_TEST_MEET", "2")  # each fine-tune waits for the other: at once, or a minute apart
    presets = {
        name: ({**PRESETS["tiny"], "RUN_DIR": str(tmp_path / name)}, tmp_path / "executed" / name)
        for name in ("first", "second")
    }
    clock = BuildClock(tmp_path / "timings.csv", "cpu", 2, 1)
    (tmp_path / "logs").mkdir()
    pages = ["00_setup", "01_redundancy"]
    states = execute_presets(presets, pages, None, tmp_path / "logs", clock, 2, 1, run=labelled_step)
    assert list(states) == ["first", "second"] and not any(computed for _, computed in states.values())
    times = _times(tmp_path)
    steps = [f"{p}--{s}" for p in presets for s in (CROSS_ENCODER, *pages)]
    assert sorted(times) == sorted(steps)
    assert {times[f"{p}--{CROSS_ENCODER}"]["function"] for p in presets} == {"fine_tune_step"}
    first, second = times[f"first--{CROSS_ENCODER}"], times[f"second--{CROSS_ENCODER}"]
    assert first["start"] < second["end"] and second["start"] < first["end"]  # the two presets' fine-tunes at once
    for p in presets:
        assert all(times[f"{p}--{page}"]["start"] >= times[f"{p}--{CROSS_ENCODER}"]["end"] for page in pages)
    recorded = pd.read_csv(tmp_path / "timings.csv")
    assert sorted(recorded[recorded["preset"] == "second"]["step"]) == sorted([CROSS_ENCODER, *pages, "preset total"])


def test_a_model_headlab_pretrains_is_a_lane_step_beside_other_work_that_its_fine_tunes_wait_for(tmp_path, monkeypatch):
    """zh-char's pretraining runs on one thread in a lane (not alone on every core before the lanes start): another
    preset's fine-tune runs beside it, its own fine-tune and pages start once it is done, and it is timed under its
    preset; a preset on a published model has no such step."""
    from lane_steps import labelled_step

    from headlab.book.build import execute_presets
    from headlab.book.presets import PRESETS, pretrains
    from headlab.book.records import BuildClock

    monkeypatch.setenv("HEADLAB_TEST_STEPS", str(tmp_path))
    monkeypatch.setenv("HEADLAB_TEST_MEET", "2")  # the pretraining and the other preset's fine-tune meet: at once
    settings = {"first": PRESETS["tiny"], "second": {**PRESETS["tiny"], "MODEL": "zh-char"}}
    assert [pretrains(s) for s in settings.values()] == [False, True]
    presets = {
        name: ({**s, "RUN_DIR": str(tmp_path / name)}, tmp_path / "executed" / name) for name, s in settings.items()
    }
    clock = BuildClock(tmp_path / "timings.csv", "cpu", 2, 1)
    (tmp_path / "logs").mkdir()
    execute_presets(presets, ["00_setup"], None, tmp_path / "logs", clock, 2, 1, run=labelled_step)
    times = _times(tmp_path)
    assert sorted(times) == sorted(
        [
            "first--00_setup",
            f"first--{CROSS_ENCODER}",
            "second--00_setup",
            f"second--{CROSS_ENCODER}",
            "second--pretraining",
        ]
    )
    pretraining, beside = times["second--pretraining"], times[f"first--{CROSS_ENCODER}"]
    assert pretraining["start"] < beside["end"] and beside["start"] < pretraining["end"]
    assert times[f"second--{CROSS_ENCODER}"]["start"] >= pretraining["end"]
    assert times["second--00_setup"]["start"] >= times[f"second--{CROSS_ENCODER}"]["end"]
    recorded = pd.read_csv(tmp_path / "timings.csv")
    assert list(recorded[recorded["step"] == "pretraining"]["preset"]) == ["second"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie has exited
    except FileNotFoundError:
        return False


def test_a_worker_whose_parent_is_no_longer_the_build_exits():
    """The parent check keeps a worker whose parent is the build, and ends one whose parent is another process (the
    build died and it was adopted), with SIGTERM's exit status."""
    import signal
    import subprocess
    import sys

    script = (
        "import os, sys, threading; from headlab.book.lanes import _exit_when_orphaned; "
        "kept = threading.Thread(target=_exit_when_orphaned, args=(os.getppid(), 0.01), daemon=True); "
        "kept.start(); kept.join(0.5); print('kept', flush=True); "
        "_exit_when_orphaned(os.getppid() + 1, 0.01); print('not ended', flush=True)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["kept"], done.stderr
    assert done.returncode == 128 + signal.SIGTERM


@pytest.mark.slow  # its worker imports headlab's build (torch, transformers) to start
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc (Linux)")
def test_a_killed_build_takes_its_lane_workers_with_it(tmp_path):
    """A build killed outright (SIGKILL: no clean-up runs in it) leaves no worker computing on its own."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    tests = Path(__file__).parent
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from lane_steps import pid_then_sleep; "
        "from headlab.book.lanes import in_lanes; "
        "list(in_lanes({'a': (sys.argv[2],)}, {}, 1, run=pid_then_sleep))"
    )
    build = subprocess.Popen([sys.executable, "-c", script, str(tests), str(tmp_path)])
    pid_file, waited = tmp_path / "worker.pid", 0.0
    while not pid_file.exists() and waited < 120:
        time.sleep(0.5)
        waited += 0.5
    assert pid_file.exists(), "the worker never started its step"
    time.sleep(0.5)
    worker = int(pid_file.read_text())
    assert _alive(worker)
    build.send_signal(signal.SIGKILL)
    build.wait()
    for _ in range(60):
        if not _alive(worker):
            break
        time.sleep(0.5)
    assert not _alive(worker), "the lane worker outlived the build"
