"""A long PDF costs the parser memory for what it keeps, not for every page docling read
(issue #36: memory stays bounded on a 1,000-page PDF; docs/benchmarks.md, "A 1,000-page
PDF"). docling's result holds each page's parsed text cells, ~2.3 MiB a page of text;
``native_content`` turns each page into its lines and tables as docling reads it and keeps
neither docling's cells nor the page's words (~560 a page).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from parsers.pdf import textlayer
from parsers.pdf.textlayer import _PageReader, native_content, native_converter
from tests.helpers.pdfdraw import manual_pdf


def test_page_by_page_reading_gives_what_docling_parsed(tmp_path: Path) -> None:
    pdf = manual_pdf(tmp_path / "manual.pdf", 4)
    content = native_content(pdf)
    plain = native_converter().convert(pdf)
    reader = _PageReader(pdf)
    for page in plain.pages:
        reader.read(page.page_no, page.parsed_page, page.size.height)
    reader.close()
    assert reader.error is None
    assert sorted(content.tables) == sorted(reader.pages) == [1, 2, 3, 4]
    assert content.lines == [ln for p in sorted(reader.pages) for ln in reader.pages[p].lines]
    assert len(content.lines) > 4 * 40
    for page_no, page in reader.pages.items():
        assert content.tables[page_no] == page.tables
    # manual_pdf draws a ruled table on every 4th page.
    tables, warnings = content.tables_except([])
    assert [t.page_no for t in tables] == [4] and not warnings
    assert content.tables_except([4]) == ([], [])  # a page OCR replaced keeps no table
    assert not textlayer._READ  # taken by native_content, nothing left behind


def _peak(path: Path) -> int:
    tracemalloc.start()
    try:
        native_content(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_text_layer_costs_its_lines_per_page_not_words_or_doclings_cells(
    tmp_path: Path,
) -> None:
    native_converter(compact=True)  # built before measuring
    short = manual_pdf(tmp_path / "short.pdf", 2)
    long = manual_pdf(tmp_path / "long.pdf", 32)
    per_page = (_peak(long) - _peak(short)) / 30 / 2**20
    # Python allocations only (tracemalloc): ~0.01 MiB a page (the lines) against ~0.15
    # while every page's words were kept for table detection to the last page, and ~2.3
    # while docling's parsed pages were.
    assert per_page < 0.05, f"{per_page:.3f} MiB per page"
