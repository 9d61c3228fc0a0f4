"""BGE-M3 through FlagEmbedding's BGEM3FlagModel: dense + sparse lexical weights in one pass.

The weights, tokenizer and heads load through ``BGEM3FlagModel`` and every forward pass
runs its model (``EncoderOnlyEmbedderM3ModelForInference``: CLS pooling + normalisation
for dense, ReLU(linear) token weights for sparse). We call that model per batch rather
than ``BGEM3FlagModel.encode``: encode first runs a trial batch to probe the batch size,
so calling it once per batch costs two forward passes, and the probe swallows every
RuntimeError (out-of-memory included) while shrinking the batch on its own. Batching,
length sorting and out-of-memory halving are ours (embedding.batching / runtime).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embedding.base import Embeddings, ModelSpec
from embedding.runtime import LazyModel, encode_with_halving
from embedding.tokenizer import Tokenizer, load_tokenizer


def _load(spec: ModelSpec, device: str) -> Any:
    from FlagEmbedding import BGEM3FlagModel

    bge = BGEM3FlagModel(
        spec.path,
        use_fp16=device == "cuda",
        devices=device,
        normalize_embeddings=spec.normalize,
        query_max_length=spec.max_length,
        passage_max_length=spec.max_length,
    )
    bge.model.to(device)
    bge.model.eval()
    if device == "cpu":
        bge.model.float()
    return bge


class BGEM3Embedder:
    has_sparse = True

    def __init__(self, spec: ModelSpec, device: str = "auto", colbert: bool = False) -> None:
        self.spec = spec
        self.colbert = colbert
        self.model = LazyModel(spec, device, _load)

    def tokenizer(self) -> Tokenizer:
        return load_tokenizer(self.spec.path)

    def _encode(self, batch: list[str]) -> Embeddings:
        import torch

        bge = self.model.get()
        self.model.encode_calls += 1
        tok = bge.tokenizer
        inputs = tok(
            batch,
            truncation=True,
            max_length=self.spec.max_length,
            padding=True,
            return_tensors="pt",
        ).to(self.model.device)
        with torch.inference_mode():
            out = bge.model(
                inputs, return_dense=True, return_sparse=True, return_colbert_vecs=self.colbert
            )
        dense = out["dense_vecs"].float().cpu().numpy().astype(np.float32).reshape(len(batch), -1)
        weights = out["sparse_vecs"].squeeze(-1).float().cpu().numpy()
        ids = inputs["input_ids"].cpu().numpy()
        special = {tok.cls_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id}
        sparse: list[dict[int, float]] = []
        for row_w, row_ids in zip(weights, ids, strict=True):
            lexical: dict[int, float] = {}
            for w, t in zip(row_w.tolist(), row_ids.tolist(), strict=True):
                if t not in special and w > 0 and w > lexical.get(t, 0.0):
                    lexical[int(t)] = float(w)  # a token's weight: its highest in the text
            sparse.append(lexical)
        return Embeddings(dense=dense, sparse=sparse)

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        return encode_with_halving(texts, batch_size, self._encode)
