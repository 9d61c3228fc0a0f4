"""Tables continued on the next page are joined into one table (issue #36).

Small PDFs drawn with pypdfium2 (``tests.helpers.pdfdraw``): a ruled table over
three pages with page furniture, with and without a repeated header; and the
situations that must not be joined: other columns, a new table with its own
header in the same columns, body text between the pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chunking import chunk_document
from common.settings import ChunkSettings, ParseSettings
from parsers import parse_file
from parsers.models import ParsedDocument
from parsers.pages import PageOutcome, merge_parts
from parsers.registry import _title
from parsers.table_joins import SOURCE
from tests.helpers.pdfdraw import Page, make_pdf

XS = [72.0, 180.0, 300.0, 420.0, 540.0]
HEAD = ["Site", "Inspector", "Turbines", "Status"]
OTHER_HEAD = ["Region", "Manager", "Farms", "Output"]


def _rows(first: int, last: int) -> list[list[str]]:
    return [
        [f"Site {i}", f"Person {i}", str(10 + i), "ok" if i % 2 else "late"]
        for i in range(first, last)
    ]


def _table(
    p: Page, rows: list[list[str]], y: float, header: list[str] | None = None, xs: list[float] = XS
) -> float:
    """A ruled table from ``y`` (its header row bold); returns the y below it."""
    return p.table(rows, y, header, xs)


def _furniture(p: Page, n: int) -> None:
    p.text("Fleet inspection report 2026", 72, 40, size=8)
    p.text(f"Page {n}", 290, 765, size=8)


def _first_page(p: Page) -> None:
    _furniture(p, 1)
    p.text("Inspection results", 72, 80, "Helvetica-Bold", 14)
    p.text("The table lists every site inspected in the quarter.", 72, 100)
    _table(p, _rows(1, 38), 120, HEAD)


def _continued(first: int, last: int, page: int, header: bool) -> Callable[[Page], None]:
    def draw(p: Page) -> None:
        _furniture(p, page)
        y = _table(p, _rows(first, last), 60, HEAD if header else None)
        if last == 90:
            p.text("After the table the report goes on with ordinary text.", 72, y + 30)

    return draw


def _three_pages(path: Path) -> Path:
    """Rows 1-37 under a header on page 1; 38-79 under a repeated header on page 2;
    80-89 without one on page 3."""
    return make_pdf(path, _first_page, _continued(38, 80, 2, True), _continued(80, 90, 3, False))


def _tables(parsed: ParsedDocument) -> list[Any]:
    return list(parsed.to_docling().tables)


def _joins(parsed: ParsedDocument) -> list[int]:
    """The pages of the pieces joined, from the parse's ``table-joins`` warnings."""
    return [w.page for w in parsed.warnings if w.source == SOURCE and w.page is not None]


def _header(table: Any) -> list[str]:
    return [c.text for c in table.data.table_cells if c.column_header]


@pytest.fixture(scope="module")
def three_pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _three_pages(tmp_path_factory.mktemp("joins") / "report.pdf")


def test_table_over_three_pages_is_one_table(three_pages: Path) -> None:
    parsed = parse_file(three_pages, ParseSettings(pdf_pipeline="offline"))
    (table,) = _tables(parsed)
    assert [p.page_no for p in table.prov] == [1, 2, 3]
    # the header once (page 2's repeat dropped), then the 89 rows of all three pages
    assert _header(table) == HEAD
    assert table.data.num_rows == 1 + 89
    first_col = [c.text for c in table.data.table_cells if c.start_col_offset_idx == 0]
    assert first_col == ["Site"] + [f"Site {i}" for i in range(1, 90)]
    assert _joins(parsed) == [2, 3]


def test_every_row_chunk_keeps_its_header(three_pages: Path, minilm_tokenizer: Any) -> None:
    parsed = parse_file(three_pages, ParseSettings(pdf_pipeline="offline"))
    chunks = chunk_document(parsed, "doc", minilm_tokenizer, 128, ChunkSettings()).children
    text = "\n".join(c.text for c in chunks)
    for i in range(1, 90):
        assert f"Site {i}, Inspector = Person {i}" in text, i
    # no data row of page 3 is read as a header over the others
    assert not re.search(r"Person \d+ = Person", text)

    off = parse_file(
        three_pages, ParseSettings(pdf_pipeline="offline", join_continued_tables=False)
    )
    assert len(_tables(off)) == 3 and not _joins(off)
    text_off = "\n".join(
        c.text for c in chunk_document(off, "doc", minilm_tokenizer, 128, ChunkSettings()).children
    )
    assert "Site 81, Inspector = Person 81" not in text_off  # what the join is for


def test_joined_across_page_ranges(tmp_path: Path) -> None:
    """Pages parsed as ranges (``parse.page_batch``): page 1, then pages 2-3 (joined
    inside their range); the two are joined again when the ranges are merged."""
    settings = ParseSettings(pdf_pipeline="offline")
    first = parse_file(make_pdf(tmp_path / "part1.pdf", _first_page), settings)
    rest = parse_file(
        make_pdf(tmp_path / "part2.pdf", _continued(38, 80, 2, True), _continued(80, 90, 3, False)),
        settings,
    )
    assert len(_tables(first)) == len(_tables(rest)) == 1
    assert _joins(rest) == [2]  # page 2 of the range: page 3 of the document
    outcome = PageOutcome(parts=[(1, first), (2, rest)])
    merged = merge_parts(tmp_path / "report.pdf", outcome, 3, {}, _title)
    (table,) = _tables(merged)
    assert [p.page_no for p in table.prov] == [1, 2, 3]
    assert table.data.num_rows == 90
    assert _header(table) == HEAD
    assert sorted(_joins(merged)) == [2, 3]
    kept = merge_parts(tmp_path / "report.pdf", outcome, 3, {}, _title, join_tables=False)
    assert [[p.page_no for p in t.prov] for t in _tables(kept)] == [[1], [2, 3]]


