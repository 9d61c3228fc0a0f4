"""The LanceDB connection of one collection and what every role shares: table names
(``<collection>__<kind>[__<suffix>]``), open/create, Arrow reads, versions."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

_IN_BATCH = 500
# ``Tables.tidy``'s "remove no version": compaction during a run must not take a version
# a reader or the retrieval check still holds; pruning is maintenance's, by the
# configured retention (storage.maintenance).
KEEP_VERSIONS = timedelta(days=36500)


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


def batches(values: Sequence[str], size: int = _IN_BATCH) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def read_table(table: Any, columns: Sequence[str], where: str | None = None) -> pa.Table:
    """Selected columns of every (matching) row of an open table (at its checked-out
    version), as Arrow."""
    query = table.search().select(list(columns))
    if where:
        query = query.where(where)
    return query.limit(max(int(table.count_rows()), 1)).to_arrow().select(list(columns))


def find_wide(
    table: Any, key: str, keys: Sequence[str], columns: Sequence[str], limit: int
) -> list[dict[str, Any]]:
    """Rows (``key`` plus ``columns``) whose ``key`` is one of ``keys``, at most ``limit``,
    for a table whose ``columns`` are wide (a document's JSON). A filtered read that
    projects a wide column reads it from every fragment no index covers, whether a row
    matches or not: 4 ms a fragment for the parse cache's JSON, 270 ms a lookup once a
    run had added 64 (docs/benchmarks.md, "Cache lookups as a run adds fragments"). So
    the keys are found first, reading the key column alone, and the wide columns are
    taken by row id. A row id a compaction moved in between takes nothing; the rows are
    then read the plain way."""
    if not keys:
        return []
    where = sql_in(key, keys)
    found = table.search().where(where).select([key]).with_row_id(True).limit(limit).to_list()
    if not found:
        return []
    wanted = [key, *(c for c in columns if c != key)]
    rows: list[dict[str, Any]] = (
        table.take_row_ids([r["_rowid"] for r in found]).select(wanted).to_list()
    )
    if sorted(r[key] for r in rows) != sorted(r[key] for r in found):
        rows = table.search().where(where).select(wanted).limit(limit).to_list()
    return [{c: r[c] for c in wanted} for r in rows]


class Tables:
    """The Lance tables of one collection in one LanceDB database."""

    def __init__(
        self,
        uri: str,
        collection: str = "default",
        storage_options: dict[str, str] | None = None,
        cache_mib: int = 256,
        metadata_cache_mib: int = 32,
    ) -> None:
        import lancedb

        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.collection = collection
        # Parse and context caches are written from concurrent task threads; Lance
        # resolves concurrent commits by retrying, which can give up under contention.
        self.write_lock = threading.Lock()
        # A zero consistency interval: every read sees other processes' commits.
        # Bounded caches: Lance keeps every version and fragment it has read, and a run
        # commits several tables per batch, so unbounded caches grow with the run. The
        # metadata cache (manifests, fragments) is what grows; a reader only ever wants
        # the latest version's, so its bound is small (docs/benchmarks.md).
        self.session = lancedb.Session(
            index_cache_size_bytes=cache_mib * 2**20,
            metadata_cache_size_bytes=metadata_cache_mib * 2**20,
        )
        self.db = lancedb.connect(
            uri,
            read_consistency_interval=timedelta(0),
            storage_options=self.storage_options or None,
            session=self.session,
        )

    def name(self, kind: str, suffix: str = "") -> str:
        return f"{self.collection}__{kind}" + (f"__{suffix}" if suffix else "")

    def find(self, name: str) -> Any | None:
        """The open table, or None when it does not exist (one open, where ``exists``
        followed by ``open`` would read the table's manifest twice)."""
        try:
            return self.db.open_table(name)
        except ValueError:
            return None

    def exists(self, name: str) -> bool:
        return self.find(name) is not None

    def open(self, name: str) -> Any:
        return self.db.open_table(name)

    def open_or_create(self, name: str, schema: pa.Schema) -> Any:
        table = self.find(name)
        if table is not None:
            return table
        try:
            return self.db.create_table(name, schema=schema)
        except (ValueError, OSError):  # created meanwhile by another handle
            return self.db.open_table(name)

    def read_columns(self, name: str, columns: Sequence[str], where: str | None = None) -> pa.Table:
        """Selected columns of every (matching) row of a table, as Arrow."""
        return read_table(self.db.open_table(name), columns, where)

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Every row of a small table (pointer, runs, erasures), as Python dicts."""
        table = self.find(name)
        if table is None:
            return []
        rows: list[dict[str, Any]] = table.to_arrow().to_pylist()
        return rows

    def rows_of_documents(
        self, name: str, doc_ids: Sequence[str], columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The rows of ``doc_ids`` in table ``name`` (selected columns)."""
        out: list[dict[str, Any]] = []
        for part in batches(list(doc_ids)):
            out.extend(self.read_columns(name, columns, sql_in("doc_id", part)).to_pylist())
        return out

    def table_names(self, prefix: str = "") -> list[str]:
        """The collection's tables (those whose kind starts with ``prefix``)."""
        names: list[str] = []
        token = None
        while True:
            resp = self.db.list_tables(page_token=token)
            names.extend(resp.tables)
            token = resp.page_token
            if not token:
                start = f"{self.collection}__{prefix}"
                return [n for n in names if n.startswith(start)]

    def tidy(
        self,
        name: str,
        max_fragments: int,
        key: str | None = None,
        prune: timedelta | None = KEEP_VERSIONS,
    ) -> str:
        """Keep table ``name`` cheap to write and read as commits add fragments: a BTREE
        index on ``key`` (created once, when the table has rows), and compaction once it
        has more than ``max_fragments`` fragments (Lance's ``optimize``, which also folds
        new rows into the table's indexes). Every commit adds a fragment and a write or
        lookup that cannot use an index opens all of them, so without this a long run
        pays more for each batch than the one before (docs/benchmarks.md, "Storage
        writes as the tables grow"). ``prune``: versions older than this are removed too
        (``KEEP_VERSIONS``, the default, keeps every version: readers and the retrieval
        check may hold older ones; ``None``, Lance's default of 7 days). Returns what was
        done: "", "indexed", "compacted" or both."""
        from lancedb.index import BTree

        table = self.find(name)
        if table is None:
            return ""
        done = []
        with self.write_lock:
            indexed = any(key in idx.columns for idx in table.list_indices()) if key else True
            if key and not indexed and table.count_rows():
                table.create_index(key, config=BTree())
                done.append("indexed")
            stats: Any = table.stats()  # a dict at run time, whatever the stub says
            if stats["fragment_stats"]["num_fragments"] > max_fragments:
                table.optimize(cleanup_older_than=prune)
                done.append("compacted")
        return " and ".join(done)

    def version_of(self, name: str) -> int | None:
        table = self.find(name)
        return int(table.version) if table is not None else None

    def restore_version(self, name: str, version: int | None) -> int | None:
        """Make ``name``'s content that of ``version`` again (Lance restore: a new version
        equal to the old one); ``None`` (a table created since) empties it. The new version."""
        table = self.find(name)
        if table is None:
            return None
        if version is None:
            table.delete("true")
        elif int(table.version) != version:
            table.restore(version)
        return int(table.version)

    def drop(self, name: str) -> bool:
        if self.exists(name):
            self.db.drop_table(name)
            return True
        return False
