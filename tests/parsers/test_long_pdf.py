"""A long PDF costs the parser memory for what it keeps, not for every page docling read
(issue #36: memory stays bounded on a 1,000-page PDF; docs/benchmarks.md, "A 1,000-page
PDF"). docling's result holds each page's parsed text cells, ~2.3 MiB a page of text;
``native_content`` takes our words and lines from each page as docling reads it.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from parsers.pdf import textlayer
from parsers.pdf.textlayer import _page_cells, native_content, native_converter
from tests.helpers.pdfdraw import manual_pdf


def test_page_by_page_reading_gives_what_docling_parsed(tmp_path: Path) -> None:
    pdf = manual_pdf(tmp_path / "manual.pdf", 4)
    content = native_content(pdf)
    plain = native_converter().convert(pdf)
    assert sorted(content.words) == [1, 2, 3, 4]
    for page in plain.pages:
        expected = _page_cells(page.parsed_page, page.size.height)
        assert content.words[page.page_no] == expected.words
        assert len(expected.words) > 400
    assert not textlayer._READ  # taken by native_content, nothing left behind


def _peak(path: Path) -> int:
    tracemalloc.start()
    try:
        native_content(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_text_layer_costs_our_words_per_page_not_doclings_cells(tmp_path: Path) -> None:
    native_converter(compact=True)  # built before measuring
    short = manual_pdf(tmp_path / "short.pdf", 2)
    long = manual_pdf(tmp_path / "long.pdf", 8)
    per_page = (_peak(long) - _peak(short)) / 6 / 2**20
    # Python allocations only (tracemalloc): ~0.15 MiB a page (our words) against ~2.3
    # while docling's parsed pages were kept to the end.
    assert per_page < 0.6, f"{per_page:.2f} MiB per page"
