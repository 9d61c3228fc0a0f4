"""Chinese (and mixed-language) keyword and hybrid search through real flows and LanceDB."""

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from common.errors import ConfigurationError
from common.settings import Settings, load_settings
from corpusflow.api import Filters, Searcher, search
from corpusflow.evaluate import evaluate, load_questions
from flows.refresh import refresh_flow
from storage import Store
from storage.maintenance import FTS_SETTINGS, _fts_index, ensure_indexes, fts_is_current
from storage.records import ChunkRow
from storage.schema import chunk_schema
from tests.corpusflow.test_cli import _cli

REPO = Path(__file__).resolve().parents[2]
BILINGUAL = REPO / "samples" / "bilingual"
QUESTIONS = REPO / "bench" / "questions" / "bilingual.jsonl"


@pytest.fixture(scope="module")
def bilingual(tmp_path_factory: pytest.TempPathFactory, prefect_server: None) -> Settings:
    root = tmp_path_factory.mktemp("bilingual")
    shutil.copytree(BILINGUAL, root / "corpus")
    settings = load_settings(
        None, {"storage": {"db": str(root / "db")}, "run": {"progress": False}}
    )
    report = refresh_flow(str(root / "corpus"), settings.model_dump_json())
    assert report["new"] == 3 and report["failed"] == 0
    return settings


def test_chinese_keyword_query_finds_the_chinese_sentence(bilingual: Settings) -> None:
    hits = search("变更窗口", bilingual, k=3, mode="keyword")
    assert hits, "the FTS index must split Chinese text into words"
    assert hits[0]["path"] == "change_management_zh.md"
    assert "固定变更窗口为每周四凌晨一点至五点" in hits[0]["text"]
    assert hits[0]["lang"] == "zh"
    # English keeps stemming: "renewed" / "licences" match "renew licence"
    hits = search("renew forklift licence", bilingual, k=3, mode="keyword")
    assert hits[0]["path"] == "warehouse_handbook.html"
    assert "Licences are renewed every three years" in hits[0]["text"]


def test_mixed_chunk_matches_both_languages(bilingual: Settings) -> None:
    for query in ("锂电池", "lithium batteries"):
        hits = search(query, bilingual, k=1, mode="keyword")
        assert "Lithium batteries are stored" in hits[0]["text"], query
        assert "锂电池存放在4号门旁边的防火笼内" in hits[0]["text"], query


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_chinese_literal_questions_hit_at_5(bilingual: Settings, mode: str) -> None:
    zh_literal = [
        q
        for q in load_questions(QUESTIONS)
        if q.extra["lang"] == "zh" and q.extra["kind"] == "literal"
    ]
    assert len(zh_literal) >= 8
    searcher = Searcher.for_active(bilingual)
    result = evaluate(zh_literal, lambda q, n: searcher.search(q, k=n, mode=mode), k=5)  # type: ignore[arg-type]
    assert result["hit_rate_at_5"] == 1.0, result["failures"]


def test_cjk_bigram_leg_finds_what_the_word_index_splits_otherwise(bilingual: Settings) -> None:
    """Each chunk row carries its CJK runs, indexed as character bigrams: "顺延" (postponed)
    finds the change-window rule, whichever way the dictionary cut "一律顺延到"; hybrid
    search puts it first."""
    searcher = Searcher.for_active(bilingual)
    assert searcher.has_bigrams
    hits = searcher._bigrams("顺延", 5, Filters())
    assert hits and "窗口之外的普通变更一律顺延到下一个窗口" in hits[0][0]["text"]
    assert not searcher._bigrams("Flights booked", 5, Filters())  # no CJK: no leg
    top = searcher.search("顺延", k=1, mode="hybrid")[0]
    assert "一律顺延到下一个窗口" in top["text"]


