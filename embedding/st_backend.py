"""Dense-only models through sentence-transformers (the bundled MiniLM, any HF encoder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embedding.base import Embeddings, ModelSpec
from embedding.runtime import LazyModel, encode_with_halving
from embedding.tokenizer import Tokenizer, load_tokenizer


def _load(spec: ModelSpec, device: str) -> Any:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(spec.path, device=device, local_files_only=True)
    model.max_seq_length = spec.max_length
    if device == "cuda":
        model.half()
    return model


class SentenceTransformerEmbedder:
    has_sparse = False

    def __init__(self, spec: ModelSpec, device: str = "auto") -> None:
        self.spec = spec
        self.model = LazyModel(spec, device, _load)

    def tokenizer(self) -> Tokenizer:
        return load_tokenizer(self.spec.path)

    def _encode(self, batch: list[str]) -> Embeddings:
        model = self.model.get()
        self.model.encode_calls += 1
        dense = model.encode(
            batch,
            batch_size=len(batch),
            normalize_embeddings=self.spec.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return Embeddings(dense=dense, sparse=None)

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        return encode_with_halving(texts, batch_size, self._encode)
