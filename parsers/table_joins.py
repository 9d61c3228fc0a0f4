"""Tables continued on the next page, joined into one table before chunking.

A PDF table that runs over a page break comes out of every parse path as one
``TableItem`` per page. The chunker linearises a table's rows with the names of
its header columns (``chunking.structure``), so the rows of the second and later
pieces lose their header unless the pieces are one table again.
``join_continued_tables`` joins them, the way docling-core represents a table
threaded over pages (its DocLang reader): one ``TableItem`` with one provenance
per page and the rows of each piece appended below the previous ones.

docling itself has no detection of continued tables (checked in docling 2.143 and
docling-core 2.104: only the DocLang reader merges pieces its input already marks
as threaded), so the decision is made here. It is conservative, because a wrong
join puts one table's rows under another table's header, which is worse than a
missed one. A piece on page n+1 continues the table on page n only when all hold:

- the table is the last thing on page n and the piece the first thing on page
  n+1, apart from page furniture (running heads and foots, page numbers: the
  furniture content layer, text that looks like a page number, or short text in
  the top or bottom margin that repeats on other pages) and a caption that says
  the table is continued;
- the table ends in the lower part of its page and the piece starts in the upper
  part of its page;
- both have the same number of columns and their left and right edges line up;
- the piece has no caption of its own (the layout path links captions), other
  than one that says the table is continued;
- the piece's first rows repeat the table's header (they are dropped), or its
  first row is not a header: not marked as one, or, where every first row is
  marked (the model-free path marks the first row of every table), it holds a
  number (not a year, unless the column holds years) in a column whose rows
  below the header are numbers, and its first cell is filled where the rows
  below have theirs filled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parsers.models import BackendResult, ParseWarning

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument, TableItem

SOURCE = "table-joins"

# Edges of two pieces closer than this share of the page width line up.
EDGE_TOLERANCE = 0.06
# The table ends below this share of its page's height; the piece starts above
# the complementary share of its own page.
LOW_ON_PAGE = 0.55
# Margin bands (share of the page height) where running heads and foots live.
MARGIN_BAND = 0.12
# Running heads and foots are short.
FURNITURE_MAX_WORDS = 16
# How many of a table's last rows show what its columns hold.
BODY_ROWS = 60

_PAGE_NUMBER = re.compile(
    r"^\s*(?:page|p\.|seite|página|pagina|стр\.?)?\s*[-–—(\[]?\s*"
    r"(?:\d{1,5}|(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3}))\s*(?:(?:/|of|von|de|sur)\s*\d{1,5})?\s*[-–—)\]]?\s*$",
    re.I,
)
_CONTINUED = re.compile(
    r"\b(?:continued|cont(?:'|’)?d\.?|cont\.|fortsetzung|suite|continuación|continua)\b", re.I
)
_YEAR = re.compile(r"^(?:1[89]|20)\d\d(?:\s*[-–/]\s*\d{2,4})?\*?$")
_NUMBER = re.compile(r"^[\s(\[]*[-+−–]?[$€£¥%]?\s*\d[\d\s.,'’:/%x×–-]*[)\]%*a-zA-Z]{0,3}\s*$")


@dataclass(frozen=True, slots=True)
class _Box:
    """An item's box on one page, top-left origin, in points."""

    page: int
    left: float
    top: float
    right: float
    bottom: float


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _box(doc: DoclingDocument, prov: Any) -> _Box | None:
    page = doc.pages.get(prov.page_no)
    if page is None or prov.bbox is None:
        return None
    bbox = prov.bbox.to_top_left_origin(page_height=page.size.height)
    top, bottom = sorted((bbox.t, bbox.b))
    return _Box(prov.page_no, bbox.l, top, bbox.r, bottom)


def _page_size(doc: DoclingDocument, page_no: int) -> tuple[float, float]:
    size = doc.pages[page_no].size
    return float(size.width), float(size.height)


def _is_furniture_label(item: Any) -> bool:
    from docling_core.types.doc import ContentLayer, DocItemLabel

    if getattr(item, "content_layer", None) == ContentLayer.FURNITURE:
        return True
    return getattr(item, "label", None) in (DocItemLabel.PAGE_HEADER, DocItemLabel.PAGE_FOOTER)


def _margin_key(text: str) -> str:
    """A running head's text with its numbers taken out (they change per page)."""
    return re.sub(r"\d+", "#", _norm(text))


