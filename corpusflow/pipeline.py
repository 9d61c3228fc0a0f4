"""The refresh as plain functions: plan, process one document, write a batch.

Flows call these; so can tests and scripts, without an orchestrator. Each function uses
the stage packages only through their public interfaces.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

from chunking import ChunkSet
from chunking.models import Chunk, Contextualizer, Parent
from common.deadline import DeadlineExceeded, thread_deadline
from common.errors import (
    Category,
    ConfigurationError,
    CorpusflowError,
    DocumentError,
)
from common.settings import Settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.plan import MISSING_PAGES, WorkItem
from embedding import EmbedCounts, Embedder, ModelSpec, embed_texts
from embedding.runtime import load_seconds
from parsers import ParsedDocument
from parsers.models import ParseWarning
from sources import Source, open_source
from storage import Store
from storage.records import ChunkRow, DocStatus, LedgerRow, ParentRow
from storage.schema import embed_key


class ValidationFailedError(CorpusflowError):
    """A rebuilt table did not validate; the active pointer was left alone."""


def choose_model(settings: Settings, store: Store) -> ModelSpec:
    """The configured model; when none is configured, the active table's model (or the
    default preset, embedding.presets.DEFAULT_MODEL)."""
    from embedding import resolve_model

    embed = settings.embed
    if embed.model is None:
        active = store.pointer.active()
        if active is not None:
            prior = json.loads(active.model_json)
            embed = embed.model_copy(
                update={
                    "model": prior["name"],
                    "max_length": embed.max_length or prior["max_length"],
                }
            )
    return resolve_model(embed)


def preflight(source: str, settings: Settings) -> ModelSpec:
    """Fail fast, before any flow starts, on a missing source, an unloadable model or an
    LLM context provider without an endpoint."""
    open_source(source, settings.source).check()
    if settings.chunk.contextual == "llm" and not settings.llm.base_url:
        raise ConfigurationError(
            "chunk.contextual='llm' needs llm.base_url (CORPUSFLOW_LLM__BASE_URL), an "
            "OpenAI-compatible API root such as http://127.0.0.1:8080/v1"
        )
    return choose_model(settings, Store.from_settings(settings.storage))


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


@dataclass(slots=True)
class Processed:
    """A document parsed and chunked, ready to embed."""

    item: WorkItem
    parsed: ParsedDocument
    chunks: ChunkSet
    from_cache: bool
    # Seconds this document took: parsing (0 from the parse cache) and chunking
    # (LLM requests for contextual prefixes included): the runs' rates (corpusflow.estimate).
    parse_s: float = 0.0
    chunk_s: float = 0.0


def parse_document(
    item: WorkItem,
    source: Source,
    store: Store,
    settings: Settings,
    fps: Fingerprints,
    parse: Callable[[str], ParsedDocument],
) -> tuple[ParsedDocument, bool]:
    """ParsedDocument from the parse cache, else from ``parse`` (cached when its batch is
    written, see write_batch)."""
    f = item.file
    if f.size > settings.source.max_file_size_mb * 1024 * 1024:
        raise DocumentError(
            Category.TOO_LARGE,
            f"{f.size / 2**20:.1f} MiB exceeds source.max_file_size_mb={settings.source.max_file_size_mb:g}",
        )
    if not item.sha256:
        try:
            item.sha256 = source.content_hash(f)
        except FileNotFoundError as exc:
            raise DocumentError(Category.SOURCE_CHANGED, "file vanished after listing") from exc
    cached = fps.parsers.cached(
        store.caches.get_parsed(item.sha256, fps.parsers.by_format.values())
    )
    if cached is not None:
        return cached, True
    metadata = source.metadata(f)
    try:
        with source.fetch(f) as local_path:
            parsed = parse(local_path)
        # The file may have changed while it was parsed: never index bytes we did not hash.
        after = source.content_hash(f)
    except FileNotFoundError as exc:
        raise DocumentError(Category.SOURCE_CHANGED, "file vanished while it was parsed") from exc
    if metadata:
        parsed = replace(parsed, metadata={**parsed.metadata, **metadata})
    if after != item.sha256:
        raise DocumentError(
            Category.SOURCE_CHANGED, "file changed while it was parsed; it is retried next run"
        )
    # Cached with the batch's commit (write_batch): one cache commit per batch, not per
    # document, keeps the cache table's fragments, and so every lookup, cheap.
    return parsed, False


def retry_pages(
    item: WorkItem,
    source: Source,
    store: Store,
    settings: Settings,
    fps: Fingerprints,
    parse_pages: Callable[[str, ParsedDocument, dict[str, Any]], ParsedDocument],
    parse: Callable[[str], ParsedDocument],
) -> tuple[ParsedDocument, bool]:
    """A page retry (``PlanReason.PAGES``): the cached parse of the document's bytes with
    only its missing pages parsed again by ``parse_pages`` (``ParserPool.parse_pages``);
    the result replaces the cached parse when its batch is written. Without a current
    cached parse (evicted, or another parser fingerprint), the document is parsed whole
    (``parse_document``); with no page missing in it, the cached parse is used as it is."""
    cached = fps.parsers.cached(
        store.caches.get_parsed(item.sha256, fps.parsers.by_format.values())
    )
    if cached is None:
        return parse_document(item, source, store, settings, fps, parse)
    if not cached.missing_pages:
        return cached, True
    f = item.file
    metadata = source.metadata(f)
    try:
        with source.fetch(f) as local_path:
            parsed = parse_pages(local_path, cached, metadata)
        after = source.content_hash(f)
    except FileNotFoundError as exc:
        raise DocumentError(Category.SOURCE_CHANGED, "file vanished while it was parsed") from exc
    if after != item.sha256:
        # Pages of other bytes spliced into this parse would be a document nobody wrote.
        raise DocumentError(
            Category.SOURCE_CHANGED, "file changed while its pages were parsed again"
        )
    return parsed, False


def make_contextualizer(settings: Settings, store: Store) -> Contextualizer | None:
    """The run's context provider: None for the built-in deterministic one (or none)."""
    if settings.chunk.contextual != "llm":
        return None
    from chunking.llm_context import LLMContextualizer

    return LLMContextualizer(settings.llm, store.caches.contexts)


