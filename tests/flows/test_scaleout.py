"""Scale-out: parse tasks on a Dask LocalCluster give the same tables as the default runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from flows.refresh import refresh_flow
from storage import Store
from tests.helpers.invariants import assert_nothing_lost

pytestmark = pytest.mark.usefixtures("prefect_server")


def _settings(db: Path, **run: Any) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False, **run}})


def _rows(db: Path) -> dict[str, tuple[Any, ...]]:
    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    table = store.read_columns(
        active.chunk_table, ["chunk_id", "doc_id", "embed_text", "heading_path", "vector"]
    )
    return {
        r["chunk_id"]: (r["doc_id"], r["embed_text"], tuple(r["heading_path"] or ()), r["vector"])
        for r in table.to_pylist()
    }


def _ledger(db: Path) -> dict[str, tuple[Any, ...]]:
    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    rows = store.ledger.all(store.chunks.suffix_of(active.chunk_table)).values()
    return {r.path: (r.status, r.content_sha256, r.chunk_count) for r in rows}


def _assert_same_tables(a_db: Path, b_db: Path) -> None:
    """The same chunks (ids, texts, headings, vectors within float noise) and ledger."""
    a, b = _rows(a_db), _rows(b_db)
    assert a.keys() == b.keys()
    for chunk_id, (doc, text, headings, vector) in a.items():
        assert b[chunk_id][:3] == (doc, text, headings)
        assert b[chunk_id][3] == pytest.approx(vector, abs=1e-5)
    assert _ledger(a_db) == _ledger(b_db)


def test_dask_runner_builds_the_same_tables(corpus: Path, tmp_path: Path) -> None:
    threads_db, dask_db = tmp_path / "threads", tmp_path / "dask"
    by_threads = refresh_flow(str(corpus), _settings(threads_db).model_dump_json())
    dask_settings = _settings(dask_db, task_runner="dask", dask_workers=2)
    by_dask = refresh_flow(str(corpus), dask_settings.model_dump_json())
    assert by_dask["new"] == by_threads["new"] == 7
    assert by_dask["failed"] == by_threads["failed"] == 0
    assert by_dask["chunks_written"] == by_threads["chunks_written"]
    _assert_same_tables(threads_db, dask_db)
    assert_nothing_lost(dask_settings, str(corpus))


def test_parse_and_embed_on_separate_dask_workers(corpus: Path, tmp_path: Path) -> None:
    """A cluster of one parse worker and one embed worker (worker resources, as CPU and
    GPU machines would be): parse tasks only on the first, embedding batches only on the
    second (the model loaded there once), the same tables as the in-process engine."""
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster

    from corpusflow.engine import RefreshEngine
    from flows.scaleout import _prefect_api_url

    local_db, dask_db = tmp_path / "local", tmp_path / "dask"
    local = RefreshEngine(str(corpus), _settings(local_db, task_runner="threads")).refresh()
    env = {"PREFECT_API_URL": _prefect_api_url() or "", "HF_HUB_OFFLINE": "1"}
    dask.config.set({"distributed.worker.daemon": False})
    worker = {"nthreads": 1, "env": env, "dashboard_address": None}
    spec = {
        "cpu": {"cls": Nanny, "options": {**worker, "resources": {"parse": 1}}},
        "gpu": {"cls": Nanny, "options": {**worker, "resources": {"embed": 1}}},
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=spec, scheduler=scheduler) as cluster, Client(cluster) as client:
        settings = _settings(
            dask_db,
            task_runner="dask",
            dask_address=cluster.scheduler_address,
            dask_parse_resources={"parse": 1},
            dask_embed_resources={"embed": 1},
        )
        by_dask = refresh_flow(str(corpus), settings.model_dump_json())

        def loaded() -> tuple[int, int]:
            from corpusflow import kit
            from flows import scaleout

            return len(kit._KITS), len(scaleout._WORKER_EMBEDDERS)

        per_worker = client.run(loaded)
        by_resource = {
            tuple(info["resources"]): per_worker[addr]
            for addr, info in client.scheduler_info()["workers"].items()
        }
    assert by_resource == {("parse",): (1, 0), ("embed",): (0, 1)}
    assert (by_dask["new"], by_dask["failed"]) == (local.new, local.failed) == (7, 0)
    assert by_dask["chunks_written"] == local.chunks_written
    _assert_same_tables(local_db, dask_db)