def test_pieces_without_a_header_are_joined(tmp_path: Path) -> None:
    """Pages 2 and 3 on their own (a page range starting inside the table): the first
    piece's first row is data, marked as a header by the model-free path, and shares a
    status value with the next piece's first row; the pieces are still one table."""
    path = make_pdf(
        tmp_path / "range.pdf", _continued(38, 80, 2, False), _continued(80, 90, 3, False)
    )
    parsed = parse_file(path, ParseSettings(pdf_pipeline="offline"))
    (table,) = _tables(parsed)
    assert table.data.num_rows == 80 - 38 + 10
    assert _joins(parsed) == [2]


def _next_page_table(
    header: list[str] | None, rows: list[list[str]], xs: list[float] = XS, text: str = ""
) -> Callable[[Page], None]:
    def draw(p: Page) -> None:
        _furniture(p, 2)
        y = 60.0
        if text:
            for line in (text, "with two lines of body text before the next table."):
                p.text(line, 72, y + 10)
                y += 14
            y += 10
        _table(p, rows, y, header, xs)

    return draw


def _not_joined(path: Path, second: Callable[[Page], None]) -> None:
    parsed = parse_file(make_pdf(path, _first_page, second), ParseSettings(pdf_pipeline="offline"))
    tables = _tables(parsed)
    assert [[p.page_no for p in t.prov] for t in tables] == [[1], [2]]
    assert not _joins(parsed)


def test_other_columns_on_the_next_page_are_not_joined(tmp_path: Path) -> None:
    """A table without a header whose first row holds numbers, in three columns over the
    same width: another table, not the four-column one going on."""
    rows = [[f"Region {i}", f"Manager {i}", str(i * 3)] for i in range(1, 20)]
    second = _next_page_table(None, rows, [72.0, 200.0, 380.0, 540.0])
    _not_joined(tmp_path / "other.pdf", second)


def test_new_table_in_the_same_columns_is_not_joined(tmp_path: Path) -> None:
    """Same column count and edges, but its own header: a new table."""
    rows = [[f"Region {i}", f"Manager {i}", str(i), f"{i * 7} MW"] for i in range(1, 20)]
    _not_joined(tmp_path / "same-columns.pdf", _next_page_table(OTHER_HEAD, rows))


def test_body_text_between_is_not_joined(tmp_path: Path) -> None:
    """The same table's columns, but body text at the top of the next page first."""
    _not_joined(
        tmp_path / "text-between.pdf",
        _next_page_table(HEAD, _rows(38, 60), text="The second site survey is reported below,"),
    )


def _layout_doc(piece_header: bool, caption: str | None) -> Any:
    """A document as docling's layout path gives it: bottom-left boxes, running heads on
    the furniture layer, header flags set by the table model, captions linked."""
    from docling_core.types.doc import (
        BoundingBox,
        ContentLayer,
        CoordOrigin,
        DocItemLabel,
        DoclingDocument,
        ProvenanceItem,
        Size,
        TableCell,
        TableData,
    )

    def data(rows: list[list[str]], header: bool) -> TableData:
        cells = [
            TableCell(
                text=v,
                start_row_offset_idx=r,
                end_row_offset_idx=r + 1,
                start_col_offset_idx=c,
                end_col_offset_idx=c + 1,
                column_header=header and r == 0,
            )
            for r, row in enumerate(rows)
            for c, v in enumerate(row)
        ]
        return TableData(num_rows=len(rows), num_cols=len(rows[0]), table_cells=cells)

    def prov(page: int, top: float, bottom: float) -> ProvenanceItem:
        box = BoundingBox(
            l=72, t=792 - top, r=540, b=792 - bottom, coord_origin=CoordOrigin.BOTTOMLEFT
        )
        return ProvenanceItem(page_no=page, bbox=box, charspan=(0, 0))

    doc = DoclingDocument(name="layout")
    for page in (1, 2):
        doc.add_page(page_no=page, size=Size(width=612, height=792))
        doc.add_text(
            label=DocItemLabel.PAGE_HEADER,
            text=f"Annual report, section {page}",  # differs per page: only its layer says furniture
            prov=prov(page, 30, 40),
            content_layer=ContentLayer.FURNITURE,
        )
    doc.add_table(data=data([HEAD, *_rows(1, 30)], True), prov=prov(1, 100, 740))
    second = (
        [HEAD, *_rows(30, 40)] if piece_header else [["Region 1", "Manager 1", "Farms", "Output"]]
    )
    piece = doc.add_table(data=data(second, piece_header), prov=prov(2, 80, 300))
    if caption is not None:
        item = doc.add_text(label=DocItemLabel.CAPTION, text=caption, prov=prov(2, 60, 72))
        piece.captions.append(item.get_ref())
    return doc


@pytest.mark.parametrize(
    ("piece_header", "caption", "joined"),
    [
        (True, None, True),  # the header repeated: dropped
        (False, None, True),  # no header flag from a model that sets them: a continuation
        (True, "Table 1 (continued)", True),
        (True, "Table 2. Sites inspected in 2025", False),  # its own caption: a new table
    ],
)
def test_layout_path_documents(piece_header: bool, caption: str | None, joined: bool) -> None:
    from parsers.table_joins import join_continued_tables

    doc, pages = join_continued_tables(_layout_doc(piece_header, caption))
    assert (pages == [2]) is joined
    assert len(doc.tables) == (1 if joined else 2)
    if joined:
        (table,) = doc.tables
        assert _header(table) == HEAD
        assert table.data.num_rows == (40 if piece_header else 31)
