"""Read side: search the active table of a collection (what a RAG service calls)."""

from __future__ import annotations

import json
from typing import Any

from corpusflow.errors import ConfigurationError
from corpusflow.settings import Settings
from embedding import ModelSpec, load_embedder
from storage import Store
from storage.store import sql_in

_COLUMNS = [
    "_distance",
    "chunk_id",
    "doc_id",
    "parent_id",
    "text",
    "context",
    "heading_path",
    "page_numbers",
    "path",
    "title",
]


def active_spec(store: Store) -> tuple[dict[str, Any], ModelSpec]:
    active = store.active()
    if active is None:
        raise ConfigurationError(
            f"collection {store.collection!r} in {store.uri} has no active table; run `corpusflow ingest` first"
        )
    fields = json.loads(active["model_json"])
    fields.pop("fingerprint", None)
    return active, ModelSpec(**fields)


def search(query: str, settings: Settings, k: int = 5) -> list[dict[str, Any]]:
    """Top-k child chunks by dense similarity, each with its parent section text."""
    store = Store(settings.storage.db, settings.storage.collection)
    active, spec = active_spec(store)
    embedder = load_embedder(settings.embed, spec)
    vector = embedder.embed([query], batch_size=1).dense[0]
    table = store.db.open_table(active["chunk_table"])
    hits = (
        table.search(vector.tolist(), vector_column_name="vector")
        .distance_type("cosine")  # type: ignore[attr-defined]
        .select(_COLUMNS)
        .limit(k)
        .to_list()
    )
    parents: dict[str, str] = {}
    parent_ids = [h["parent_id"] for h in hits if h.get("parent_id")]
    if parent_ids and store.exists(active["parent_table"]):
        rows = (
            store.db.open_table(active["parent_table"])
            .search()
            .where(sql_in("parent_id", parent_ids))
            .select(["parent_id", "text"])
            .limit(len(parent_ids))
            .to_list()
        )
        parents = {r["parent_id"]: r["text"] for r in rows}
    return [
        {
            "rank": i + 1,
            "score": round(1.0 - float(h["_distance"]), 4),
            "path": h["path"],
            "title": h["title"],
            "heading_path": list(h["heading_path"] or []),
            "page_numbers": list(h["page_numbers"] or []),
            "text": h["text"],
            "context": h["context"],
            "parent_text": parents.get(h["parent_id"], ""),
            "chunk_id": h["chunk_id"],
            "doc_id": h["doc_id"],
        }
        for i, h in enumerate(hits)
    ]


def status(settings: Settings) -> dict[str, Any]:
    store = Store(settings.storage.db, settings.storage.collection)
    active = store.active()
    ledger = store.ledger(store.suffix_of(active["chunk_table"])) if active else {}
    by_status: dict[str, int] = {}
    for row in ledger.values():
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    out: dict[str, Any] = {
        "db": settings.storage.db,
        "collection": settings.storage.collection,
        "documents": by_status,
        "active_table": None,
        "model": None,
        "table_version": None,
        "rows": None,
        "last_run": None,
    }
    if active is not None:
        table = store.db.open_table(active["chunk_table"])
        model = json.loads(active["model_json"])
        out.update(
            active_table=active["chunk_table"],
            previous_table=active["previous_chunk_table"],
            model={k: model.get(k) for k in ("model_id", "fingerprint", "dim", "max_length")},
            table_version=int(table.version),
            rows=int(table.count_rows()),
        )
    out["tables"] = store.model_tables()
    run = store.last_run()
    if run is not None:
        report = json.loads(run["report_json"])
        out["last_run"] = {
            "run_id": run["run_id"],
            "kind": run["kind"],
            "finished_at": run["finished_at"].isoformat(),
            "status": run["status"],
            **{
                k: report.get(k)
                for k in (
                    "new",
                    "changed",
                    "unchanged",
                    "deleted",
                    "failed",
                    "chunks_written",
                    "elapsed_s",
                )
            },
        }
    failed = [
        {
            "path": r["path"],
            "status": r["status"],
            "category": r["error_category"],
            "message": r["error_message"],
        }
        for r in ledger.values()
        if r["status"] in ("failed", "quarantined")
    ]
    out["failed_documents"] = sorted(failed, key=lambda r: r["path"])
    return out
