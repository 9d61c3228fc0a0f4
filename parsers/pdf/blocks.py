"""Lines of a page grouped into blocks: paragraphs and list items.

A block break is a vertical gap, a move up (a new column), a change of size or
weight, a line that starts with a list marker (``primitives.LIST_START``) or
a drawn bullet, or two short lines in a row where the first had room for more.
``parsers.pdf.headings`` then marks headings among the blocks, and
``parsers.pdf.assemble`` turns them into a DoclingDocument.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from parsers.pdf.primitives import LIST_START, Line, is_cjk, join_pieces

if TYPE_CHECKING:
    from parsers.pdf.tables import Table

# A line is "set in bold" when nearly all its letters are: a bold lead-in
# ("Note: ...", "Wang Laboratories: ...") does not make a paragraph a heading.
FULL_BOLD = 0.85


@dataclass(slots=True)
class Block:
    kind: str  # "paragraph" | "heading" | "list_item" | "table"
    lines: list[Line]
    level: int = 0
    table: Table | None = None
    # Set apart from a neighbour by nothing but a line broken short on purpose
    # (``_broken_on_purpose``): one of a run of short lines in the text's own style,
    # an item of a list whose markers are drawn shapes. Never a heading: the line was
    # one of a paragraph's before it was split, and nothing else sets it apart.
    in_run: bool = False

    @property
    def text(self) -> str:
        return join_pieces(line.text for line in self.lines)

    @property
    def height(self) -> float:
        """Font-size proxy of the block."""
        return statistics.median(line.fsize for line in self.lines)

    @property
    def bold(self) -> bool:
        """Set in bold throughout (a bold lead-in phrase does not count)."""
        chars = sum(len(ln.text) for ln in self.lines)
        return sum(ln.bold * len(ln.text) for ln in self.lines) >= FULL_BOLD * chars


def _style_break(line: Line, prev: Line, right: float) -> bool:
    """A change of style between two lines that does not happen inside a paragraph.

    A heading set in the body size but in bold sits right above its paragraph
    with normal leading; only the change of weight separates them. A change of
    face alone is common inside paragraphs (an italic line), so it counts only
    together with a change of size, or at a line that ends short.
    """
    if (line.bold >= FULL_BOLD) != (prev.bold >= FULL_BOLD):
        return True
    # A change of face after a line that ends well short of the column (``right``:
    # the right edge of the block so far and of this line): the short line closed
    # its paragraph or stood alone (a side heading in italics, a label).
    # So does a change of face after a line that ends a sentence.
    edge = max(right, line.right)
    if (
        line.font
        and line.font != prev.font  # a line without letters has no face: a change too
        and abs(prev.left - line.left) <= 0.5 * line.height
        and (prev.right < edge - 0.2 * (edge - line.left) or prev.text.rstrip()[-1:] in ".:;!?")
    ):
        return True
    if line.font and prev.font and line.font != prev.font:
        a, b = line.fsize, prev.fsize
        return abs(a - b) >= 0.05 * max(a, b)
    # A step of a sixth or more in the size the words are set at, in one face: "2.2.2
    # 账户相关特征" at 12 pt right under 10 pt items (the same bold face) starts its own
    # block; a paragraph's lines are set at one size.
    return (
        line.size > 0
        and prev.size > 0
        and abs(line.size - prev.size) >= 0.15 * max(line.size, prev.size)
    )


def _continues(prev: Line, line: Line) -> bool:
    """Two consecutive lines of one column at one size: possibly one paragraph."""
    return (
        prev.page_no == line.page_no
        and abs(line.fsize - prev.fsize) <= 0.2 * max(line.fsize, prev.fsize)
        and line.left < prev.right
        and line.right > prev.left
    )


def _widest(lines: list[Line]) -> dict[int, float]:
    """Per page, the width of its widest lines (the 90th percentile: a stray long line,
    a rule of dots, does not set it)."""
    by_page: dict[int, list[float]] = {}
    for ln in lines:
        by_page.setdefault(ln.page_no, []).append(ln.right - ln.left)
    widest: dict[int, float] = {}
    for page_no, widths in by_page.items():
        widths.sort()
        widest[page_no] = widths[int(0.9 * (len(widths) - 1))]
    return widest


def _leading(lines: list[Line], widest: dict[int, float]) -> dict[int, float]:
    """The usual white gap between the lines of a paragraph, per font size.

    Measured after lines that run (nearly) the full width of the page's text
    (``widest``), which a paragraph goes on from. Chinese and Japanese are often set
    with a line gap larger than the glyphs, and so are double-spaced manuscripts: the
    gap that splits paragraphs is judged against this, not against the glyphs.
    """
    gaps: dict[int, list[float]] = {}
    for prev, line in itertools.pairwise(lines):
        if not _continues(prev, line) or prev.right - prev.left < 0.9 * widest[prev.page_no]:
            continue
        gap = line.top - prev.bottom
        if gap >= 0:
            gaps.setdefault(round(prev.fsize), []).append(gap)
    return {size: statistics.median(g) for size, g in gaps.items() if len(g) >= 3}


Spans = dict[int, list[tuple[float, float, float]]]


def column_spans(lines: list[Line], widest: dict[int, float] | None = None) -> Spans:
    """Per page, the (left, right, size) spans of its full lines: those nearly as wide as
    the widest lines of the page (``widest``, measured here when not given), one span per
    column they run in, with the size of the text that fills it."""
    lines = [ln for ln in lines if ln.text.strip()]
    widest = _widest(lines) if widest is None else widest
    out: Spans = {}
    for ln in sorted(lines, key=lambda ln: ln.left):
        if ln.right - ln.left < 0.9 * widest[ln.page_no]:
            continue
        spans = out.setdefault(ln.page_no, [])
        if spans and abs(spans[-1][0] - ln.left) <= ln.fsize:
            spans[-1] = (spans[-1][0], max(spans[-1][1], ln.right), spans[-1][2])
        else:
            spans.append((ln.left, ln.right, ln.fsize))
    return out


# A line that opens with a short label and a colon: "验证数据：", "Owner: ".
_LABELLED = re.compile(r"[^\s:：][^:：]{0,24}[:：]")


def _labelled_pair(prev: Line, line: Line, widest: float) -> bool:
    """Two lines at one left that each open with a label ("训练数据：5002条" over
    "验证数据：2000条"), the first short of the document's widest lines (``widest``): one
    labelled value per line, whatever their lengths, where a page of such lines gives no
    full line at their size to measure a column's edge by."""
    em = max(prev.fsize, line.fsize)
    return (
        abs(line.left - prev.left) <= 0.5 * em
        and abs(prev.fsize - line.fsize) <= 0.1 * em
        and prev.right - prev.left < 0.9 * widest
        and all(_LABELLED.match(ln.text.strip()) for ln in (prev, line))
    )


