"""Every Lance table of one collection, behind one small facade.

Tables (``<collection>__<kind>``), each owned by one role:
- ``store.ledger`` (storage.ledger): ``documents__<model>``, the document ledger of that
  model's chunk table, one row per source file (each index build has its own, so a
  rebuild beside the live table never disturbs the live table's bookkeeping);
- ``store.caches`` (storage.caches): ``parse_cache`` (ParsedDocument JSON by content
  sha256 and parser fingerprint), ``context_cache`` (LLM contexts by their input) and
  ``embed_cache__<model>`` (that model's embeddings by hash of the embedded text: the
  checkpoint of an interrupted run, and what spares a refresh re-embedding unchanged
  chunks);
- ``store.chunks`` (storage.chunks): ``chunks__<model>`` / ``parents__<model>``, chunk
  and parent rows per embedding model fingerprint (a model change means new tables,
  never mixed vectors);
- ``store.pointer`` (storage.pointer): ``pointer``, which chunk table readers use (one
  row, overwritten atomically), its rollback target and a checked refresh's pin;
- ``store.runs`` (storage.pointer): ``runs``, one row per finished run, and
  ``erasures``, one receipt per ``corpusflow forget`` (storage.erasure).

The facade itself is the shared table handle (storage.tables.Tables: names, open,
reads, versions) plus the three operations that span roles: ``validate``,
``model_tables`` and ``drop_model_tables``.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from common.settings import StorageSettings
from storage.caches import Caches, ContextCacheTable, EmbeddingCache
from storage.chunks import ChunkTables
from storage.ledger import Ledger
from storage.pointer import PointerTable, RunLog
from storage.records import DocStatus
from storage.tables import Tables, read_table

__all__ = ["ContextCacheTable", "EmbeddingCache", "Store"]


class Store(Tables):
    """One collection's tables: the shared handle and its five roles."""

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger(self)

    @cached_property
    def caches(self) -> Caches:
        return Caches(self)

    @cached_property
    def chunks(self) -> ChunkTables:
        return ChunkTables(self)

    @cached_property
    def pointer(self) -> PointerTable:
        return PointerTable(self, self.chunks)

    @cached_property
    def runs(self) -> RunLog:
        return RunLog(self)

    @classmethod
    def from_settings(cls, storage: StorageSettings) -> Store:
        return cls(
            storage.db,
            storage.collection,
            storage.storage_options,
            storage.cache_mib,
            storage.metadata_cache_mib,
        )

    def validate(self, suffix: str, dim: int) -> list[str]:
        """Problems that make a chunk table unfit to serve (empty list = valid)."""
        name = self.chunks.name(suffix)
        table = self.find(name)
        if table is None:
            return [f"table {name} does not exist"]
        problems = []
        field = table.schema.field("vector")
        if getattr(field.type, "list_size", None) != dim:
            problems.append(f"vector dimension {getattr(field.type, 'list_size', None)} != {dim}")
        cols = read_table(table, ["chunk_id", "doc_id"])
        ids = cols.column("chunk_id").to_pylist()
        if len(ids) != len(set(ids)):
            problems.append(f"{len(ids) - len(set(ids))} duplicate chunk ids")
        counts: dict[str, int] = {}
        for d in cols.column("doc_id").to_pylist():
            counts[d] = counts.get(d, 0) + 1
        # A held document keeps the chunks of its previous indexed bytes.
        indexed = {
            d: r
            for d, r in self.ledger.all(suffix).items()
            if r.status in (DocStatus.INDEXED, DocStatus.HELD)
        }
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

    def model_tables(self) -> list[dict[str, Any]]:
        """Every chunk table of the collection with rows, version, tags and role."""
        active = self.pointer.active()
        roles = {}
        if active is not None:
            roles = {active.chunk_table: "active", active.previous_chunk_table: "previous"}
        out = []
        for name in self.chunks.names():
            table = self.open(name)
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
        """Drop a model's chunk, parent, staging, embedding-cache and ledger tables (never
        the active one's)."""
        suffix = self.chunks.suffix_of(suffix_or_table)
        chunk_table = self.chunks.name(suffix)
        active = self.pointer.active()
        if active is not None and chunk_table == active.chunk_table:
            raise ValueError("refusing to drop the active table; switch or roll back first")
        names = (
            chunk_table,
            self.chunks.parent_name(suffix),
            self.name("staging", suffix),  # the checkpoint of versions before the cache
            self.name("embed_cache", suffix),
            self.ledger.name(suffix),
        )
        dropped = [name for name in names if self.drop(name)]
        if active is not None and chunk_table == active.previous_chunk_table:
            self.pointer.forget_previous()
        return dropped