def test_cjk_lexical_legs_weigh_by_the_query_language_of_the_dense_top(
    bilingual: Settings,
) -> None:
    """A Chinese question whose dense neighbours are English (its answer likely is too)
    gets no bigram leg and half the keyword leg; all Chinese, both in full; the settings
    scale them (bigram weight 0: off; floor 1: the keyword leg ignores the language)."""
    searcher = Searcher.for_active(bilingual)
    question = "叉车证多久更新"

    def dense(*langs: str) -> list[tuple[dict[str, Any], float]]:
        return [({"lang": lang}, 1.0) for lang in langs]

    assert searcher._cjk_weights(question, dense(*["en"] * 10)) == (0.5, 0.0)
    assert searcher._cjk_weights(question, dense(*["zh", "en"] * 5)) == (0.75, 0.5)
    assert searcher._cjk_weights(question, dense(*["zh"] * 12)) == (1.0, 1.0)
    searcher.fusion = searcher.fusion.model_copy(
        update={"cjk_bigram_weight": 0.0, "keyword_language_floor": 1.0, "keyword_weight_cjk": 2}
    )
    assert searcher._cjk_weights(question, dense(*["en"] * 10)) == (2.0, 0.0)


def test_lang_filter(bilingual: Settings) -> None:
    for lang in ("zh", "en", "ja"):
        hits = search("仓库 warehouse 倉庫", bilingual, k=10, filters=Filters(lang=[lang]))
        assert hits and {h["lang"] for h in hits} == {lang}, lang
    both = search(
        "仓库 warehouse", bilingual, k=20, mode="dense", filters=Filters(lang=["zh", "en"])
    )
    assert {h["lang"] for h in both} == {"zh", "en"}


def test_cli_search_lang_and_per_language_eval(bilingual: Settings) -> None:
    db = bilingual.storage.db
    out = _cli("search", "叉车证", "--db", db, "--mode", "keyword", "--lang", "zh", "--json")
    hits = json.loads(out.stdout)
    assert hits and all(h["lang"] == "zh" for h in hits)
    assert "叉车证每三年" in hits[0]["text"]
    report = json.loads(_cli("eval", str(QUESTIONS), "--db", db, "--json").stdout)
    groups = report["groups"]
    assert set(groups["lang"]) == {"en", "ja", "zh"}
    assert {"literal", "paraphrase"} <= set(groups["kind"])
    assert "en/zh" in groups["lang/doc_lang"]  # English questions over Chinese documents
    n = sum(g["questions"] for g in groups["lang"].values())
    assert n == report["questions"] == len(load_questions(QUESTIONS))
    text = _cli("eval", str(QUESTIONS), "--db", db, "--mode", "keyword").stdout
    assert "by lang:" in text and "by kind:" in text


def _old_rows(dim: int) -> list[dict[str, Any]]:
    """Rows of a chunk table from before the ``lang`` column (written as plain dicts)."""
    vec = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
    return [
        {
            "chunk_id": f"c{i}",
            "doc_id": "d",
            "parent_id": None,
            "position": i,
            "text": text,
            "context": "",
            "embed_text": text,
            "heading_path": [],
            "page_numbers": [],
            "path": "old.md",
            "title": "old",
            "format": "md",
            "metadata_json": "{}",
            "acl_groups": None,
            "n_tokens": 5,
            "vector": vec.tolist(),
            "sparse_ids": None,
            "sparse_weights": None,
            "manifest_json": "{}",
        }
        for i, text in enumerate(["固定变更窗口为每周四凌晨一点至五点", "Flights are booked early"])
    ]


