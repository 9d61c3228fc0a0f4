"""Model-free PDF path: text lines -> paragraphs, headings, lists and tables.

docling's NativePdfPipeline (no models, works offline) yields the text layer as
lines and words, in content-stream order, with boxes and font names but no
structure. This module rebuilds the structure from what a PDF still tells
without models:

- the outline (bookmarks), whose titles and levels become headings: the
  author's own statement of the structure, so it wins over every other cue;
- typography: glyph height (a font-size proxy), weight (bold faces) and
  typeface; a short block set apart by size, weight or face from the body text,
  with text below it, becomes a heading, one level per distinct style;
- section numbering ("2.3", "(1)", "Chapter 4"), which supports a weak cue;
- vertical gaps, indentation and changes of style, which separate paragraphs;
- bullet and numbering markers, and glyphs from symbol fonts, which start
  list items;
- drawn cell borders and aligned columns, which become tables
  (``parsers.pdf_tables``).

Scanned pages (no usable text layer) are OCR'd (parsers.ocr) and their lines
go through the same assembly, so a mixed document is one DoclingDocument.
"""

from __future__ import annotations

import functools
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpusflow.settings import ParseSettings

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from parsers.pdf_tables import Table, Word


@dataclass(frozen=True, slots=True)
class Line:
    """One line of text on a page, box in points with a top-left origin.

    The typographic fields are known for text-layer lines only; OCR lines keep
    the defaults (size 0 means: use the box height).
    """

    page_no: int
    text: str
    left: float
    top: float
    right: float
    bottom: float
    size: float = 0.0  # median glyph-box height of its words: a font-size proxy
    bold: float = 0.0  # share of its letters set in a bold face
    font: str = ""  # the face most of its letters are set in
    bullet: bool = False  # starts with a lone glyph from a symbol font (a drawn bullet)

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 0.1)

    @property
    def fsize(self) -> float:
        return self.size if self.size > 0 else self.height


@dataclass(slots=True)
class Block:
    kind: str  # "paragraph" | "heading" | "list_item" | "table"
    lines: list[Line]
    level: int = 0
    table: Table | None = None

    @property
    def text(self) -> str:
        out = ""
        for line in self.lines:
            piece = line.text.strip()
            if not out:
                out = piece
            elif out.endswith("-") and not out.endswith(" -") and piece[:1].islower():
                out = out[:-1] + piece  # re-join a hyphenated word
            elif _is_cjk(out[-1:]) and _is_cjk(piece[:1]):
                out += piece
            else:
                out += " " + piece
        return out

    @property
    def height(self) -> float:
        """Font-size proxy of the block."""
        return statistics.median(line.fsize for line in self.lines)

    @property
    def bold(self) -> bool:
        """Set in bold throughout (a bold lead-in phrase does not count)."""
        chars = sum(len(ln.text) for ln in self.lines)
        return sum(ln.bold * len(ln.text) for ln in self.lines) >= _FULL_BOLD * chars


