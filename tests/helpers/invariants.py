"""The "nothing lost" invariant as a test assertion (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

from common.settings import Settings
from corpusflow.verify import nothing_lost
from storage import Store


def assert_nothing_lost(settings: Settings, source: str) -> dict[str, dict[str, Any]]:
    """``corpusflow verify`` finds no violation and nothing pending; every indexed document
    has rows (an empty parse fails as 'empty'). Returns the live ledger rows by path."""
    report = nothing_lost(settings, source)
    assert report.ok, report.violations
    assert not report.pending, report.pending
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    ledger = store.ledger.all(store.chunks.suffix_of(active.chunk_table))
    live = {r.path: r.to_row() for r in ledger.values() if r.status != "deleted"}
    assert all(r["chunk_count"] > 0 for r in live.values() if r["status"] == "indexed")
    return live
