"""Tables into docling's table model, whatever backend found them.

Every parse path stores a table as a docling ``TableItem`` (cells with spans and
header flags), never as pre-rendered text: Markdown export renders it as a
Markdown table, and the chunker linearises it into "row, column = value"
triplets with the header repeated (``chunking.structure``). So a table found by
the model-free PDF path and one found by unstructured read the same downstream.
"""

from __future__ import annotations

from collections.abc import Iterable
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from docling_core.types.doc import TableData


class CellLike(Protocol):
    """A table cell: top-left slot (0-based) and how many rows/columns it spans."""

    @property
    def row(self) -> int: ...

    @property
    def col(self) -> int: ...

    @property
    def row_span(self) -> int: ...

    @property
    def col_span(self) -> int: ...

    @property
    def text(self) -> str: ...


def table_data(cells: Iterable[CellLike], n_rows: int, n_cols: int, header_rows: int) -> TableData:
    """docling TableData from positioned cells; the first ``header_rows`` rows are headers."""
    from docling_core.types.doc import TableCell, TableData

    table_cells = [
        TableCell(
            text=c.text,
            row_span=c.row_span,
            col_span=c.col_span,
            start_row_offset_idx=c.row,
            end_row_offset_idx=c.row + c.row_span,
            start_col_offset_idx=c.col,
            end_col_offset_idx=c.col + c.col_span,
            column_header=c.row < header_rows,
        )
        for c in cells
    ]
    return TableData(num_rows=n_rows, num_cols=n_cols, table_cells=table_cells)


class _HtmlCell:
    __slots__ = ("col", "col_span", "header", "row", "row_span", "text")

    def __init__(self, row: int, col: int, row_span: int, col_span: int, header: bool) -> None:
        self.row = row
        self.col = col
        self.row_span = row_span
        self.col_span = col_span
        self.header = header
        self.text = ""


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1000))
    except ValueError:
        return 1


class _TableHtml(HTMLParser):
    """Reads the first <table> of an HTML fragment into positioned cells.

    The standard-library parser never fetches or expands anything: entity
    declarations are not processed, only the HTML character references.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[_HtmlCell] = []
        self.row = -1
        self.depth = 0  # nested tables are read as text of their cell
        self.done = False
        self._taken: set[tuple[int, int]] = set()
        self._cell: _HtmlCell | None = None
        self._in_thead = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth += 1
            return
        if self.depth != 1:
            return
        if tag == "thead":
            self._in_thead = True
        elif tag == "tr":
            self.row += 1
            self._cell = None
        elif tag in ("td", "th"):
            if self.row < 0:
                self.row = 0
            a = dict(attrs)
            col = 0
            while (self.row, col) in self._taken:
                col += 1
            cell = _HtmlCell(
                self.row,
                col,
                _span(a.get("rowspan")),
                _span(a.get("colspan")),
                tag == "th" or self._in_thead,
            )
            for r in range(cell.row, cell.row + cell.row_span):
                for k in range(cell.col, cell.col + cell.col_span):
                    self._taken.add((r, k))
            self.cells.append(cell)
            self._cell = cell
        elif tag == "br" and self._cell is not None:
            self._cell.text += " "

    def handle_endtag(self, tag: str) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth -= 1
            if self.depth == 0:
                self.done = True
        elif self.depth == 1 and tag in ("td", "th"):
            self._cell = None
        elif self.depth == 1 and tag == "thead":
            self._in_thead = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self.done:
            self._cell.text += data


def cells_from_html(html: str) -> tuple[list[CellLike], int, int, int] | None:
    """Cells, row count, column count and header rows of the first HTML table, or None."""
    reader = _TableHtml()
    reader.feed(html)
    reader.close()
    if not reader.cells:
        return None
    for cell in reader.cells:
        cell.text = " ".join(cell.text.split())
    n_rows = max(c.row + c.row_span for c in reader.cells)
    n_cols = max(c.col + c.col_span for c in reader.cells)
    header_rows = 0
    for r in range(n_rows):
        row_cells = [c for c in reader.cells if c.row == r]
        if row_cells and all(c.header for c in row_cells):
            header_rows = r + 1
        else:
            break
    return list(reader.cells), n_rows, n_cols, header_rows
