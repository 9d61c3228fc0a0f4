"""Chunk, parent and ledger writes: one commit per table per batch, new documents appended
without a join, changed ones replaced whole, and ``tidy`` compacting without losing a
version (storage.chunks, storage.tables.Tables.tidy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from storage import Store
from storage.records import ChunkRow, LedgerRow, ParentRow

DIM = 4


def _rows(doc: str, texts: list[str]) -> tuple[list[ChunkRow], list[ParentRow]]:
    rng = np.random.default_rng(len(doc) + len(texts))
    parent = ParentRow(parent_id=f"p:{doc}:{len(texts)}", doc_id=doc, text=" ".join(texts))
    chunks = [
        ChunkRow(
            chunk_id=f"{doc}:{t}",
            doc_id=doc,
            parent_id=parent.parent_id,
            position=i,
            text=t,
            embed_text=t,
            path=f"{doc}.md",
            vector=rng.standard_normal(DIM).astype("float32"),
        )
        for i, t in enumerate(texts)
    ]
    return chunks, [parent]


def _texts(store: Store, doc: str) -> list[str]:
    table = store.open(store.chunks.name("m"))
    rows = table.search().where(f"doc_id = '{doc}'").select(["text"]).to_list()
    return sorted(r["text"] for r in rows)


def test_new_documents_are_appended_and_a_document_with_rows_is_replaced(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    a, a_parents = _rows("a", ["one", "two"])
    b, b_parents = _rows("b", ["three"])
    v1 = store.chunks.replace("m", DIM, ["a", "b"], [*a, *b], [*a_parents, *b_parents])
    chunks = store.open(store.chunks.name("m"))
    assert int(chunks.count_rows()) == 3
    # One commit on the created table.
    assert v1 == int(chunks.version) and len(chunks.list_versions()) == 2

    # "a" again, cut differently: its rows are there, so the merge replaces them whole;
    # the rows of "b" are untouched, and nothing of the old "a" is left.
    a2, a2_parents = _rows("a", ["uno", "dos", "tres"])
    v2 = store.chunks.replace("m", DIM, ["a"], a2, a2_parents)
    assert v2 == v1 + 1
    assert _texts(store, "a") == ["dos", "tres", "uno"]
    assert _texts(store, "b") == ["three"]
    parents = store.open(store.chunks.parent_name("m"))
    left = parents.search().where("doc_id = 'a'").select(["parent_id"]).to_list()
    assert [r["parent_id"] for r in left] == [a2_parents[0].parent_id]

    # A document whose chunks were committed by a run that died before its ledger row
    # is "new" to the next run: its rows are found and replaced, never duplicated.
    b2, b2_parents = _rows("b", ["three"])
    store.chunks.replace("m", DIM, ["b"], b2, b2_parents)
    assert _texts(store, "b") == ["three"]
    assert int(store.open(store.chunks.name("m")).count_rows()) == 4


def test_tidy_indexes_and_compacts_and_keeps_every_version(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    for i in range(6):
        chunks, parents = _rows(f"d{i}", [f"text {i}", f"more {i}"])
        store.chunks.replace("m", DIM, [f"d{i}"], chunks, parents)
        store.ledger.upsert("m", [LedgerRow(doc_id=f"d{i}", path=f"d{i}.md", chunk_count=2)])
    name = store.chunks.name("m")
    before = store.open(name)
    versions = [int(v["version"]) for v in before.list_versions()]
    assert before.stats()["fragment_stats"]["num_fragments"] == 6

    assert store.chunks.tidy("m", max_fragments=8) == {
        name: "indexed",
        store.chunks.parent_name("m"): "indexed",
    }  # indexed; not fragmented enough to compact
    done = store.chunks.tidy("m", max_fragments=3)
    assert done == {name: "compacted", store.chunks.parent_name("m"): "compacted"}
    assert store.ledger.tidy("m", max_fragments=3) == "compacted"

    after = store.open(name)
    assert after.stats()["fragment_stats"]["num_fragments"] == 1
    assert int(after.count_rows()) == 12 and len(store.ledger.all("m")) == 6
    assert any("doc_id" in idx.columns for idx in after.list_indices())
    # Every version a reader might hold is still readable (maintenance prunes, not this).
    kept = {int(v["version"]) for v in after.list_versions()}
    assert set(versions) <= kept
    after.checkout(versions[2])
    assert int(after.count_rows()) == 4
    # The index serves the same answers as a scan: the new-document check and a read.
    assert _texts(store, "d3") == ["more 3", "text 3"]
