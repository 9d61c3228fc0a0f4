"""Maintenance: index upkeep, compaction, version cleanup, rollback and retirement."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from common.settings import Settings
from storage import Store, collection_lease
from storage.maintenance import compact, ensure_indexes, evict_embeddings
from storage.records import Pointer


@flow(name="corpusflow-maintain", log_prints=False)
def maintain_flow(settings_json: str) -> dict[str, Any]:
    """Evict unreferenced embeddings, compact every table, update indexes, clean up
    versions past retention."""
    settings = Settings.model_validate_json(settings_json)
    store = Store.from_settings(settings.storage)
    with collection_lease(settings.storage):
        report: dict[str, Any] = {}
        # Cleanup may remove old versions: first undo a dead checked refresh's pinned,
        # unchecked writes, so no reader is left pinned to a removed version.
        if (pin := store.pointer.recover_pin()) is not None:
            report["recovered_pin"] = pin.to_dict()
        active = store.pointer.active()
        if active is not None:
            report["indexes"] = ensure_indexes(store, active.chunk_table, settings.storage)
        report["embeddings_evicted"] = evict_embeddings(store)
        report["tables"] = compact(store, settings.storage)
    get_run_logger().info("maintenance: %s", report)
    return report


def rollback(settings: Settings) -> Pointer:
    """Make the previous table active again (and the current one the rollback target)."""
    store = Store.from_settings(settings.storage)
    with collection_lease(settings.storage):
        store.pointer.recover_pin()
        return store.pointer.rollback()


def retire(settings: Settings, table: str | None = None) -> list[str]:
    """Drop a non-active model table (default: the rollback target) and its ledger."""
    store = Store.from_settings(settings.storage)
    with collection_lease(settings.storage):
        if table is None:
            active = store.pointer.active()
            if active is None or not active.previous_chunk_table:
                raise LookupError("there is no previous table to retire")
            table = active.previous_chunk_table
        return store.drop_model_tables(table)