_BULLET = re.compile(r"^(?:[•●▪◦‣∙·\-–*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+\S")
# Chinese and Japanese run words together, so their lines join without a space.
# Korean separates words with spaces like Latin scripts do, so it is not here.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# A list marker standing alone: a bullet, "1.", "(a)", "iv)".
_LONE_MARKER = re.compile(r"^(?:[•●▪◦‣∙·\-–*]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxlc]{1,5})[.)])$")
# Section numbering at the start of a heading: "2", "2.3", "2.3.1.", "IV.", "B.",
# "(1)", "1)", "Chapter 4", "Part II", "Appendix A", "제3장", "第二章".
_SECTION_NUMBER = re.compile(
    r"^(?:\d{1,2}(?:\.\d{1,2}){0,4}\.?|[IVXLC]{1,6}\.|[A-Z]\.|\(\d{1,2}\)|\d{1,2}\)"
    r"|(?:chapter|section|part|appendix|annex|article)\s+[\dIVXLCA-Z]{1,6}\.?"
    r"|제\s*\d{1,3}\s*[장절편부조]|第[\d一二三四五六七八九十百]{1,4}[章节節部篇条])(?:\s|$)",
    re.IGNORECASE,
)
# Faces by name. PDF font names carry the weight by convention ("Arial-BoldMT",
# "MyriadPro-Bd", "NotoSansCJKkr-Black"; TeX's Computer Modern "CMBX12", "SFBX1000").
_BOLD_WORDS = re.compile(r"bold|black|heavy|demi", re.I)
# Abbreviated weights as a separate part of the name: "MyriadPro-Bd", "MyriadBdIt",
# URW's "NimbusRomNo9L-Medi" (their bold); TeX's bold extended "CMBX12", "SFBX1000".
_BOLD_PARTS = {"bd", "medi", "hv", "blk"}
_TEX_BOLD = re.compile(r"^(?:cm|sf|lm|ec|tc)bx", re.I)
_SYMBOL_FACE = re.compile(r"symbol|dingbat|wingding|webding|zapf|marlett|fontawesome", re.I)
# Fixed-pitch faces: code, listings, typewriter text. URW's "NimbusMonL" is Courier.
_MONO_FACE = re.compile(
    r"mono|courier|nimbusmon|consol|menlo|inconsolata|andale|sourcecode|firacode"
    r"|letter ?gothic|cmtt|sftt|typewriter",
    re.I,
)
# A line is "set in bold" when nearly all its letters are: a bold lead-in
# ("Note: ...", "Wang Laboratories: ...") does not make a paragraph a heading.
_FULL_BOLD = 0.85
# Dot leaders ending in a page number.
_TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*[\dIVXLCivxlc]+\s*$")
_SENTENCE_END = (".", ",", ";", "。", "，", "；", "、")


def _is_cjk(ch: str) -> bool:
    return bool(ch) and bool(_CJK.match(ch))


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def _face(font_name: str) -> str:
    """'/ABCDEF+Arial-BoldMT' -> 'Arial-BoldMT' (drop the subset tag)."""
    name = font_name.lstrip("/")
    return re.sub(r"^[A-Z]{6}\+", "", name)


def is_bold_face(face: str) -> bool:
    if _BOLD_WORDS.search(face) or _TEX_BOLD.match(face):
        return True
    parts = re.findall(r"[A-Z][a-z]*|[a-z]+", face)  # camel case, '-' and ',' split
    return any(p.lower() in _BOLD_PARTS for p in parts[1:])


def is_symbol_face(face: str) -> bool:
    return bool(_SYMBOL_FACE.search(face))


def is_mono_face(face: str) -> bool:
    return bool(_MONO_FACE.search(face))


def _is_rtl(text: str) -> bool:
    strong = [unicodedata.bidirectional(c) for c in text if c.isalpha()]
    rtl = sum(1 for b in strong if b in ("R", "AL"))
    return rtl * 2 > len(strong) > 0


# --------------------------------------------------------------------------- #
# Paragraphs and list items
# --------------------------------------------------------------------------- #


def _style_break(line: Line, prev: Line) -> bool:
    """A change of style between two lines that does not happen inside a paragraph.

    A heading set in the body size but in bold sits right above its paragraph
    with normal leading; only the change of weight separates them. A change of
    face alone is common inside paragraphs (an italic line), so it counts only
    together with a change of size.
    """
    if (line.bold >= _FULL_BOLD) != (prev.bold >= _FULL_BOLD):
        return True
    if line.font and prev.font and line.font != prev.font:
        a, b = line.fsize, prev.fsize
        return abs(a - b) >= 0.05 * max(a, b)
    return False


def group_blocks(lines: list[Line]) -> list[Block]:
    """Group consecutive lines of one page into paragraphs and list items."""
    blocks: list[Block] = []
    current: Block | None = None
    prev: Line | None = None
    for line in lines:
        if not line.text.strip():
            continue
        starts_list = line.bullet or bool(_BULLET.match(line.text.strip()))
        new_block = True
        if current is not None and prev is not None and prev.page_no == line.page_no:
            gap = line.top - prev.bottom
            similar_size = abs(line.fsize - prev.fsize) <= 0.2 * max(line.fsize, prev.fsize)
            overlaps = line.left < prev.right and line.right > prev.left
            new_block = (
                starts_list
                or not similar_size
                or not overlaps
                or gap > 0.9 * max(line.height, prev.height)
                or gap < -0.5 * line.height  # moved up: a new column or region
                or _style_break(line, prev)
            )
        if new_block:
            current = Block("list_item" if starts_list else "paragraph", [line])
            blocks.append(current)
        else:
            assert current is not None
            current.lines.append(line)
        prev = line
    return blocks


