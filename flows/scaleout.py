"""Where parse tasks and embedding batches run: this process, or a Dask cluster.

With ``run.task_runner = "threads"`` (the default) parse tasks run on the flow's
thread pool and share one ParserPool (``parse.workers`` child processes). With
``"dask"`` they are submitted through prefect-dask's DaskTaskRunner: to a
LocalCluster of ``run.dask_workers`` processes, or to an existing cluster at
``run.dask_address`` (other machines). Each Dask worker process builds its own
kit (parser pool, store handle, tokenizer, context provider) once, from a
picklable recipe (corpusflow.kit.KitRecipe), and keeps it for the life of the worker. Parse tasks ask for
``run.dask_parse_resources`` (e.g. ``{"cpu": 1}``); with ``run.dask_embed_resources``
(e.g. ``{"gpu": 1}``) every embedding batch is encoded on a worker offering those
resources, which loads the model once and keeps it. The embedding checkpoint and
the Lance commits stay in the flow process, under its write lease.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from common.settings import EmbedSettings, RunSettings, Settings
from embedding import Embeddings, ModelSpec, OneThreadEmbedder, load_embedder

_WORKER_LOCK = threading.Lock()


_WORKER_EMBEDDERS: dict[str, Any] = {}


def _encode_on_worker(
    embed_json: str, spec: ModelSpec, texts: list[str], batch_size: int
) -> Embeddings:
    """Runs on a Dask worker: the worker's embedder (loaded once), encoding ``texts``."""
    key = f"{embed_json}|{spec.fingerprint}"
    with _WORKER_LOCK:
        embedder = _WORKER_EMBEDDERS.get(key)
        if embedder is None:
            embedder = OneThreadEmbedder(
                load_embedder(EmbedSettings.model_validate_json(embed_json), spec)
            )
            _WORKER_EMBEDDERS[key] = embedder
    return embedder.embed(texts, batch_size)


class ClusterEmbedder:
    """An Embedder whose encoding runs on the Dask workers that offer ``resources``
    (the GPU machines); the coordinator only sends texts and receives vectors."""

    def __init__(
        self, client: Any, settings: Settings, spec: ModelSpec, resources: dict[str, float]
    ) -> None:
        self.client = client
        self.spec = spec
        self.resources = dict(resources)
        self.embed_json = settings.embed.model_dump_json()
        self.batches = 0

    @property
    def has_sparse(self) -> bool:
        return self.spec.backend == "bge-m3"

    def tokenizer(self) -> Any:
        raise NotImplementedError("chunking uses the parse workers' tokenizer")

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        self.batches += 1
        future = self.client.submit(
            _encode_on_worker,
            self.embed_json,
            self.spec,
            list(texts),
            batch_size,
            resources=self.resources or None,
            pure=False,
        )
        out: Embeddings = future.result()
        return out


def _prefect_api_url() -> str | None:
    """The API the flow reports to, so workers report there too (not to their own
    ephemeral server)."""
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        return str(configured)
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    return str(server.api_url) if server.running else None


@contextlib.contextmanager
def dask_task_runner(run: RunSettings) -> Iterator[Any]:
    """An entered DaskTaskRunner; a LocalCluster is closed when the block ends."""
    try:
        import dask
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        from common.errors import ConfigurationError

        raise ConfigurationError(
            "run.task_runner='dask' needs prefect-dask (pip install prefect-dask)"
        ) from exc
    if run.dask_address:
        runner = DaskTaskRunner(address=run.dask_address)
    else:
        # Parser children are spawned from the worker processes, which Dask makes
        # daemonic (daemons may not have children) unless told otherwise.
        dask.config.set({"distributed.worker.daemon": False})
        env = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        url = _prefect_api_url()
        if url:
            env["PREFECT_API_URL"] = url
        for name in ("PREFECT_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            if name in os.environ:
                env[name] = os.environ[name]
        runner = DaskTaskRunner(
            cluster_kwargs={
                "n_workers": run.dask_workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
                "env": env,
            }
        )
    with runner:
        yield runner
