"""Indexes, compaction and version cleanup of a collection's tables.

- Full-text index (Lance native) on ``embed_text`` (context + chunk), created on
  first write and brought up to date by ``optimize`` after later writes. Its tokenizer
  (``FTS_SETTINGS``) is ICU word segmentation: dictionary-based for Chinese, Japanese
  and Thai, Unicode word boundaries elsewhere (Korean is written with spaces), then
  lower case, English stemming and stop words. An index built with other settings (the
  whitespace/punctuation "simple" tokenizer of earlier versions, which left a Chinese
  sentence as one token) is dropped and rebuilt. Measured against n-grams and a second
  n-gram index on the CJK characters in docs/benchmarks.md (bench/fts_tokenizers.py).
- A second full-text index, character bigrams (``CJK_FTS_SETTINGS``), on ``cjk_text``
  (the Chinese, Japanese and Korean runs of ``embed_text``): hybrid search's third leg
  for a CJK query, where a dictionary's word boundaries and the question's differ
  (corpusflow.api). A table written before the column existed gets it as nulls until
  its rows are rewritten (chunker version 8 re-chunks every document once).
- BTREE index on ``doc_id``: a refresh asks whether a batch's documents have rows
  (``ChunkTables.replace``) and deletes by document.
- Vector index only above ``storage.vector_index_min_rows`` rows (below it an
  exact scan is fast and an index costs more to build than it saves):
  IVF_HNSW_SQ up to ``storage.ivf_pq_min_rows``, IVF_PQ beyond (smaller in memory).
- Compaction and cleanup of versions older than the retention window. Lance
  never removes the latest (active) version, and tagged versions are kept.
- Eviction from each model's embedding cache of the texts its chunk table no longer
  holds (``evict_embeddings``): after maintenance a cache holds at most one vector per
  distinct embedded text of the table; between maintenances it grows by each run's
  new texts.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from typing import Any

from common.settings import StorageSettings
from storage.store import Store

log = logging.getLogger(__name__)

# The full-text index's tokenizer. Lance tokenises queries with the index's own settings.
FTS_SETTINGS: dict[str, Any] = {
    "base_tokenizer": "icu",
    "language": "English",
    "stem": True,
    "remove_stop_words": True,
    "lower_case": True,
    "ascii_folding": True,
    "with_position": False,
}


# The CJK bigram index: every pair of adjacent characters of a CJK run is a term.
CJK_FTS_SETTINGS: dict[str, Any] = {
    "base_tokenizer": "ngram",
    "ngram_min_length": 2,
    "ngram_max_length": 2,
    "stem": False,
    "remove_stop_words": False,
    "lower_case": True,
    "ascii_folding": False,
    "with_position": False,
}


def _fts_index(table: Any, column: str) -> Any | None:
    for idx in table.list_indices():
        if str(getattr(idx, "index_type", "")) == "FTS" and column in (idx.columns or []):
            return idx
    return None


def fts_is_current(index: Any) -> bool:
    """Whether an FTS index was built with ``FTS_SETTINGS`` (details Lance records)."""
    details = getattr(index, "index_details", None) or {}
    return all(details.get(k, v) == v for k, v in FTS_SETTINGS.items() if k != "language") and (
        str(details.get("language", "English")).lower() == FTS_SETTINGS["language"].lower()
    )


def _index_names(table: Any) -> dict[str, str]:
    """column -> index type of a table's existing indexes."""
    out = {}
    for idx in table.list_indices():
        cols = getattr(idx, "columns", None) or []
        kind = str(getattr(idx, "index_type", ""))
        for col in cols:
            out[col] = kind
    return out


def vector_index_type(rows: int, settings: StorageSettings) -> str | None:
    if rows < settings.vector_index_min_rows:
        return None
    return "IVF_PQ" if rows >= settings.ivf_pq_min_rows else "IVF_HNSW_SQ"