class _Furniture:
    """Decides which text items are page furniture."""

    def __init__(self, doc: DoclingDocument, items: list[tuple[Any, _Box]]) -> None:
        self.doc = doc
        # margin text -> the pages it is on
        self.pages_of: dict[str, set[int]] = {}
        for item, box in items:
            text = getattr(item, "text", None)
            if text and self._in_margin(box) and len(text.split()) <= FURNITURE_MAX_WORDS:
                self.pages_of.setdefault(_margin_key(text), set()).add(box.page)

    def _in_margin(self, box: _Box) -> bool:
        _w, height = _page_size(self.doc, box.page)
        return box.bottom <= MARGIN_BAND * height or box.top >= (1 - MARGIN_BAND) * height

    def __call__(self, item: Any, box: _Box) -> bool:
        if _is_furniture_label(item):
            return True
        text = getattr(item, "text", None)
        if text is None:
            return False  # pictures, tables, groups: content
        if not text.strip() or _PAGE_NUMBER.match(text):
            return True
        if not self._in_margin(box) or len(text.split()) > FURNITURE_MAX_WORDS:
            return False
        return len(self.pages_of.get(_margin_key(text), ())) >= 2


def _rows(table: TableItem) -> dict[int, list[Any]]:
    """Cells by the row they start in."""
    rows: dict[int, list[Any]] = {}
    for cell in table.data.table_cells:
        rows.setdefault(cell.start_row_offset_idx, []).append(cell)
    return rows


def _header_rows(table: TableItem) -> int:
    """How many leading rows are marked as column headers."""
    rows = _rows(table)
    n = 0
    while n < table.data.num_rows and any(c.column_header for c in rows.get(n, ())):
        n += 1
    return n


def _grid(table: TableItem, first: int = 0, last: int | None = None) -> list[list[str]]:
    """Rows ``first``..``last`` (exclusive) of the table, their text per column (a
    spanning cell in each column and row it covers), in one pass over the cells."""
    last = table.data.num_rows if last is None else min(last, table.data.num_rows)
    n_cols = table.data.num_cols
    rows = [[""] * n_cols for _ in range(max(last - first, 0))]
    for cell in table.data.table_cells:
        text = _norm(cell.text)
        for r in range(max(cell.start_row_offset_idx, first), min(cell.end_row_offset_idx, last)):
            for col in range(
                max(cell.start_col_offset_idx, 0), min(cell.end_col_offset_idx, n_cols)
            ):
                rows[r - first][col] = text
    return rows


def _is_number(text: str) -> bool:
    return bool(text) and bool(_NUMBER.match(text)) and sum(ch.isdigit() for ch in text) > 0


def _numeric_columns(body: list[list[str]], n_cols: int) -> set[int]:
    """Columns whose filled cells in ``body`` are mostly numbers."""
    out: set[int] = set()
    for col in range(n_cols):
        filled = [row[col] for row in body if row[col]]
        if len(filled) >= 2 and sum(_is_number(t) for t in filled) >= 0.8 * len(filled):
            out.add(col)
    return out


def _first_row_verdict(table: TableItem, piece: TableItem) -> int | None:
    """How many leading rows of ``piece`` to drop when it continues ``table`` (a
    repeated header), or None when its first row reads as a new table's header."""
    head = _header_rows(table)
    header = _grid(table, 0, head)
    if head and piece.data.num_rows > head and _grid(piece, 0, head) == header:
        return head
    first = _grid(piece, 0, 1)[0]
    header_cells = {t for row in header for t in row if t}
    filled = [t for t in first if t]
    if 2 * sum(t in header_cells for t in filled) >= len(filled):
        # Mostly the header again, changed: not a plain continuation. (One shared
        # cell is not enough: where the table's first row is data marked as a header,
        # as in a page range that starts inside a table, a category value repeats.)
        return None
    if _header_rows(piece) == 0:
        return 0  # the parser marks headers, and this piece has none
    # the rows the piece would follow (the last ones: a long table is not read whole)
    body = _grid(table, max(head, table.data.num_rows - BODY_ROWS))
    if not first[0] and sum(bool(row[0]) for row in body) >= 0.8 * max(len(body), 1):
        return None  # an empty stub cell over a filled stub column: a header row
    for col in _numeric_columns(body, table.data.num_cols):
        value = first[col] if col < len(first) else ""
        if not _is_number(value):
            continue
        # Years head the columns of many tables; a year is data only in a column of years.
        if not _YEAR.match(value) or all(_YEAR.match(row[col]) for row in body if row[col]):
            return 0
    return None


def _lined_up(doc: DoclingDocument, a: _Box, b: _Box) -> bool:
    width = max(_page_size(doc, a.page)[0], _page_size(doc, b.page)[0])
    tol = EDGE_TOLERANCE * width
    return abs(a.left - b.left) <= tol and abs(a.right - b.right) <= tol