def test_old_table_gains_the_column_and_a_cjk_index(tmp_path: Path) -> None:
    """A chunk table from before this change (no ``lang``, a whitespace FTS index)."""
    from lancedb.index import FTS

    store = Store(str(tmp_path / "db"), "default")
    dim = 8
    old_schema = pa.schema([f for f in chunk_schema(dim) if f.name not in ("lang", "cjk_text")])
    name = store.chunks.name("m")
    table = store.db.create_table(name, pa.Table.from_pylist(_old_rows(dim), schema=old_schema))
    table.create_index("embed_text", config=FTS())
    assert not table.search("变更窗口", query_type="fts", fts_columns="embed_text").to_list()
    # Read as it is: search works without the column; a language filter says what to do.
    searcher = Searcher(store, name, store.chunks.parent_name("m"), embedder=None)  # type: ignore[arg-type]
    assert not searcher.has_bigrams
    assert searcher._keyword("booked", 5, Filters())[0][0]["chunk_id"] == "c1"
    with pytest.raises(ConfigurationError, match="ingest"):
        searcher.search("x", mode="keyword", filters=Filters(lang=["zh"]))
    # The next write adds the column; maintenance rebuilds the index with the CJK tokenizer.
    new = ChunkRow.from_row({**_old_rows(dim)[0], "chunk_id": "c9", "doc_id": "d2", "lang": "zh"})
    store.chunks.replace("m", dim, ["d2"], [new], [])
    table = store.db.open_table(name)
    assert "lang" in table.schema.names
    assert fts_is_current(_fts_index(table, "embed_text")) is False
    done = ensure_indexes(store, name, load_settings(None, {}).storage)
    assert "rebuilt" in done["embed_text"]
    index = _fts_index(table, "embed_text")
    assert index.index_details["base_tokenizer"] == FTS_SETTINGS["base_tokenizer"]
    hits = table.search("变更窗口", query_type="fts", fts_columns="embed_text").to_list()
    assert {h["chunk_id"] for h in hits} == {"c0", "c9"}
    assert ensure_indexes(store, name, load_settings(None, {}).storage).get("embed_text") is None
    # The CJK bigram column came with the same write (nulls for the old rows, until their
    # documents are re-chunked), and its index with maintenance.
    assert "cjk_text" in table.schema.names and "cjk_text" in done
    assert Searcher(store, name, store.chunks.parent_name("m"), embedder=None).has_bigrams  # type: ignore[arg-type]


@pytest.mark.usefixtures("prefect_server")
def test_bge_m3_code_path_carries_chinese(tiny_bgem3: Path, tmp_path: Path) -> None:
    """The production model's path (BGEM3FlagModel: dense + sparse heads) on Chinese text."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bgem3)
    text = (BILINGUAL / "change_management_zh.md").read_text(encoding="utf-8")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.unk_token_id not in ids  # the tiny tokenizer covers these characters
    shutil.copytree(BILINGUAL, tmp_path / "corpus")
    settings = load_settings(
        None,
        {
            "storage": {"db": str(tmp_path / "db")},
            "embed": {"model": str(tiny_bgem3)},
            "run": {"progress": False},
        },
    )
    report = refresh_flow(str(tmp_path / "corpus"), settings.model_dump_json())
    assert report["new"] == 3 and report["failed"] == 0
    store = Store.from_settings(settings.storage)
    rows = store.read_columns(
        store.pointer.active().chunk_table,
        ["chunk_id", "embed_text", "lang", "vector", "sparse_ids", "sparse_weights"],
    ).to_pylist()
    zh = [r for r in rows if r["lang"] == "zh"]
    assert len(zh) >= 8
    for r in zh:
        assert r["sparse_ids"] and len(r["sparse_ids"]) == len(r["sparse_weights"])
        assert tokenizer.unk_token_id not in r["sparse_ids"]
        assert min(r["sparse_weights"]) > 0
        assert np.linalg.norm(r["vector"]) == pytest.approx(1.0, abs=1e-3)
    searcher = Searcher.for_active(settings)
    target = next(r for r in zh if "固定变更窗口" in r["embed_text"])
    # dense: the chunk's own text embeds to its stored vector
    assert (
        searcher.search(target["embed_text"], k=1, mode="dense")[0]["chunk_id"]
        == target["chunk_id"]
    )
    # sparse: the query's Chinese tokens score only chunks that share them
    query = "固定变更窗口为每周四凌晨一点至五点"
    query_ids = set(tokenizer.encode(query, add_special_tokens=False))
    sparse = searcher.search(query, k=5, mode="sparse")
    assert sparse and target["chunk_id"] in {h["chunk_id"] for h in sparse}
    by_id = {r["chunk_id"]: set(r["sparse_ids"]) for r in rows}
    assert all(by_id[h["chunk_id"]] & query_ids for h in sparse)
    hybrid = searcher.search(query, k=5, mode="hybrid", filters=Filters(lang=["zh"]))
    assert target["chunk_id"] in {h["chunk_id"] for h in hybrid}
    assert {h["lang"] for h in hybrid} == {"zh"}
