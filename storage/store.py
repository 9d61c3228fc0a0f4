"""Every Lance table of one collection, behind one small class.

Tables (``<collection>__<kind>``):
- ``documents``: the document ledger, one row per source file;
- ``parse_cache``: ParsedDocument JSON keyed by (content sha256, parser fingerprint);
- ``chunks__<model>`` / ``parents__<model>``: chunk and parent rows per embedding
  model fingerprint (a model change means new tables, never mixed vectors);
- ``staging__<model>``: the embedding checkpoint, dropped once committed;
- ``pointer``: which chunk table readers use (one row, overwritten atomically);
- ``runs``: one row per finished run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from storage.schema import (
    LEDGER_SCHEMA,
    PARENT_SCHEMA,
    PARSE_CACHE_SCHEMA,
    POINTER_SCHEMA,
    RUNS_SCHEMA,
    chunk_schema,
    staging_schema,
)

_IN_BATCH = 500


def now() -> datetime:
    return datetime.now(UTC)


def sql_in(column: str, values: Iterable[str]) -> str:
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"{column} IN ({quoted})"


def _batches(values: Sequence[str], size: int = _IN_BATCH) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class Store:
    """The Lance tables of one collection in one LanceDB database."""

    def __init__(self, uri: str, collection: str = "default") -> None:
        import lancedb

        self.uri = uri
        self.collection = collection
        # A zero consistency interval: every read sees other processes' commits.
        self.db = lancedb.connect(uri, read_consistency_interval=timedelta(0))

    # -- naming ---------------------------------------------------------------
    def name(self, kind: str, suffix: str = "") -> str:
        return f"{self.collection}__{kind}" + (f"__{suffix}" if suffix else "")

    def exists(self, name: str) -> bool:
        try:
            self.db.open_table(name)
        except ValueError:
            return False
        return True

    def _open_or_create(self, name: str, schema: pa.Schema) -> Any:
        if self.exists(name):
            return self.db.open_table(name)
        try:
            return self.db.create_table(name, schema=schema)
        except (ValueError, OSError):  # created meanwhile by another handle
            return self.db.open_table(name)

    def read_columns(self, name: str, columns: Sequence[str], where: str | None = None) -> pa.Table:
        """Selected columns of every (matching) row of a table, as Arrow."""
        table = self.db.open_table(name)
        query = table.search().select(list(columns))
        if where:
            query = query.where(where)
        return query.limit(max(int(table.count_rows()), 1)).to_arrow().select(list(columns))

    def table_names(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            resp = self.db.list_tables(page_token=token)
            names.extend(resp.tables)
            token = resp.page_token
            if not token:
                return [n for n in names if n.startswith(f"{self.collection}__")]

    # -- ledger ---------------------------------------------------------------
    def ledger(self) -> dict[str, dict[str, Any]]:
        name = self.name("documents")
        if not self.exists(name):
            return {}
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return {r["doc_id"]: r for r in rows}

    def upsert_ledger(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        full = [
            {f.name: r.get(f.name) for f in LEDGER_SCHEMA} | {"updated_at": now()} for r in rows
        ]
        table = self._open_or_create(self.name("documents"), LEDGER_SCHEMA)
        data = pa.Table.from_pylist(full, schema=LEDGER_SCHEMA)
        (
            table.merge_insert("doc_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data)
        )

    # -- parse cache ----------------------------------------------------------
    def get_parsed(self, sha256: str, parser_fp: str) -> str | None:
        name = self.name("parse_cache")
        if not self.exists(name):
            return None
        key = f"{sha256}:{parser_fp}"
        rows = (
            self.db.open_table(name)
            .search()
            .where(f"cache_key = '{key}'")
            .select(["parsed_json"])
            .limit(1)
            .to_list()
        )
        return rows[0]["parsed_json"] if rows else None

    def put_parsed(self, items: Sequence[tuple[str, str, str]]) -> None:
        """items: (sha256, parser fingerprint, ParsedDocument JSON)."""
        if not items:
            return
        table = self._open_or_create(self.name("parse_cache"), PARSE_CACHE_SCHEMA)
        data = pa.Table.from_pylist(
            [
                {
                    "cache_key": f"{sha}:{fp}",
                    "content_sha256": sha,
                    "parser_fingerprint": fp,
                    "parsed_json": js,
                    "created_at": now(),
                }
                for sha, fp, js in items
            ],
            schema=PARSE_CACHE_SCHEMA,
        )
        table.merge_insert("cache_key").when_not_matched_insert_all().execute(data)

    # -- chunk and parent tables ----------------------------------------------
    def chunk_table_name(self, suffix: str) -> str:
        return self.name("chunks", suffix)

    def parent_table_name(self, suffix: str) -> str:
        return self.name("parents", suffix)

    def replace_documents(
        self,
        suffix: str,
        dim: int,
        doc_ids: Sequence[str],
        chunk_rows: list[dict[str, Any]],
        parent_rows: list[dict[str, Any]],
    ) -> int:
        """Replace the chunks (and parents) of ``doc_ids`` in one commit per table.

        Rows of these documents that are not in the new set are deleted in the
        same merge_insert commit, so a reader sees either the old or the new
        chunks of a document, never none or both. Returns the chunk table version.
        """
        parents = self._open_or_create(self.parent_table_name(suffix), PARENT_SCHEMA)
        chunks = self._open_or_create(self.chunk_table_name(suffix), chunk_schema(dim))
        scope = sql_in("doc_id", doc_ids)
        for table, rows, schema, key in (
            (parents, parent_rows, PARENT_SCHEMA, "parent_id"),
            (chunks, chunk_rows, chunk_schema(dim), "chunk_id"),
        ):
            if rows:
                data = pa.Table.from_pylist(rows, schema=schema)
                (
                    table.merge_insert(key)
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(scope)
                    .execute(data)
                )
            elif doc_ids:
                table.delete(scope)
        return int(chunks.version)

    def delete_documents(self, suffix: str, doc_ids: Sequence[str]) -> None:
        for name in (self.chunk_table_name(suffix), self.parent_table_name(suffix)):
            if self.exists(name) and doc_ids:
                table = self.db.open_table(name)
                for part in _batches(list(doc_ids)):
                    table.delete(sql_in("doc_id", part))

    def chunk_counts(self, suffix: str) -> dict[str, int]:
        name = self.chunk_table_name(suffix)
        if not self.exists(name):
            return {}
        col = self.read_columns(name, ["doc_id"]).column("doc_id")
        counts: dict[str, int] = {}
        for value in col.to_pylist():
            counts[value] = counts.get(value, 0) + 1
        return counts

    def tag_version(self, suffix: str, tag: str) -> int | None:
        name = self.chunk_table_name(suffix)
        if not self.exists(name):
            return None
        table = self.db.open_table(name)
        version = int(table.version)
        try:
            table.tags.create(tag, version)
        except Exception:  # an existing tag of the same name: keep the first
            return version
        return version

    # -- active pointer ----------------------------------------------------------
    def active(self) -> dict[str, Any] | None:
        name = self.name("pointer")
        if not self.exists(name):
            return None
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return rows[0] if rows else None

    def set_active(self, suffix: str, model: Mapping[str, Any]) -> None:
        """Point readers at the chunk table of ``suffix``: one atomic overwrite commit."""
        previous = self.active()
        chunk_table = self.chunk_table_name(suffix)
        prev_table = previous["chunk_table"] if previous else None
        row = {
            "collection": self.collection,
            "chunk_table": chunk_table,
            "parent_table": self.parent_table_name(suffix),
            "model_fingerprint": model.get("fingerprint"),
            "model_json": json.dumps(dict(model)),
            "previous_chunk_table": prev_table
            if prev_table != chunk_table
            else (previous or {}).get("previous_chunk_table"),
            "updated_at": now(),
        }
        data = pa.Table.from_pylist([row], schema=POINTER_SCHEMA)
        name = self.name("pointer")
        if self.exists(name):
            self.db.open_table(name).add(data, mode="overwrite")
        else:
            self._open_or_create(name, POINTER_SCHEMA).add(data, mode="overwrite")

    # -- runs ------------------------------------------------------------------
    def record_run(self, row: Mapping[str, Any]) -> None:
        table = self._open_or_create(self.name("runs"), RUNS_SCHEMA)
        table.add(pa.Table.from_pylist([dict(row)], schema=RUNS_SCHEMA))

    def last_run(self) -> dict[str, Any] | None:
        name = self.name("runs")
        if not self.exists(name):
            return None
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return max(rows, key=lambda r: r["finished_at"]) if rows else None

    # -- embedding checkpoint ------------------------------------------------------
    def checkpoint(self, suffix: str, dim: int) -> StagingCheckpoint:
        return StagingCheckpoint(self, self.name("staging", suffix), dim)

    def drop(self, name: str) -> None:
        if self.exists(name):
            self.db.drop_table(name)


class StagingCheckpoint:
    """VectorCheckpoint on a Lance staging table keyed by chunk id (one per model)."""

    def __init__(self, store: Store, name: str, dim: int) -> None:
        self.store = store
        self.name = name
        self.dim = dim

    def load(self, ids: Sequence[str]) -> dict[str, tuple[np.ndarray, dict[int, float] | None]]:
        if not ids or not self.store.exists(self.name):
            return {}
        table = self.store.db.open_table(self.name)
        out: dict[str, tuple[np.ndarray, dict[int, float] | None]] = {}
        for part in _batches(list(dict.fromkeys(ids))):
            arrow = table.search().where(sql_in("chunk_id", part)).limit(len(part) * 2).to_arrow()
            for row in arrow.to_pylist():
                sparse = None
                if row["sparse_ids"] is not None:
                    sparse = dict(zip(row["sparse_ids"], row["sparse_weights"], strict=True))
                out[row["chunk_id"]] = (np.asarray(row["vector"], dtype=np.float32), sparse)
        return out

    def save(
        self, ids: Sequence[str], dense: np.ndarray, sparse: list[dict[int, float]] | None
    ) -> None:
        schema = staging_schema(self.dim)
        table = self.store._open_or_create(self.name, schema)
        rows = [
            {
                "chunk_id": cid,
                "vector": dense[i].astype(np.float32).tolist(),
                "sparse_ids": list(sparse[i].keys()) if sparse is not None else None,
                "sparse_weights": list(sparse[i].values()) if sparse is not None else None,
            }
            for i, cid in enumerate(ids)
        ]
        table.add(pa.Table.from_pylist(rows, schema=schema))

    def clear(self) -> None:
        self.store.drop(self.name)