# --------------------------------------------------------------------------- #
# Headings
# --------------------------------------------------------------------------- #


@dataclass(slots=True)
class _BodyStyle:
    size: float
    bold: bool
    face: str


def _body_style(blocks: Sequence[Block]) -> _BodyStyle:
    """The style that carries the most characters: the running text."""
    by_size: dict[float, int] = {}
    for b in blocks:
        for ln in b.lines:
            key = round(ln.fsize, 0)
            by_size[key] = by_size.get(key, 0) + len(ln.text)
    if not by_size:
        return _BodyStyle(10.0, False, "")
    body_key = max(by_size.items(), key=lambda kv: kv[1])[0]
    body_lines = [ln for b in blocks for ln in b.lines if round(ln.fsize, 0) == body_key]
    size = statistics.median(ln.fsize for ln in body_lines)
    bold_chars = sum(len(ln.text) * ln.bold for ln in body_lines)
    faces: dict[str, int] = {}
    for ln in body_lines:
        faces[ln.font] = faces.get(ln.font, 0) + len(ln.text)
    face = max(faces.items(), key=lambda kv: kv[1])[0]
    return _BodyStyle(size, bold_chars * 2 > sum(len(ln.text) for ln in body_lines), face)


def _page_furniture(blocks: Sequence[Block]) -> set[int]:
    """ids of lines repeated at the same height on many pages: running heads and feet.

    The text must repeat exactly (digits too): "Chapter 1" and "Chapter 2" opening
    their pages at the same height are titles, not furniture. Running heads
    recur on a good share of the pages, not on two pages of a long document.
    """
    pages = {ln.page_no for b in blocks for ln in b.lines}
    seen: dict[tuple[str, int], set[int]] = {}
    for b in blocks:
        for ln in b.lines:
            seen.setdefault((_norm(ln.text), round(ln.top / 4)), set()).add(ln.page_no)
    need = max(2.0, 0.3 * len(pages))
    repeated = {k for k, on in seen.items() if len(on) >= need}
    return {
        id(ln) for b in blocks for ln in b.lines if (_norm(ln.text), round(ln.top / 4)) in repeated
    }


def _title_key(text: str) -> str:
    """Outline lookup key: bookmarks often drop the section number the page shows."""
    return _norm(_SECTION_NUMBER.sub("", text.strip(), count=1))


def _outline_level(text: str, outline_levels: dict[str, int]) -> int | None:
    for key in (_norm(text), _title_key(text)):
        if key and key in outline_levels:
            return outline_levels[key]
    return None


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


def classify_headings(blocks: list[Block], outline: list[tuple[int, str]]) -> None:
    """Mark heading blocks and their levels (in place)."""
    outline_levels: dict[str, int] = {}
    for level, title in outline:
        for key in (_norm(title), _title_key(title)):
            if key:
                outline_levels.setdefault(key, level)
    if outline_levels:
        blocks[:] = _split_outline_titles(blocks, outline_levels)
    # "1. Scope" set large is a numbered heading, not a list item.
    text_blocks = [b for b in blocks if b.kind in ("paragraph", "list_item")]
    if not text_blocks:
        return
    body = _body_style(text_blocks)
    furniture = _page_furniture(blocks)
    by_page: dict[int, list[Line]] = {}
    for b in blocks:
        for ln in b.lines:
            by_page.setdefault(ln.page_no, []).append(ln)
    position = {id(b): i for i, b in enumerate(blocks)}

    def style(b: Block) -> tuple[float, bool]:
        return (round(b.height, 0), b.bold)

    candidates: list[Block] = []
    outline_style: dict[tuple[float, bool], int] = {}
    for block in text_blocks:
        text = block.text
        found = _outline_level(text, outline_levels)
        if found is not None:
            block.kind = "heading"
            block.level = found + 1
            outline_style.setdefault(style(block), block.level)
            continue
        if _is_heading(block, text, body, furniture, by_page, blocks, position):
            candidates.append(block)

    # One level per distinct style: larger first, bold before regular at one size.
    # A style the outline already used keeps the outline's level; another one
    # goes one level below the nearest larger outline style.
    def rank(s: tuple[float, bool]) -> tuple[float, bool]:
        return (-s[0], not s[1])

    styles = sorted({style(b) for b in candidates} | set(outline_style), key=rank)
    level_of: dict[tuple[float, bool], int] = {}
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
    for block in candidates:
        block.kind = "heading"
        block.level = level_of[style(block)]