def chunk_parsed(
    item: WorkItem,
    parsed: ParsedDocument,
    tokenizer: Any,
    settings: Settings,
    fps: Fingerprints,
    contextualizer: Contextualizer | None = None,
) -> ChunkSet:
    from chunking import chunk_document

    limit = settings.chunk.timeout_s
    try:
        with thread_deadline(limit):
            chunks = chunk_document(
                parsed, item.file.doc_id, tokenizer, fps.max_tokens, settings.chunk, contextualizer
            )
    except DeadlineExceeded:
        # Raised below, outside this handler, so that the DocumentError does not keep
        # the chunker's frames (and the parsed document) alive as its __context__.
        chunks = None
    if chunks is None:
        # Chunking the same text again takes as long: refused until the bytes or the
        # limit change (the limit is part of failure_judge), not retried every night.
        raise DocumentError(
            Category.TOO_LARGE,
            f"chunking did not finish within chunk.timeout_s={limit:g} s "
            f"({len(parsed.markdown)} characters of text); raise it to index this document",
        )
    if not chunks.children:
        if any(ch.isalnum() for ch in parsed.markdown):
            # The chunker guarantees a chunk for any text: this is a bug, not an empty file.
            raise DocumentError(
                Category.INTERNAL,
                f"the chunker returned no chunks for {len(parsed.markdown)} characters of text",
            )
        raise DocumentError(Category.EMPTY, "document has no words to index")
    return chunks


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


@dataclass(slots=True)
class RunReport:
    run_id: str
    collection: str
    new: int = 0
    changed: int = 0
    retried: int = 0
    rechunked: int = 0
    page_retries: int = 0  # partial documents whose missing pages were parsed again
    unchanged: int = 0
    deleted: int = 0
    forgotten: int = 0  # erased documents still in the source, skipped (``corpusflow forget``)
    # Held by the retrieval check (corpusflow.holds): skipped, or held by this undone run.
    held: int = 0
    accepted: int = 0  # held documents indexed anyway (``corpusflow accept-held``)
    failed: int = 0
    partial: int = 0  # indexed with content missing (ledger error_category "partial")
    reused: int = 0  # chunks taken from the active table (same bytes, same chunker)
    parsed: int = 0  # documents actually parsed (not served by the parse cache)
    parse_cache_hits: int = 0
    chunks_written: int = 0
    embedded: int = 0  # distinct texts sent to the embedding model
    embed_cache_hits: int = 0  # distinct texts whose vectors came from the embedding cache
    chunk_table: str = ""
    chunk_table_version: int | None = None
    activated: bool = False
    gate: str = ""  # the quality gate's comparison, when one ran
    model: str = ""
    executor: str = ""  # the name of the executor that processed the documents
    elapsed_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)
    # What this run measured, per format and per model, for later plans
    # (corpusflow.estimate.Rates.to_dict); read back from the runs table.
    rates: dict[str, Any] = field(default_factory=dict)
    # The plan's estimate made before the run started (corpusflow.estimate.Estimate.to_dict).
    estimate: dict[str, Any] = field(default_factory=dict)
    # The budget (run.max_*) that stopped the run early, "" when it finished, and what
    # it left for the next run: documents still new/changed, and why.
    stopped_by: str = ""
    stop_reason: str = ""
    left: int = 0
    llm_tokens: int = 0  # LLM tokens spent on contextual prefixes (chunk.contextual='llm')
    failures: list[dict[str, str]] = field(default_factory=list)
    # The retrieval check (before/after figures, changed questions, whether it undid
    # the run); empty when no question set is configured.
    check: dict[str, Any] = field(default_factory=dict)
    held_documents: list[dict[str, Any]] = field(default_factory=list)  # Hold.row of each
    # The approval this run asked for (corpusflow.approval): reasons, answer, by, note;
    # empty when it asked nothing.
    approval: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StageTimer:
    """Accumulates wall time per stage name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds

    def time(self, stage: str) -> _Timed:
        return _Timed(self, stage)


class _Timed:
    def __init__(self, timer: StageTimer, stage: str) -> None:
        self.timer, self.stage = timer, stage

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timer.add(self.stage, time.perf_counter() - self.start)
