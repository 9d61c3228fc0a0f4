"""The document ledgers of a collection: one table ``documents__<model>`` per index
build, one row per source file (storage.records.LedgerRow)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from storage.records import DocStatus, LedgerRow
from storage.schema import LEDGER_SCHEMA
from storage.tables import Tables, now, read_table


class Ledger:
    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def name(self, suffix: str) -> str:
        return self.tables.name("documents", suffix)

    def all(self, suffix: str) -> dict[str, LedgerRow]:
        """Every row of one model's ledger, by doc_id (small collections and tests; the
        planner reads ``columns`` instead)."""
        rows = self.tables.rows(self.name(suffix))
        return {r["doc_id"]: LedgerRow.from_row(r) for r in rows}

    def suffixes(self) -> list[str]:
        """The model suffixes that have a ledger: every build that recorded a document,
        whether or not its chunk table was ever made (a first run where nothing indexed
        records its failures and makes no table)."""
        prefix = self.name("") + "__"
        return sorted(n[len(prefix) :] for n in self.tables.table_names("documents__"))

    def current(self, active_suffix: str | None) -> dict[str, LedgerRow]:
        """The rows readers should be told about: the active table's ledger, or, while the
        collection has no table yet, the rows of every ledger it has (failures included)."""
        if active_suffix is not None:
            return self.all(active_suffix)
        rows: dict[str, LedgerRow] = {}
        for suffix in self.suffixes():
            rows.update(self.all(suffix))
        return rows

    def columns(self, suffix: str, columns: Sequence[str]) -> pa.Table:
        """Selected ledger columns of every document, as Arrow (empty when no ledger yet).
        The planner reads this instead of ``all()``: a million rows of a few columns
        are tens of MiB in Arrow and about 2 GiB as Python dicts."""
        name = self.name(suffix)
        schema = pa.schema([LEDGER_SCHEMA.field(c) for c in columns])
        table = self.tables.find(name)
        if table is None:
            return schema.empty_table()
        data = read_table(table, [c for c in columns if c in table.schema.names])
        for c in columns:  # a ledger written before a column was added (e.g. etag)
            if c not in data.schema.names:
                field = schema.field(c)
                data = data.append_column(field, pa.nulls(data.num_rows, field.type))
        return data.select(list(columns)).cast(schema)

    def rows(self, suffix: str, doc_ids: Sequence[str]) -> dict[str, LedgerRow]:
        """Whole ledger rows of ``doc_ids`` (those present), by doc_id."""
        name = self.name(suffix)
        table = self.tables.find(name) if doc_ids else None
        if table is None:
            return {}
        rows = self.tables.rows_of_documents(name, doc_ids, table.schema.names)
        return {r["doc_id"]: LedgerRow.from_row(r) for r in rows}

    def upsert(self, suffix: str, rows: Sequence[LedgerRow]) -> None:
        if not rows:
            return
        stamp = now()
        full = [r.to_row() | {"updated_at": stamp} for r in rows]
        table = self.tables.open_or_create(self.name(suffix), LEDGER_SCHEMA)
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

    def tidy(self, suffix: str, max_fragments: int) -> str:
        """Compact the ledger of ``suffix`` once fragmented (``Tables.tidy``; no version
        is removed): each batch's upsert adds a fragment and joins against all of them."""
        return self.tables.tidy(self.name(suffix), max_fragments)

    def tombstones(self) -> dict[str, str]:
        """{doc_id: path} of documents forgotten in any ledger of the collection (status
        ``forgotten``): the planner keeps them out while their files are in the source."""
        out: dict[str, str] = {}
        for name in self.tables.table_names("documents__"):
            rows = self.tables.read_columns(
                name, ["doc_id", "path"], f"status = '{DocStatus.FORGOTTEN.value}'"
            )
            out.update(zip(*(rows.column(c).to_pylist() for c in ("doc_id", "path")), strict=True))
        return out
