"""End to end: a real Prefect flow run writing a real LanceDB in tmp_path."""

import shutil
import time
from pathlib import Path
from typing import Any

import lancedb
import pytest

from common.settings import Settings, load_settings
from corpusflow.api import search, status
from corpusflow.plan import DeletionGuardError
from flows.refresh import refresh_flow
from storage import Store
from tests.helpers.invariants import assert_nothing_lost

pytestmark = pytest.mark.usefixtures("prefect_server")


def _settings(db: Path, **embed: Any) -> Settings:
    return load_settings(
        None, {"storage": {"db": str(db)}, "embed": embed, "run": {"progress": False}}
    )


def _run(corpus: Path, settings: Settings, **kw: Any) -> dict[str, Any]:
    return refresh_flow(str(corpus), settings.model_dump_json(), **kw)


def test_refresh_end_to_end(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    settings = _settings(db)
    first = _run(corpus, settings)
    assert (first["new"], first["failed"], first["unchanged"]) == (7, 0, 0)
    assert first["chunks_written"] > 7
    assert_nothing_lost(settings, str(corpus))

    # The table is plain Lance: readable with lancedb alone, with the documented schema.
    ldb = lancedb.connect(str(db))
    table = ldb.open_table(first["chunk_table"])
    assert table.schema.field("vector").type.list_size == 384
    for col in (
        "chunk_id",
        "doc_id",
        "parent_id",
        "text",
        "context",
        "heading_path",
        "page_numbers",
        "path",
        "sparse_ids",
    ):
        assert col in table.schema.names
    assert table.count_rows() == first["chunks_written"]

    hits = search("nightly hotel cap in tier 1 cities", settings, k=3)
    assert hits[0]["path"] == "travel_policy.docx"
    assert "500" in hits[0]["text"] and hits[0]["parent_text"]
    scan = search("why did the cooling pump trip", settings, k=3)
    assert scan[0]["path"] == "scanned_incident_report.pdf" and scan[0]["page_numbers"] == [1]

    # Second run: nothing changed, nothing parsed, same table version.
    second = _run(corpus, settings)
    assert (second["new"], second["changed"], second["unchanged"], second["chunks_written"]) == (
        0,
        0,
        7,
        0,
    )
    assert second["chunk_table_version"] == first["chunk_table_version"]

    # Change one, delete one, add one (a broken file), touch one without changing it.
    time.sleep(0.01)
    (corpus / "release_notes.md").write_text(
        "# Release Notes\n\n## Version 3.0\n\nThe turbine dashboard now shows blade pitch in degrees.\n"
    )
    (corpus / "onboarding.html").unlink()
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\nnot really a pdf")
    (corpus / "travel_policy.docx").touch()
    third = _run(corpus, settings)
    assert (
        third["new"],
        third["changed"],
        third["deleted"],
        third["failed"],
        third["unchanged"],
    ) == (1, 1, 1, 1, 5)
    assert third["failures"][0]["path"] == "broken.pdf"
    assert third["failures"][0]["category"] == "corrupt"
    assert_nothing_lost(settings, str(corpus))
    hits = search("blade pitch in degrees", settings, k=1)
    assert hits[0]["path"] == "release_notes.md" and "3.0" in " ".join(hits[0]["heading_path"])
    assert all(h["path"] != "onboarding.html" for h in search("badge reception", settings, k=10))

    info = status(settings)
    assert info["documents"] == {"indexed": 6, "deleted": 1, "failed": 1}
    assert info["last_run"]["failed"] == 1
    assert info["failed_documents"][0]["category"] == "corrupt"


def test_deletion_guard_refuses_to_wipe(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    # Without run.approval the flow refuses like the CLI (with it, it pauses for an
    # answer: tests/flows/test_approval.py).
    settings = load_settings(
        None, {"storage": {"db": str(db)}, "run": {"progress": False, "approval": []}}
    )
    _run(corpus, settings)
    for p in list(corpus.iterdir())[:5]:
        p.unlink()
    with pytest.raises(DeletionGuardError):
        _run(corpus, settings)
    store = Store(str(db), "default")
    suffix = store.chunks.suffix_of(store.pointer.active().chunk_table)
    assert sum(r.status == "indexed" for r in store.ledger.all(suffix).values()) == 7
    forced = _run(corpus, settings, force_delete=True)
    assert forced["deleted"] == 5


def test_model_change_builds_a_new_table(corpus: Path, tmp_path: Path, tiny_bgem3: Path) -> None:
    for p in corpus.iterdir():
        if p.name not in {"travel_policy.docx", "release_notes.md"}:
            p.unlink()
    db = tmp_path / "db"
    first = _run(corpus, _settings(db))
    assert first["parsed"] == 2
    second = _run(corpus, _settings(db, model=str(tiny_bgem3)))
    assert second["chunk_table"] != first["chunk_table"]
    # the new model's table is built from the parse cache: nothing is parsed again
    assert (second["new"], second["parsed"], second["parse_cache_hits"]) == (2, 0, 2)
    store = Store(str(db), "default")
    # readers stay on the old table until a reindex switches them
    assert store.pointer.active().chunk_table == first["chunk_table"]
    new = store.db.open_table(second["chunk_table"])
    assert new.schema.field("vector").type.list_size == 32
    rows = (
        store.read_columns(second["chunk_table"], ["sparse_ids"]).column("sparse_ids").to_pylist()
    )
    assert rows and all(r for r in rows)  # BGE-M3 path writes sparse weights
    old = store.db.open_table(first["chunk_table"])
    assert old.schema.field("vector").type.list_size == 384


def test_collections_are_independent(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    a = load_settings(
        None, {"storage": {"db": str(db), "collection": "a"}, "run": {"progress": False}}
    )
    b = load_settings(
        None, {"storage": {"db": str(db), "collection": "b"}, "run": {"progress": False}}
    )
    small = tmp_path / "small"
    small.mkdir()
    shutil.copy(corpus / "release_notes.md", small)
    assert _run(corpus, a)["new"] == 7
    assert _run(small, b)["new"] == 1
    assert status(a)["documents"] == {"indexed": 7}
    assert status(b)["documents"] == {"indexed": 1}