def _is_heading(
    block: Block,
    text: str,
    body: _BodyStyle,
    furniture: set[int],
    by_page: dict[int, list[Line]],
    blocks: Sequence[Block],
    position: dict[int, int],
) -> bool:
    if not any(c.isalpha() for c in text) or text.rstrip().endswith(_SENTENCE_END):
        return False
    if _TOC_ENTRY.search(text):
        return False  # "2.1 Scope . . . . 7": a table-of-contents entry
    if all(id(ln) in furniture for ln in block.lines):
        return False  # a running head or foot, repeated on every page
    ratio = block.height / max(body.size, 0.1)
    larger = block.height >= body.size * 1.15 + 0.5
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
        if not ((ratio >= 1.05 or other_face) and _SECTION_NUMBER.match(text)):
            return False
    # Short: a heading is a phrase, not a paragraph. Titles set large may wrap twice.
    if len(text) > 120 or len(block.lines) > (3 if larger else 2):
        return False
    first, last = block.lines[0], block.lines[-1]
    mine = {id(ln) for ln in block.lines}
    page_lines = [ln for ln in by_page.get(first.page_no, []) if id(ln) not in mine]
    # A heading introduces text below it. A styled line with nothing under it,
    # set off by several blank lines from the text above, is a page footer.
    if not any(ln.top >= last.bottom - 0.5 for ln in page_lines):
        above = [ln.bottom for ln in page_lines if ln.bottom <= first.top + 0.5]
        if not above or first.top - max(above) > 3 * first.height:
            return False
    # A bold phrase that the next line continues in lower case, at the same
    # size, is emphasis inside a sentence, not a heading.
    nxt_i = position[id(block)] + 1
    if not larger and nxt_i < len(blocks):
        nl = blocks[nxt_i].lines[0]
        if (
            nl.page_no == last.page_no
            and 0 <= nl.top - last.bottom < 0.9 * last.height
            and abs(nl.fsize - last.fsize) <= 0.05 * last.fsize
            and nl.text.strip()[:1].islower()
        ):
            return False
    if not larger:
        # Cells of a table row: several short pieces side by side, or a
        # same-styled neighbour on the row (a header row). A heading stands
        # alone on its row of its column.
        mates = [
            ln
            for ln in page_lines
            if min(ln.bottom, first.bottom) - max(ln.top, first.top) >= 0.5 * first.height
        ]
        if len(mates) >= 2 or any(
            (m.bold >= _FULL_BOLD) == (first.bold >= _FULL_BOLD)
            and m.font == first.font
            and abs(m.fsize - first.fsize) <= 0.05 * first.fsize
            and len(m.text) < 60
            for m in mates
        ):
            return False
    return True


# --------------------------------------------------------------------------- #
# Assembly
# --------------------------------------------------------------------------- #


def _blocks_with_tables(lines: list[Line], tables: Sequence[Table]) -> list[Block]:
    """Paragraph blocks, with each table's lines replaced by one table block in place."""
    if not tables:
        return group_blocks(lines)
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
            blocks += group_blocks(run)
            run = []
        if id(table) in placed:
            placed[id(table)].lines.append(ln)
        else:
            placed[id(table)] = Block("table", [ln], table=table)
            blocks.append(placed[id(table)])
    if run:
        blocks += group_blocks(run)
    return blocks


def _table_data(table: Table) -> Any:
    from parsers.tables import table_data

    return table_data(table.cells, table.n_rows, table.n_cols, table.header_rows)


