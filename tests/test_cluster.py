"""headlab.core.cluster: a sweep on Dask worker processes gives the single-process result, survives a killed
worker, resumes with only what is missing, and without Dask says which extra to install."""

import os
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import random_encoded, tiny_bert

from headlab.core.cluster import EXTRA, ClusterError, _new_client, cluster_results, connect
from headlab.core.sweep import load_sweep, random_share_specs, run_sweep, single_head_specs

distributed = pytest.importorskip("distributed", reason=f"Dask is the optional extra {EXTRA}")
starts_a_cluster = pytest.mark.slow  # two worker processes: seconds to start, so out of the fast loop


def _closing(client):
    """Yields ``client``, then closes it and its cluster."""
    yield client
    cluster = client.cluster
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each, as CLUSTER='local:2' starts them."""
    yield from _closing(connect("local:2"))


@pytest.fixture
def own_client():
    """The same cluster, started anew for the test that kills a worker (``connect`` would hand back the shared
    one): a scheduler that has just lost a worker can stall a later broadcast scatter (dask/distributed#5704), so
    the shared cluster never sees a death."""
    yield from _closing(_new_client(distributed, "local:2", "local:2"))


def _sweep():
    model = tiny_bert()
    specs = single_head_specs(3, 4) + random_share_specs(3, 4, [0.25, 0.5], draws=3, seed=0)
    return model, random_encoded(30), specs


@starts_a_cluster
def test_a_sweep_on_two_workers_equals_the_single_process_sweep(tmp_path, client):
    model, encoded, specs = _sweep()
    alone = run_sweep(model, encoded, specs, tmp_path / "alone", batch_size=8, progress=False)
    spread = run_sweep(
        model, encoded, specs, tmp_path / "dask", batch_size=8, progress=False, cluster=client, chunk_size=3
    )
    pd.testing.assert_frame_equal(spread, alone)
    assert (tmp_path / "dask" / "masks" / "head-2-3.csv").read_bytes() == (
        tmp_path / "alone" / "masks" / "head-2-3.csv"
    ).read_bytes()


class KillOnce(distributed.WorkerPlugin):
    """Kills its worker process as the ``nth`` chunk starts executing there, once (a marker file says it did)."""

    def __init__(self, marker, nth: int = 2):
        self.marker, self.nth, self.started = str(marker), nth, 0

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and "evaluate_chunk" in str(key):
            self.started += 1
            if self.started == self.nth:
                # O_EXCL: two workers at their nth chunk together must not both die (the scattered inputs would go too)
                try:
                    os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                os._exit(1)


@starts_a_cluster
def test_a_worker_killed_mid_chunk_costs_only_its_chunk(tmp_path, own_client):
    client = own_client
    model, encoded, specs = _sweep()
    alone = run_sweep(model, encoded, specs, tmp_path / "alone", batch_size=8, progress=False)
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(marker), name="kill-once")
    try:
        spread = run_sweep(
            model, encoded, specs, tmp_path / "dask", batch_size=8, progress=False, cluster=client, chunk_size=2
        )
    finally:
        client.unregister_worker_plugin("kill-once")
    assert marker.exists()  # a worker did die while a chunk was running
    pd.testing.assert_frame_equal(spread, alone)


@starts_a_cluster
def test_a_restarted_sweep_submits_only_what_is_missing(tmp_path, client, monkeypatch):
    model, encoded, specs = _sweep()
    out = tmp_path / "dask"
    first = run_sweep(model, encoded, specs, out, batch_size=8, progress=False, cluster=client)
    lost = ["head-0-1", "head-1-2"]
    for mask_id in lost:
        (out / "masks" / f"{mask_id}.csv").unlink()
    submitted = []
    submit = client.submit
    monkeypatch.setattr(client, "submit", lambda fn, *args, **kw: submitted.append(args[2]) or submit(fn, *args, **kw))
    again = run_sweep(model, encoded, specs, out, batch_size=8, progress=False, cluster=client)
    assert sum(len(keeps) for keeps in submitted) == len(lost)
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(load_sweep(out), first)


@starts_a_cluster
@pytest.mark.timeout(120)  # the race below hung CI until its 900 s limit; a recurrence fails here in minutes
def test_the_same_sweep_sent_again_and_again_to_one_cluster_always_finishes(client):
    """Each sweep scatters its model and split under keys of its own: data scattered under the key of its
    content, just released by the sweep before, can be lost or hang the scatter (dask/distributed#8576)."""
    model, encoded, specs = _sweep()
    keeps = [spec.keep(3, 4) for spec in specs[:2]]

    def probabilities():
        ((_, probs, _),) = cluster_results(
            client, model, encoded, [keeps], batch_size=8, pad_id=0, masks_per_pass=4, autocast=None
        )
        return np.stack(probs)

    first = probabilities()
    for _ in range(29):
        np.testing.assert_array_equal(probabilities(), first)


def test_cluster_specs_that_cannot_work_are_refused_with_the_parameter():
    with pytest.raises(ClusterError, match="'local:N' needs a positive number"):
        connect("local:zero")
    with pytest.raises(ClusterError, match="expected None, 'local:N' or a scheduler address"):
        connect("my-laptop")


def test_without_dask_a_cluster_asks_for_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(ClusterError, match=r"pip install 'headlab\[cluster\]'"):
        connect("local:2")
    model, encoded, specs = _sweep()
    table = run_sweep(model, encoded, specs[:2], tmp_path / "alone", batch_size=8, progress=False)
    assert len(table) == 3 * len(encoded)  # without a cluster nothing needs Dask


@starts_a_cluster
def test_a_lab_sweeps_on_the_cluster_its_study_names(tmp_path_factory, client):
    """CLUSTER reaches every notebook sweep through Lab.sweep: the same tables as without it."""
    from tiny_setup import tiny_setup

    lab = tiny_setup(tmp_path_factory.mktemp("runs"), n_right=3)
    specs = random_share_specs(4, 4, [0.25], draws=3, seed=0)
    alone = lab.sweep(specs, "alone", progress=False)
    lab.params.cluster = client
    pd.testing.assert_frame_equal(lab.sweep(specs, "spread", progress=False), alone)
    lab.params.cluster = "nowhere"
    with pytest.raises(ClusterError, match="CLUSTER='nowhere'"):
        lab.sweep(specs, "refused", progress=False)
