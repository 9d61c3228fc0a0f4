"""What a refresh writes to storage: a batch's chunks (embedded) and then its ledger
rows, failures, deletions; and the chunks it takes back from the active table instead
of parsing and chunking again (``reuse_active_chunks``).

The engine calls these one batch at a time, under the collection's write lease
(corpusflow.engine; ``write_batch`` through the executor's ``WriteBatch``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Any

from chunking import ChunkSet
from chunking.language import cjk_runs
from chunking.models import Chunk, Parent
from common.errors import DocumentError
from common.settings import Settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.parse_chunk import Processed
from corpusflow.plan import MISSING_PAGES, WorkItem
from embedding import EmbedCounts, Embedder, embed_texts
from embedding.runtime import load_seconds
from parsers import ParsedDocument
from parsers.models import ParseWarning
from storage import Store
from storage.records import ChunkRow, DocStatus, LedgerRow, ParentRow
from storage.schema import embed_key

# Stored columns that are exactly the fields of Chunk / Parent.
_CHUNK_FIELDS = [f.name for f in dataclass_fields(Chunk)]
_PARENT_FIELDS = [f.name for f in dataclass_fields(Parent)]


def _tuple_lists(row: dict[str, Any]) -> dict[str, Any]:
    """A stored chunk or parent row as dataclass fields (list columns become tuples)."""
    return {**row, **{k: tuple(row[k] or ()) for k in ("heading_path", "page_numbers")}}


def reuse_active_chunks(
    work: Sequence[WorkItem],
    store: Store,
    fps: Fingerprints,
    settings: Settings,
    group: int = 256,
) -> tuple[list[WorkItem], Iterator[Processed | WorkItem]]:
    """Split ``work`` for a table being built beside the active one: documents whose
    active chunks were cut from the same bytes with the same chunker (same tokenizer and
    chunk settings) are taken from the active table, with no parse-cache read and no
    chunking; the rest are returned to be parsed and chunked.

    Returns (items still to process, a stream of reused documents; an item the active
    table turns out not to hold whole comes back as a WorkItem, to be processed).
    """
    active = store.pointer.active()
    if active is None or active.chunk_table == store.chunks.name(fps.table_suffix):
        return list(work), iter(())
    ledger = store.ledger.rows(
        store.chunks.suffix_of(active.chunk_table), [item.file.doc_id for item in work]
    )
    reusable: list[WorkItem] = []
    rest: list[WorkItem] = []
    for item in work:
        row = ledger.get(item.file.doc_id)
        if (
            row is None
            or row.status != DocStatus.INDEXED
            or row.chunker_fingerprint != fps.chunker
            or row.parser_fingerprint != fps.parsers.of(row.format)
            or not row.content_sha256
        ):
            rest.append(item)
        elif item.sha256:  # hashed while planning: the hash decides
            (reusable if item.sha256 == row.content_sha256 else rest).append(item)
        elif settings.source.hash_shortcut and item.file.hint_matches(
            row.size, row.mtime, row.etag
        ):
            reusable.append(item)
        else:
            rest.append(item)

    def stream() -> Iterator[Processed | WorkItem]:
        for start in range(0, len(reusable), group):
            part = reusable[start : start + group]
            ids = [item.file.doc_id for item in part]
            chunks: dict[str, list[Chunk]] = {d: [] for d in ids}
            for r in store.rows_of_documents(active.chunk_table, ids, _CHUNK_FIELDS):
                chunks[r["doc_id"]].append(Chunk(**_tuple_lists(r)))
            parents: dict[str, list[Parent]] = {d: [] for d in ids}
            if active.parent_table and store.exists(active.parent_table):
                for r in store.rows_of_documents(active.parent_table, ids, _PARENT_FIELDS):
                    parents[r["doc_id"]].append(Parent(**_tuple_lists(r)))
            for item in part:
                row = ledger[item.file.doc_id]
                children = sorted(chunks[item.file.doc_id], key=lambda c: c.position)
                if len(children) != row.chunk_count:
                    yield item  # the active table disagrees with its ledger: rebuild it
                    continue
                item.sha256 = row.content_sha256 or ""
                partial = row.error_category == "partial"
                parsed = ParsedDocument(
                    markdown="",
                    docling_json="",
                    title=row.title or "",
                    format=row.format or "",
                    page_count=row.page_count or 0,
                    parser=row.parser or "",
                    status="partial" if partial else "success",
                    warnings=(ParseWarning("ledger", row.error_message),)
                    if partial and row.error_message
                    else (),
                    metadata=row.metadata,
                )
                chunk_set = ChunkSet(tuple(children), tuple(parents[item.file.doc_id]))
                yield Processed(item=item, parsed=parsed, chunks=chunk_set, from_cache=True)

    return rest, stream()


def ledger_row(
    item: WorkItem,
    fps: Fingerprints,
    status: DocStatus,
    parsed: ParsedDocument | None = None,
    chunk_count: int = 0,
    error: DocumentError | None = None,
) -> LedgerRow:
    f = item.file
    category = error.category.value if error else None
    message = error.message if error else None
    indexed = status == DocStatus.INDEXED
    if indexed and parsed is not None and parsed.status == "partial":
        # Indexed, but never as complete: the ledger says what is missing.
        category = "partial"
        missing = ", ".join(str(p) for p in parsed.missing_pages)
        message = (
            "; ".join(
                ([f"{MISSING_PAGES}{missing}"] if missing else [])
                + [str(w) for w in parsed.warnings]
            )[:2000]
            or "the parser returned a partial result"
        )
    return LedgerRow(
        doc_id=f.doc_id,
        path=f.rel_path,
        # The hash is the commit marker: written only with status indexed.
        content_sha256=item.sha256 if indexed else None,
        size=f.size,
        mtime=f.mtime,
        etag=f.etag,
        status=status,
        error_category=category,
        error_message=message,
        attempts=0 if indexed else item.attempts + 1,
        format=parsed.format if parsed else None,
        title=parsed.title if parsed else None,
        page_count=parsed.page_count if parsed else None,
        parser=parsed.parser if parsed else None,
        parser_fingerprint=fps.parsers.of(parsed.format) if indexed and parsed else None,
        chunker_fingerprint=fps.chunker if indexed else None,
        model_fingerprint=fps.model if indexed else None,
        chunk_count=chunk_count,
        metadata_json=json.dumps(parsed.metadata if parsed else {}),
    )


@dataclass(frozen=True, slots=True)
class BatchWritten:
    """One committed batch: chunks written, the chunk table's version, and how many
    distinct texts were embedded or taken from the embedding cache."""

    chunks: int
    version: int
    embedded: int
    cache_hits: int
    embed_s: float = 0.0  # of the batch's time: embedding-cache reads and encoding
    load_s: float = 0.0  # of embed_s: loading the model's weights (the first batch only)


def write_batch(
    batch: Sequence[Processed],
    store: Store,
    embedder: Embedder,
    settings: Settings,
    fps: Fingerprints,
    on_progress: Callable[[int], None] | None = None,
) -> BatchWritten:
    """Embed a batch of documents and commit their chunks, then their ledger rows.

    Texts are keyed by the hash of exactly what is embedded (``embed_key``): a text
    this model embedded in any earlier run comes from the embedding cache.
    """
    spec = embedder.spec
    # The batch's fresh parses go to the parse cache first: a failed embedding or commit
    # does not cost the parse again.
    store.caches.put_parsed(
        [
            (p.item.sha256, fps.parsers.of(p.parsed.format), p.parsed.to_json())
            for p in batch
            if not p.from_cache
        ]
    )
    children = [c for p in batch for c in p.chunks.children]
    keys = {c.chunk_id: embed_key(c.embed_text) for c in children}
    counts = EmbedCounts()
    embed_start, loaded_before = time.perf_counter(), load_seconds()
    vectors = embed_texts(
        embedder,
        [keys[c.chunk_id] for c in children],
        [c.embed_text for c in children],
        settings.embed.batch_size,
        checkpoint=store.caches.embeddings(spec.table_suffix, spec.dim),
        checkpoint_every=settings.embed.checkpoint_every,
        on_progress=on_progress,
        counts=counts,
    )
    embed_s, load_s = time.perf_counter() - embed_start, load_seconds() - loaded_before
    manifest = {  # what produced a chunk row, per format in the batch
        fmt: json.dumps(
            {"parser": fps.parsers.of(fmt), "chunker": fps.chunker, "model": spec.to_dict()},
            sort_keys=True,
        )
        for fmt in {p.parsed.format for p in batch}
    }
    chunk_rows: list[ChunkRow] = []
    parent_rows: list[ParentRow] = []
    for p in batch:
        meta = json.dumps(p.parsed.metadata)
        for c in p.chunks.children:
            dense, sparse = vectors[keys[c.chunk_id]]
            chunk_rows.append(
                ChunkRow(
                    chunk_id=c.chunk_id,
                    doc_id=c.doc_id,
                    parent_id=c.parent_id,
                    position=c.position,
                    text=c.text,
                    context=c.context,
                    embed_text=c.embed_text,
                    embed_key=keys[c.chunk_id],
                    cjk_text=cjk_runs(c.embed_text),
                    heading_path=list(c.heading_path),
                    page_numbers=list(c.page_numbers),
                    path=p.item.file.rel_path,
                    title=p.parsed.title,
                    format=p.parsed.format,
                    metadata_json=meta,
                    acl_groups=_acl(p.parsed.metadata),
                    n_tokens=c.n_tokens,
                    lang=c.lang or None,
                    vector=dense,
                    sparse_ids=list(sparse.keys()) if sparse is not None else None,
                    sparse_weights=list(sparse.values()) if sparse is not None else None,
                    manifest_json=manifest[p.parsed.format],
                )
            )
        parent_rows.extend(
            ParentRow(
                parent_id=par.parent_id,
                doc_id=par.doc_id,
                text=par.text,
                heading_path=list(par.heading_path),
                page_numbers=list(par.page_numbers),
            )
            for par in p.chunks.parents
        )
    version = store.chunks.replace(
        spec.table_suffix,
        spec.dim,
        [p.item.file.doc_id for p in batch],
        chunk_rows,
        parent_rows,
    )
    # Only now that the chunks are committed does the ledger record the new hash.
    store.ledger.upsert(
        fps.table_suffix,
        [
            ledger_row(p.item, fps, DocStatus.INDEXED, p.parsed, len(p.chunks.children))
            for p in batch
        ],
    )
    return BatchWritten(
        len(chunk_rows), version, counts.embedded, counts.cached, embed_s - load_s, load_s
    )


def _acl(metadata: dict[str, Any]) -> list[str] | None:
    acl = metadata.get("acl")
    return [str(g) for g in acl] if isinstance(acl, list) else None


def record_failures(
    failures: Iterable[tuple[WorkItem, DocumentError]],
    store: Store,
    fps: Fingerprints,
    quarantine_after: int,
) -> None:
    rows = []
    for item, err in failures:
        quarantine = item.attempts + 1 >= quarantine_after
        status = DocStatus.QUARANTINED if quarantine else DocStatus.FAILED
        row = ledger_row(item, fps, status, error=err)
        if quarantine or err.terminal:
            # Remember which bytes failed, and what judged them, so they are not retried
            # until either changes (the judge sits in parser_fingerprint: a failed row
            # has no parse of its own).
            row.content_sha256 = item.sha256 or None
            row.parser_fingerprint = fps.failures
        rows.append(row)
    store.ledger.upsert(fps.table_suffix, rows)


def record_deletions(deleted: Sequence[LedgerRow], store: Store, suffix: str) -> None:
    if not deleted:
        return
    store.chunks.delete(suffix, [r.doc_id for r in deleted])
    store.ledger.upsert(
        suffix,
        [
            replace(r, status=DocStatus.DELETED, content_sha256=None, chunk_count=0, hold_json=None)
            for r in deleted
        ],
    )
