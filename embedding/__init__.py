"""embedding: chunk texts -> dense (+ sparse) vectors, in checkpointed batches.

``load_embedder(settings)`` resolves a preset name, Hugging Face id or local
directory to an Embedder; ``embed_texts`` runs it in length-sorted batches and
persists each finished batch through a ``VectorCheckpoint`` so a killed run
resumes without re-embedding. torch / FlagEmbedding are imported only inside
the backend modules.
"""

from embedding.base import (
    Embedder,
    EmbeddingError,
    Embeddings,
    ModelSpec,
    OneThreadEmbedder,
    VectorCheckpoint,
)
from embedding.batching import EmbedCounts, embed_texts
from embedding.presets import load_embedder, resolve_model, tokenizer_fingerprint

__all__ = [
    "EmbedCounts",
    "Embedder",
    "EmbeddingError",
    "Embeddings",
    "ModelSpec",
    "OneThreadEmbedder",
    "VectorCheckpoint",
    "embed_texts",
    "load_embedder",
    "resolve_model",
    "tokenizer_fingerprint",
]
