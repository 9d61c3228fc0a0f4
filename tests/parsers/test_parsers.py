import sys
import zipfile
from pathlib import Path

import pytest

from common.errors import Category
from common.settings import ParseSettings
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
        # A legacy Word file is supported now (LibreOffice); a broken one is corrupt.
        ("legacy.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, Category.CORRUPT),
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


def test_pool_parses_in_child_and_survives_timeouts(samples_dir: Path, tmp_path: Path) -> None:
    # 2 s: an HTML or DOCX parse fits with room on a loaded 2-core box; OCR of twelve
    # scanned pages does not (~16 s on a 2-core VM where the one-page scan takes 2.3 s,
    # close enough to the deadline that a faster machine finished it in time).
    import pypdfium2 as pdfium

    scan = pdfium.PdfDocument(samples_dir / "scanned_incident_report.pdf")
    long_scan = pdfium.PdfDocument.new()
    long_scan.import_pages(scan, [0] * 12)
    long_scan.save(tmp_path / "long_scan.pdf")
    # Without page isolation, which would read the scan page by page (tests/parsers/test_page_isolation.py).
    settings = ParseSettings(timeout_s=2.0, page_isolation=False)
    with ParserPool(settings) as pool:
        doc = pool.parse(samples_dir / "onboarding.html")
        assert "Day One" in doc.markdown
        # The child is killed at the deadline.
        with pytest.raises(ParseError) as err:
            pool.parse(tmp_path / "long_scan.pdf")
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
        # Not page by page: a page job can finish before the first memory sample.
        ParserPool(ParseSettings(memory_limit_mb=60, timeout_s=120, page_isolation=False)) as pool,
        pytest.raises(ParseError) as err,
    ):
        pool.parse(samples_dir / "field_handbook.pdf")
    assert err.value.category == Category.OUT_OF_MEMORY