def lines_to_document(
    lines: list[Line],
    page_sizes: dict[int, tuple[float, float]],
    name: str,
    outline: list[tuple[int, str]],
    tables: Sequence[Table] = (),
) -> DoclingDocument:
    """Assemble a structured DoclingDocument from page lines (and detected tables)."""
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
    classify_headings(blocks, outline)

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
            enumerated = bool(re.match(r"^\(?[\da-zA-Z]{1,3}[.)]$", marker))
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


def read_outline(path: Path) -> list[tuple[int, str]]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        return [(b.level, b.get_title() or "") for b in pdf.get_toc(max_depth=6)]
    except Exception:  # a broken outline is not a broken document
        return []
    finally:
        pdf.close()


# --------------------------------------------------------------------------- #
# Text layer
# --------------------------------------------------------------------------- #


@dataclass(slots=True)
class NativeContent:
    lines: list[Line]
    sizes: dict[int, tuple[float, float]]
    warnings: list[str]
    words: dict[int, list[Word]] = field(default_factory=dict)
    # 1-based pages whose text layer docling could not read (the others parsed).
    failed_pages: list[int] = field(default_factory=list)


def _resolve_fonts(path: Path, words: dict[int, list[Word]], keys: dict[int, set[str]]) -> None:
    """Replace resource keys ('/F3') by base font names ('Helvetica-Bold') in place.

    docling-parse names a font by its resource key when the font is not embedded
    (the 14 standard fonts, typically); pdfium reads the BaseFont. Each word takes
    the name of the text object that covers its centre.
    """
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    from parsers.pdf_tables import Word as WordT
    from parsers.pdf_tables import walk_objects

    pdf = pdfium.PdfDocument(path)
    try:
        for page_no in sorted(keys):
            if not 1 <= page_no <= len(pdf):
                continue
            page = pdf[page_no - 1]
            try:
                height = page.get_height()
                spans: list[tuple[float, float, float, float, str]] = []
                for obj, _kind, (left, bottom, right, top) in walk_objects(
                    page, {pdfium_c.FPDF_PAGEOBJ_TEXT}
                ):
                    font = pdfium_c.FPDFTextObj_GetFont(obj)
                    if not font:
                        continue
                    buf = ctypes.create_string_buffer(256)
                    n = pdfium_c.FPDFFont_GetBaseFontName(font, buf, 256)
                    name = buf.value.decode("latin-1") if n else ""
                    if name:
                        spans.append((left, height - top, right, height - bottom, name))
                if not spans:
                    continue
                out: list[WordT] = []
                for w in words.get(page_no, []):
                    if w.font in keys[page_no]:
                        for sl, st, sr, sb, name in spans:
                            if sl - 0.5 <= w.cx <= sr + 0.5 and st - 0.5 <= w.cy <= sb + 0.5:
                                w = replace(w, font=name)
                                break
                    out.append(w)
                words[page_no] = out
            finally:
                page.close()
    finally:
        pdf.close()


def _line_from_words(page_no: int, text: str, box: tuple[float, ...], ws: list[Word]) -> Line:
    left, top, right, bottom = box
    letters = [(w, sum(ch.isalnum() for ch in w.text)) for w in ws if not is_symbol_face(w.font)]
    letters = [(w, n) for w, n in letters if n]
    size = 0.0
    bold = 0.0
    font = ""
    if letters:
        # Character-weighted median glyph height: one tall glyph (a checkbox,
        # a superscript, a symbol) does not make the line look larger.
        heights = sorted((w.height, n) for w, n in letters)
        half = sum(n for _, n in heights) / 2
        acc = 0
        for h, n in heights:
            acc += n
            if acc >= half:
                size = h
                break
        total = sum(n for _, n in letters)
        bold = sum(n for w, n in letters if is_bold_face(w.font)) / total
        faces: dict[str, int] = {}
        for w, n in letters:
            faces[w.font] = faces.get(w.font, 0) + n
        font = max(faces.items(), key=lambda kv: kv[1])[0]
    bullet = False
    if len(ws) >= 2:
        w0 = min(ws, key=lambda w: w.order)
        glyph = w0.text.strip()
        # Word processors draw bullets as a glyph of Symbol or Wingdings ("·",
        # "§", "Ø", a box), which the text layer spells as a random letter.
        bullet = len(glyph) == 1 and (
            is_symbol_face(w0.font)
            or (not glyph.isalnum() and unicodedata.category(glyph) in ("Co", "Cc", "So"))
        )
    return Line(page_no, text, left, top, right, bottom, size, bold, font, bullet)


