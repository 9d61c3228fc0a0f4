"""One document's own work: parsed (from the parse cache, whole, or only its missing
pages) and chunked, ready to embed (``Processed``).

``corpusflow.kit.process_document`` runs these for the executors; ``corpusflow.writes``
embeds and commits what they return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from chunking import ChunkSet
from chunking.models import Contextualizer
from common.deadline import DeadlineExceeded, thread_deadline
from common.errors import Category, DocumentError
from common.settings import Settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.plan import WorkItem
from parsers import ParsedDocument
from sources import Source
from storage import Store


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
