"""The typed rows at the storage boundary mirror their Arrow schemas and round-trip."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pytest

from storage import Store
from storage.records import ChunkRow, DocStatus, LedgerRow, ParentRow, Pin, Pointer, RunRecord
from storage.schema import (
    LEDGER_SCHEMA,
    PARENT_SCHEMA,
    POINTER_SCHEMA,
    RUNS_SCHEMA,
    chunk_schema,
)


@pytest.mark.parametrize(
    ("record", "schema"),
    [
        (LedgerRow, LEDGER_SCHEMA),
        (Pointer, POINTER_SCHEMA),
        (RunRecord, RUNS_SCHEMA),
        (ChunkRow, chunk_schema(4)),
        (ParentRow, PARENT_SCHEMA),
    ],
)
def test_records_mirror_their_schemas(record: type, schema: pa.Schema) -> None:
    assert sorted(f.name for f in fields(record)) == sorted(schema.names)


def test_ledger_rows_round_trip_through_lance(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    rows = [
        LedgerRow(doc_id="a", path="a.md", content_sha256="x" * 64, size=3, chunk_count=2),
        LedgerRow(doc_id="b", path="b.md", status=DocStatus.FAILED, error_category="corrupt"),
    ]
    store.ledger.upsert("m", rows)
    back = store.ledger.all("m")
    assert back["a"].status is DocStatus.INDEXED and back["a"].chunk_count == 2
    assert back["b"].status is DocStatus.FAILED and back["b"].error_category == "corrupt"
    assert back["a"].updated_at is not None  # stamped by the store
    assert {k: v for k, v in back["b"].to_row().items() if k != "updated_at"} == {
        k: v for k, v in rows[1].to_row().items() if k != "updated_at"
    }
    with pytest.raises(ValueError):
        LedgerRow(doc_id="c", path="c.md", status="lost")  # type: ignore[arg-type]


def test_each_role_owns_its_tables_and_the_pointer_swaps(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), "c")
    store.ledger.upsert("m1", [LedgerRow(doc_id="a", path="a.md")])
    store.caches.put_parsed([("sha", "fp", "{}")])
    store.caches.contexts.put_many({"k": "ctx"})
    store.pointer.set_active("m1", {"fingerprint": "m1"})
    store.runs.record(RunRecord(run_id="r1", collection="c", kind="refresh", status="ok"))
    assert sorted(n.removeprefix("c__") for n in store.table_names()) == [
        "context_cache",
        "documents__m1",
        "parse_cache",
        "pointer",
        "runs",
    ]
    assert store.caches.get_parsed("sha", ["fp", "other"]) == ("fp", "{}")
    assert store.caches.get_parsed("sha", ["other"]) is None
    assert store.caches.contexts.get_many(["k", "absent"]) == {"k": "ctx"}
    assert store.runs.last() is not None and store.runs.last().run_id == "r1"  # type: ignore[union-attr]

    with pytest.raises(LookupError, match="no previous table"):
        store.pointer.rollback()
    store.pointer.set_active("m2", {"fingerprint": "m2"})
    with pytest.raises(LookupError, match="no longer exists"):  # m1's chunk table was never built
        store.pointer.rollback()
    store.chunks.replace("m1", 2, [], [], [])  # creates the (empty) m1 tables
    back = store.pointer.rollback()
    assert back.chunk_table == "c__chunks__m1" and back.previous_chunk_table == "c__chunks__m2"
    assert back.model_fingerprint == "m1" and back.parent_table == "c__parents__m1"
    with pytest.raises(ValueError, match="refusing to drop the active table"):
        store.drop_model_tables("m1")


def test_the_pin_is_stored_as_sorted_json_and_read_back_typed(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), "c")
    store.pointer.set_active("m1", {"fingerprint": "m1"})
    pin = Pin(chunks=3, ledger=5, ledger_table="c__documents__m1", parents=None, run_id="r1")
    store.pointer.pin(pin)
    stored = store.pointer.require().pinned_json
    assert stored == (
        '{"chunks": 3, "ledger": 5, "ledger_table": "c__documents__m1", '
        '"parents": null, "run_id": "r1"}'
    )
    assert store.pointer.pinned() == pin and Pin.from_dict(pin.to_dict()) == pin
    store.pointer.unpin()
    assert store.pointer.pinned() is None


def test_chunk_and_parent_rows_round_trip_through_lance(tmp_path: Path) -> None:
    """The writer takes typed rows (NumPy vectors or lists) and the searcher's columns
    are chunk columns: one schema for writer, reader and tests."""
    import numpy as np

    store = Store(str(tmp_path / "db"))
    chunks = [
        ChunkRow(
            chunk_id=f"c{i}",
            doc_id="d",
            parent_id="p",
            position=i,
            text=f"chunk {i}",
            embed_text=f"chunk {i}",
            heading_path=["H"],
            page_numbers=[i + 1],
            path="a.md",
            vector=np.full(4, i, dtype=np.float64) if i else [0.5, 0.5, 0.5, 0.5],
        )
        for i in range(3)
    ]
    parents = [ParentRow(parent_id="p", doc_id="d", text="chunk 0 chunk 1 chunk 2")]
    store.chunks.replace("m", 4, ["d"], chunks[1:], parents)
    store.chunks.replace("m", 4, ["d"], chunks[:1] + chunks[2:], parents)  # a list vector too
    table = store.db.open_table(store.chunks.name("m"))
    back = {r["chunk_id"]: ChunkRow.from_row(r) for r in table.to_arrow().to_pylist()}
    assert sorted(back) == ["c0", "c2"]  # c1 is gone: replace is per document
    assert back["c2"].vector == [2.0] * 4 and back["c0"].vector == [0.5] * 4
    assert back["c2"].page_numbers == [3] and back["c2"].heading_path == ["H"]
    assert set(ChunkRow.HIT_COLUMNS) <= set(ChunkRow.field_names())
    parent_rows = store.db.open_table(store.chunks.parent_name("m")).to_arrow().to_pylist()
    assert [ParentRow.from_row(r) for r in parent_rows] == parents