def _merge_row_fragments(lines: list[Line]) -> list[Line]:
    """Join consecutive pieces of one visual line, drop overprinted duplicates.

    The text layer splits a line where the writing direction changes (an English
    word in Arabic text), where the font changes, or at a tab; those pieces sit
    on one baseline a space or a tab apart. They are joined in the order the
    writing direction reads them: right to left for a right-to-left line,
    content-stream order otherwise. A piece drawn twice (fake bold, a glyph
    overprinted) is kept once.
    """
    out: list[Line] = []
    for ln in lines:
        if out:
            prev = out[-1]
            overlap = min(prev.bottom, ln.bottom) - max(prev.top, ln.top)
            if prev.page_no == ln.page_no and overlap >= 0.6 * min(prev.height, ln.height):
                if (
                    ln.left >= prev.left - 1
                    and ln.right <= prev.right + 1
                    and ln.text.strip() in prev.text
                ):
                    continue  # an overprinted copy
                if (
                    prev.left >= ln.left - 1
                    and prev.right <= ln.right + 1
                    and prev.text.strip() in ln.text
                ):
                    out[-1] = ln  # the copy came first
                    continue
                gap = max(ln.left - prev.right, prev.left - ln.right)
                # Up to ~1.5 em apart: a space, a bidi break or a tab after a
                # section number. Table columns and column gutters are wider.
                # A lone list marker hangs further out from its item's text.
                em = max(prev.height, ln.height)
                reach = 4.0 * em if _LONE_MARKER.match(prev.text.strip()) else 1.5 * em
                if (
                    abs(prev.fsize - ln.fsize) <= 0.2 * max(prev.fsize, ln.fsize)
                    and -1.0 <= gap <= reach
                    and (gap <= 1.5 * em or ln.left > prev.right)
                ):
                    out[-1] = _join(prev, ln)
                    continue
        out.append(ln)
    return out


def _join(a: Line, b: Line) -> Line:
    rtl = _is_rtl(a.text + b.text)
    first, second = (a, b)
    if rtl and b.right > a.right:
        first, second = b, a
    na, nb = len(a.text), len(b.text)
    bold = (a.bold * na + b.bold * nb) / max(na + nb, 1)
    head, tail = first.text.rstrip(), second.text.lstrip()
    gap = max(b.left - a.right, a.left - b.right)
    # Pieces that touch were cut inside a word (or before its punctuation),
    # unless the script changes there (an English word inside Arabic text).
    dirs = {unicodedata.bidirectional(c) for c in (head[-1:] + tail[:1])}
    spaced = first.text[-1:].isspace() or second.text[:1].isspace()
    glued = (
        gap <= 0.15 * max(a.height, b.height)
        and not spaced
        and not (dirs & {"R", "AL"} and "L" in dirs)
    )
    return Line(
        a.page_no,
        head + ("" if glued else " ") + tail,
        min(a.left, b.left),
        min(a.top, b.top),
        max(a.right, b.right),
        max(a.bottom, b.bottom),
        (a.size * na + b.size * nb) / max(na + nb, 1) if a.size and b.size else a.size or b.size,
        bold,
        a.font if na >= nb else b.font,
        first.bullet,
    )


@functools.lru_cache(maxsize=1)
def native_converter() -> Any:
    """One converter per parser process: building it costs seconds, converting reuses it."""
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, PdfFormatOption
    from docling.pipeline.native_pdf_pipeline import NativePdfPipeline

    opts = NativePdfPipelineOptions(
        generate_page_images=False, generate_picture_images=False, parser_threads=1
    )
    return DocumentConverter(
        format_options={
            InputFormat.PDF: PdfFormatOption(pipeline_cls=NativePdfPipeline, pipeline_options=opts)
        }
    )


