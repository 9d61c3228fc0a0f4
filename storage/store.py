"""Every Lance table of one collection, behind one small class.

Tables (``<collection>__<kind>``):
- ``documents__<model>``: the document ledger of that model's chunk table, one
  row per source file (each index build has its own, so a rebuild beside the
  live table never disturbs the live table's bookkeeping);
- ``parse_cache``: ParsedDocument JSON keyed by (content sha256, parser fingerprint);
- ``chunks__<model>`` / ``parents__<model>``: chunk and parent rows per embedding
  model fingerprint (a model change means new tables, never mixed vectors);
- ``embed_cache__<model>``: that model's embeddings by hash of the embedded text, the
  checkpoint of an interrupted run and the cache that spares a refresh re-embedding
  unchanged chunks;
- ``pointer``: which chunk table readers use (one row, overwritten atomically);
- ``runs``: one row per finished run;
- ``erasures``: one receipt per ``corpusflow forget`` (storage.erasure).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from corpusflow.settings import StorageSettings
from storage.records import DocStatus, LedgerRow, Pointer, RunRecord
from storage.schema import (
    CONTEXT_CACHE_SCHEMA,
    ERASURES_SCHEMA,
    LEDGER_SCHEMA,
    PARENT_SCHEMA,
    PARSE_CACHE_SCHEMA,
    POINTER_SCHEMA,
    RUNS_SCHEMA,
    chunk_schema,
    embed_cache_schema,
)

_IN_BATCH = 500


def add_missing_columns(table: Any, schema: pa.Schema) -> list[str]:
    """Add the columns of ``schema`` an older table lacks (as nulls): a table written
    before a column existed (``lang``) takes new rows without a rebuild; the chunker
    version that came with the column re-chunks its documents, which fills it."""
    have = set(table.schema.names)
    missing = [f for f in schema if f.name not in have]
    if missing:
        table.add_columns(missing)
    return [f.name for f in missing]


def now() -> datetime:
    return datetime.now(UTC)


def sql_in(column: str, values: Iterable[str]) -> str:
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"{column} IN ({quoted})"


def _batches(values: Sequence[str], size: int = _IN_BATCH) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def read_table(table: Any, columns: Sequence[str], where: str | None = None) -> pa.Table:
    """Selected columns of every (matching) row of an open table (at its checked-out
    version), as Arrow."""
    query = table.search().select(list(columns))
    if where:
        query = query.where(where)
    return query.limit(max(int(table.count_rows()), 1)).to_arrow().select(list(columns))


class Store:
    """The Lance tables of one collection in one LanceDB database."""

    def __init__(
        self,
        uri: str,
        collection: str = "default",
        storage_options: dict[str, str] | None = None,
        cache_mib: int = 256,
    ) -> None:
        import lancedb

        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.collection = collection
        # Parse and context caches are written from concurrent task threads; Lance
        # resolves concurrent commits by retrying, which can give up under contention.
        self._write_lock = threading.Lock()
        # A zero consistency interval: every read sees other processes' commits.
        # Bounded caches: Lance keeps every version and fragment it has read, and a run
        # commits the parse cache once per document, so unbounded caches grow with the run.
        cache = cache_mib * 2**20
        self.db = lancedb.connect(
            uri,
            read_consistency_interval=timedelta(0),
            storage_options=self.storage_options or None,
            session=lancedb.Session(index_cache_size_bytes=cache, metadata_cache_size_bytes=cache),
        )

    @classmethod
    def from_settings(cls, storage: StorageSettings) -> Store:
        return cls(storage.db, storage.collection, storage.storage_options, storage.cache_mib)

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
        return read_table(self.db.open_table(name), columns, where)

    def rows_of_documents(
        self, name: str, doc_ids: Sequence[str], columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The rows of ``doc_ids`` in table ``name`` (selected columns)."""
        out: list[dict[str, Any]] = []
        for part in _batches(list(doc_ids)):
            out.extend(self.read_columns(name, columns, sql_in("doc_id", part)).to_pylist())
        return out

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
    def ledger_name(self, suffix: str) -> str:
        return self.name("documents", suffix)

    def suffix_of(self, chunk_table: str) -> str:
        return chunk_table.removeprefix(self.name("chunks") + "__")

    def ledger(self, suffix: str) -> dict[str, LedgerRow]:
        """The document ledger of one model's chunk table (one ledger per index build)."""
        name = self.ledger_name(suffix)
        if not self.exists(name):
            return {}
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return {r["doc_id"]: LedgerRow.from_row(r) for r in rows}

    def ledger_table(self, suffix: str, columns: Sequence[str]) -> pa.Table:
        """Selected ledger columns of every document, as Arrow (empty when no ledger yet).
        The planner reads this instead of ``ledger()``: a million rows of a few columns
        are tens of MiB in Arrow and about 2 GiB as Python dicts."""
        name = self.ledger_name(suffix)
        schema = pa.schema([LEDGER_SCHEMA.field(c) for c in columns])
        if not self.exists(name):
            return schema.empty_table()
        present = [c for c in columns if c in self.db.open_table(name).schema.names]
        data = self.read_columns(name, present)
        for c in columns:  # a ledger written before a column was added (e.g. etag)
            if c not in data.schema.names:
                field = schema.field(c)
                data = data.append_column(field, pa.nulls(data.num_rows, field.type))
        return data.select(list(columns)).cast(schema)

    def ledger_rows(self, suffix: str, doc_ids: Sequence[str]) -> dict[str, LedgerRow]:
        """Whole ledger rows of ``doc_ids`` (those present), by doc_id."""
        name = self.ledger_name(suffix)
        if not doc_ids or not self.exists(name):
            return {}
        names = self.db.open_table(name).schema.names
        rows = self.rows_of_documents(name, doc_ids, names)
        return {r["doc_id"]: LedgerRow.from_row(r) for r in rows}

    def upsert_ledger(self, suffix: str, rows: Sequence[LedgerRow]) -> None:
        if not rows:
            return
        stamp = now()
        full = [r.to_row() | {"updated_at": stamp} for r in rows]
        table = self._open_or_create(self.ledger_name(suffix), LEDGER_SCHEMA)
        missing = [f for f in LEDGER_SCHEMA if f.name not in table.schema.names]
        if missing:  # a ledger written before a column was added (e.g. etag): add it, null
            table.add_columns(missing)
        data = pa.Table.from_pylist(full, schema=LEDGER_SCHEMA)
        (
            table.merge_insert("doc_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data)
        )

    # -- parse cache ----------------------------------------------------------
    def tidy_caches(self, max_fragments: int = 16) -> dict[str, str]:
        """Keep cache lookups cheap as the caches grow.

        Every cached document is its own commit and so its own fragment, and a lookup
        opens every fragment: at 1,000 documents a reindex spent most of its time
        there. A BTREE index on the key, and compaction once fragmented, fix that.
        """
        from lancedb.index import BTree

        done: dict[str, str] = {}
        names = [self.name("parse_cache"), self.name("context_cache")] + [
            n for n in self.table_names() if n.startswith(self.name("embed_cache") + "__")
        ]
        for name in names:
            kind = name.removeprefix(self.collection + "__")
            key = "embed_key" if kind.startswith("embed_cache") else "cache_key"
            if not self.exists(name):
                continue
            table = self.db.open_table(name)
            with self._write_lock:
                if not any(key in idx.columns for idx in table.list_indices()):
                    table.create_index(key, config=BTree())
                    done[kind] = "indexed"
                stats: Any = table.stats()  # a dict at run time, whatever the stub says
                if stats["fragment_stats"]["num_fragments"] > max_fragments:
                    table.optimize()  # compaction, and the index takes in the new rows
                    done[kind] = "compacted"
        return done

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
        with self._write_lock:
            table = self._open_or_create(self.name("parse_cache"), PARSE_CACHE_SCHEMA)
            table.merge_insert("cache_key").when_not_matched_insert_all().execute(data)

    # -- context cache ------------------------------------------------------------
    def get_contexts(self, keys: Sequence[str]) -> dict[str, str]:
        name = self.name("context_cache")
        if not keys or not self.exists(name):
            return {}
        out: dict[str, str] = {}
        for part in _batches(list(dict.fromkeys(keys))):
            rows = self.read_columns(name, ["cache_key", "context"], sql_in("cache_key", part))
            out.update(
                zip(
                    rows.column("cache_key").to_pylist(),
                    rows.column("context").to_pylist(),
                    strict=True,
                )
            )
        return out

    def put_contexts(self, items: Mapping[str, str]) -> None:
        if not items:
            return
        data = pa.Table.from_pylist(
            [{"cache_key": k, "context": v, "created_at": now()} for k, v in items.items()],
            schema=CONTEXT_CACHE_SCHEMA,
        )
        with self._write_lock:
            table = self._open_or_create(self.name("context_cache"), CONTEXT_CACHE_SCHEMA)
            table.merge_insert("cache_key").when_not_matched_insert_all().execute(data)

    def context_cache(self) -> ContextCacheTable:
        return ContextCacheTable(self)

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
        add_missing_columns(chunks, chunk_schema(dim))
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
    def active(self) -> Pointer | None:
        name = self.name("pointer")
        if not self.exists(name):
            return None
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return Pointer.from_row(rows[0]) if rows else None

    def pinned(self) -> dict[str, Any] | None:
        """The table versions readers are held on while a checked refresh runs, or None."""
        current = self.active()
        return current.pinned if current else None

    def pin(self, versions: Mapping[str, Any]) -> None:
        """Hold readers on these versions of the active chunk and parent tables (one
        pointer commit) until ``unpin``: a checked refresh writes in place, and readers
        see its result only once its retrieval check has passed."""
        self._rewrite_pointer(json.dumps(dict(versions), sort_keys=True))

    def unpin(self) -> None:
        if self.pinned() is not None:
            self._rewrite_pointer(None)

    def recover_pin(self) -> dict[str, Any] | None:
        """A pin left by a checked refresh that died before its check (whoever holds the
        write lease may call this): its writes were never shown to readers, so the chunk,
        parent and ledger tables go back to the pinned versions and the pin is cleared.
        Returns the pin that was recovered, or None."""
        pin = self.pinned()
        current = self.active()
        if pin is None or current is None:
            return None
        for name, version in (
            (current.chunk_table, pin.get("chunks")),
            (current.parent_table, pin.get("parents")),
            (pin.get("ledger_table"), pin.get("ledger")),
        ):
            if name and version is not None:
                self.restore_version(name, int(version))
        self.unpin()
        return pin

    def version_of(self, name: str) -> int | None:
        return int(self.db.open_table(name).version) if self.exists(name) else None

    def restore_version(self, name: str, version: int | None) -> int | None:
        """Make ``name``'s content that of ``version`` again (Lance restore: a new version
        equal to the old one); ``None`` (a table created since) empties it. The new version."""
        if not self.exists(name):
            return None
        table = self.db.open_table(name)
        if version is None:
            table.delete("true")
        elif int(table.version) != version:
            table.restore(version)
        return int(table.version)

    def _rewrite_pointer(self, pinned_json: str | None) -> None:
        current = self.active()
        if current is None:
            raise LookupError(f"collection {self.collection!r} has no active table")
        self._write_pointer(
            current.chunk_table,
            current.parent_table,
            current.model_json,
            current.previous_chunk_table,
            current.previous_parent_table,
            current.previous_model_json,
            pinned_json,
        )

    def set_active(self, suffix: str, model: Mapping[str, Any]) -> None:
        """Point readers at the chunk table of ``suffix`` in one atomic commit.

        The table it replaces becomes the rollback target.
        """
        current = self.active()
        chunk_table = self.chunk_table_name(suffix)
        previous: tuple[str | None, str | None, str | None] = (None, None, None)
        if current is not None and current.chunk_table == chunk_table:
            previous = (
                current.previous_chunk_table,
                current.previous_parent_table,
                current.previous_model_json,
            )
        elif current is not None:
            previous = (current.chunk_table, current.parent_table, current.model_json)
        self._write_pointer(
            chunk_table, self.parent_table_name(suffix), json.dumps(dict(model)), *previous
        )

    def rollback(self) -> Pointer:
        """Swap the active table with the previous one; returns the new pointer."""
        current = self.active()
        if current is None or not current.previous_chunk_table:
            raise LookupError(
                f"collection {self.collection!r} has no previous table to roll back to"
            )
        if not self.exists(current.previous_chunk_table):
            raise LookupError(f"previous table {current.previous_chunk_table} no longer exists")
        self._write_pointer(
            current.previous_chunk_table,
            current.previous_parent_table
            or self.parent_table_name(self.suffix_of(current.previous_chunk_table)),
            current.previous_model_json or "{}",
            current.chunk_table,
            current.parent_table,
            current.model_json,
        )
        active = self.active()
        assert active is not None
        return active

    def forget_previous(self) -> None:
        current = self.active()
        if current is not None:
            self._write_pointer(
                current.chunk_table,
                current.parent_table,
                current.model_json,
                None,
                None,
                None,
                current.pinned_json,
            )

    def _write_pointer(
        self,
        chunk_table: str,
        parent_table: str,
        model_json: str,
        prev_chunk: str | None,
        prev_parent: str | None,
        prev_model: str | None,
        pinned_json: str | None = None,
    ) -> None:
        row = {
            "collection": self.collection,
            "chunk_table": chunk_table,
            "parent_table": parent_table,
            "model_fingerprint": json.loads(model_json).get("fingerprint"),
            "model_json": model_json,
            "previous_chunk_table": prev_chunk,
            "previous_parent_table": prev_parent,
            "previous_model_json": prev_model,
            "pinned_json": pinned_json,
            "updated_at": now(),
        }
        data = pa.Table.from_pylist([row], schema=POINTER_SCHEMA)
        self._open_or_create(self.name("pointer"), POINTER_SCHEMA).add(data, mode="overwrite")

    def model_tables(self) -> list[dict[str, Any]]:
        """Every chunk table of the collection with rows, version, tags and role."""
        active = self.active()
        roles = {}
        if active is not None:
            roles = {active.chunk_table: "active", active.previous_chunk_table: "previous"}
        out = []
        for name in sorted(self.table_names()):
            if not name.startswith(self.name("chunks") + "__"):
                continue
            table = self.db.open_table(name)
            tags = table.tags.list()
            out.append(
                {
                    "table": name,
                    "rows": int(table.count_rows()),
                    "version": int(table.version),
                    "tags": {t: int(v["version"]) for t, v in sorted(tags.items())},
                    "role": roles.get(name, ""),
                }
            )
        return out

    def drop_model_tables(self, suffix_or_table: str) -> list[str]:
        """Drop a model's chunk, parent and staging tables (never the active one)."""
        prefix = self.name("chunks") + "__"
        suffix = suffix_or_table.removeprefix(prefix)
        active = self.active()
        if active is not None and self.chunk_table_name(suffix) == active.chunk_table:
            raise ValueError("refusing to drop the active table; switch or roll back first")
        dropped = []
        for name in (
            self.chunk_table_name(suffix),
            self.parent_table_name(suffix),
            self.name("staging", suffix),  # the checkpoint of versions before the cache
            self.name("embed_cache", suffix),
            self.ledger_name(suffix),
        ):
            if self.exists(name):
                self.db.drop_table(name)
                dropped.append(name)
        if active is not None and self.chunk_table_name(suffix) == active.previous_chunk_table:
            self.forget_previous()
        return dropped

    def validate(self, suffix: str, dim: int) -> list[str]:
        """Problems that make a chunk table unfit to serve (empty list = valid)."""
        name = self.chunk_table_name(suffix)
        if not self.exists(name):
            return [f"table {name} does not exist"]
        problems = []
        table = self.db.open_table(name)
        field = table.schema.field("vector")
        if getattr(field.type, "list_size", None) != dim:
            problems.append(f"vector dimension {getattr(field.type, 'list_size', None)} != {dim}")
        cols = self.read_columns(name, ["chunk_id", "doc_id"])
        ids = cols.column("chunk_id").to_pylist()
        if len(ids) != len(set(ids)):
            problems.append(f"{len(ids) - len(set(ids))} duplicate chunk ids")
        counts: dict[str, int] = {}
        for d in cols.column("doc_id").to_pylist():
            counts[d] = counts.get(d, 0) + 1
        indexed = {d: r for d, r in self.ledger(suffix).items() if r.status == DocStatus.INDEXED}
        expected = sum(r.chunk_count for r in indexed.values())
        if len(ids) != expected:
            problems.append(f"{len(ids)} rows but the ledger expects {expected}")
        missing = [r.path for d, r in indexed.items() if counts.get(d, 0) != r.chunk_count]
        if missing:
            problems.append(f"{len(missing)} documents with wrong chunk counts, e.g. {missing[:3]}")
        stray = set(counts) - set(indexed)
        if stray:
            problems.append(f"{len(stray)} documents in the table are not indexed in the ledger")
        return problems

    # -- runs ------------------------------------------------------------------
    def record_run(self, run: RunRecord) -> None:
        table = self._open_or_create(self.name("runs"), RUNS_SCHEMA)
        table.add(pa.Table.from_pylist([run.to_row()], schema=RUNS_SCHEMA))

    def last_run(self) -> RunRecord | None:
        name = self.name("runs")
        if not self.exists(name):
            return None
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return RunRecord.from_row(max(rows, key=lambda r: r["finished_at"])) if rows else None

    # -- erasures (storage.erasure) ---------------------------------------------------
    def tombstones(self) -> dict[str, str]:
        """{doc_id: path} of documents forgotten in any ledger of the collection (status
        ``forgotten``): the planner keeps them out while their files are in the source."""
        out: dict[str, str] = {}
        prefix = self.name("documents") + "__"
        for name in self.table_names():
            if name.startswith(prefix):
                rows = self.read_columns(name, ["doc_id", "path"], "status = 'forgotten'")
                out.update(
                    zip(
                        rows.column("doc_id").to_pylist(),
                        rows.column("path").to_pylist(),
                        strict=True,
                    )
                )
        return out

    def record_erasure(self, row: Mapping[str, Any]) -> None:
        table = self._open_or_create(self.name("erasures"), ERASURES_SCHEMA)
        table.add(pa.Table.from_pylist([dict(row)], schema=ERASURES_SCHEMA))

    def erasures(self) -> list[dict[str, Any]]:
        """Every erasure receipt of the collection, oldest first."""
        name = self.name("erasures")
        if not self.exists(name):
            return []
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return sorted(rows, key=lambda r: r["started_at"])

    def erasure_key(self) -> str | None:
        """The key of the collection's window hashes (the first receipt's), so ``verify``
        hashes the database once for all receipts."""
        keys = [r["window_key"] for r in self.erasures() if r["window_key"]]
        return keys[0] if keys else None

    # -- embedding cache -----------------------------------------------------------
    def embedding_cache(self, suffix: str, dim: int) -> EmbeddingCache:
        return EmbeddingCache(self, self.name("embed_cache", suffix), dim)

    def drop(self, name: str) -> None:
        if self.exists(name):
            self.db.drop_table(name)


class ContextCacheTable:
    """chunking.llm_context.ContextCache on the collection's context_cache table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        return self.store.get_contexts(keys)

    def put_many(self, items: Mapping[str, str]) -> None:
        self.store.put_contexts(items)


class EmbeddingCache:
    """VectorCheckpoint and cross-run cache of one model's embeddings, keyed by the hash
    of the exact text embedded (``embed_key``). Saved as each group of batches finishes,
    so it is also the resume point of an interrupted run; kept across runs, so a refresh
    embeds only texts this model has never embedded. The table name carries the model's
    fingerprint: another model never reads these entries. Maintenance compacts it and
    evicts keys no chunk row of the model references (``storage.maintenance``)."""

    def __init__(self, store: Store, name: str, dim: int) -> None:
        self.store = store
        self.name = name
        self.dim = dim

    def load(self, keys: Sequence[str]) -> dict[str, tuple[np.ndarray, dict[int, float] | None]]:
        if not keys or not self.store.exists(self.name):
            return {}
        table = self.store.db.open_table(self.name)
        out: dict[str, tuple[np.ndarray, dict[int, float] | None]] = {}
        for part in _batches(list(dict.fromkeys(keys))):
            arrow = table.search().where(sql_in("embed_key", part)).limit(len(part) * 2).to_arrow()
            for row in arrow.to_pylist():
                sparse = None
                if row["sparse_ids"] is not None:
                    sparse = dict(zip(row["sparse_ids"], row["sparse_weights"], strict=True))
                out[row["embed_key"]] = (np.asarray(row["vector"], dtype=np.float32), sparse)
        return out

    def save(
        self, keys: Sequence[str], dense: np.ndarray, sparse: list[dict[int, float]] | None
    ) -> None:
        schema = embed_cache_schema(self.dim)
        created = now()
        rows = [
            {
                "embed_key": key,
                "vector": dense[i].astype(np.float32).tolist(),
                "sparse_ids": list(sparse[i].keys()) if sparse is not None else None,
                "sparse_weights": list(sparse[i].values()) if sparse is not None else None,
                "created_at": created,
            }
            for i, key in enumerate(keys)
        ]
        data = pa.Table.from_pylist(rows, schema=schema)
        # Only keys ``load`` did not find are saved (under the collection's write lease),
        # so a plain append: no join against a cache that grows with the corpus.
        with self.store._write_lock:
            self.store._open_or_create(self.name, schema).add(data)

    def count(self) -> int:
        if not self.store.exists(self.name):
            return 0
        return int(self.store.db.open_table(self.name).count_rows())
