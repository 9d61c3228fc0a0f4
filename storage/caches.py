"""The collection's caches: parsed documents, LLM contexts, and one embedding cache per
model. Every cache is keyed by a hash of exactly what produced its value, so an entry
is never stale, only unused (``storage.maintenance`` evicts those)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pyarrow as pa

from storage.schema import CONTEXT_CACHE_SCHEMA, PARSE_CACHE_SCHEMA, embed_cache_schema
from storage.tables import Tables, batches, find_wide, now, read_table, sql_in


class Caches:
    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.contexts = ContextCacheTable(tables)

    def embeddings(self, suffix: str, dim: int) -> EmbeddingCache:
        """The embedding cache of the model whose tables carry ``suffix``."""
        return EmbeddingCache(self.tables, self.tables.name("embed_cache", suffix), dim)

    def tidy(self, max_fragments: int = 16) -> dict[str, str]:
        """Keep cache lookups cheap as the caches grow.

        Every cached document is its own commit and so its own fragment, and a lookup
        opens every fragment: at 1,000 documents a reindex spent most of its time
        there. A BTREE index on the key, and compaction once fragmented, fix that
        (``Tables.tidy``; versions older than Lance's default of 7 days are pruned: no
        reader holds a cache's version).
        """
        t = self.tables
        done: dict[str, str] = {}
        names = [t.name("parse_cache"), t.name("context_cache"), *t.table_names("embed_cache__")]
        for name in names:
            kind = name.removeprefix(t.collection + "__")
            key = "embed_key" if kind.startswith("embed_cache") else "cache_key"
            if what := t.tidy(name, max_fragments, key=key, prune=None):
                done[kind] = what
        return done

    def get_parsed(self, sha256: str, parser_fps: Collection[str]) -> tuple[str, str] | None:
        """(fingerprint, ParsedDocument JSON) of a parse of these bytes under any of
        ``parser_fps`` (fingerprints are per format, and the format is known only from
        the parse), or None."""
        table = self.tables.find(self.tables.name("parse_cache"))
        if table is None or not parser_fps:
            return None
        keys = [f"{sha256}:{fp}" for fp in sorted(set(parser_fps))]
        rows = find_wide(table, "cache_key", keys, ["parser_fingerprint", "parsed_json"], 1)
        return (rows[0]["parser_fingerprint"], rows[0]["parsed_json"]) if rows else None

    def put_parsed(self, items: Sequence[tuple[str, str, str]]) -> None:
        """items: (sha256, parser fingerprint, ParsedDocument JSON); of two items with one
        key (copies of one file in a batch), the last."""
        if not items:
            return
        unique = {f"{sha}:{fp}": (sha, fp, js) for sha, fp, js in items}
        data = pa.Table.from_pylist(
            [
                {
                    "cache_key": key,
                    "content_sha256": sha,
                    "parser_fingerprint": fp,
                    "parsed_json": js,
                    "created_at": now(),
                }
                for key, (sha, fp, js) in unique.items()
            ],
            schema=PARSE_CACHE_SCHEMA,
        )
        with self.tables.write_lock:
            table = self.tables.open_or_create(self.tables.name("parse_cache"), PARSE_CACHE_SCHEMA)
            if not table.count_rows(sql_in("cache_key", unique)):
                # New bytes (the usual case): appended. A merge joins against every
                # fragment: 0.5-0.7 s a batch at 64 fragments, against 16 ms.
                table.add(data)
                return
            # A parse of cached bytes under the same fingerprint replaces the cached one:
            # a page retry (``ParserPool.parse_pages``) filled in pages it lacked.
            (
                table.merge_insert("cache_key")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data)
            )


class ContextCacheTable:
    """chunking.llm_context.ContextCache on the collection's context_cache table."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.name = tables.name("context_cache")

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        table = self.tables.find(self.name) if keys else None
        if table is None:
            return {}
        out: dict[str, str] = {}
        for part in batches(list(dict.fromkeys(keys))):
            rows = read_table(table, ["cache_key", "context"], sql_in("cache_key", part))
            out.update(
                zip(*(rows.column(c).to_pylist() for c in ("cache_key", "context")), strict=True)
            )
        return out

    def put_many(self, items: Mapping[str, str]) -> None:
        if not items:
            return
        data = pa.Table.from_pylist(
            [{"cache_key": k, "context": v, "created_at": now()} for k, v in items.items()],
            schema=CONTEXT_CACHE_SCHEMA,
        )
        with self.tables.write_lock:
            table = self.tables.open_or_create(self.name, CONTEXT_CACHE_SCHEMA)
            table.merge_insert("cache_key").when_not_matched_insert_all().execute(data)


class EmbeddingCache:
    """VectorCheckpoint and cross-run cache of one model's embeddings, keyed by the hash
    of the exact text embedded (``embed_key``). Saved as each group of batches finishes,
    so it is also the resume point of an interrupted run; kept across runs, so a refresh
    embeds only texts this model has never embedded. The table name carries the model's
    fingerprint: another model never reads these entries. Maintenance compacts it and
    evicts keys no chunk row of the model references (``storage.maintenance``)."""

    def __init__(self, tables: Tables, name: str, dim: int) -> None:
        self.tables = tables
        self.name = name
        self.dim = dim

    def load(self, keys: Sequence[str]) -> dict[str, tuple[np.ndarray, dict[int, float] | None]]:
        table = self.tables.find(self.name) if keys else None
        if table is None:
            return {}
        out: dict[str, tuple[np.ndarray, dict[int, float] | None]] = {}
        for part in batches(list(dict.fromkeys(keys))):
            arrow = table.search().where(sql_in("embed_key", part)).limit(len(part) * 2).to_arrow()
            for row in arrow.to_pylist():
                sparse = None
                if row["sparse_ids"] is not None:
                    sparse = dict(zip(row["sparse_ids"], row["sparse_weights"], strict=True))
                out[row["embed_key"]] = (np.asarray(row["vector"], dtype=np.float32), sparse)
        return out

    def save(
        self, keys: Sequence[str], dense: np.ndarray, sparse: list[dict[int, float]] | None
    ) -> None:
        schema = embed_cache_schema(self.dim)
        created = now()
        rows = [
            {
                "embed_key": key,
                "vector": dense[i].astype(np.float32).tolist(),
                "sparse_ids": list(sparse[i].keys()) if sparse is not None else None,
                "sparse_weights": list(sparse[i].values()) if sparse is not None else None,
                "created_at": created,
            }
            for i, key in enumerate(keys)
        ]
        data = pa.Table.from_pylist(rows, schema=schema)
        # Only keys ``load`` did not find are saved (under the collection's write lease),
        # so a plain append: no join against a cache that grows with the corpus.
        with self.tables.write_lock:
            self.tables.open_or_create(self.name, schema).add(data)

    def count(self) -> int:
        table = self.tables.find(self.name)
        return int(table.count_rows()) if table is not None else 0
