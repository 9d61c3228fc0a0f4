"""Plain data of the chunking stage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from common.settings import ChunkSettings

if TYPE_CHECKING:
    from parsers.models import ParsedDocument

# Bump when the chunk output for the same input and settings changes.
# 3: each chunk records its detected language (``lang``).
# 4: chunk and parent ids from heading path, text and occurrence, not position.
# 5: tables split as triplet text without docling-core's header repetition (which
#    wrote "| - |" into every piece); language from 3 langdetect trials, not 7.
# 6: a chunk takes its document's language unless its script or its own function words
#    say otherwise (tables, headings and names no longer read as German or Dutch).
# 7: a table's top-left header cell, which no "row, column = value" triplet names, is
#    written once before the table's triplets.
# 8: each chunk row also carries its CJK runs (``cjk_text``) for the CJK bigram index; the
#    chunks are unchanged, the rows rewritten once (parses and embeddings from the caches).
CHUNKER_VERSION = "8"


@dataclass(frozen=True, slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    parent_id: str
    position: int
    text: str  # the chunk as written in the document
    context: str  # situating prefix ("" when contextual retrieval is off)
    heading_path: tuple[str, ...]
    page_numbers: tuple[int, ...]
    n_tokens: int
    lang: str = ""  # ISO 639-1 code of the chunk's main language (chunking.language)

    @property
    def embed_text(self) -> str:
        """What is embedded and keyword-indexed: context + text."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text


@dataclass(frozen=True, slots=True)
class Parent:
    parent_id: str
    doc_id: str
    text: str
    heading_path: tuple[str, ...]
    page_numbers: tuple[int, ...]


class Contextualizer(Protocol):
    """Writes one situating context per chunk of a document.

    ``pieces`` are (chunk text, heading path, parent section text) in document order.
    """

    def contexts(
        self, parsed: ParsedDocument, pieces: Sequence[tuple[str, tuple[str, ...], str]]
    ) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class ChunkSet:
    children: tuple[Chunk, ...]
    parents: tuple[Parent, ...]


def stable_id(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def chunker_fingerprint(settings: ChunkSettings, max_tokens: int, tokenizer_id: str) -> str:
    blob = json.dumps(
        {
            "version": CHUNKER_VERSION,
            "max_tokens": max_tokens,
            "strategy": settings.strategy,
            "overlap_tokens": settings.overlap_tokens,
            "parents": settings.parents,
            "merge_peers": settings.merge_peers,
            "parent_max_tokens": settings.parent_max_tokens,
            "contextual": settings.contextual,
            "tokenizer": tokenizer_id,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