def _text_pdf(pages: list[str | None]) -> bytes:
    """A minimal PDF, one page per entry: a line of Helvetica text, or nothing (None)."""
    objects: list[bytes] = []
    n = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    font_ref = 3 + 2 * n
    for i, text in enumerate(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_ref} 0 R >> >> >>".encode()
        )
        stream = f"BT /F1 14 Tf 72 700 Td ({text}) Tj ET".encode() if text else b""
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for k, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (k, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def test_pdf_over_max_pages_is_refused_never_complete(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(_text_pdf([f"Section {i} of the maintenance log" for i in range(1, 6)]))
    doc = parse_file(path, ParseSettings(max_pages=5))
    assert doc.status == "success" and doc.missing_pages == () and doc.page_count == 5
    assert "Section 5 of the maintenance log" in doc.markdown
    # Over the limit: refused as a whole (parse.max_pages), never a "complete" prefix.
    with pytest.raises(ParseError) as err:
        parse_file(path, ParseSettings(max_pages=3))
    assert err.value.category == Category.TOO_LARGE
    assert "5 pages" in err.value.message


def test_failed_page_makes_document_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import parsers.pdf.ocr
    from parsers import ParsedDocument

    path = tmp_path / "mixed.pdf"
    # Page 2 has no text layer, so it goes to OCR, which fails on it.
    path.write_bytes(
        _text_pdf(["Inspection summary for turbine four", None, "Final remarks on the gearbox"])
    )

    def broken_ocr(image: object) -> object:
        raise RuntimeError("OCR engine failed on this page")

    monkeypatch.setattr(parsers.pdf.ocr, "ocr_image", broken_ocr)
    doc = parse_file(path)
    assert doc.status == "partial"
    assert doc.missing_pages == (2,)
    assert doc.page_count == 3
    assert "Inspection summary" in doc.markdown and "Final remarks" in doc.markdown
    assert any("page 2: OCR failed" in str(w) for w in doc.warnings)
    assert any(w.page == 2 and w.source == "ocr" for w in doc.warnings)
    again = ParsedDocument.from_json(doc.to_json())
    assert again.missing_pages == (2,) and again.status == "partial"
    # JSON written before the field existed still loads.
    import json

    old = json.loads(doc.to_json())
    del old["missing_pages"]
    assert ParsedDocument.from_json(json.dumps(old)).missing_pages == ()


def test_markdown_front_matter_becomes_metadata(tmp_path: Path) -> None:
    doc = tmp_path / "policy.md"
    doc.write_text(
        "---\ntitle: Remote Work Policy\ntags: [hr, remote]\ndepartment: People\n"
        "effective_date: 2026-01-15\nacl: [hr]\n---\n# Eligibility\n\nAll staff after probation.\n"
    )
    parsed = parse_file(doc, ParseSettings())
    assert parsed.title == "Remote Work Policy"
    assert parsed.metadata["tags"] == ["hr", "remote"]
    assert parsed.metadata["department"] == "People"
    assert parsed.metadata["effective_date"] == "2026-01-15"
    assert parsed.metadata["acl"] == ["hr"]
    assert "department:" not in parsed.markdown and "Eligibility" in parsed.markdown


def test_markdown_of_front_matter_alone_is_text_not_empty(tmp_path: Path) -> None:
    # pandoc's test/fb2/meta.markdown: a title and an abstract, no body; it failed `empty`.
    only = tmp_path / "meta.markdown"
    only.write_text(
        "---\ntitle: Book title\nauthor:\n  - name: Ann Lee\n    affiliation: Acme\n"
        "abstract: |\n  This is the abstract.\n\n  It has two paragraphs.\n"
        "keywords: [fiction, test]\n---\n"
    )
    parsed = parse_file(only, ParseSettings())
    assert parsed.title == "Book title" and parsed.metadata["keywords"] == ["fiction", "test"]
    for words in ("# Book title", "Ann Lee", "Acme", "This is the abstract.", "two paragraphs"):
        assert words in parsed.markdown, parsed.markdown
    assert "keywords: fiction; test" in parsed.markdown
    # Front matter of data fields alone is still text.
    data = tmp_path / "data.md"
    data.write_text("---\ndepartment: People\n---\n")
    assert parse_file(data, ParseSettings()).markdown.strip() == "department: People"


def test_markdown_front_matter_shown_fields_are_text_beside_a_body(tmp_path: Path) -> None:
    doc = tmp_path / "post.md"
    doc.write_text(
        "---\ntitle: Release notes\ndescription: What changed in the spring release.\n"
        "author: Bo Chen\nlayout: post\n---\n# Fixes\n\nThe importer no longer hangs.\n"
    )
    parsed = parse_file(doc, ParseSettings())
    assert "What changed in the spring release." in parsed.markdown
    assert "Bo Chen" in parsed.markdown and "The importer no longer hangs." in parsed.markdown
    # The title is the document's title, not a heading of its own; data fields stay out.
    assert "Release notes" not in parsed.markdown and "layout" not in parsed.markdown
    assert parsed.title == "Release notes" and parsed.metadata["layout"] == "post"


def test_yaml_sidecar_is_read_and_not_listed(tmp_path: Path) -> None:
    from common.settings import SourceSettings
    from sources import LocalSource

    (tmp_path / "memo.md").write_text("# Memo\n\nQuarterly numbers.\n")
    (tmp_path / "memo.md.meta.yaml").write_text(
        "title: Q3 memo\ndepartment: Finance\neffective_date: 2026-10-01\nacl: [finance]\n"
    )
    source = LocalSource(tmp_path, SourceSettings())
    (f,) = list(source.list())
    assert f.rel_path == "memo.md" and f.sidecar is not None
    meta = source.metadata(f)
    assert meta == {
        "title": "Q3 memo",
        "department": "Finance",
        "effective_date": "2026-10-01",
        "acl": ["finance"],
    }
    before = source.content_hash(f)
    (tmp_path / "memo.md.meta.yaml").write_text("acl: [finance, board]\n")
    assert source.content_hash(next(iter(source.list()))) != before  # metadata is part of it


def test_outlook_msg_headers_are_decoded() -> None:
    """A real Outlook .msg (markitdown's test file): Outlook keeps the sender as it came in,
    an RFC 2047 encoded word; the document shows the decoded name, the subject as its
    title and the body, and no empty recipient entries."""
    doc = parse_file(
        Path(__file__).resolve().parents[1] / "data" / "markitdown" / "test_outlook_msg.msg"
    )
    assert doc.format == "msg"
    assert "M. C. Kurtuluş (muratcan.kurtulus@gmail.com)" in doc.markdown
    assert "=?UTF-8?" not in doc.markdown
    assert doc.markdown.lstrip().startswith("# Test Email Message")
    assert "This is the body of the test email message" in doc.markdown
    assert "To: test.recipient@example.com\n" in doc.markdown + "\n"  # no empty recipients


def test_jupyter_notebook_keeps_markdown_code_and_text_outputs(tmp_path: Path) -> None:
    """A notebook's Markdown cells, its code and the text its cells printed are indexed;
    an image output with no text form is left out with a warning, not silently."""
    import json

    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": ["# Vibration study\n", "\n", "Method"],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "source": ["rms = 4.2\n", "print(f'rms {rms} mm/s')"],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["rms 4.2 mm/s\n"]}],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 2,
            "source": "summary()",
            "outputs": [
                {
                    "output_type": "execute_result",
                    "execution_count": 2,
                    "metadata": {},
                    "data": {"text/plain": ["'gearbox bearing wear'"], "text/html": ["<b>x</b>"]},
                },
                {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR"}},
            ],
        },
        {"cell_type": "raw", "metadata": {}, "source": "Reviewed by the reliability team."},
    ]
    nb = {
        "cells": cells,
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "study.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    doc = parse_file(path)
    assert doc.format == "ipynb"
    for text in (
        "Vibration study",
        "print(f'rms {rms} mm/s')",
        "rms 4.2 mm/s",
        "gearbox bearing wear",
        "Reviewed by the reliability team.",
    ):
        assert text in doc.markdown, text
    assert "<b>" not in doc.markdown and "iVBOR" not in doc.markdown
    assert any("image output" in w.message for w in doc.warnings), doc.warnings
    # JSON that is not a notebook, under a notebook's name, is still read as JSON.
    other = tmp_path / "settings.ipynb"
    other.write_text('{"site": "Esbjerg", "turbines": 30}', encoding="utf-8")
    assert "Esbjerg" in parse_file(other).markdown


def test_a_broken_pdf_read_after_an_encrypted_one_is_corrupt(tmp_path: Path) -> None:
    """pdfium reports its last error: a page tree pointing nowhere fails without setting
    one, and read after a password-protected file it said "password" (a fuzzed file of
    pdf.js's tests was `encrypted`). Encrypted only when the file names an /Encrypt."""
    import pypdf

    from tests.helpers.pdfgen import write_pdf

    plain = write_pdf(tmp_path / "plain.pdf", [[(11, "Ledger of the Wendigrail depot")]])
    writer = pypdf.PdfWriter(clone_from=str(plain))
    writer.encrypt(user_password="u-secret", owner_password="o-secret")
    writer.write(tmp_path / "locked.pdf")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(plain.read_bytes().replace(b"/Pages 2 0 R", b"/Pages 99 0 R", 1))
    for name, category in (("locked.pdf", Category.ENCRYPTED), ("broken.pdf", Category.CORRUPT)):
        with pytest.raises(ParseError) as err:
            parse_file(tmp_path / name)
        assert err.value.category == category, (name, err.value)
    assert "password" not in err.value.message


def test_a_pdf_docling_cannot_load_is_read_with_pdfium(tmp_path: Path) -> None:
    """A cross-reference table whose offsets are all wrong: pdfium rebuilds it, docling's
    parser refuses the file. Its words are read from pdfium's text layer, not lost as
    `corrupt`."""
    import re

    from tests.helpers.pdfgen import write_pdf

    pdf = write_pdf(tmp_path / "ok.pdf", [[(11, "Provenance of the Wendigrail ledger")]])
    broken = tmp_path / "broken_xref.pdf"
    broken.write_bytes(re.sub(rb"\d{10} 00000 n", b"0000000000 00000 n", pdf.read_bytes()))
    doc = parse_file(broken)
    assert "Provenance of the Wendigrail ledger" in doc.markdown
    assert any("read with pdfium" in w.message for w in doc.warnings), doc.warnings


def test_a_page_read_as_symbols_is_read_with_pdfium(tmp_path: Path) -> None:
    """Where docling's parser maps a font's glyphs to dingbats (pdf.js's issue918.pdf read
    as "■❞❡♦❧♦❣②"), the page is read with pdfium; a page read as letters is kept, and
    ".notdef" glyph names read as spaces."""
    from parsers.pdf.offline import _pdfium_where_better
    from parsers.pdf.primitives import Line
    from tests.helpers.pdfgen import write_pdf

    pdf = write_pdf(
        tmp_path / "two.pdf",
        [[(11, "Ideology as ritual in the greengrocer window")], [(11, "Kept as read")]],
    )
    sizes = {1: (612.0, 842.0), 2: (612.0, 842.0)}
    garbled = Line(1, "■❞❡♦❧♦❣② ❛a115 a114✐a116✉❛❧ ✐♥", 50, 30, 300, 42)
    kept = Line(2, "Kept.notdefas.notdefread", 50, 30, 300, 42)
    lines, better = _pdfium_where_better(pdf, [garbled, kept], sizes)
    assert better == [1]
    assert [ln.text for ln in lines] == [
        "Ideology as ritual in the greengrocer window",
        "Kept as read",
    ]
    # A scant reading of letters is docling's still (OCR decides about it, as before).
    scant = Line(1, "Ideology", 50, 30, 100, 42)
    lines, better = _pdfium_where_better(pdf, [scant, kept], sizes)
    assert better == [] and lines[0].text == "Ideology"
