"""Model-versioned tables: reindex beside the live table, validation, switch, rollback,
retire, the write lease, indexes and maintenance, on a real LanceDB."""

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from corpusflow.activation import ValidationFailedError
from corpusflow.api import search, status
from flows.maintenance import maintain_flow, retire, rollback
from flows.refresh import refresh_flow
from flows.reindex import reindex_flow
from storage import LeaseHeldError, Store, write_lease
from storage.maintenance import ensure_indexes

pytestmark = pytest.mark.usefixtures("prefect_server")


def _settings(db: Path, model: str | None = None, **storage: Any) -> Settings:
    return load_settings(
        None,
        {
            "storage": {"db": str(db), **storage},
            "embed": {"model": model},
            "run": {"progress": False},
        },
    )


@pytest.fixture()
def small_corpus(corpus: Path) -> Path:
    for p in corpus.iterdir():
        if p.name not in {"travel_policy.docx", "release_notes.md", "onboarding.html"}:
            p.unlink()
    return corpus


def test_reindex_switches_after_validation_and_rolls_back(
    small_corpus: Path, tmp_path: Path, tiny_bgem3: Path
) -> None:
    db = tmp_path / "db"
    first = refresh_flow(str(small_corpus), _settings(db).model_dump_json())
    store = Store(str(db), "default")
    old_rows = store.db.open_table(first["chunk_table"]).count_rows()

    rebuilt = reindex_flow(str(small_corpus), _settings(db, str(tiny_bgem3)).model_dump_json())
    assert rebuilt["activated"] and rebuilt["parsed"] == 0 and rebuilt["parse_cache_hits"] == 3
    pointer = store.pointer.active()
    assert pointer.chunk_table == rebuilt["chunk_table"]
    assert pointer.previous_chunk_table == first["chunk_table"]
    # the old table is untouched and still readable
    assert store.db.open_table(first["chunk_table"]).count_rows() == old_rows

    # with no model configured, the nightly refresh follows the active model
    nightly = refresh_flow(str(small_corpus), _settings(db).model_dump_json())
    assert nightly["chunk_table"] == rebuilt["chunk_table"] and nightly["unchanged"] == 3
    info = status(_settings(db))
    roles = {t["table"]: t["role"] for t in info["tables"]}
    assert roles == {rebuilt["chunk_table"]: "active", first["chunk_table"]: "previous"}
    assert any(tag.startswith("reindex-") for t in info["tables"] for tag in t["tags"])

    back = rollback(_settings(db))
    assert back.chunk_table == first["chunk_table"]
    assert back.previous_chunk_table == rebuilt["chunk_table"]
    hits = search("nightly hotel cap", _settings(db), k=1)
    assert hits[0]["path"] == "travel_policy.docx"  # served by the 384-dim MiniLM table again

    dropped = retire(_settings(db))
    assert rebuilt["chunk_table"] in dropped
    assert not store.exists(rebuilt["chunk_table"])
    assert store.pointer.active().previous_chunk_table is None
    with pytest.raises(ValueError):
        store.drop_model_tables(first["chunk_table"])  # never the active table


def test_validation_failure_keeps_the_old_pointer(
    small_corpus: Path, tmp_path: Path, tiny_bgem3: Path
) -> None:
    db = tmp_path / "db"
    first = refresh_flow(str(small_corpus), _settings(db).model_dump_json())
    # build the new model's table beside the live one, then damage it
    built = refresh_flow(str(small_corpus), _settings(db, str(tiny_bgem3)).model_dump_json())
    assert not built["activated"]
    store = Store(str(db), "default")
    table = store.db.open_table(built["chunk_table"])
    rows = store.read_columns(built["chunk_table"], table.schema.names)
    table.add(rows.slice(0, 1).cast(table.schema))  # a duplicate chunk row
    with pytest.raises(ValidationFailedError, match="duplicate chunk ids"):
        reindex_flow(str(small_corpus), _settings(db, str(tiny_bgem3)).model_dump_json())
    assert store.pointer.active().chunk_table == first["chunk_table"]


