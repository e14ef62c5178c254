"""Sweeps on a Dask cluster: masks evaluated by workers, results saved by the driver as they arrive.

A head sweep is embarrassingly parallel over masks, and Dask (``distributed``) is the scientific-Python engine
for spreading such work: over local processes, the GPUs of one machine (``dask-cuda``) or a Slurm/PBS cluster
(``dask-jobqueue``). The driver sends the fine-tuned model and the encoded split to every worker once
(``scatter``); each worker builds its own :class:`headlab.core.engine.MaskEngine` once and evaluates chunks of
masks; the probabilities come back to the driver, which writes each mask's file as today
(:func:`headlab.core.sweep.run_sweep`), so no shared filesystem is needed, a restarted sweep submits only what
is missing, and a worker lost mid-chunk costs only its chunk (Dask runs the chunk again elsewhere).

Dask is an optional extra: ``pip install 'headlab[cluster]'``.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
from typing import Any

import numpy as np
import torch

from headlab.core.engine import MaskEngine

EXTRA = "headlab[cluster]"
_CLIENTS: dict[str, Any] = {}  # one client per spec in this process: a notebook's sweeps share one local cluster
_ENGINE: dict = {}  # per worker process, the current sweep's key, split, engine and precision check (one at a time)


class ClusterError(RuntimeError):
    """A cluster that cannot be reached or described, or Dask missing."""


def _dask():
    """The ``distributed`` module, or an error that names the extra to install (Dask is optional)."""
    try:
        import distributed
    except ImportError:
        raise ClusterError(f"sweeps on a cluster need Dask: pip install '{EXTRA}' (or dask[distributed])") from None
    return distributed


def connect(spec):
    """A Dask client for ``spec``: ``"local:N"`` (N worker processes of one thread on this machine),
    a scheduler address such as ``"tcp://host:8786"``, or a ``distributed.Client`` used as it is. A spec
    connected before in this process gets the same client."""
    distributed = _dask()
    if isinstance(spec, distributed.Client):
        return spec
    text = str(spec)
    if text not in _CLIENTS or _CLIENTS[text].status != "running":
        _CLIENTS[text] = _new_client(distributed, spec, text)
    return _CLIENTS[text]


def _new_client(distributed, spec, text: str):
    if text.startswith("local:"):
        try:
            workers = int(text.split(":", 1)[1])
        except ValueError:
            workers = 0
        if workers < 1:
            raise ClusterError(f"CLUSTER={spec!r}: 'local:N' needs a positive number of workers, e.g. 'local:2'")
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        return distributed.Client(cluster)
    if "://" in text:
        try:
            return distributed.Client(text, timeout="30s")
        except OSError as err:
            raise ClusterError(f"CLUSTER={spec!r}: no Dask scheduler answers there ({err})") from None
    raise ClusterError(f"CLUSTER={spec!r}: expected None, 'local:N' or a scheduler address such as 'tcp://host:8786'")


def _engine(
    shipped: tuple[str, bytes], encoded, batch_size: int, pad_id: int, masks_per_pass: int, autocast
) -> tuple[MaskEngine, dict | None]:
    """This worker's engine for the shipped model and split, with its precision check against fp32 where it
    runs in reduced precision: built on the first chunk, reused after. Only the current sweep's engine is kept (it
    holds a model and recorded layer outputs), so a long-lived worker does not pile up one per sweep.

    The model travels pickled as plain bytes: Dask's own torch serializer rebuilds a module whose hook
    registries are plain dicts, which the engine's hooks cannot use."""
    digest, payload = shipped
    key = (digest, batch_size, pad_id, masks_per_pass, autocast)
    if _ENGINE.get("key") != key or _ENGINE["encoded"] is not encoded:
        model = pickle.loads(payload)
        worker = _dask().get_worker()
        torch.set_num_threads(max(1, worker.state.nthreads))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        engine = MaskEngine(
            model.to(device), encoded, batch_size, device, pad_id, masks_per_pass=masks_per_pass, autocast=autocast
        )
        _ENGINE.update(
            key=key, encoded=encoded, engine=engine, check=engine.precision_check() if engine.autocast else None
        )
    return _ENGINE["engine"], _ENGINE["check"]


def evaluate_chunk(
    shipped: tuple[str, bytes],
    encoded,
    keeps: list[torch.Tensor],
    batch_size: int,
    pad_id: int,
    masks_per_pass: int,
    autocast,
) -> tuple[list[np.ndarray], dict | None]:
    """On a worker: the grade probabilities of each mask in ``keeps``, and the engine's precision check against
    fp32 where it runs in reduced precision (so the driver can refuse a precision that moves too many grades)."""
    engine, check = _engine(shipped, encoded, batch_size, pad_id, masks_per_pass, autocast)
    return engine.probabilities(keeps), check


def cluster_results(
    client,
    model,
    encoded,
    chunks: list[list[torch.Tensor]],
    batch_size: int,
    pad_id: int,
    masks_per_pass: int,
    autocast,
):
    """Submit every chunk of masks; yield ``(chunk index, probabilities, precision check)`` as each finishes."""
    distributed = _dask()
    on_cpu = next(model.parameters()).device.type == "cpu"
    payload = pickle.dumps(model if on_cpu else copy.deepcopy(model).cpu())  # workers may have no GPU
    shipped = (hashlib.sha256(payload).hexdigest(), payload)
    # Keys of this sweep's own (hash=False): the content's key, released by the sweep before, can still be
    # leaving the workers as it is scattered again, and the data is lost or the scatter hangs (dask/distributed#8576).
    model_ref, encoded_ref = client.scatter([shipped, encoded], broadcast=True, hash=False)
    futures = {
        client.submit(
            evaluate_chunk, model_ref, encoded_ref, keeps, batch_size, pad_id, masks_per_pass, autocast, pure=False
        ): i
        for i, keeps in enumerate(chunks)
    }
    for future in distributed.as_completed(futures):
        probs, check = future.result()
        yield futures[future], probs, check