def _broken_on_purpose(prev: Line, line: Line, spans: Spans, before: Line | None) -> bool:
    """Two lines that both end short of their column, the first with room left for the
    next one's first word: the writer broke the line, the typesetter did not (a list
    whose markers are drawn shapes, an address, one item per line). Chinese and
    Japanese wrap at any character, so there room for two characters is enough. Lines
    that end at one x short of the column wrap around a figure. A line at the same left
    that runs on past where the first one had room for its first word shows the same
    without the column's edge (a page of list items has no full line to measure it by),
    unless the first ends where the line ``before`` it does (it wrapped at a figure).
    Only lines set at the size of the text that fills the column: a title over two lines
    is one title, and a slide's larger bullets keep their own rules."""
    words = line.text.split()
    if not words or not all(any(c.isalpha() for c in ln.text) for ln in (prev, line)):
        return False  # a line without letters: a diagram's rule drawn in text ("+---+")
    em = max(prev.fsize, line.fsize)
    edges = [
        right
        for left, right, size in spans.get(prev.page_no, ())
        if left - 1 <= prev.left < right and abs(size - em) <= 0.1 * size
    ]
    if not edges or abs(prev.fsize - line.fsize) > 0.1 * em:
        return False
    edge = max(edges)
    first = words[0]
    need = 2 * em if is_cjk(first[0]) else (len(first) + 1) * 0.6 * em
    if (
        abs(line.left - prev.left) <= 0.5 * em
        and line.right - prev.right > need
        and (before is None or abs(before.right - prev.right) > 0.5 * em)
    ):
        return True  # the next line itself runs on past where this one's first word fits
    return (
        edge - prev.right > need
        and edge - line.right > em
        and abs(line.right - prev.right) > 0.5 * em
    )


def group_blocks(lines: list[Line], spans: Spans | None = None) -> list[Block]:
    """Group consecutive lines of one page into paragraphs and list items. ``spans``:
    the pages' full-line spans (``column_spans``), when ``lines`` are only part of them."""
    lines = [ln for ln in lines if ln.text.strip()]
    widest = _widest(lines)
    spans = column_spans(lines, widest) if spans is None else spans
    leading = _leading(lines, widest)
    full = max(widest.values(), default=0.0)
    blocks: list[Block] = []
    current: Block | None = None
    prev: Line | None = None
    for line in lines:
        starts_list = line.bullet or bool(LIST_START.match(line.text.strip()))
        new_block = True
        in_run = False
        if current is not None and prev is not None and prev.page_no == line.page_no:
            gap = line.top - prev.bottom
            height = max(line.height, prev.height)
            usual = leading.get(round(prev.fsize))
            new_block = (
                starts_list
                or line.picture != prev.picture  # a picture's text is a block of its own
                or not _continues(prev, line)
                or gap > max(0.9 * height, (usual or 0.0) + 0.5 * height)
                or gap < -0.5 * line.height  # moved up: a new column or region
                or _style_break(line, prev, max(ln.right for ln in current.lines))
            )
            before = current.lines[-2] if len(current.lines) > 1 else None
            if not new_block and (
                _broken_on_purpose(prev, line, spans, before) or _labelled_pair(prev, line, full)
            ):
                new_block = in_run = current.in_run = True
        if new_block:
            current = Block("list_item" if starts_list else "paragraph", [line], in_run=in_run)
            blocks.append(current)
        else:
            assert current is not None
            current.lines.append(line)
        prev = line
    return blocks
