"""chunking: ParsedDocument -> child chunks (retrieval units) + parent sections (context).

Structure-aware splitting is docling-core's HybridChunker driven by the
embedding model's own tokenizer; parents group a section's children up to a
token budget; a context prefix (deterministic by default) situates each chunk.
"""

from chunking.models import Chunk, ChunkSet, Parent, chunker_fingerprint

__all__ = ["Chunk", "ChunkSet", "Parent", "chunk_document", "chunker_fingerprint"]


def __getattr__(name: str) -> object:
    if name == "chunk_document":
        from chunking.structure import chunk_document

        return chunk_document
    raise AttributeError(name)
