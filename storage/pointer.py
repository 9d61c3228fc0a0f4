"""Which chunk table readers use (the one-row ``pointer`` table, overwritten
atomically), the rollback target, the pin of a checked refresh; and the run log and
erasure receipts (``runs``, ``erasures``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from storage.chunks import ChunkTables
from storage.records import Pin, Pointer, RunRecord
from storage.schema import ERASURES_SCHEMA, POINTER_SCHEMA, RUNS_SCHEMA
from storage.tables import Tables, now


class PointerTable:
    def __init__(self, tables: Tables, chunks: ChunkTables) -> None:
        self.tables = tables
        self.chunks = chunks
        self.table_name = tables.name("pointer")

    def active(self) -> Pointer | None:
        rows = self.tables.rows(self.table_name)
        return Pointer.from_row(rows[0]) if rows else None

    def require(self) -> Pointer:
        """The active pointer; LookupError when the collection has none yet."""
        current = self.active()
        if current is None:
            raise LookupError(f"collection {self.tables.collection!r} has no active table")
        return current

    def pinned(self) -> Pin | None:
        """The table versions readers are held on while a checked refresh runs, or None."""
        current = self.active()
        return current.pinned if current else None

    def pin(self, pin: Pin) -> None:
        """Hold readers on these versions of the active chunk and parent tables (one
        pointer commit) until ``unpin``: a checked refresh writes in place, and readers
        see its result only once its retrieval check has passed."""
        self._write(self.require(), pinned_json=json.dumps(pin.to_dict(), sort_keys=True))

    def unpin(self) -> None:
        current = self.active()
        if current is not None and current.pinned is not None:
            self._write(current, pinned_json=None)

    def recover_pin(self) -> Pin | None:
        """A pin left by a checked refresh that died before its check (whoever holds the
        write lease may call this): its writes were never shown to readers, so the chunk,
        parent and ledger tables go back to the pinned versions and the pin is cleared.
        Returns the pin that was recovered, or None."""
        current = self.active()
        pin = current.pinned if current else None
        if current is None or pin is None:
            return None
        for name, version in (
            (current.chunk_table, pin.chunks),
            (current.parent_table, pin.parents),
            (pin.ledger_table, pin.ledger),
        ):
            if name and version is not None:
                self.tables.restore_version(name, int(version))
        self._write(current, pinned_json=None)
        return pin

    def set_active(self, suffix: str, model: Mapping[str, Any]) -> None:
        """Point readers at the chunk table of ``suffix`` in one atomic commit.

        The table it replaces becomes the rollback target.
        """
        current = self.active()
        chunk_table = self.chunks.name(suffix)
        previous: tuple[str | None, str | None, str | None] = (None, None, None)
        if current is not None and current.chunk_table == chunk_table:
            previous = (
                current.previous_chunk_table,
                current.previous_parent_table,
                current.previous_model_json,
            )
        elif current is not None:
            previous = (current.chunk_table, current.parent_table, current.model_json)
        self._put(chunk_table, self.chunks.parent_name(suffix), json.dumps(dict(model)), *previous)

    def rollback(self) -> Pointer:
        """Swap the active table with the previous one; returns the new pointer."""
        current = self.active()
        if current is None or not current.previous_chunk_table:
            raise LookupError(
                f"collection {self.tables.collection!r} has no previous table to roll back to"
            )
        if not self.tables.exists(current.previous_chunk_table):
            raise LookupError(f"previous table {current.previous_chunk_table} no longer exists")
        if not current.previous_model_json:
            raise LookupError(
                f"the pointer of {self.tables.collection!r} names a previous table but not "
                "its model; rebuild it with `corpusflow reindex` instead"
            )
        self._put(
            current.previous_chunk_table,
            current.previous_parent_table
            or self.chunks.parent_name(self.chunks.suffix_of(current.previous_chunk_table)),
            current.previous_model_json,
            current.chunk_table,
            current.parent_table,
            current.model_json,
        )
        return self.require()

    def forget_previous(self) -> None:
        current = self.active()
        if current is not None:
            self._put(
                current.chunk_table,
                current.parent_table,
                current.model_json,
                None,
                None,
                None,
                current.pinned_json,
            )

    def _write(self, current: Pointer, pinned_json: str | None) -> None:
        self._put(
            current.chunk_table,
            current.parent_table,
            current.model_json,
            current.previous_chunk_table,
            current.previous_parent_table,
            current.previous_model_json,
            pinned_json,
        )

    def _put(
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
            "collection": self.tables.collection,
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
        self.tables.open_or_create(self.table_name, POINTER_SCHEMA).add(data, mode="overwrite")


class RunLog:
    """One row per finished run, and one receipt per ``corpusflow forget``."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def record(self, run: RunRecord) -> None:
        table = self.tables.open_or_create(self.tables.name("runs"), RUNS_SCHEMA)
        table.add(pa.Table.from_pylist([run.to_row()], schema=RUNS_SCHEMA))

    def last(self) -> RunRecord | None:
        rows = self.tables.rows(self.tables.name("runs"))
        return RunRecord.from_row(max(rows, key=lambda r: r["finished_at"])) if rows else None

    def recent(self, limit: int) -> list[RunRecord]:
        """The collection's last ``limit`` runs, newest first (the plan's rates come from
        their reports: corpusflow.estimate)."""
        name = self.tables.name("runs")
        if self.tables.find(name) is None:
            return []
        # Two small columns of every run to pick the newest, then only their rows: a
        # collection refreshed nightly for years does not read every report back.
        ids = self.tables.read_columns(name, ["run_id", "finished_at"]).to_pylist()
        ids.sort(key=lambda r: r["finished_at"], reverse=True)
        wanted = [r["run_id"] for r in ids[:limit]]
        if not wanted:
            return []
        quoted = ", ".join("'" + w.replace("'", "''") + "'" for w in wanted)
        rows = self.tables.read_columns(
            name, RUNS_SCHEMA.names, where=f"run_id IN ({quoted})"
        ).to_pylist()
        rows.sort(key=lambda r: r["finished_at"], reverse=True)
        return [RunRecord.from_row(r) for r in rows]

    def record_erasure(self, row: Mapping[str, Any]) -> None:
        table = self.tables.open_or_create(self.tables.name("erasures"), ERASURES_SCHEMA)
        table.add(pa.Table.from_pylist([dict(row)], schema=ERASURES_SCHEMA))

    def erasures(self) -> list[dict[str, Any]]:
        """Every erasure receipt of the collection, oldest first."""
        rows = self.tables.rows(self.tables.name("erasures"))
        return sorted(rows, key=lambda r: r["started_at"])

    def erasure_key(self) -> str | None:
        """The key of the collection's window hashes (the first receipt's), so ``verify``
        hashes the database once for all receipts."""
        keys = [r["window_key"] for r in self.erasures() if r["window_key"]]
        return keys[0] if keys else None
