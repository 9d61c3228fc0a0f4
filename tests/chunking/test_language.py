"""Chunk language detection: deterministic, script-aware, short chunks take the document's."""

from pathlib import Path
from typing import Any

from chunking.language import detect_language, detect_languages, has_cjk
from chunking.structure import chunk_document
from common.settings import ChunkSettings
from parsers import parse_file

BILINGUAL = Path(__file__).resolve().parents[2] / "samples" / "bilingual"


def test_scripts_decide_cjk_even_with_english_terms() -> None:
    assert detect_language("固定变更窗口为每周四凌晨一点至五点") == "zh"
    assert detect_language("退回的零件如果没有 RMA 编号会怎么处理？") == "zh"
    assert detect_language("東京からの出荷は毎週月曜日に倉庫で検品されます。") == "ja"
    assert detect_language("코로나-19 국내 확진자는 9,661명") == "ko"
    assert detect_language("12.5 / 300 — 4") == "und"
    assert has_cjk("Hazardous Goods 危险品") and not has_cjk("Hazardous Goods")


def test_latin_languages_and_determinism() -> None:
    en = "Parts returned without an RMA number are scrapped by the depot staff."
    de = "Der Zug fährt morgen früh um sieben Uhr nach Berlin und kommt mittags an."
    # langdetect samples n-grams at random; the seeded factory gives one answer.
    assert {detect_language(en) for _ in range(20)} == {"en"}
    assert {detect_language(de) for _ in range(20)} == {"de"}


def test_short_chunks_take_the_document_language() -> None:
    texts = [
        "Hotel Limits",  # alone, character statistics call this Estonian
        "Tier 1 | 500 | CNY",  # and this German
        "Flights are booked through the corporate travel portal at least 14 days ahead.",
        "餐补",
    ]
    assert detect_languages(texts) == ["en", "en", "en", "zh"]


def test_chunks_of_a_mixed_document_record_their_language(minilm_tokenizer: Any) -> None:
    parsed = parse_file(BILINGUAL / "warehouse_handbook.html")
    chunks = chunk_document(parsed, "doc", minilm_tokenizer, 256, ChunkSettings()).children
    by_text = {c.text[:12]: c.lang for c in chunks}
    assert by_text["The warehous"] == "en"
    assert by_text["仓库工作日早上七点到晚上"] == "zh"
    assert by_text["東京からの出荷は毎週月曜"] == "ja"
    zh = chunk_document(
        parse_file(BILINGUAL / "expense_rules_zh.docx"),
        "d2",
        minilm_tokenizer,
        256,
        ChunkSettings(),
    )
    assert {c.lang for c in zh.children} == {"zh"}  # table rows too
