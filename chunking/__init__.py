"""chunking: ParsedDocument -> child chunks (retrieval units) + parent sections (context).

Structure-aware splitting is docling-core's HybridChunker driven by the
embedding model's own tokenizer; parents group a section's children up to a
token budget; a context prefix (deterministic by default) situates each chunk.
"""

from chunking.models import Chunk, ChunkSet, Parent, chunker_fingerprint
from chunking.structure import chunk_document, warm_up

__all__ = ["Chunk", "ChunkSet", "Parent", "chunk_document", "chunker_fingerprint", "warm_up"]