def test_second_writer_is_refused_or_waits(small_corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    with write_lease(str(db), "default"), pytest.raises(LeaseHeldError, match="another run"):
        refresh_flow(str(small_corpus), _settings(db).model_dump_json())
    assert Store(str(db), "default").pointer.active() is None  # nothing was written

    release = threading.Event()

    def hold() -> None:
        with write_lease(str(db), "default"):
            release.wait(5)
            time.sleep(1.0)

    holder = threading.Thread(target=hold)
    holder.start()
    release.set()
    time.sleep(0.2)
    report = refresh_flow(str(small_corpus), _settings(db, lease_wait_s=30).model_dump_json())
    holder.join()
    assert report["new"] == 3


def test_indexes_and_maintenance_keep_tagged_versions(small_corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    settings = _settings(db, vector_index_min_rows=5, retention_days=0, tag_retention_days=365)
    first = refresh_flow(str(small_corpus), settings.model_dump_json())
    store = Store(str(db), "default")
    table = store.db.open_table(first["chunk_table"])
    indexed = {c for idx in table.list_indices() for c in idx.columns}
    assert {"embed_text", "vector", "doc_id"} <= indexed
    # full-text search works on the contextualised text
    fts = table.search("reimbursed", query_type="fts").limit(3).to_list()
    assert fts and "reimbursed" in fts[0]["embed_text"]
    (small_corpus / "release_notes.md").write_text("# Notes\n\nFirmware 4 adds pitch logging.\n")
    refresh_flow(str(small_corpus), settings.model_dump_json())
    before = {int(v["version"]) for v in store.db.open_table(first["chunk_table"]).list_versions()}
    tags = store.db.open_table(first["chunk_table"]).tags.list()
    assert len(tags) == 2
    report = maintain_flow(settings.model_dump_json())
    after = {int(v["version"]) for v in store.db.open_table(first["chunk_table"]).list_versions()}
    assert len(after) < len(before) + 1  # old untagged versions were removed
    assert {int(t["version"]) for t in tags.values()} <= after  # tagged versions survive
    assert report["tables"][first["chunk_table"]]["versions_after"] == len(after)
    assert search("pitch logging firmware", settings, k=1)[0]["path"] == "release_notes.md"
    assert ensure_indexes(store, first["chunk_table"], settings.storage) == {
        "optimize": "indexes updated"
    }


def test_upgrade_with_the_same_tokenizer_reuses_the_active_chunks(
    small_corpus: Path, tmp_path: Path, tiny_bgem3: Path
) -> None:
    """A fine-tuned upgrade (same tokenizer, other weights) rebuilds every vector but
    takes the chunks from the active table: no parse-cache read, no chunking."""
    from tests.helpers.tiny_models import retrained_copy

    db = tmp_path / "db"
    first = refresh_flow(str(small_corpus), _settings(db, str(tiny_bgem3)).model_dump_json())
    tuned = retrained_copy(tiny_bgem3, tmp_path / "tuned", seed=11)
    rebuilt = reindex_flow(str(small_corpus), _settings(db, str(tuned)).model_dump_json())
    assert rebuilt["chunk_table"] != first["chunk_table"] and rebuilt["activated"]
    assert (rebuilt["reused"], rebuilt["parsed"], rebuilt["parse_cache_hits"]) == (3, 0, 0)
    store = Store(str(db), "default")
    cols = ["chunk_id", "embed_text", "heading_path", "parent_id", "metadata_json", "vector"]
    old = {r["chunk_id"]: r for r in store.read_columns(first["chunk_table"], cols).to_pylist()}
    new = {r["chunk_id"]: r for r in store.read_columns(rebuilt["chunk_table"], cols).to_pylist()}
    assert old.keys() == new.keys() and len(new) == rebuilt["chunks_written"]
    for cid, row in new.items():
        for key in ("embed_text", "heading_path", "parent_id", "metadata_json"):
            assert row[key] == old[cid][key]
        assert row["vector"] != old[cid]["vector"]  # embedded again by the new weights
    parents = store.chunks.parent_name(store.chunks.suffix_of(rebuilt["chunk_table"]))
    assert store.db.open_table(parents).count_rows() > 0
    assert (
        store.validate(store.chunks.suffix_of(rebuilt["chunk_table"]), len(new[cid]["vector"]))
        == []
    )