def ensure_indexes(store: Store, table_name: str, settings: StorageSettings) -> dict[str, str]:
    """Create missing indexes, bring existing ones up to date; returns what was done."""
    from lancedb.index import FTS, BTree, HnswSq, IvfPq

    table = store.db.open_table(table_name)
    rows = int(table.count_rows())
    done: dict[str, str] = {}
    existing = _index_names(table)
    if rows == 0:
        return done
    fts = _fts_index(table, "embed_text")
    if fts is not None and not fts_is_current(fts):
        table.drop_index(fts.name)
        existing.pop("embed_text", None)
        fts = None
        done["embed_text"] = "rebuilt FTS (tokenizer changed)"
    if fts is None:
        table.create_index("embed_text", config=FTS(**FTS_SETTINGS))
        done.setdefault("embed_text", "created FTS")
    if "cjk_text" in table.schema.names and _fts_index(table, "cjk_text") is None:
        table.create_index("cjk_text", config=FTS(**CJK_FTS_SETTINGS))
        done["cjk_text"] = "created FTS (CJK bigrams)"
    if "doc_id" not in existing:  # a refresh's "any rows of these documents?" and deletes
        table.create_index("doc_id", config=BTree())
        done["doc_id"] = "created BTREE"
    wanted = vector_index_type(rows, settings)
    if wanted and "vector" not in existing:
        dim = table.schema.field("vector").type.list_size
        partitions = max(1, int(math.sqrt(rows)))
        config: Any = (
            IvfPq(
                distance_type="cosine", num_partitions=partitions, num_sub_vectors=max(1, dim // 16)
            )
            if wanted == "IVF_PQ"
            else HnswSq(distance_type="cosine", num_partitions=partitions)
        )
        table.create_index("vector", config=config)
        done["vector"] = f"created {wanted}"
    if existing:
        # Rows written since the indexes were built are searched exactly until merged in.
        table.optimize()
        done["optimize"] = "indexes updated"
    return done


def prune_tags(table: Any, older_than: timedelta) -> list[str]:
    """Delete run tags whose version is older than ``older_than`` (never the latest version)."""
    latest = int(table.version)
    stamps = {int(v["version"]): v["timestamp"] for v in table.list_versions()}
    cutoff = datetime.now() - older_than
    removed = []
    for tag, info in table.tags.list().items():
        version = int(info["version"])
        stamp = stamps.get(version)
        if version != latest and stamp is not None and stamp < cutoff:
            table.tags.delete(tag)
            removed.append(tag)
    return removed


def _cleanup(table: Any, retention: timedelta) -> None:
    """Remove versions older than ``retention``, never a tagged one.

    Lance refuses (with an error, deleting nothing) a cleanup whose cut-off falls after
    a tagged version, and it takes "now" itself, a little after we do. So the cut-off
    is placed just after an untagged version older than the oldest tagged one: first
    the newest such version (the gap to the tagged one absorbs the delay), and if Lance
    still refuses (a gap of milliseconds), the one before it, and so on.
    """
    versions = sorted(table.list_versions(), key=lambda v: int(v["version"]))
    tagged = {int(v["version"]) for v in table.tags.list().values()}
    first_tagged = next((v for v in versions if int(v["version"]) in tagged), None)
    if first_tagged is None:
        cutoffs = [None]
    else:
        older = [
            v["timestamp"] for v in versions if int(v["version"]) < int(first_tagged["version"])
        ]
        cutoffs = [t + timedelta(microseconds=1) for t in reversed(older[-5:])]
    for i, cutoff in enumerate(cutoffs):
        window = retention if cutoff is None else max(retention, datetime.now() - cutoff)
        try:
            # Files no version references are a killed writer's leftovers: Lance keeps
            # them a week in case a writer is mid-commit, but maintenance runs under
            # the collection's write lease, so none is, and they can go now.
            table.optimize(cleanup_older_than=window, delete_unverified=True)
            return
        except RuntimeError as exc:
            if "tagged version" not in str(exc) or i == len(cutoffs) - 1:
                raise


def evict_embeddings(store: Store) -> dict[str, int]:
    """Remove embedding-cache entries no chunk row of their model references; a cache
    whose chunk table is gone is dropped. Returns rows removed per cache table.
    One commit per cache: a merge with the referenced keys that deletes the rest."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from storage.schema import embed_key

    prefix = store.name("embed_cache") + "__"
    removed: dict[str, int] = {}
    for name in store.table_names():
        if not name.startswith(prefix):
            continue
        cache = store.db.open_table(name)
        chunks = store.chunks.name(name.removeprefix(prefix))
        chunk_table = store.find(chunks)
        if chunk_table is None:
            removed[name] = int(cache.count_rows())
            store.drop(name)
            continue
        columns = chunk_table.schema.names
        if "embed_key" in columns:
            keys = store.read_columns(chunks, ["embed_key"]).column("embed_key")
            # Rows written before the column existed: their key is the text's hash.
            unkeyed = store.read_columns(chunks, ["embed_text"], "embed_key IS NULL")
            keys = pc.drop_null(keys).to_pylist()
        else:
            unkeyed = store.read_columns(chunks, ["embed_text"])
            keys = []
        keys += [embed_key(t) for t in unkeyed.column("embed_text").to_pylist()]
        referenced = pa.table({"embed_key": pa.array(sorted(set(keys)), pa.string())})
        result = (
            cache.merge_insert("embed_key").when_not_matched_by_source_delete().execute(referenced)
        )
        removed[name] = int(result.num_deleted_rows)
    return removed


def compact(store: Store, settings: StorageSettings) -> dict[str, dict[str, Any]]:
    """Compact every table of the collection and remove versions past retention.

    Tags younger than ``tag_retention_days`` pin their versions; cleanup stops
    short of the oldest pinned version so a tagged version is never removed.
    """
    report: dict[str, dict[str, Any]] = {}
    for name in store.table_names():
        table = store.db.open_table(name)
        before = len(table.list_versions())
        pruned = prune_tags(table, timedelta(days=settings.tag_retention_days))
        # Compaction and index merge first: they can take minutes, and the cleanup
        # window below is relative to the moment cleanup starts.
        table.optimize()
        _cleanup(table, timedelta(days=settings.retention_days))
        report[name] = {
            "versions_before": before,
            "versions_after": len(table.list_versions()),
            "tags_pruned": len(pruned),
        }
    return report
