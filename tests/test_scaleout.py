"""Scale-out: parse tasks on a Dask LocalCluster give the same tables as the default runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corpusflow.settings import Settings, load_settings
from flows.refresh import refresh_flow
from storage import Store
from tests.helpers.invariants import assert_nothing_lost

pytestmark = pytest.mark.usefixtures("prefect_server")


def _settings(db: Path, **run: Any) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False, **run}})


def _rows(db: Path) -> dict[str, tuple[Any, ...]]:
    store = Store(str(db))
    active = store.active()
    assert active is not None
    table = store.read_columns(
        active["chunk_table"], ["chunk_id", "doc_id", "embed_text", "heading_path", "vector"]
    )
    return {
        r["chunk_id"]: (r["doc_id"], r["embed_text"], tuple(r["heading_path"] or ()), r["vector"])
        for r in table.to_pylist()
    }


def _ledger(db: Path) -> dict[str, tuple[Any, ...]]:
    store = Store(str(db))
    active = store.active()
    assert active is not None
    rows = store.ledger(store.suffix_of(active["chunk_table"])).values()
    return {r["path"]: (r["status"], r["content_sha256"], r["chunk_count"]) for r in rows}


def test_dask_runner_builds_the_same_tables(corpus: Path, tmp_path: Path) -> None:
    threads_db, dask_db = tmp_path / "threads", tmp_path / "dask"
    by_threads = refresh_flow(str(corpus), _settings(threads_db).model_dump_json())
    dask_settings = _settings(dask_db, task_runner="dask", dask_workers=2)
    by_dask = refresh_flow(str(corpus), dask_settings.model_dump_json())
    assert by_dask["new"] == by_threads["new"] == 7
    assert by_dask["failed"] == by_threads["failed"] == 0
    assert by_dask["chunks_written"] == by_threads["chunks_written"]
    a, b = _rows(threads_db), _rows(dask_db)
    assert a.keys() == b.keys()
    for chunk_id, (doc, text, headings, vector) in a.items():
        assert b[chunk_id][:3] == (doc, text, headings)
        assert b[chunk_id][3] == pytest.approx(vector, abs=1e-5)
    assert _ledger(threads_db) == _ledger(dask_db)
    assert_nothing_lost(dask_settings, str(corpus))
