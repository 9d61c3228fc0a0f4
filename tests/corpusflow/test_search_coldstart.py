"""Cold `corpusflow search` (issue #15): queries embed through embedding.query_encoder
(NumPy BERT, no torch / transformers / sentence-transformers imports) with the vectors
and rankings of the sentence-transformers path, on a real LanceDB index of the samples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.settings import EmbedSettings, Settings, load_settings
from corpusflow.api import Searcher, active_spec
from embedding import load_embedder, resolve_model
from embedding.query_encoder import NumpyBertEncoder, NumpyFirstEmbedder, load_query_embedder
from storage import Store

REPO = Path(__file__).resolve().parents[2]
EXE = shutil.which("corpusflow") or str(Path(sys.executable).with_name("corpusflow"))

QUERIES = [
    "refund policy",
    "How many vacation days do new employees get?",
    "  leading and trailing spaces\t",
    "Wie hoch ist die Erstattung für Hotelkosten?",
    "politique de remboursement des frais de déplacement",
    "política de reembolso",
    "退款政策是什么",
    "固定变更窗口为每周四凌晨一点至五点",
    "返金ポリシーについて教えてください",
    "환불 정책",
    "политика возврата средств",
    "سياسة الاسترداد",
    "नीति क्या है",
    "emoji 🎉 and symbols © ™ ½",
    "UPPER case QUERY with Café naïve",
    "",
    # longer than max_length (256 tokens): truncation must cut at the same token
    "warranty claim " * 200,
]
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "sklearn",
    "prefect",
    "docling",
    "lance_namespace_urllib3_client.api.table_api",  # lancedb's REST client (storage._deferred)
)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def minilm() -> Any:
    spec = resolve_model(EmbedSettings(model="minilm"))
    return spec, load_embedder(EmbedSettings(model="minilm", device="cpu"), spec)


def test_query_vectors_match_sentence_transformers(minilm: Any) -> None:
    spec, st = minilm
    fast = NumpyBertEncoder(spec)
    model = st.model.get()
    for q in QUERIES:  # the same tokens, truncation included
        ids = model.preprocess([q])["input_ids"][0].tolist()
        assert fast.token_ids(q) == ids, q[:40]
    assert len(fast.token_ids(QUERIES[-1])) == spec.max_length == 256
    ref = st.embed(QUERIES, batch_size=4).dense  # padded batches on the reference side
    got = fast.encode(QUERIES)
    assert got.shape == ref.shape == (len(QUERIES), 384) and got.dtype == np.float32
    cos = _cosine(got, ref)
    assert cos.min() >= 0.9999, dict(zip(QUERIES, cos.round(6), strict=True))
    assert np.abs(got - ref).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # Different queries stay different (the encoder is not returning a constant).
    assert _cosine(got[:1], got[6:7])[0] < 0.9


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The bundled samples (English and bilingual) ingested through the real CLI."""
    root = tmp_path_factory.mktemp("coldstart")
    shutil.copytree(REPO / "samples" / "corpus", root / "corpus" / "en")
    shutil.copytree(REPO / "samples" / "bilingual", root / "corpus" / "bilingual")
    db = root / "db"
    proc = subprocess.run(
        [EXE, "ingest", str(root / "corpus"), "--db", str(db)],
        capture_output=True,
        text=True,
        env={**os.environ, "PREFECT_HOME": str(root / "prefect")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})


def _ranked(hits: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(h["chunk_id"], h["score"]) for h in hits]


def _backend_searcher(settings: Settings) -> Searcher:
    """The active table searched with the model's own backend (sentence-transformers)."""
    store = Store.from_settings(settings.storage)
    active, spec = active_spec(store)
    return Searcher(
        store, active.chunk_table, active.parent_table, load_embedder(settings.embed, spec)
    )


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_same_top_k_on_the_sample_index(sample_index: Settings, mode: str) -> None:
    fast = Searcher.for_active(sample_index)
    assert isinstance(fast.embedder, NumpyFirstEmbedder)
    today = _backend_searcher(sample_index)
    assert today.table.count_rows() > 25
    for q in QUERIES:
        got, ref = fast.search(q, k=8, mode=mode), today.search(q, k=8, mode=mode)  # type: ignore[arg-type]
        assert [c for c, _ in _ranked(got)] == [c for c, _ in _ranked(ref)], q[:40]
        for (_, a), (_, b) in zip(_ranked(got), _ranked(ref), strict=True):
            assert abs(a - b) < 1e-4, q[:40]
        assert got == ref or mode == "dense"  # hybrid scores are rank-based: identical rows
    assert fast.embedder._fallback is None  # type: ignore[attr-defined]  # ST never built


