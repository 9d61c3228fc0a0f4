from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from common.errors import ConfigurationError
from common.settings import EmbedSettings
from embedding import Embeddings, embed_texts, load_embedder, resolve_model
from tests.helpers.tiny_models import build_tiny_bgem3

TEXTS = [
    "hotel cap for tier one",
    "lockout checklist before a cabinet",
    "spares ship same day",
    "表格 数据",
]


def test_bundled_minilm() -> None:
    spec = resolve_model(EmbedSettings(model="minilm"))
    assert spec.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert (spec.dim, spec.max_length, spec.pooling, spec.backend) == (
        384,
        256,
        "mean",
        "sentence-transformers",
    )
    emb = load_embedder(EmbedSettings(model="minilm"), spec).embed(TEXTS, batch_size=2)
    assert emb.dense.shape == (4, 384)
    assert emb.sparse is None
    np.testing.assert_allclose(np.linalg.norm(emb.dense, axis=1), 1.0, atol=1e-5)


def test_bge_m3_path_dense_and_sparse(tiny_bgem3: Path) -> None:
    settings = EmbedSettings(model=str(tiny_bgem3))
    spec = resolve_model(settings)
    assert spec.backend == "bge-m3"
    embedder = load_embedder(settings, spec)
    out = embedder.embed(TEXTS, batch_size=3)
    assert out.dense.shape == (4, 32)
    np.testing.assert_allclose(np.linalg.norm(out.dense, axis=1), 1.0, atol=1e-5)
    assert out.sparse is not None and len(out.sparse) == 4
    tok = embedder.tokenizer()
    ids = set(tok.encode(TEXTS[0], add_special_tokens=False))
    assert out.sparse[0] and set(out.sparse[0]) <= ids  # weights keyed by the text's token ids
    assert all(w > 0 for w in out.sparse[0].values())
    again = embedder.embed(TEXTS, batch_size=1)  # batch size must not change the vectors
    np.testing.assert_allclose(again.dense, out.dense, atol=1e-5)
    assert again.sparse is not None and again.sparse[0].keys() == out.sparse[0].keys()


def test_fingerprint_changes_with_the_model(tiny_bgem3: Path, tmp_path: Path) -> None:
    other = build_tiny_bgem3(tmp_path / "other", seed=1)
    a = resolve_model(EmbedSettings(model=str(tiny_bgem3)))
    b = resolve_model(EmbedSettings(model=str(other)))
    c = resolve_model(EmbedSettings(model=str(tiny_bgem3), max_length=64))
    assert resolve_model(EmbedSettings(model=str(tiny_bgem3))).fingerprint == a.fingerprint
    assert len({a.fingerprint, b.fingerprint, c.fingerprint}) == 3
    assert a.table_suffix != b.table_suffix


def test_unavailable_model_gives_an_actionable_error() -> None:
    with pytest.raises(ConfigurationError) as err:
        resolve_model(EmbedSettings(model="bge-m3"))
    msg = str(err.value)
    assert "BAAI/bge-m3" in msg and "CORPUSFLOW_EMBED__MODEL" in msg
    with pytest.raises(ConfigurationError):
        resolve_model(EmbedSettings(model="/no/such/model/dir"))


class MemoryCheckpoint:
    def __init__(self) -> None:
        self.saved: dict[str, tuple[np.ndarray, dict[int, float] | None]] = {}

    def load(self, ids):  # type: ignore[no-untyped-def]
        return {i: self.saved[i] for i in ids if i in self.saved}

    def save(self, ids, dense, sparse):  # type: ignore[no-untyped-def]
        for n, i in enumerate(ids):
            self.saved[i] = (dense[n], sparse[n] if sparse else None)


