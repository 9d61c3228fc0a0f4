"""Witnesses of work done: the real document embedder, counting what it is asked to encode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import corpusflow.job as job_module


class CountingEmbedder:
    """The real embedder, counting the texts the model is asked to encode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.texts: list[str] = []

    @property
    def has_sparse(self) -> bool:
        return bool(self.inner.has_sparse)

    def tokenizer(self) -> Any:
        return self.inner.tokenizer()

    def embed(self, texts: Sequence[str], batch_size: int) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts, batch_size)


def count_embedders(monkeypatch: pytest.MonkeyPatch) -> list[CountingEmbedder]:
    """Every document embedder a refresh loads from now on is a CountingEmbedder, appended
    to the returned list (the last one is the latest run's)."""
    made: list[CountingEmbedder] = []
    real = job_module.load_document_embedder

    def load(*args: Any, **kwargs: Any) -> CountingEmbedder:
        made.append(CountingEmbedder(real(*args, **kwargs)))
        return made[-1]

    monkeypatch.setattr(job_module, "load_document_embedder", load)
    return made
