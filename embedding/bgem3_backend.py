"""BGE-M3 through FlagEmbedding's BGEM3FlagModel: dense + sparse lexical weights in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embedding.base import Embeddings, ModelSpec
from embedding.runtime import LazyModel, encode_with_halving


def _load(spec: ModelSpec, device: str) -> Any:
    from FlagEmbedding import BGEM3FlagModel

    return BGEM3FlagModel(
        spec.path,
        use_fp16=device == "cuda",
        devices=device,
        normalize_embeddings=spec.normalize,
        query_max_length=spec.max_length,
        passage_max_length=spec.max_length,
    )


class BGEM3Embedder:
    has_sparse = True

    def __init__(self, spec: ModelSpec, device: str = "auto", colbert: bool = False) -> None:
        self.spec = spec
        self.colbert = colbert
        self.model = LazyModel(spec, device, _load)

    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.spec.path, local_files_only=True)

    def _encode(self, batch: list[str]) -> Embeddings:
        model = self.model.get()
        self.model.encode_calls += 1
        out = model.encode(
            batch,
            batch_size=len(batch),
            max_length=self.spec.max_length,
            return_dense=True,
            return_sparse=True,
            return_colbert_vecs=False,
        )
        dense = np.asarray(out["dense_vecs"], dtype=np.float32).reshape(len(batch), -1)
        sparse = [
            {int(tok): float(w) for tok, w in weights.items()} for weights in out["lexical_weights"]
        ]
        return Embeddings(dense=dense, sparse=sparse)

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        return encode_with_halving(texts, batch_size, self._encode)
