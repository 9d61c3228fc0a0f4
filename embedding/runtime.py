"""Shared machinery of the local-model backends: device choice, lazy load, OOM halving."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from common.errors import is_oom, is_transient
from embedding.base import EmbeddingError, Embeddings, ModelLoadError, ModelSpec

log = logging.getLogger(__name__)


def pick_device(requested: str) -> str:
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("embed.device is 'cuda' but no CUDA device is visible")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


_load_lock = threading.Lock()
_load_seconds = 0.0


def record_load_time(seconds: float) -> None:
    global _load_seconds
    with _load_lock:
        _load_seconds += seconds


def load_seconds() -> float:
    """Seconds this process has spent loading embedding weights: callers that time an
    embedding call subtract the difference to tell loading from encoding."""
    return _load_seconds


class LazyModel:
    """Loads the model once per process, on first use, behind a lock."""

    def __init__(self, spec: ModelSpec, device: str, loader: Callable[[ModelSpec, str], Any]):
        self.spec = spec
        self.requested_device = device
        self._loader = loader
        self._lock = threading.Lock()
        self._model: Any = None
        self.device = ""
        self.encode_calls = 0  # batches sent to the encoder (tests and benchmarks read it)

    def get(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self.device = pick_device(self.requested_device)
                    start = time.perf_counter()
                    try:
                        self._model = self._loader(self.spec, self.device)
                        record_load_time(time.perf_counter() - start)
                    except ModelLoadError:
                        raise
                    except Exception as exc:
                        raise ModelLoadError(
                            f"cannot load embedding model {self.spec.name!r} from "
                            f"{self.spec.path}: {type(exc).__name__}: {exc}. Check "
                            "embed.model (CORPUSFLOW_EMBED__MODEL / --model)."
                        ) from exc
        return self._model


def encode_with_halving(
    texts: Sequence[str], batch_size: int, encode: Callable[[list[str]], Embeddings]
) -> Embeddings:
    """Encode in batches; on out-of-memory, halve the batch and go on. Other errors are
    not retried here: the batch write is, under the refresh's one retry policy
    (corpusflow.retry), so attempts do not multiply."""
    import numpy as np

    dense_parts: list[Any] = []
    sparse_all: list[dict[int, float]] | None = []
    start = 0
    size = max(1, batch_size)
    while start < len(texts):
        batch = list(texts[start : start + size])
        try:
            out = encode(batch)
        except Exception as exc:
            if is_oom(exc) and size > 1:
                size = max(1, size // 2)
                log.warning("out of memory at batch size %d; retrying with %d", size * 2, size)
                _free_cuda_cache()
                continue
            if is_transient(exc):
                raise  # as it is: the batch write's retry policy sees it is transient
            raise EmbeddingError(f"encoder failed: {type(exc).__name__}: {exc}") from exc
        dense_parts.append(out.dense)
        if out.sparse is None:
            sparse_all = None
        elif sparse_all is not None:
            sparse_all.extend(out.sparse)
        start += len(batch)
    dense = np.concatenate(dense_parts) if dense_parts else np.zeros((0, 0), dtype=np.float32)
    return Embeddings(dense=dense.astype(np.float32, copy=False), sparse=sparse_all)


def _free_cuda_cache() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover
        pass
