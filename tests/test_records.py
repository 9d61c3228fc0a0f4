"""The typed rows at the storage boundary mirror their Arrow schemas and round-trip."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pytest

from storage import Store
from storage.records import DocStatus, LedgerRow, Pointer, RunRecord
from storage.schema import LEDGER_SCHEMA, POINTER_SCHEMA, RUNS_SCHEMA


@pytest.mark.parametrize(
    ("record", "schema"),
    [(LedgerRow, LEDGER_SCHEMA), (Pointer, POINTER_SCHEMA), (RunRecord, RUNS_SCHEMA)],
)
def test_records_mirror_their_schemas(record: type, schema: pa.Schema) -> None:
    assert sorted(f.name for f in fields(record)) == sorted(schema.names)


def test_ledger_rows_round_trip_through_lance(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    rows = [
        LedgerRow(doc_id="a", path="a.md", content_sha256="x" * 64, size=3, chunk_count=2),
        LedgerRow(doc_id="b", path="b.md", status=DocStatus.FAILED, error_category="corrupt"),
    ]
    store.upsert_ledger("m", rows)
    back = store.ledger("m")
    assert back["a"].status is DocStatus.INDEXED and back["a"].chunk_count == 2
    assert back["b"].status is DocStatus.FAILED and back["b"].error_category == "corrupt"
    assert back["a"].updated_at is not None  # stamped by the store
    assert {k: v for k, v in back["b"].to_row().items() if k != "updated_at"} == {
        k: v for k, v in rows[1].to_row().items() if k != "updated_at"
    }
    with pytest.raises(ValueError):
        LedgerRow(doc_id="c", path="c.md", status="lost")  # type: ignore[arg-type]
