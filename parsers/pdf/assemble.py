"""Lines (and detected tables) of a document -> one structured DoclingDocument.

Lines are grouped into blocks (``parsers.pdf.blocks``), a table's lines are
replaced by the table in place, headings are marked (``parsers.pdf.headings``),
and the blocks become docling items with their page and box. Text-layer lines,
OCR lines and mixed documents all go through here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from parsers.pdf.blocks import Block, column_spans, group_blocks
from parsers.pdf.headings import classify_headings
from parsers.pdf.primitives import NUMBERING, Line

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from parsers.pdf.headings import OutlineEntry, RangeHeadings
    from parsers.pdf.regions import Region
    from parsers.pdf.tables import Table


def _blocks_with_tables(lines: list[Line], tables: Sequence[Table]) -> list[Block]:
    """Paragraph blocks, with each table's lines replaced by one table block in place."""
    if not tables:
        return group_blocks(lines)
    spans = column_spans(lines)
    on_page: dict[int, list[Table]] = {}
    for t in tables:
        on_page.setdefault(t.page_no, []).append(t)
    owner: dict[int, Table] = {}
    for i, ln in enumerate(lines):
        cx, cy = (ln.left + ln.right) / 2, (ln.top + ln.bottom) / 2
        for t in on_page.get(ln.page_no, ()):
            if t.contains(cx, cy):
                owner[i] = t
                break
    blocks: list[Block] = []
    run: list[Line] = []
    placed: dict[int, Block] = {}
    for i, ln in enumerate(lines):
        table = owner.get(i)
        if table is None:
            run.append(ln)
            continue
        if run:
            blocks += group_blocks(run, spans)
            run = []
        if id(table) in placed:
            placed[id(table)].lines.append(ln)
        else:
            placed[id(table)] = Block("table", [ln], table=table)
            blocks.append(placed[id(table)])
    if run:
        blocks += group_blocks(run, spans)
    return blocks


def _table_data(table: Table) -> Any:
    from parsers.tables import table_data

    return table_data(table.cells, table.n_rows, table.n_cols, table.header_rows)


def lines_to_document(
    lines: list[Line],
    page_sizes: dict[int, tuple[float, float]],
    name: str,
    outline: Sequence[OutlineEntry],
    tables: Sequence[Table] = (),
    titles: dict[int, list[Region]] | None = None,
    heading_rules: bool = True,
    context: RangeHeadings | None = None,
) -> DoclingDocument:
    """Assemble a structured DoclingDocument from page lines (and detected tables).

    ``titles`` and ``heading_rules`` choose how headings are found, ``context`` says the
    lines are a page range of a longer document (see
    ``parsers.pdf.headings.classify_headings``).
    """
    from docling_core.types.doc import (
        BoundingBox,
        CoordOrigin,
        DocItemLabel,
        DoclingDocument,
        ProvenanceItem,
        Size,
    )

    doc = DoclingDocument(name=name)
    for page_no, (width, height) in sorted(page_sizes.items()):
        doc.add_page(page_no=page_no, size=Size(width=width, height=height))
    blocks = _blocks_with_tables(lines, tables)
    classify_headings(blocks, outline, titles, heading_rules, context)

    list_group = None
    for block in blocks:
        if block.kind == "table" and block.table is not None:
            list_group = None
            t = block.table
            bbox = BoundingBox(
                l=t.left, t=t.top, r=t.right, b=t.bottom, coord_origin=CoordOrigin.TOPLEFT
            )
            prov = ProvenanceItem(page_no=t.page_no, bbox=bbox, charspan=(0, 0))
            doc.add_table(data=_table_data(t), prov=prov)
            continue
        text = block.text
        first, last = block.lines[0], block.lines[-1]
        bbox = BoundingBox(
            l=min(ln.left for ln in block.lines),
            t=first.top,
            r=max(ln.right for ln in block.lines),
            b=last.bottom,
            coord_origin=CoordOrigin.TOPLEFT,
        )
        prov = ProvenanceItem(page_no=first.page_no, bbox=bbox, charspan=(0, len(text)))
        if block.kind == "list_item":
            if list_group is None:
                list_group = doc.add_list_group()
            marker_match = re.match(r"^(\S+)\s+", text)
            marker = marker_match.group(1) if marker_match else ""
            body = text[marker_match.end() :] if marker_match else text
            enumerated = bool(NUMBERING.match(marker))
            doc.add_list_item(
                body, enumerated=enumerated, marker=marker, prov=prov, parent=list_group
            )
            continue
        list_group = None
        if block.kind == "heading":
            doc.add_heading(text, level=max(1, block.level), prov=prov)
        else:
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    return doc