def test_cold_cli_search_imports_no_model_stack(sample_index: Settings) -> None:
    """A fresh process: the results of today's path, without torch & co. in sys.modules."""
    script = (
        "import json, sys\n"
        "from corpusflow.cli import main\n"
        f"sys.argv = ['corpusflow', 'search', 'refund policy', '--db', {sample_index.storage.db!r},"
        " '--json', '-k', '6']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"sys.stderr.write('LOADED=' + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], loaded
    hits = json.loads(proc.stdout)
    today = _backend_searcher(sample_index)
    assert hits == today.search("refund policy", k=6, mode="hybrid")
    assert len(hits) == 6


def test_the_deferred_rest_client_loads_on_first_use(tmp_path: Path) -> None:
    """storage._deferred: a local database never imports the REST client's API modules,
    and a program that does use the client still gets all of it."""
    script = (
        "import sys\n"
        "from storage import Store\n"
        f"store = Store({str(tmp_path / 'db')!r})\n"
        "store.pointer.set_active('m', {'fingerprint': 'm'})\n"
        "assert store.pointer.active().chunk_table == 'default__chunks__m'\n"
        "assert 'lance_namespace_urllib3_client.api.table_api' not in sys.modules\n"
        "import lance_namespace_urllib3_client as client\n"
        "assert client.ApiClient.__name__ == 'ApiClient' and client.TableApi\n"
        "from lance_namespace_urllib3_client import Configuration\n"
        "assert 'lance_namespace_urllib3_client.api.table_api' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _model_copy(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    dst.mkdir()
    for item in src.iterdir():
        if item.name not in skip:
            (dst / item.name).symlink_to(item)
    return dst


def test_pipelines_it_cannot_reproduce_stay_on_their_backend(
    minilm: Any, tmp_path: Path, tiny_bgem3: Path
) -> None:
    from embedding.bgem3_backend import BGEM3Embedder
    from embedding.st_backend import SentenceTransformerEmbedder

    spec, _ = minilm
    src = Path(spec.path)
    # An extra Dense module after pooling: sentence-transformers runs it, NumPy would not.
    dense = _model_copy(src, tmp_path / "dense", skip=("modules.json",))
    modules = json.loads((src / "modules.json").read_text())
    modules.insert(
        2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    )
    (dense / "modules.json").write_text(json.dumps(modules))
    # A default prompt sentence-transformers would prepend.
    prompt = _model_copy(src, tmp_path / "prompt", skip=("config_sentence_transformers.json",))
    (prompt / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: "}, "default_prompt_name": "query"})
    )
    for model in (dense, prompt):
        s = resolve_model(EmbedSettings(model=str(model)))
        assert isinstance(
            load_query_embedder(EmbedSettings(model=str(model)), s), SentenceTransformerEmbedder
        )
    settings = EmbedSettings(model=str(tiny_bgem3))
    assert isinstance(load_query_embedder(settings, resolve_model(settings)), BGEM3Embedder)


def test_a_fast_path_that_cannot_load_falls_back_to_the_same_vectors(
    minilm: Any, tmp_path: Path
) -> None:
    """bfloat16 weights (NumPy has no such dtype): found on first use, answered by ST."""
    import torch
    from safetensors.torch import load_file, save_file

    spec, _ = minilm
    src = Path(spec.path)
    model = _model_copy(src, tmp_path / "bf16", skip=("model.safetensors",))
    weights = load_file(str(src / "model.safetensors"))
    save_file(
        {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in weights.items()},
        str(model / "model.safetensors"),
        metadata={"format": "pt"},
    )
    settings = EmbedSettings(model=str(model), device="cpu")
    s = resolve_model(settings)
    embedder = load_query_embedder(settings, s)
    assert isinstance(embedder, NumpyFirstEmbedder)
    got = embedder.embed(QUERIES[:6], batch_size=1).dense
    assert embedder.fast is None and "BF16" in embedder.reason
    ref = load_embedder(settings, s).embed(QUERIES[:6], batch_size=1).dense
    np.testing.assert_array_equal(got, ref)
