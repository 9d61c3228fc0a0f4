"""Headings among the blocks: the outline first, then typography.

- the outline (bookmarks), whose titles and levels become headings: the
  author's own statement of the structure, so it wins over every other cue;
- typography: glyph height (a font-size proxy), weight (bold faces) and
  typeface; a short block set apart by size, weight or face from the body text,
  with text below it, becomes a heading, one level per distinct style;
- section numbering ("2.3", "(1)", "Chapter 4"), which supports a weak cue.

A page range of a longer PDF parsed as a PDF of its own (``parsers.pages``) is given
the whole PDF's outline and an earlier range's body style (``RangeHeadings``), and
records each heading's style, from which every range's levels are numbered as one
document's (``mark_levels``).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parsers.pdf.blocks import FULL_BOLD, Block
from parsers.pdf.primitives import (
    BULLET_START,
    LARGER,
    Line,
    is_cjk,
    is_mono_face,
    is_symbol_face,
    open_pdf,
)
from parsers.pdf.regions import Region

# Section numbering at the start of a heading: "2", "2.3", "2.3.1.", "IV.", "B.",
# "(1)", "1)", "2-5-" (hyphenated, as Persian and Arabic documents number),
# "Chapter 4", "Part II", "Appendix A", "제3장", "第二章".
_SECTION_NUMBER = re.compile(
    r"^(?:\d{1,2}(?:\.\d{1,2}){0,4}\.?|\d{1,2}(?:-\d{1,2}){0,4}-|[IVXLC]{1,6}\.|[A-Z]\.|\(\d{1,2}\)|\d{1,2}\)"
    r"|(?:chapter|section|part|appendix|annex|article)\s+[\dIVXLCA-Z]{1,6}\.?"
    r"|제\s*\d{1,3}\s*[장절편부조]|第[\d一二三四五六七八九十百]{1,4}[章节節部篇条])(?:\s|$)",
    re.IGNORECASE,
)
# A caption's label on a line of its own ("Table 1", "Fig. 3", "图 2"): the caption
# below it names a table or figure, not a section.
_CAPTION_WORDS = r"table|tab\.|figure|fig\.|chart|exhibit|scheme|plate|listing|algorithm|表|图|圖"
_CAPTION_LABEL = re.compile(
    rf"^(?:{_CAPTION_WORDS}|equation)\s*[\dIVXivx]+(?:[.-]\d+)*[.:]?$", re.IGNORECASE
)
# Dot leaders ending in a page number.
_TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*[\dIVXLCivxlc]+\s*$")
_SENTENCE_END = (".", ",", ";", "。", "，", "；", "、")
# The end of a sentence or a clause a line may stop at; a line that stops
# elsewhere goes on to the next.
_CLAUSE_END = (*_SENTENCE_END, ":", "：", "!", "?", "！", "？", "…", ")", "）", "”", '"')
# A caption with its text on the same line ("Figure 1: A cute duckling", "表 2：结果").
_CAPTION_TEXT = re.compile(
    rf"^(?:{_CAPTION_WORDS})\s*[\dIVXivx]+(?:[.-]\d+)*(?:\s*[.:：]|\s)\s*\S", re.IGNORECASE
)
# A relation sign between spaces: a display formula ("rid(t + 1) = min{...}").
_RELATION = re.compile(r"\s[=≠≤≥≈]\s")
_PERSON = re.compile(r"^(?:[A-Z][\w'’-]*\.?\s+){1,3}[A-Z][\w'’-]+$")
_INITIAL = re.compile(r"(?:^|\s)[A-Z]\.(?:\s|-|$)")
_PARTS = frozenset({"part", "appendix", "annex", "section", "chapter", "article", "step"})
# A line that is one address: "github.com/owner/project", "https://...", "name@host.org".
_ADDRESS = re.compile(
    r"^(?:(?i:[a-z][a-z0-9+.-]*://\S+|www\.\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
    # a host and path, as print spells them: lower case, a common top-level domain
    r"|[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|edu|gov|dev|ai|app|info|co|cn|de|uk"
    r"|jp|fr|eu|us)/\S*)$"
)
# A line that only numbers its page: "Page 3", "Page 1/5", "Seite 2 von 9", "第 3 页".
_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|pg\.|p\.|seite|página|pagina|strona)\s*\d+(?:\s*(?:/|of|von|de|sur|di|z)\s*\d+)?"
    r"|第\s*\d+\s*页(?:\s*[/,，]?\s*共\s*\d+\s*页)?)$",
    re.IGNORECASE,
)
# Faces that set mathematics: MathJax, Cambria Math, STIX/XITS Math, TeX's math italic,
# symbols and extension fonts (CMMI, CMSY, CMEX, AMS's MSAM/MSBM).
_MATH_FACE = re.compile(
    r"mathjax|cambria.?math|(?:stix|stixtwo|xits|latinmodern|lm|texgyre\w+|asana|libertinus"
    r"|fira|garamond|dejavu|noto\w*)[-_ ]?math|^(?:cmmi|cmsy|cmex|msam|msbm|eufm|rsfs)\d",
    re.IGNORECASE,
)


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    """One bookmark: its level (0 = top), title and, when it says, where it points (the
    page, numbered from 1, and its view's top in points from the page's top)."""

    level: int
    title: str
    page_no: int | None = None
    top: float | None = None


# Views whose position holds the top: XYZ (left, top, zoom), FitH and FitBH (top).
_VIEW_TOP = {1: 1, 3: 0, 7: 0}


def read_outline(path: Path, first_page: int = 1) -> list[OutlineEntry]:
    """The PDF's outline (bookmarks); empty when it has none. ``first_page``: the page
    numbered 1 in the result (a page range parsed as a PDF of its own)."""
    entries: list[OutlineEntry] = []
    with open_pdf(path) as pdf:
        try:
            for b in pdf.get_toc(max_depth=6):
                page_no = top = None
                dest = b.get_dest()
                index = dest.get_index() if dest is not None else None
                if index is not None and index >= 0:
                    page_no = index + 2 - first_page
                    mode, pos = dest.get_view()
                    k = _VIEW_TOP.get(mode)
                    if k is not None and k < len(pos) and pos[k]:
                        top = pdf.get_page_size(index)[1] - float(pos[k])
                entries.append(OutlineEntry(b.level, b.get_title() or "", page_no, top))
        except Exception:  # a broken outline is not a broken document
            return []
    return entries


@dataclass(frozen=True, slots=True)
class BodyStyle:
    """The running text's style: median glyph height, bold or not, typeface; and the
    size most of the code is set at, in a monospaced face (0: no code)."""

    size: float
    bold: bool
    face: str
    code_size: float = 0.0


# A heading style: (glyph height rounded to a point, bold); one level per style.
Style = tuple[float, bool]


@dataclass(frozen=True, slots=True)
class HeadingMark:
    """A heading that one parse found, in document order: its style and, for a title
    the outline names, the level the outline gave it (other headings' levels follow
    from the styles, ``heading_levels``)."""

    size: float
    bold: bool
    outline_level: int | None = None

    @property
    def style(self) -> Style:
        return (self.size, self.bold)


@dataclass(slots=True)
class RangeHeadings:
    """The heading context of one page range of a longer PDF parsed as a PDF of its own
    (``parsers.pages``), so that its headings are found as in the whole document's parse.

    Given: ``outline``, the whole PDF's outline (the range's own PDF has none), and
    ``body``, the body style an earlier range found (None: this range's own, which
    ``classify_headings`` then stores here). Found: ``marks``, each heading's style,
    from which the pool numbers every range's headings as one document's.
    """

    outline: list[OutlineEntry] = field(default_factory=list)
    body: BodyStyle | None = None
    marks: list[HeadingMark] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the pipe between the pool and its parser child."""
        body = self.body
        return {
            "outline": [[e.level, e.title, e.page_no, e.top] for e in self.outline],
            "body": [body.size, body.bold, body.face, body.code_size] if body else None,
            "marks": [[m.size, m.bold, m.outline_level] for m in self.marks],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RangeHeadings:
        body = data.get("body")
        return cls(
            outline=[OutlineEntry(*entry) for entry in data.get("outline") or ()],
            body=BodyStyle(float(body[0]), bool(body[1]), str(body[2]), float(body[3]))
            if body
            else None,
            marks=[
                HeadingMark(float(size), bool(bold), None if level is None else int(level))
                for size, bold, level in data.get("marks") or ()
            ],
        )


_RANGE: ContextVar[RangeHeadings | None] = ContextVar("corpusflow_pdf_range", default=None)


@contextlib.contextmanager
def parsing_range(context: RangeHeadings) -> Iterator[RangeHeadings]:
    """While in this block, the PDF being parsed is a page range of a longer one
    described by ``context`` (``current_range``)."""
    token = _RANGE.set(context)
    try:
        yield context
    finally:
        _RANGE.reset(token)


def current_range() -> RangeHeadings | None:
    """The heading context of the page range being parsed (``parsing_range``); None
    when a whole document is."""
    return _RANGE.get()


def heading_levels(
    candidates: Iterable[Style], outline_style: Mapping[Style, int]
) -> dict[Style, int]:
    """The level of each heading style: one level per distinct style, larger first,
    bold before regular at one size. A style the outline already used
    (``outline_style``: the level of its first outline heading) keeps the outline's
    level; another one goes one level below the nearest larger outline style."""

    def rank(s: Style) -> tuple[float, bool]:
        return (-s[0], not s[1])

    styles = sorted(set(candidates) | set(outline_style), key=rank)
    level_of: dict[Style, int] = {}
    current = 0
    seen_outline = not outline_style
    for s in styles:
        if s in outline_style:
            current = outline_style[s]
            seen_outline = True
        elif seen_outline:
            current += 1
        else:
            current = 1  # set larger than every outline heading: a title
        level_of[s] = min(max(current, 1), 6)
    return level_of


def mark_levels(marks: Sequence[HeadingMark]) -> list[int]:
    """The level of each of ``marks`` (headings in document order, from one parse or
    from every range of one document), as ``classify_headings`` numbers them."""
    outline_style: dict[Style, int] = {}
    for m in marks:
        if m.outline_level is not None:
            outline_style.setdefault(m.style, m.outline_level)
    level_of = heading_levels((m.style for m in marks if m.outline_level is None), outline_style)
    return [m.outline_level if m.outline_level is not None else level_of[m.style] for m in marks]


def _body_style(blocks: Sequence[Block]) -> BodyStyle:
    """The style that carries the most characters: the running text (not the text OCR
    read in pictures, where there is other, nor code listings in a monospaced face,
    where the prose holds a tenth of the characters or more: a deployment guide that is
    mostly commands is read by its prose)."""
    every = [ln for b in blocks for ln in b.lines]
    lines = [ln for ln in every if not ln.picture] or every
    code = [ln for ln in lines if is_mono_face(ln.font)]
    prose = [ln for ln in lines if not is_mono_face(ln.font)]
    if sum(len(ln.text) for ln in prose) * 10 >= sum(len(ln.text) for ln in lines):
        lines = prose
    if not lines:
        return BodyStyle(10.0, False, "")
    body_key = _most_text(lines)
    body_lines = [ln for ln in lines if round(ln.fsize, 0) == body_key]
    size = statistics.median(ln.fsize for ln in body_lines)
    bold_chars = sum(len(ln.text) * ln.bold for ln in body_lines)
    faces: dict[str, int] = {}
    for ln in body_lines:
        faces[ln.font] = faces.get(ln.font, 0) + len(ln.text)
    face = max(faces.items(), key=lambda kv: kv[1])[0]
    code_key = _most_text(code) if code else 0.0
    code_size = (
        statistics.median(ln.fsize for ln in code if round(ln.fsize, 0) == code_key)
        if code
        else 0.0
    )
    bold = bold_chars * 2 > sum(len(ln.text) for ln in body_lines)
    return BodyStyle(size, bold, face, code_size)


def _most_text(lines: Sequence[Line]) -> float:
    """The size, rounded to a point, that carries the most characters of ``lines``; of
    sizes within a tenth of that, the smallest (a short deck's titles carry as many
    characters as its text: headings are set larger than the text, not smaller)."""
    by_size: dict[float, int] = {}
    for ln in lines:
        key = round(ln.fsize, 0)
        by_size[key] = by_size.get(key, 0) + len(ln.text)
    most = max(by_size.values())
    return min(size for size, n in by_size.items() if n * 10 >= most * 9)


def _page_furniture(blocks: Sequence[Block]) -> set[int]:
    """ids of lines repeated at the same height on many pages: running heads and feet.

    The text must repeat exactly (digits too): "Chapter 1" and "Chapter 2" opening
    their pages at the same height are titles, not furniture. Running heads
    recur on a good share of the pages, not on two pages of a long document; or,
    in a book whose running head names the chapter, on three or more pages near
    each other (every page, or every other one: recto or verso only).
    """
    pages = {ln.page_no for b in blocks for ln in b.lines}
    seen: dict[tuple[str, int], set[int]] = {}
    for b in blocks:
        for ln in b.lines:
            seen.setdefault((_norm(ln.text), round(ln.top / 4)), set()).add(ln.page_no)
    need = max(2.0, 0.3 * len(pages))
    repeated = {k for k, on in seen.items() if len(on) >= need or _runs_on_near_pages(on)}
    return {
        id(ln) for b in blocks for ln in b.lines if (_norm(ln.text), round(ln.top / 4)) in repeated
    }


def _runs_on_near_pages(pages: set[int]) -> bool:
    """Three of the pages in a row, each at most two pages after the one before."""
    order = sorted(pages)
    return any(
        b - a <= 2 and c - b <= 2 for a, b, c in zip(order, order[1:], order[2:], strict=False)
    )


def _title_key(text: str) -> str:
    """Outline lookup key: bookmarks often drop the section number the page shows."""
    return _norm(_SECTION_NUMBER.sub("", text.strip(), count=1))


def _outline_key(text: str, outline_levels: dict[str, int]) -> str | None:
    for key in (_norm(text), _title_key(text)):
        if key and key in outline_levels:
            return key
    return None


def _outline_level(text: str, outline_levels: dict[str, int]) -> int | None:
    key = _outline_key(text, outline_levels)
    return None if key is None else outline_levels[key]


def _at_destinations(
    hits: dict[int, tuple[str, Block]], outline: Sequence[OutlineEntry]
) -> set[int]:
    """The blocks (by id) that are the outline's headings, of ``hits`` (block id -> the
    outline key it spells, and the block). A title the outline names once but the pages
    spell more often (in a contents list above the chapter, in a cross-reference) is
    the heading where its bookmark points: the block on its page (or the next: some
    writers point at the end of the page before), nearest its view's top; the others
    are references to it. Where a bookmark does not say where it points, every block
    that spells it stays."""
    places: dict[str, list[OutlineEntry]] = {}
    for entry in outline:
        for key in {_norm(entry.title), _title_key(entry.title)} - {""}:
            places.setdefault(key, []).append(entry)
    by_key: dict[str, list[Block]] = {}
    for key, block in hits.values():
        by_key.setdefault(key, []).append(block)
    chosen: set[int] = set()
    for key, found in by_key.items():
        entries = places.get(key, [])
        if any(e.page_no is None for e in entries):
            chosen |= {id(b) for b in found}
            continue
        left = list(found)
        for entry in entries:
            near = [b for b in left if 0 <= b.lines[0].page_no - (entry.page_no or 0) <= 1]
            if not near:
                continue
            top = entry.top

            def distance(b: Block, e: OutlineEntry = entry, top: float | None = top) -> tuple:
                line = b.lines[0]
                return (line.page_no - (e.page_no or 0), abs(line.top - top) if top else 0.0)

            best = min(near, key=distance)
            chosen.add(id(best))
            left.remove(best)
    return chosen


def _split_outline_titles(blocks: list[Block], outline_levels: dict[str, int]) -> list[Block]:
    """Split off leading lines of a block that spell an outline title."""
    out: list[Block] = []
    for b in blocks:
        if (
            b.kind not in ("paragraph", "list_item")
            or len(b.lines) < 2
            or _outline_level(b.text, outline_levels) is not None
        ):
            out.append(b)
            continue
        for k in range(1, len(b.lines)):
            if _outline_level(Block(b.kind, b.lines[:k]).text, outline_levels) is not None:
                out += [Block(b.kind, b.lines[:k]), Block("paragraph", b.lines[k:])]
                break
        else:
            out.append(b)
    return out


def _in_title(block: Block, titles: dict[int, list[Region]]) -> bool:
    """Most of the block's lines sit in a title region of the layout model."""
    boxes = titles.get(block.lines[0].page_no, [])
    inside = sum(
        1
        for ln in block.lines
        if any(t.holds((ln.left + ln.right) / 2, (ln.top + ln.bottom) / 2) for t in boxes)
    )
    return inside * 2 > len(block.lines)


def _split_at_titles(blocks: list[Block], titles: dict[int, list[Region]]) -> list[Block]:
    """Split paragraphs where lines enter or leave a title region (a run-in heading
    set like the text below it is grouped with that text)."""
    out: list[Block] = []
    for b in blocks:
        if b.kind not in ("paragraph", "list_item") or len(b.lines) < 2:
            out.append(b)
            continue
        flags = [_in_title(Block(b.kind, [ln]), titles) for ln in b.lines]
        start = 0
        for k in range(1, len(b.lines) + 1):
            if k == len(b.lines) or flags[k] != flags[start]:
                out.append(Block(b.kind if start == 0 else "paragraph", b.lines[start:k]))
                start = k
    return out


def classify_headings(
    blocks: list[Block],
    outline: Sequence[OutlineEntry],
    titles: dict[int, list[Region]] | None = None,
    rules: bool = True,
    context: RangeHeadings | None = None,
) -> None:
    """Mark heading blocks and their levels (in place).

    ``titles``: title regions of a layout model per page; a short block in one is
    a heading. ``rules``: also apply the typography rules. ``context``: the blocks
    are a page range of a longer document (``RangeHeadings``): its body style is
    used when it has one (else this range's is stored in it), and each heading's
    style is added to its ``marks``.
    """
    outline_levels: dict[str, int] = {}
    for entry in outline:
        for key in (_norm(entry.title), _title_key(entry.title)):
            if key:
                outline_levels.setdefault(key, entry.level)
    if outline_levels:
        blocks[:] = _split_outline_titles(blocks, outline_levels)
    if titles:
        blocks[:] = _split_at_titles(blocks, titles)
    # "1. Scope" set large is a numbered heading, not a list item.
    text_blocks = [b for b in blocks if b.kind in ("paragraph", "list_item")]
    if not text_blocks:
        return
    # Table cells are running text too: a page that is mostly a table or a form
    # has its body size in the cells, and the few lines outside are its headings.
    if context is not None and context.body is not None:
        body = context.body
    else:
        body = _body_style([b for b in blocks if b.kind != "heading"])
        if context is not None:
            context.body = body
    furniture = _page_furniture(blocks)
    by_page: dict[int, list[Line]] = {}
    for b in blocks:
        for ln in b.lines:
            by_page.setdefault(ln.page_no, []).append(ln)
    position = {id(b): i for i, b in enumerate(blocks)}
    columns = _text_columns(blocks, body)

    def style(b: Block) -> Style:
        return (round(b.height, 0), b.bold)

    hits: dict[int, tuple[str, Block]] = {}
    for block in text_blocks:
        spelled = _outline_key(block.text, outline_levels)
        # The outline names a chapter once; a running head that spells its title on
        # every page of it ("CHAPTER II. THE POOL OF TEARS") is still furniture.
        if spelled is not None and not all(id(ln) in furniture for ln in block.lines):
            hits[id(block)] = (spelled, block)
    at_destinations = _at_destinations(hits, outline) if hits else set()

    candidates: list[Block] = []
    outline_style: dict[Style, int] = {}
    for block in text_blocks:
        text = block.text
        if id(block) in at_destinations:
            block.kind = "heading"
            block.level = outline_levels[hits[id(block)][0]] + 1
            outline_style.setdefault(style(block), block.level)
            continue
        if id(block) in hits:
            continue  # spells a title away from where its bookmark points: a contents entry
        if (
            titles
            and _in_title(block, titles)
            and len(text) <= 150
            and len(block.lines) <= 3
            and any(c.isalpha() for c in text)
        ):
            candidates.append(block)
            continue
        if rules and _is_heading(block, text, body, furniture, by_page, blocks, position, columns):
            candidates.append(block)

    candidates = _drop_repeats(blocks, candidates, style, furniture)
    if len(outline) >= 3 and len(at_destinations) >= 2:
        # The outline lists the document's headings, and its titles show their styles.
        # An unnumbered line at the body's size, in none of those styles, is emphasis
        # the outline left out ("**Training**" on a line of its own, a template's
        # "License" label), not a section; a numbered one ("1.1.1 Vent screws") is a
        # section deeper than the outline goes.
        # Bookmarks may stop a level or two above the page's headings (pandoc's LaTeX
        # bookmarks sections, not subsubsections); a style the document's own contents
        # list names three times over is a level the outline left out.
        listed = _styles_its_contents_name(blocks, candidates, style, outline_style)
        candidates = [
            b
            for b in candidates
            if style(b) in outline_style
            or style(b) in listed
            or b.height >= body.size * LARGER
            or _SECTION_NUMBER.match(b.text)
        ]
    level_of = heading_levels((style(b) for b in candidates), outline_style)
    for block in candidates:
        block.kind = "heading"
        block.level = level_of[style(block)]
    if context is not None:
        marked = {id(b) for b in candidates}
        context.marks += [
            HeadingMark(*style(b), outline_level=None if id(b) in marked else b.level)
            for b in blocks
            if b.kind == "heading"
        ]


# A contents entry's marker: a bullet or a dash in front of a heading's title.
_ENTRY_MARK = re.compile(r"^\s*[-–•◦▪·*]\s+")


def _styles_its_contents_name(
    blocks: Sequence[Block],
    candidates: Sequence[Block],
    style: Callable[[Block], Style],
    known: Mapping[Style, int],
) -> set[Style]:
    """Styles of at least three candidates that a contents list elsewhere in the
    document spells: dot-leader lines ("Using pip . . . 3") or bulleted entries ("- Using
    pip"), as a Markdown README's own "Table of Contents" prints."""
    mine = {id(b) for b in candidates}
    entries: set[str] = set()
    for b in blocks:
        if id(b) in mine:
            continue
        for ln in b.lines:
            text = ln.text.strip()
            marked = _ENTRY_MARK.sub("", text, count=1)
            if marked != text or _TOC_ENTRY.search(text):
                entries.add(_norm(_TOC_ENTRY.sub("", marked)))
    named: dict[Style, set[str]] = {}
    for b in candidates:
        key = _norm(b.text)
        if style(b) not in known and key in entries:
            named.setdefault(style(b), set()).add(key)
    return {s for s, keys in named.items() if len(keys) >= 3}


def _drop_repeats(
    blocks: Sequence[Block],
    candidates: list[Block],
    style: Callable[[Block], Style],
    furniture: set[int],
) -> list[Block]:
    """A heading that repeats the heading before it, in the same style, at the top of a
    later page (a slide's title on its continuation slide, a title repeated on the next
    page) continues that section: it is not a new one. The same title again on the same
    page, or lower on a later one, is a section of its own ("Example", "Parameters")."""
    chosen = {id(b) for b in candidates}
    keep: list[Block] = []
    previous: tuple[str, Style, int] | None = None
    page_top: dict[int, int] = {}  # page -> id of its first block that is not furniture
    for b in blocks:
        if b.lines and not all(id(ln) in furniture for ln in b.lines):
            page_top.setdefault(b.lines[0].page_no, id(b))
    for b in blocks:
        if not b.lines or (b.kind != "heading" and id(b) not in chosen):
            continue
        key = (_norm(b.text), style(b))
        page = b.lines[0].page_no
        repeat = (
            previous is not None
            and key == previous[:2]
            and page > previous[2]
            and page_top.get(page) == id(b)
        )
        if id(b) in chosen and not repeat:
            keep.append(b)
        previous = (*key, page)
    return keep


_MARKS = r"[\s\d*⇑†‡§¶,]+$"
_MARK = re.compile(r"[\d*⇑†‡§¶]")


def _names(text: str) -> list[tuple[str, str]] | None:
    """(name, its trailing marks) of a list of people's names ("Jack Cushman 1, Matthew
    Dahl 2, and Michael Lissner 3"); None when a part is not a name."""
    named = []
    for part in re.split(r",|&|\band\b", text):
        name = re.sub(_MARKS, "", part).strip()
        if name:
            named.append((name, part.strip()[len(name) :]))
        elif named:  # "Luis M. B. Varona 1, 2, 3": the next marks of the same name
            named[-1] = (named[-1][0], named[-1][1] + part)
    if not named or not all(
        _PERSON.match(p) and p.split()[0].lower() not in _PARTS for p, _ in named
    ):
        return None
    return named


def _is_byline(text: str) -> bool:
    """Names with initials, in a list: "H. Ashuri, A. Hassani", "M. Walley and I. Bjarnason *"."""
    named = _names(text) or []
    return len(named) >= 2 and any(_INITIAL.search(p) for p, _ in named)


def _byline_over_affiliations(text: str, after: str) -> bool:
    """Names that each carry a mark ("Alexander Power 1"), over a line that the first of
    those marks opens ("1 Department of Computer Science, ..."): the authors over their
    affiliations."""
    named = _names(text)
    if not named or not all(_MARK.search(marks) for _, marks in named):
        return False
    opener = re.match(r"[\d*⇑†‡§¶]+", after.strip())
    return opener is not None and opener.group() in set(_MARK.findall(named[0][1]))


def _reads_as_text(text: str) -> bool:
    """Lines that typography may set apart but that are not section titles."""
    return (
        bool(_CAPTION_TEXT.match(text))  # "Figure 1: A cute duckling": a caption
        or bool(_RELATION.search(text))  # "rid(t + 1) = min{...}": a display formula
        or _is_byline(text)  # "H. Ashuri, A. Hassani": the authors
        or text.endswith(("…", "..."))  # "The risks can be even higher when…": a lead-in
    )


def _side_heading(
    block: Block,
    text: str,
    other_face: bool,
    body: BodyStyle,
    blocks: Sequence[Block],
    position: dict[int, int],
) -> bool:
    """A short title-cased line in another face of the body size, standing alone
    above a paragraph of body text: a side heading (italic in many manuals and
    papers). It sits right above its paragraph, or nearer to it than to the text
    above (a heading belongs to what follows it)."""
    if not other_face or len(block.lines) != 1 or len(text.split()) > 10:
        return False
    if not (text[:1].isupper() or is_cjk(text[:1])):
        return False
    i = position[id(block)]
    if i + 1 >= len(blocks):
        return False
    nxt = blocks[i + 1]
    line, first = block.lines[0], nxt.lines[0]
    if not (
        first.page_no == line.page_no
        and (
            (nxt.kind == "paragraph" and first.font == body.face and len(nxt.lines) >= 2)
            or nxt.kind == "list_item"
        )
    ):
        return False
    below = first.top - line.bottom
    if 0 <= below <= 1.5 * line.height:
        return True
    prev = blocks[i - 1].lines[-1] if i > 0 else None
    above = (
        line.top - prev.bottom
        if prev is not None and prev.page_no == line.page_no and prev.bottom <= line.top
        else float("inf")
    )
    return 0 <= below <= 3 * line.height and above > 1.5 * below


# A paragraph's extent: left, right, top, bottom; the id of its block; whether it
# is set at the body size.
Extent = tuple[float, float, float, float, int, bool]


def _text_columns(blocks: Sequence[Block], body: BodyStyle) -> dict[int, list[Extent]]:
    """The paragraphs on each page that show where its text columns lie: two lines
    or more, wider than a table's cell (15 ems)."""
    out: dict[int, list[Extent]] = {}
    for b in blocks:
        lines = b.lines
        if b.kind != "paragraph" or len(lines) < 2:
            continue
        left, right = min(ln.left for ln in lines), max(ln.right for ln in lines)
        if right - left >= 15 * b.height:
            top, bottom = min(ln.top for ln in lines), max(ln.bottom for ln in lines)
            running = abs(b.height - body.size) <= 0.1 * body.size
            out.setdefault(lines[0].page_no, []).append((left, right, top, bottom, id(b), running))
    return out


def _column_of(line: Line, columns: Sequence[Extent], skip: int) -> tuple[float, float] | None:
    """The left and right edges of the text column ``line`` is set in: those of the
    paragraph of running text (at the body size) nearest above, below or around it
    whose edges hold its middle, other than the block with id ``skip``; None where
    there is none (a page of tables, a form)."""
    middle = (line.left + line.right) / 2
    best: tuple[float, float, float] | None = None
    for left, right, top, bottom, block_id, running in columns:
        if not running or block_id == skip or not left <= middle <= right:
            continue
        away = max(top - line.bottom, line.top - bottom, 0.0)
        if best is None or away < best[0]:
            best = (away, left, right)
    return None if best is None else (best[1], best[2])


def _runs_through(column: tuple[float, float], line: Line, columns: Sequence[Extent]) -> bool:
    """The column has text above ``line``'s row and below it: paragraphs (captions
    too) set within its edges."""
    left, right = column
    slack = 0.05 * (right - left)
    inside = [e for e in columns if e[0] >= left - slack and e[1] <= right + slack]
    return any(e[3] <= line.top for e in inside) and any(e[2] >= line.bottom for e in inside)


def _across_gutter(block: Block, mate: Line, columns: Sequence[Extent]) -> bool:
    """``mate`` is set in another text column than ``block``: each lies in a column
    of running text, the two columns do not overlap (a gutter runs between them)
    and both run through the row, with text above it and below it. A table's row
    lies within one column; a form's labels beside its fields lie in no column of
    running text; names set side by side above the columns (a paper's authors)
    are in none yet."""
    first = block.lines[0]
    mine, theirs = _column_of(first, columns, id(block)), _column_of(mate, columns, 0)
    if mine is None or theirs is None or not (theirs[1] <= mine[0] or mine[1] <= theirs[0]):
        return False
    return _runs_through(mine, first, columns) and _runs_through(theirs, mate, columns)


def _not_horizontal(line: Line) -> bool:
    """Text not set along the line: taller than twice its width (upright), or
    narrower than its letters could be side by side (aslant: a diagram's label
    along an arrow, whose word boxes are tall)."""
    chars = sum(not c.isspace() for c in line.text)
    if chars < 4:
        return False
    width = line.right - line.left
    return line.bottom - line.top > 2 * width or width < 0.2 * line.fsize * chars


def _small_heading(
    block: Block, body: BodyStyle, blocks: Sequence[Block], position: dict[int, int]
) -> bool:
    """A line smaller than the body text is a heading only as one of these: numbered
    (a deep section, "2.3 Builder": HTML sets h5 and h6 below the body size); above
    running text at the body size that starts where it starts; or above a paragraph
    set no larger than itself (a flyer's or a sidebar's smaller print). A figure's
    labels, and a sidebar's label above a list, are none of these."""
    if _SECTION_NUMBER.match(block.text):
        return True
    i = position[id(block)] + 1
    if i >= len(blocks):
        return False
    nxt = blocks[i]
    if nxt.kind != "paragraph" or not nxt.lines:
        return False
    first = nxt.lines[0]
    if first.page_no != block.lines[-1].page_no:
        return False
    if abs(nxt.height - body.size) <= 0.1 * body.size:
        return abs(first.left - block.lines[0].left) <= 0.5 * body.size
    return len(nxt.lines) >= 2 and nxt.height <= 1.1 * block.height


def _wraps_with_text(block: Block, blocks: Sequence[Block], position: dict[int, int]) -> bool:
    """A line set bold in a paragraph is split from it into a block of its own.
    It is running text when it goes on from the line right above it (at the
    paragraph's leading, which ends no sentence), or when it runs as far right as
    the paragraph right below it, which goes on from it."""
    i = position[id(block)]
    first, last = block.lines[0], block.lines[-1]

    def close(upper: Line, lower: Line, paragraph: Block) -> bool:
        """``lower`` follows ``upper`` at the leading of ``paragraph``'s lines (or,
        where it has one line, closer than 0.6 of a line's height)."""
        lines = paragraph.lines
        height = min(upper.height, lower.height)
        gaps = [b.top - a.bottom for a, b in itertools.pairwise(lines) if a.page_no == b.page_no]
        leading = statistics.median(gaps) if gaps else 0.6 * height
        return (
            upper.page_no == lower.page_no
            and 0 <= lower.top - upper.bottom <= max(leading, 0.0) + 0.15 * height
            and min(upper.right, lower.right) > max(upper.left, lower.left)
        )

    if i > 0 and blocks[i - 1].lines:
        above = blocks[i - 1].lines[-1]
        if (
            blocks[i - 1].kind == "paragraph"
            and close(above, first, blocks[i - 1])
            and not above.text.rstrip().endswith(_CLAUSE_END)
        ):
            return True
    if i + 1 < len(blocks) and blocks[i + 1].lines:
        nxt = blocks[i + 1]
        below = nxt.lines[0]
        measure = max(ln.right for ln in nxt.lines)  # the right edge its lines run to
        if (
            nxt.kind == "paragraph"
            and len(nxt.lines) >= 2
            and close(last, below, nxt)
            and not last.text.rstrip().endswith(_CLAUSE_END)
            and last.right >= measure - 0.02 * (measure - below.left)
            and abs(last.left - below.left) <= 0.5 * last.height
        ):
            return True
    return False


_ITEM_NUMBER = re.compile(r"^(\d{1,3})([.):]?)\s")


def _in_numbered_run(block: Block, blocks: Sequence[Block], position: dict[int, int]) -> bool:
    """The block is numbered, and the line right above or below it carries the number
    before or after its own, numbered alike: items of a numbered list (a heading has
    its section's text between it and the next one)."""
    mine = _ITEM_NUMBER.match(block.text)
    if mine is None:
        return False
    i = position[id(block)]
    for j, step in ((i - 1, -1), (i + 1, 1)):
        if not 0 <= j < len(blocks) or not blocks[j].lines:
            continue
        other = _ITEM_NUMBER.match(blocks[j].text)
        if other is None or other.group(2) != mine.group(2):
            continue
        if int(other.group(1)) != int(mine.group(1)) + step:
            continue
        first, second = (blocks[j], block) if step < 0 else (block, blocks[j])
        upper, lower = first.lines[-1], second.lines[0]
        if upper.page_no == lower.page_no and 0 <= lower.top - upper.bottom < 1.5 * lower.height:
            return True
    return False


def _is_heading(
    block: Block,
    text: str,
    body: BodyStyle,
    furniture: set[int],
    by_page: dict[int, list[Line]],
    blocks: Sequence[Block],
    position: dict[int, int],
    columns: dict[int, list[Extent]],
) -> bool:
    if not any(c.isalpha() for c in text) or text.rstrip().endswith(_SENTENCE_END):
        return False
    if block.lines[0].picture:
        return False  # text OCR read in a screenshot or a photo on the page
    if block.in_run:
        return False  # one of a run of short lines in the text's style: a list's item
    if block.lines[0].bullet or BULLET_START.match(text):
        return False  # "• Tensile strength": a list item, however it is set
    if text.rstrip().endswith((":", "\uff1a")):
        return False  # "Consider including:", "Input:": a lead-in to what follows
    stripped = text.strip()
    if _CAPTION_LABEL.match(stripped) or _reads_as_text(stripped):
        return False
    if _TOC_ENTRY.search(text):
        return False  # "2.1 Scope . . . . 7": a table-of-contents entry
    if all(id(ln) in furniture for ln in block.lines):
        return False  # a running head or foot, repeated on every page
    if any(_not_horizontal(ln) for ln in block.lines):
        return False  # set upright or aslant: a chart's axis title, a diagram's label
    if _PAGE_NUMBER.match(stripped):
        return False  # "Page 1/5": a page's number, however it is set
    if _ADDRESS.match(stripped):
        return False  # "github.com/owner/project": a link to follow, not a title
    if all(_MATH_FACE.search(ln.font) for ln in block.lines):
        return False  # set in a math face: a formula
    if len(stripped) < 2 and not is_cjk(stripped):
        return False  # "a", "b": a diagram's node or a list's letter, not a title
    if re.search(r"[^\W\d_]-$", text.rstrip()):
        return False  # "... num et fer-": a word broken at the line end, running text
    ratio = block.height / max(body.size, 0.1)
    larger = block.height >= body.size * LARGER
    if ratio < 0.9 and not _small_heading(block, body, blocks, position):
        return False  # smaller than the text: a label in a figure or a sidebar
    if not larger and ("，" in text or "；" in text or "://" in text):
        return False  # a clause break or a web address in a line at body size: a sentence
    faced = [ln.font for ln in block.lines if ln.font]  # not "{" on a line of its own
    if (
        faced
        and all(is_mono_face(f) for f in faced)
        and not (larger and block.height >= body.code_size * LARGER)
    ):
        return False  # "public:", "else" set bold in a listing, code set larger than prose
    # Strong cues set a heading apart from the running text on their own: a
    # clearly larger size, or bold where the body is not.
    strong = larger or (block.bold and not body.bold)
    if not strong:
        # Weak cues (slightly larger, another face) also mark captions, code and
        # call-outs; with section numbering in front they make a heading.
        faces = {ln.font for ln in block.lines}
        other_face = (
            bool(body.face)
            and len(faces) == 1
            and "" not in faces
            and body.face not in faces
            and ratio >= 0.97
            and not any(is_mono_face(f) or is_symbol_face(f) for f in faces)  # code, dingbats
        )
        numbered = bool(_SECTION_NUMBER.match(text))
        # Where the body itself is bold, a bold line at body size has no weaker
        # cue left to show than its numbering.
        same_bold = body.bold and block.bold and ratio >= 0.97
        if not (
            (ratio >= 1.05 or other_face or (same_bold and numbered))
            and (
                numbered
                or _side_heading(block, text, other_face or ratio >= 1.05, body, blocks, position)
            )
        ):
            return False
    # Short: a heading is a phrase, not a paragraph. Titles set large may wrap twice.
    if len(text) > 120 or len(block.lines) > (3 if larger else 2):
        return False
    first, last = block.lines[0], block.lines[-1]
    mine = {id(ln) for ln in block.lines}
    page_lines = [ln for ln in by_page.get(first.page_no, []) if id(ln) not in mine]
    # A heading introduces text below it. A styled line with nothing under it,
    # set off by several blank lines from the text above, is a page footer.
    # The one line on its page, set large, is a divider or a title page's title.
    if page_lines and not any(ln.top >= last.bottom - 0.5 for ln in page_lines):
        above = [ln.bottom for ln in page_lines if ln.bottom <= first.top + 0.5]
        if not above or first.top - max(above) > 3 * first.height:
            return False
    if not page_lines and not larger:
        return False
    # A heading introduces text. What comes next on its page without a letter in it
    # ("0", "122", "(1)") is a chart's tick values or an equation's number: the line
    # is an axis title or a formula.
    nxt_i = position[id(block)] + 1
    if nxt_i < len(blocks):
        nb = blocks[nxt_i]
        if _byline_over_affiliations(stripped, nb.text):
            return False
        if (
            nb.kind != "table"
            and nb.lines[0].page_no == last.page_no
            and not nb.lines[0].picture  # a screenshot's clock under a slide's title
            and not (  # the page's number in the margin far below it
                nb.text.strip() == str(nb.lines[0].page_no)
                and nb.lines[0].top - last.bottom > 4 * last.height
            )
            and not any(c.isalpha() for c in nb.text)
        ):
            return False
    # A bold phrase that the next line continues in lower case, at the same
    # size, is emphasis inside a sentence, not a heading.
    if not larger and nxt_i < len(blocks):
        nl = blocks[nxt_i].lines[0]
        if (
            nl.page_no == last.page_no
            and 0 <= nl.top - last.bottom < 0.9 * last.height
            and abs(nl.fsize - last.fsize) <= 0.05 * last.fsize
            and nl.text.strip()[:1].islower()
        ):
            return False
    if not larger and _wraps_with_text(block, blocks, position):
        return False
    if not larger and _in_numbered_run(block, blocks, position):
        return False  # "1. Numbered list 1" above "2. ...": a list, or a contents page
    # Cells of a table row: several short pieces side by side, or a same-styled
    # neighbour on the row (a header row, a diagram's labels, larger than the body or
    # not). A heading stands alone on its row of its column.
    page_columns = columns.get(first.page_no, [])
    mates = [
        ln
        for ln in page_lines
        if min(ln.bottom, first.bottom) - max(ln.top, first.top) >= 0.5 * first.height
        and not _across_gutter(block, ln, page_columns)
    ]
    same_styled = any(
        (m.bold >= FULL_BOLD) == (first.bold >= FULL_BOLD)
        and m.font == first.font
        and abs(m.fsize - first.fsize) <= 0.05 * first.fsize
        and len(m.text) < 60
        for m in mates
    )
    return not same_styled and (larger or len(mates) < 2)
