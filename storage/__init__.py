"""storage: every Lance table (ledger, parse cache, per-model chunk tables, pointer)."""

import storage._deferred  # noqa: F401  (first, before lancedb is imported anywhere)
from storage.lease import LeaseHeldError, LeaseLostError, collection_lease, write_lease
from storage.store import EmbeddingCache, Store

__all__ = [
    "EmbeddingCache",
    "LeaseHeldError",
    "LeaseLostError",
    "Store",
    "collection_lease",
    "write_lease",
]