def _join(table: TableItem, piece: TableItem, drop: int) -> None:
    """Append ``piece``'s rows (less the first ``drop``) below ``table``'s, and its pages."""
    offset = table.data.num_rows - drop
    for cell in piece.data.table_cells:
        if cell.start_row_offset_idx < drop:
            continue
        moved = cell.model_copy()
        moved.start_row_offset_idx += offset
        moved.end_row_offset_idx += offset
        moved.column_header = False  # the piece's rows are body rows of the table
        table.data.table_cells.append(moved)
    table.data.num_rows = offset + piece.data.num_rows
    table.prov.extend(piece.prov)


def join_continued_tables(doc: DoclingDocument) -> tuple[DoclingDocument, list[int]]:
    """Join each table continued on the next page into the table it continues.

    Returns the document (changed in place) and, per join, the page the joined
    piece was on. Documents without pages or with one table are left as they are.
    """
    from docling_core.types.doc import ContentLayer

    if len(doc.tables) < 2 or len(doc.pages) < 2:
        return doc, []
    layers = set(ContentLayer)
    items: list[tuple[Any, _Box]] = []
    for item, _level in doc.iterate_items(included_content_layers=layers, traverse_pictures=True):
        for prov in getattr(item, "prov", None) or []:
            box = _box(doc, prov)
            if box is not None:
                items.append((item, box))
    furniture = _Furniture(doc, items)
    by_page: dict[int, list[tuple[Any, _Box]]] = {}
    for item, box in items:
        by_page.setdefault(box.page, []).append((item, box))
    captions = {ref.cref for t in doc.tables for ref in t.captions}

    def blocks(item: Any, box: _Box, table: Any, piece: Any) -> bool:
        if item is table or item is piece or furniture(item, box):
            return False
        text = getattr(item, "text", "") or ""
        return not (item.self_ref in captions and _CONTINUED.search(text))

    joined_pages: list[int] = []
    removed: list[TableItem] = []
    tables = [t for t in doc.tables if t.prov and t.data.num_rows and t.data.num_cols]
    i = 0
    while i < len(tables) - 1:
        table, piece = tables[i], tables[i + 1]
        if _continues(doc, table, piece, by_page, blocks):
            drop = _first_row_verdict(table, piece)
            if drop is not None:
                _join(table, piece, drop)
                joined_pages.append(piece.prov[0].page_no)
                removed.append(piece)
                tables.pop(i + 1)
                continue  # the next piece may continue the joined table
        i += 1
    if removed:
        doc.delete_items(node_items=list(removed))
    return doc, joined_pages


def _continues(
    doc: DoclingDocument,
    table: TableItem,
    piece: TableItem,
    by_page: dict[int, list[tuple[Any, _Box]]],
    blocks: Any,
) -> bool:
    """Whether ``piece`` sits where a continuation of ``table`` would: on the next
    page, at its top, below nothing but furniture, the table at the bottom of its
    page above nothing but furniture, same columns, edges lined up, no caption."""
    end, start = _box(doc, table.prov[-1]), _box(doc, piece.prov[0])
    if end is None or start is None or start.page != end.page + 1:
        return False
    if piece.data.num_cols != table.data.num_cols:
        return False
    for ref in piece.captions:  # a caption of its own: a new table, unless "continued"
        if not _CONTINUED.search(getattr(ref.resolve(doc), "text", "") or ""):
            return False
    if not _lined_up(doc, end, start):
        return False
    if end.bottom < LOW_ON_PAGE * _page_size(doc, end.page)[1]:
        return False
    if start.top > (1 - LOW_ON_PAGE) * _page_size(doc, start.page)[1]:
        return False
    below = [
        (item, box)
        for item, box in by_page.get(end.page, ())
        if box.bottom > end.bottom + 1 and blocks(item, box, table, piece)
    ]
    above = [
        (item, box)
        for item, box in by_page.get(start.page, ())
        if box.top < start.top - 1 and blocks(item, box, table, piece)
    ]
    return not below and not above


def join_warnings(pages: list[int]) -> list[ParseWarning]:
    """One warning per join, on the page of the piece that was joined."""
    return [
        ParseWarning(SOURCE, "table continued from the previous page joined to it", page)
        for page in pages
    ]


def join_result_tables(result: BackendResult) -> BackendResult:
    """``result`` with its continued tables joined and each join in its warnings."""
    result.doc, pages = join_continued_tables(result.doc)
    result.warnings.extend(join_warnings(pages))
    return result
