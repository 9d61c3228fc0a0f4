"""Arrow schemas of every Lance table corpusflow writes (documented in docs/architecture.md)."""

from __future__ import annotations

import hashlib

import pyarrow as pa

LEDGER_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("content_sha256", pa.string()),  # written only once chunks are committed
        pa.field("size", pa.int64()),
        pa.field("mtime", pa.float64()),
        # Object stores: the entity tag(s) listed with the bytes; with size, the change hint.
        pa.field("etag", pa.string()),
        pa.field(
            "status", pa.string()
        ),  # indexed | failed | quarantined | deleted | forgotten | held
        pa.field("error_category", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("attempts", pa.int32()),
        pa.field("format", pa.string()),
        pa.field("title", pa.string()),
        pa.field("page_count", pa.int32()),
        pa.field("parser", pa.string()),  # which parse path ran
        pa.field("parser_fingerprint", pa.string()),
        pa.field("chunker_fingerprint", pa.string()),
        pa.field("model_fingerprint", pa.string()),
        pa.field("chunk_count", pa.int32()),
        pa.field("metadata_json", pa.string()),
        # Status held: what the retrieval check held and why (corpusflow.holds.Hold, JSON).
        pa.field("hold_json", pa.string()),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)

PARSE_CACHE_SCHEMA = pa.schema(
    [
        pa.field("cache_key", pa.string(), nullable=False),  # sha256 + parser fingerprint
        pa.field("content_sha256", pa.string()),
        pa.field("parser_fingerprint", pa.string()),
        pa.field("parsed_json", pa.large_string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
    ]
)

CONTEXT_CACHE_SCHEMA = pa.schema(
    [
        pa.field("cache_key", pa.string(), nullable=False),  # chunk|section|outline|prompt|model
        pa.field("context", pa.string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
    ]
)

POINTER_SCHEMA = pa.schema(
    [
        pa.field("collection", pa.string(), nullable=False),
        pa.field("chunk_table", pa.string()),
        pa.field("parent_table", pa.string()),
        pa.field("model_fingerprint", pa.string()),
        pa.field("model_json", pa.string()),
        pa.field("previous_chunk_table", pa.string()),  # the rollback target
        pa.field("previous_parent_table", pa.string()),
        pa.field("previous_model_json", pa.string()),
        # Set while a checked refresh runs: the versions readers stay on until its
        # retrieval check passes (JSON {"chunks", "parents", "ledger", "run_id"}).
        pa.field("pinned_json", pa.string()),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("collection", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("finished_at", pa.timestamp("us", tz="UTC")),
        pa.field("status", pa.string()),
        pa.field("report_json", pa.string()),
        pa.field("chunk_table", pa.string()),
        pa.field("chunk_table_version", pa.int64()),
    ]
)

PARENT_SCHEMA = pa.schema(
    [
        pa.field("parent_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("text", pa.large_string()),
        pa.field("heading_path", pa.list_(pa.string())),
        pa.field("page_numbers", pa.list_(pa.int32())),
    ]
)


def chunk_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("parent_id", pa.string()),
            pa.field("position", pa.int32()),
            pa.field("text", pa.large_string()),  # the chunk as in the document
            pa.field("context", pa.string()),  # contextual-retrieval prefix
            pa.field("embed_text", pa.large_string()),  # context + text: embedded and FTS-indexed
            pa.field("embed_key", pa.string()),  # embed_key(embed_text): its embedding-cache key
            # The CJK runs of embed_text: indexed as character bigrams (storage.maintenance).
            pa.field("cjk_text", pa.large_string()),
            pa.field("heading_path", pa.list_(pa.string())),
            pa.field("page_numbers", pa.list_(pa.int32())),
            pa.field("path", pa.string()),  # source-relative path
            pa.field("title", pa.string()),
            pa.field("format", pa.string()),
            pa.field("metadata_json", pa.string()),
            pa.field("acl_groups", pa.list_(pa.string())),  # null = readable by everyone
            pa.field("n_tokens", pa.int32()),
            pa.field("lang", pa.string()),  # detected language, ISO 639-1 ("und" = unknown)
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("sparse_ids", pa.list_(pa.int32())),  # null for dense-only models
            pa.field("sparse_weights", pa.list_(pa.float32())),
            pa.field("manifest_json", pa.string()),  # parser/chunker/embedder versions
        ]
    )


def embed_key(text: str) -> str:
    """The embedding-cache key of a text: the hash of exactly what is embedded."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def embed_cache_schema(dim: int) -> pa.Schema:
    """One model's embeddings by text hash (the table name carries the model fingerprint)."""
    return pa.schema(
        [
            pa.field("embed_key", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("sparse_ids", pa.list_(pa.int32())),
            pa.field("sparse_weights", pa.list_(pa.float32())),
            pa.field("created_at", pa.timestamp("us", tz="UTC")),
        ]
    )


# One row per `corpusflow forget` call: the receipt of an erasure. It never holds the
# forgotten text, only where rows were removed, and hashes that let `verify` look for
# left-over bytes (storage.erasure: what the window hashes are and their limits).
ERASURES_SCHEMA = pa.schema(
    [
        pa.field("erasure_id", pa.string(), nullable=False),
        pa.field("collection", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("finished_at", pa.timestamp("us", tz="UTC")),
        pa.field("paths", pa.list_(pa.string())),
        pa.field("doc_ids", pa.list_(pa.string())),
        pa.field("rows_removed", pa.int64()),
        pa.field("versions_pruned", pa.int64()),
        pa.field("tags_removed", pa.list_(pa.string())),  # "<table>:<tag>@<version>"
        pa.field("tables_json", pa.string()),  # per table: rows removed, versions, tags
        pa.field("chunk_sha256", pa.list_(pa.string())),  # sha256 of each forgotten text
        pa.field("window_key", pa.string()),  # hex key of the window hashes
        pa.field("window_prefilter", pa.list_(pa.uint32())),  # cheap rolling hash per window
        pa.field("window_confirm", pa.list_(pa.string())),  # keyed sha256 per window [:16]
        pa.field("notes", pa.list_(pa.string())),
    ]
)
