"""The parse cache as a run grows it: every batch appends a fragment, and lookups read
the JSON of the matching row only (storage.caches.Caches, storage.tables.find_wide)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storage import Store
from storage.tables import find_wide


def _doc(i: int, version: int = 1) -> str:
    return json.dumps({"doc": i, "version": version, "text": f"body of document {i} " * 50})


def _rows(store: Store, key: str) -> list[dict[str, Any]]:
    table = store.open(store.caches.tables.name("parse_cache"))
    return table.search().where(f"cache_key = '{key}'").select(["parsed_json"]).to_list()


def test_lookups_find_rows_in_indexed_and_unindexed_fragments_and_puts_replace(
    tmp_path: Path,
) -> None:
    store = Store(str(tmp_path / "db"))
    caches = store.caches
    caches.put_parsed([(f"sha{i}", "fp", _doc(i)) for i in range(4)])
    assert caches.tidy(max_fragments=0)["parse_cache"].startswith("indexed")
    for batch in range(1, 6):  # five more batches, each its own unindexed fragment
        caches.put_parsed([(f"sha{batch}{i}", "fp", _doc(10 * batch + i)) for i in range(3)])
    table = store.open(caches.tables.name("parse_cache"))
    assert table.stats()["fragment_stats"]["num_fragments"] >= 6

    assert caches.get_parsed("sha2", ["other", "fp"]) == ("fp", _doc(2))  # indexed part
    assert caches.get_parsed("sha52", ["fp"]) == ("fp", _doc(52))  # the newest fragment
    assert caches.get_parsed("sha52", ["other"]) is None  # another fingerprint
    assert caches.get_parsed("nothing", ["fp"]) is None

    # Copies of one file in a batch are one entry; cached bytes parsed again (a page
    # retry) replace the entry instead of adding a second one.
    caches.put_parsed(
        [("sha52", "fp", _doc(52, 2)), ("new", "fp", _doc(7)), ("new", "fp", _doc(8))]
    )
    assert caches.get_parsed("sha52", ["fp"]) == ("fp", _doc(52, 2))
    assert len(_rows(store, "sha52:fp")) == 1
    assert [r["parsed_json"] for r in _rows(store, "new:fp")] == [_doc(8)]
    assert table.count_rows() == 4 + 5 * 3 + 1


class _CompactsBeforeTake:
    """A real table that a compaction (another thread's ``tidy``) changes between a
    lookup's two reads, so the row ids it found no longer exist."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def search(self) -> Any:
        return self.table.search()

    def take_row_ids(self, row_ids: list[int]) -> Any:
        self.table.optimize()
        return self.table.take_row_ids(row_ids)


def test_a_compaction_between_the_two_reads_falls_back_to_a_plain_read(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    for batch in range(3):
        store.caches.put_parsed([(f"sha{batch}", "fp", _doc(batch))])
    table = store.open(store.caches.tables.name("parse_cache"))
    moved = table.search().where("cache_key = 'sha2:fp'").with_row_id(True).to_list()[0]["_rowid"]
    racing = _CompactsBeforeTake(table)
    rows = find_wide(racing, "cache_key", ["sha2:fp", "sha9:fp"], ["parsed_json"], 5)
    assert rows == [{"cache_key": "sha2:fp", "parsed_json": _doc(2)}]
    assert table.stats()["fragment_stats"]["num_fragments"] == 1  # it did compact
    assert table.take_row_ids([moved]).to_list() == []  # so the first read's row id was stale
