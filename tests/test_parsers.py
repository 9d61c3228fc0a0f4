import sys
import zipfile
from pathlib import Path

import pytest

from corpusflow.errors import Category
from corpusflow.settings import ParseSettings
from parsers import ParseError, ParserPool, parse_file


@pytest.mark.parametrize(
    ("name", "fmt", "expect"),
    [
        ("travel_policy.docx", "docx", ["Hotel Limits", "Tier 1", "500", "CNY"]),
        ("onboarding.html", "html", ["Day One", "room 2.14", "4410"]),
        ("service_review.pptx", "pptx", ["Availability", "97.4", "Kestrel Ridge"]),
        ("component_warranty.xlsx", "xlsx", ["Gearbox", "Hansen Drives", "Volta Machines"]),
        ("release_notes.md", "md", ["Version 2.3", "Modbus TCP"]),
        ("field_handbook.pdf", "pdf", ["Site Safety", "Rotterdam", "RMA number"]),
    ],
)
def test_formats_parse_to_markdown(
    samples_dir: Path, name: str, fmt: str, expect: list[str]
) -> None:
    doc = parse_file(samples_dir / name)
    assert doc.format == fmt
    for text in expect:
        assert text in doc.markdown, text
    assert doc.to_docling().name  # the docling JSON round-trips


def test_offline_pdf_recovers_headings_and_pages(samples_dir: Path) -> None:
    doc = parse_file(samples_dir / "field_handbook.pdf")
    assert doc.parser == "pdf-offline"
    assert doc.page_count == 2
    headings = [line for line in doc.markdown.splitlines() if line.startswith("#")]
    assert any("Site Safety" in h for h in headings)
    assert any("Spare Parts Logistics" in h for h in headings)
    pages = {
        p.page_no for item, _ in doc.to_docling().iterate_items() for p in getattr(item, "prov", [])
    }
    assert pages == {1, 2}


def test_scanned_page_is_ocred(samples_dir: Path) -> None:
    doc = parse_file(samples_dir / "scanned_incident_report.pdf")
    assert doc.parser == "pdf-offline+ocr"
    assert "cooling pump" in doc.markdown
    assert "contactor" in doc.markdown


def test_rotated_scan_is_read(shared_corpus: Path) -> None:
    sys.path.insert(0, str(shared_corpus.parents[1] / "tools"))
    from parse_metrics import text_f1  # type: ignore[import-not-found]

    doc = parse_file(shared_corpus / "ocr" / "ocr_test_rotated_90.pdf")
    gt = (shared_corpus / "ocr" / "groundtruth" / "ocr_test_rotated_90.md").read_text()
    assert text_f1(doc.markdown, gt) > 0.9


def test_encrypted_pdf_is_reported(shared_corpus: Path) -> None:
    with pytest.raises(ParseError) as err:
        parse_file(shared_corpus / "pdf_password" / "2206.01062_pg3.pdf")
    assert err.value.category == Category.ENCRYPTED


@pytest.mark.parametrize(
    ("name", "content", "category"),
    [
        ("empty.pdf", b"", Category.EMPTY),
        ("truncated.pdf", b"%PDF-1.7\n1 0 obj <<", Category.CORRUPT),
        ("fake.docx", b"this is not a zip", Category.CORRUPT),
        ("notes.pdf", b"plain text pretending to be a pdf", Category.CORRUPT),
        ("legacy.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, Category.UNSUPPORTED),
        ("archive.bin", b"\x7fELF\x02\x01", Category.UNSUPPORTED),
    ],
)
def test_bad_input_is_categorised(
    tmp_path: Path, name: str, content: bytes, category: Category
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ParseError) as err:
        parse_file(path)
    assert err.value.category == category


def test_misnamed_file_is_parsed_by_content(tmp_path: Path, samples_dir: Path) -> None:
    path = tmp_path / "policy.pdf"
    path.write_bytes((samples_dir / "travel_policy.docx").read_bytes())
    doc = parse_file(path)
    assert doc.format == "docx"
    assert "Hotel Limits" in doc.markdown


def test_zip_bomb_is_rejected_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"<w:t>" + b"A" * (64 * 1024 * 1024) + b"</w:t>")
    assert path.stat().st_size < 1024 * 1024
    with pytest.raises(ParseError) as err:
        parse_file(path, ParseSettings(zip_max_uncompressed_mb=32))
    assert err.value.category == Category.CORRUPT
    assert "zip bomb" in err.value.message


def test_pool_parses_in_child_and_survives_timeouts(samples_dir: Path) -> None:
    settings = ParseSettings(timeout_s=1.0)
    with ParserPool(settings) as pool:
        doc = pool.parse(samples_dir / "onboarding.html")
        assert "Day One" in doc.markdown
        # OCR of the scan takes several seconds: the child is killed at the deadline.
        with pytest.raises(ParseError) as err:
            pool.parse(samples_dir / "scanned_incident_report.pdf")
        assert err.value.category == Category.TIMEOUT
        # A fresh worker replaces the killed one and the next file parses.
        assert "Hotel Limits" in pool.parse(samples_dir / "travel_policy.docx").markdown


def test_pool_reports_categorised_errors(tmp_path: Path) -> None:
    bad = tmp_path / "zero.docx"
    bad.write_bytes(b"")
    with ParserPool(ParseSettings()) as pool, pytest.raises(ParseError) as err:
        pool.parse(bad)
    assert err.value.category == Category.EMPTY


def test_pool_kills_parser_over_memory_cap(samples_dir: Path) -> None:
    # A cap below what docling needs to import: the child is killed for memory.
    with (
        ParserPool(ParseSettings(memory_limit_mb=60, timeout_s=120)) as pool,
        pytest.raises(ParseError) as err,
    ):
        pool.parse(samples_dir / "field_handbook.pdf")
    assert err.value.category == Category.OUT_OF_MEMORY
