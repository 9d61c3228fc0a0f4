"""No text lost, words as the reader sees them (issue 32), on files the tests make."""

from __future__ import annotations

from pathlib import Path

from parsers import parse_file
from tests.helpers.pdfgen import write_pdf

# --------------------------------------------------------------------------- #
# PDF: a fallback never replaces text already extracted with less
# --------------------------------------------------------------------------- #


def test_two_word_text_layer_is_indexed(tmp_path: Path) -> None:
    # Two words at 12 pt: under the OCR threshold, so the page is OCR'd, and RapidOCR
    # finds nothing that small on a full page. The text layer's words must stay.
    path = write_pdf(tmp_path / "hello.pdf", [[(12, "Hello World")]])
    doc = parse_file(path)
    assert doc.markdown.strip() == "Hello World"
    assert doc.status == "success"
    assert doc.parser == "pdf-offline"
    assert any("text layer kept" in w.message for w in doc.warnings)