def native_content(path: Path) -> NativeContent:
    """Text layer (lines with typography, and words) of every page, via docling's
    model-free NativePdfPipeline."""
    from docling.datamodel.base_models import ConversionStatus
    from docling_core.types.doc import CoordOrigin

    from parsers.pdf_tables import Word as WordT

    result = native_converter().convert(path, raises_on_error=False)
    warnings = [f"{e.module_name}: {e.error_message}" for e in result.errors]
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        from parsers.errors import Category, ParseError

        raise ParseError(
            Category.CORRUPT, "; ".join(warnings) or f"PDF conversion {result.status.value}"
        )
    doc = result.document
    sizes = {no: (p.size.width, p.size.height) for no, p in doc.pages.items()}

    def top_left(box: Any, page_h: float) -> tuple[float, float, float, float]:
        if box.coord_origin == CoordOrigin.BOTTOMLEFT:
            box = box.to_top_left_origin(page_height=page_h)
        return (box.l, box.t, box.r, box.b)

    parsed = {p.page_no: p.parsed_page for p in result.pages if p.parsed_page is not None}
    words: dict[int, list[WordT]] = {}
    # Fonts docling-parse could only name by their resource key ("/F3").
    unresolved: dict[int, set[str]] = {}
    raw_lines: dict[int, list[tuple[str, tuple[float, float, float, float]]]] = {}
    for page_no, page in parsed.items():
        page_h = sizes.get(page_no, (0.0, 0.0))[1]
        ws = []
        for i, cell in enumerate(page.word_cells):
            if not cell.text.strip():
                continue
            l_, t_, r_, b_ = top_left(cell.rect.to_bounding_box(), page_h)
            font_name = getattr(cell, "font_name", "") or ""
            face = _face(font_name)
            if font_name and font_name == getattr(cell, "font_key", ""):
                unresolved.setdefault(page_no, set()).add(face)
            ws.append(WordT(cell.text, l_, t_, r_, b_, face, i))
        words[page_no] = ws
        raw_lines[page_no] = [
            (cell.text, top_left(cell.rect.to_bounding_box(), page_h))
            for cell in page.textline_cells
            if cell.text
        ]
    if unresolved:
        try:
            _resolve_fonts(path, words, unresolved)
        except Exception as exc:  # typography is a hint; the text stands without it
            warnings.append(f"font names: {exc}")

    failed: list[int] = []
    if parsed:
        page_total = max(int(getattr(result.input, "page_count", 0) or 0), len(sizes))
        failed = [p for p in range(1, page_total + 1) if p not in parsed]
    elif result.status == ConversionStatus.PARTIAL_SUCCESS:
        warnings.append("text layer: partial conversion without per-page results")
    lines: list[Line] = []
    if parsed:
        for page_no in sorted(raw_lines):
            page_lines = raw_lines[page_no]
            # Each word belongs to the line whose box holds its centre (bucketed by y).
            buckets: dict[int, list[int]] = {}
            for k, (_text, (_l, t_, _r, b_)) in enumerate(page_lines):
                for y in range(int(t_ // 8), int(b_ // 8) + 1):
                    buckets.setdefault(y, []).append(k)
            owned: list[list[WordT]] = [[] for _ in page_lines]
            for w in words.get(page_no, []):
                best = None
                for k in buckets.get(int(w.cy // 8), []):
                    text, (l_, t_, r_, b_) = page_lines[k]
                    if l_ - 0.5 <= w.cx <= r_ + 0.5 and t_ - 0.5 <= w.cy <= b_ + 0.5:
                        area = (r_ - l_) * (b_ - t_)
                        score = (w.text.strip() not in text, area)
                        if best is None or score < best[0]:
                            best = (score, k)
                if best is not None:
                    owned[best[1]].append(w)
            built = [
                _line_from_words(page_no, text, box, owned[k])
                for k, (text, box) in enumerate(page_lines)
            ]
            lines += _merge_row_fragments(built)
    else:  # no parsed pages kept: fall back to the document's text items
        for item, _level in doc.iterate_items():
            text = getattr(item, "text", "")
            provs = getattr(item, "prov", None)
            if not text or not provs:
                continue
            prov = provs[0]
            page_h = sizes.get(prov.page_no, (0.0, 0.0))[1]
            lines.append(Line(prov.page_no, text, *top_left(prov.bbox, page_h)))
    return NativeContent(lines, sizes, warnings, words, failed)


def detect_tables(path: Path, words: dict[int, list[Word]]) -> tuple[list[Table], list[str]]:
    """Tables of the text-layer pages: drawn grids first, then aligned columns."""
    from parsers.pdf_tables import find_aligned_tables, find_ruled_tables, page_rules

    pages = [p for p, ws in words.items() if ws]
    if not pages:
        return [], []
    try:
        rules = page_rules(path, pages)
    except Exception as exc:  # graphics are a hint; text-only tables still work
        rules = {}
        warn = [f"table borders: {exc}"]
    else:
        warn = []
    tables: list[Table] = []
    for page_no in sorted(pages):
        ws = words[page_no]
        try:
            found = find_ruled_tables(page_no, ws, rules.get(page_no, []))
            rest = [w for w in ws if not any(t.contains(w.cx, w.cy) for t in found)]
            found += find_aligned_tables(page_no, rest)
        except Exception as exc:  # a table missed is text kept: never lose the document
            warn.append(f"table detection on p. {page_no}: {exc!r}")
            continue
        tables += found
    return tables, warn


@dataclass(slots=True)
class PdfParse:
    doc: DoclingDocument
    parser: str
    warnings: list[str]
    page_count: int
    # 1-based pages with no content: text layer and (when enabled) OCR both failed.
    missing_pages: list[int]
    # docling reported a partial conversion that no page list explains.
    partial: bool = False


def parse_pdf_offline(
    path: Path, settings: ParseSettings
) -> tuple[DoclingDocument, str, list[str]]:
    """Structured DoclingDocument of a PDF without layout models; OCR for scanned pages."""
    result = parse_pdf(path, settings)
    return result.doc, result.parser, result.warnings


def _page_sizes(path: Path, page_nos: Sequence[int]) -> dict[int, tuple[float, float]]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        sizes = {}
        for p in page_nos:
            width, height = pdf[p - 1].get_size()
            sizes[p] = (float(width), float(height))
        return sizes
    finally:
        pdf.close()


def parse_pdf(path: Path, settings: ParseSettings) -> PdfParse:
    """Like ``parse_pdf_offline``, and says which pages could not be read.

    A page whose text layer failed is OCR'd like a scan when OCR is on; it is
    missing only if that fails too (or OCR is off).
    """
    content = native_content(path)
    lines, sizes, warnings = content.lines, content.sizes, content.warnings
    failed = sorted(content.failed_pages)
    if failed:
        warnings.append(f"text layer failed on pages {failed}")
    page_count = max([len(sizes), *failed, *sizes]) if (sizes or failed) else 0
    parser = "pdf-offline"
    scanned: list[int] = []
    missing: list[int] = []
    if settings.ocr:
        chars: dict[int, int] = {}
        for line in lines:
            chars[line.page_no] = chars.get(line.page_no, 0) + len(line.text.strip())
        scanned = sorted(
            {p for p in sizes if chars.get(p, 0) < settings.ocr_min_chars_per_page} | set(failed)
        )
        if scanned:
            from parsers.ocr import ocr_pdf_pages

            ocr_lines, ocr_warnings, ocr_failed = ocr_pdf_pages(path, scanned, settings)
            warnings.extend(ocr_warnings)
            missing = sorted(set(ocr_failed))
            redone = set(scanned) - set(ocr_failed)
            lines = [ln for ln in lines if ln.page_no not in redone] + ocr_lines
            lines.sort(key=lambda ln: ln.page_no)  # stable: keeps order inside a page
            if redone:
                parser = "pdf-offline+ocr"
            recovered = [p for p in failed if p in redone and p not in sizes]
            if recovered:
                sizes = {**sizes, **_page_sizes(path, recovered)}
    else:
        missing = failed
    text_words = {p: ws for p, ws in content.words.items() if p not in set(scanned)}
    tables, table_warnings = detect_tables(path, text_words)
    warnings.extend(table_warnings)
    doc = lines_to_document(lines, sizes, path.stem, read_outline(path), tables)
    partial = any("partial conversion" in w for w in warnings)
    return PdfParse(doc, parser, warnings, page_count, missing, partial)