def test_checkpointed_batches_are_not_recomputed(tiny_bgem3: Path) -> None:
    embedder = load_embedder(EmbedSettings(model=str(tiny_bgem3)))
    ids = [f"c{i}" for i in range(10)]
    texts = [f"sentence number {i} about hotel caps" for i in range(10)]
    ckpt = MemoryCheckpoint()
    first = embed_texts(embedder, ids[:6], texts[:6], batch_size=2, checkpoint=ckpt)
    calls = embedder.model.encode_calls  # type: ignore[attr-defined]
    assert calls == 3 and len(ckpt.saved) == 6
    second = embed_texts(embedder, ids, texts, batch_size=2, checkpoint=ckpt)
    assert embedder.model.encode_calls - calls == 2  # type: ignore[attr-defined]  # only the 4 new
    np.testing.assert_allclose(second["c0"][0], first["c0"][0])
    assert set(second) == set(ids)


def test_out_of_memory_halves_the_batch(tiny_bgem3: Path) -> None:
    embedder = load_embedder(EmbedSettings(model=str(tiny_bgem3)))
    real = embedder._encode  # type: ignore[attr-defined]
    sizes: list[int] = []

    def flaky(batch: list[str]):  # type: ignore[no-untyped-def]
        sizes.append(len(batch))
        if len(batch) > 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(batch)

    embedder._encode = flaky  # type: ignore[attr-defined]
    out = embedder.embed(TEXTS * 2, batch_size=8)
    assert out.dense.shape == (8, 32)
    assert sizes[:3] == [8, 4, 2]


def test_a_run_embeds_with_numpy_until_its_budget_then_with_the_backend() -> None:
    from embedding.query_encoder import NumpyFirstEmbedder, load_document_embedder
    from embedding.st_backend import SentenceTransformerEmbedder

    settings = EmbedSettings(model="minilm", numpy_texts=5)
    spec = resolve_model(settings)
    embedder = load_document_embedder(settings, spec)
    assert isinstance(embedder, NumpyFirstEmbedder)
    first = embedder.embed(TEXTS[:3], batch_size=8)  # 3 of 5: NumPy, no backend yet
    assert embedder._fallback is None and embedder._fast is not None
    second = embedder.embed(TEXTS[:3], batch_size=8)  # 3 > the 2 left: the backend
    assert isinstance(embedder._fallback, SentenceTransformerEmbedder)
    assert embedder._fast is None  # the NumPy weights are not kept beside the backend's
    assert embedder._fallback.model.encode_calls == 1
    embedder.embed(TEXTS[:1], batch_size=8)  # once loaded, the backend takes every batch
    assert embedder._fallback.model.encode_calls == 2
    cosine = np.sum(first.dense * second.dense, axis=1)
    assert cosine.min() > 0.9999  # the same vectors either way
    assert isinstance(
        load_document_embedder(EmbedSettings(numpy_texts=0), spec), SentenceTransformerEmbedder
    )


def test_bge_m3_documents_always_go_to_its_backend(tiny_bgem3: Path) -> None:
    from embedding.bgem3_backend import BGEM3Embedder
    from embedding.query_encoder import load_document_embedder

    settings = EmbedSettings(model=str(tiny_bgem3))
    embedder = load_document_embedder(settings, resolve_model(settings))
    assert isinstance(embedder, BGEM3Embedder)  # its sparse head needs torch


def test_one_thread_embedder_runs_every_call_on_its_own_thread() -> None:
    """Write batches arrive on many task-runner threads; the model must see one (torch
    keeps MKL buffers and an OpenMP team per calling thread)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from embedding import OneThreadEmbedder

    settings = EmbedSettings(numpy_texts=0)
    inner = load_embedder(settings, resolve_model(settings))
    seen: set[int] = set()
    real = inner.embed

    def embed(texts: Sequence[str], batch_size: int) -> Embeddings:
        seen.add(threading.get_ident())
        return real(texts, batch_size)

    inner.embed = embed  # type: ignore[method-assign]
    wrapped = OneThreadEmbedder(inner)
    with ThreadPoolExecutor(6) as callers:
        outs = list(callers.map(lambda i: wrapped.embed(TEXTS[i % 3 : i % 3 + 2], 8), range(12)))
    assert len(seen) == 1 and threading.get_ident() not in seen
    assert all(out.dense.shape == (2, inner.spec.dim) for out in outs)
    assert (wrapped.has_sparse, wrapped.spec) == (inner.has_sparse, inner.spec)
