"""The text layer of a PDF: lines with typography, and words, per page.

docling's NativePdfPipeline (no models, works offline) yields the text layer as
lines and words in content-stream order, with boxes and font names but no
structure. Here each word is given to the line whose box holds it, a line gets
its typography (glyph height, share of bold letters, main face, a drawn bullet),
fonts docling-parse could only name by resource key are named through pdfium,
and the pieces of one visual line are joined in reading order. Tables are found
in each page's words (``parsers.pdf.tables``) as the page is read: the words of a
page are dropped once its lines and tables are made, so memory does not grow with
the page count by ~560 words a page.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import re
import sys
import unicodedata
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from parsers.models import ParseWarning
from parsers.pdf.primitives import (
    MARKER,
    Line,
    Word,
    face_name,
    fold_radicals,
    is_bold_face,
    is_cjk,
    is_rtl,
    is_symbol_face,
    walk_objects,
)
from parsers.pdf.tables import Rule, Table, page_rules, page_tables

# docling-parse's PdfCellRenderingMode values for text drawn filled, then stroked
# (with or without clipping).
_FILL_THEN_STROKE = (2, 6)


@dataclass(slots=True)
class PageTables:
    """The tables found in one page's words as it was read, or why none could be."""

    tables: list[Table]
    warnings: list[ParseWarning]


@dataclass(slots=True)
class TextLayer:
    lines: list[Line]
    sizes: dict[int, tuple[float, float]]
    warnings: list[ParseWarning]
    # Pages with words: their tables (the words themselves are not kept).
    tables: dict[int, PageTables] = field(default_factory=dict)
    # pdfium could not read a page's vector graphics (the first failure): tables
    # were then found without that page's borders.
    borders_error: str | None = None
    # 1-based pages whose text layer docling could not read (the others parsed).
    failed_pages: list[int] = field(default_factory=list)
    # docling reported a partial conversion that no page list explains.
    partial: bool = False
    page_count: int = 0

    def tables_except(self, skip: Collection[int]) -> tuple[list[Table], list[ParseWarning]]:
        """Tables of the pages with words but those in ``skip`` (pages whose text OCR
        replaced), in page order, with the warnings of their detection."""
        skipped = set(skip)
        chosen = sorted(p for p in self.tables if p not in skipped)
        if not chosen:
            return [], []
        warnings: list[ParseWarning] = []
        if self.borders_error is not None:
            warnings.append(ParseWarning("pdf-tables", f"table borders: {self.borders_error}"))
        tables: list[Table] = []
        for p in chosen:
            tables += self.tables[p].tables
            warnings += self.tables[p].warnings
        return tables, warnings


def _with_text_objects(page: Any, words: list[Word], unresolved: set[str]) -> list[Word]:
    """The page's words with the size their text is set at and, for fonts docling-parse
    names by resource key ('/F3', in ``unresolved``: the 14 standard fonts, typically),
    the base font name ('Helvetica-Bold'). Each word takes both from the smallest text
    object that covers its centre, read with pdfium.

    The size is the object's font size times the scale of its matrix and of the Form
    XObjects around it: points on the page (a browser writes 15 px at 0.75 for 11.25 pt),
    whatever the glyphs' ink. docling-parse's word box is that ink where a font has no
    metrics (browser prints, Type 3 fonts), so "use" would read smaller than "Type"."""
    import pypdfium2.raw as pdfium_c

    height = page.get_height()
    spans: list[tuple[float, float, float, float, str, float]] = []  # l, t, r, b, name, pt
    buf = ctypes.create_string_buffer(256)
    size = ctypes.c_float()
    matrix = pdfium_c.FS_MATRIX()
    objects = walk_objects(page, {pdfium_c.FPDF_PAGEOBJ_TEXT})
    for obj, _kind, (left, bottom, right, top), form_scale in objects:
        pt = 0.0
        known = pdfium_c.FPDFTextObj_GetFontSize(obj, ctypes.byref(size))
        # Only for text along the page's width: a label set aslant or upright keeps its
        # box's size, which tells that it is not a line of running text.
        if (
            known
            and pdfium_c.FPDFPageObj_GetMatrix(obj, ctypes.byref(matrix))
            and matrix.a > 0
            and abs(matrix.b) <= 0.03 * matrix.a
        ):
            scale = math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c))
            pt = size.value * scale * form_scale
        name = ""
        if unresolved:
            font = pdfium_c.FPDFTextObj_GetFont(obj)
            if font and pdfium_c.FPDFFont_GetBaseFontName(font, buf, 256):
                name = buf.value.decode("latin-1")
        if pt > 0 or name:
            spans.append((left, height - top, right, height - bottom, name, pt))
    if not spans:
        return words
    holders = _holders([span[:4] for span in spans])
    out: list[Word] = []
    for w in words:
        held = holders(w)
        if held:
            _sl, _st, _sr, _sb, name, pt = spans[min(held)[1]]  # the smallest object
            w = replace(w, pt=pt, font=name if name and w.font in unresolved else w.font)
        out.append(w)
    return out


def _script_change(a: str, b: str) -> bool:
    """Chinese or Japanese on one side, a Latin letter or digit on the other."""
    return is_cjk(a) != is_cjk(b) and (a if is_cjk(b) else b).isalnum()


# A run of Latin letters longer than almost any word: "beensuccessfullytestedwith".
_LONG_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]{16,}")


def _with_pdfium_spaces(page: Any, words: list[Word]) -> list[Word]:
    """The words with a space where Chinese or Japanese meets Latin letters or digits
    and the page leaves a word space's gap between them, as pdfium reads it; and inside
    a run of Latin letters too long for a word.

    docling-parse keeps "基于LightGBM的RUL预测" as one word although xeCJK, Word and
    pandoc's templates set a quarter-em gap at each change of script (the space the
    writer typed, or the typesetter's glue): the reader sees "基于 LightGBM 的 RUL 预测".
    Where XeLaTeX sets English in a CJK font and justifies it tightly, it keeps
    "beensuccessfullytestedwith" as one word too. pdfium's text of the word's box has
    those spaces; only they are taken, and only when pdfium reads the same characters
    (a box that catches a neighbour's glyph changes nothing). Other gaps inside a run
    of one script are docling-parse's to judge."""
    todo = [
        k
        for k, w in enumerate(words)
        if _LONG_LATIN.search(w.text)
        or any(_script_change(a, b) for a, b in itertools.pairwise(w.text))
    ]
    if not todo:
        return words
    height = page.get_height()
    textpage = page.get_textpage()
    out = list(words)
    try:
        for k in todo:
            w = words[k]
            # The box without its top third, where the descenders of the line above
            # reach, and a little in from either end, where the next glyphs touch it.
            h = w.bottom - w.top
            seen = textpage.get_text_bounded(
                w.left + 0.1 * h,
                height - w.bottom + 0.05 * h,
                w.right - 0.1 * h,
                height - w.top - 0.35 * h,
            )
            spaced = _respaced(w.text, fold_radicals(seen))
            if spaced != w.text:
                out[k] = replace(w, text=spaced)
    finally:
        textpage.close()
    return out


def _respaced(text: str, seen: str) -> str:
    """``text`` with a space where ``seen`` has one at each change of script and inside
    a run of Latin letters too long for a word, when the two hold the same letters and
    digits (docling-parse writes "——" as "--" and curly quotes straight; pdfium keeps
    them); else ``text`` unchanged."""
    spaced: list[bool] = []  # per letter or digit of ``seen``: only spaces before it
    between = ""
    for ch in seen:
        if ch.isalnum():
            spaced.append(bool(between) and not between.strip())
            between = ""
        else:
            between += ch
    if [ch for ch in seen if ch.isalnum()] != [ch for ch in text if ch.isalnum()]:
        return text
    long_runs = [m.span() for m in _LONG_LATIN.finditer(text)]
    out: list[str] = []
    k = 0
    for i, ch in enumerate(text):
        if ch.isalnum():
            prev = text[i - 1] if i else ""
            # Inside a run too long for one word: text[i - 1] and text[i] both in it.
            in_long = any(start < i < end for start, end in long_runs)
            if spaced[k] and prev and (_script_change(prev, ch) or in_long):
                out.append(" ")
            k += 1
        out.append(ch)
    return "".join(out)


def _with_word_spaces(text: str, words: list[Word]) -> str:
    """A line's text with the spaces its words were given (``_with_pdfium_spaces``):
    docling-parse's line holds each such word without them."""
    pos = 0
    for w in sorted(words, key=lambda w: w.order):
        if " " not in w.text.strip():
            continue
        glued = "".join(w.text.split())
        i = text.find(glued, pos)
        if i < 0:
            continue
        text = text[:i] + w.text + text[i + len(glued) :]
        pos = i + len(w.text)
    return text


def _holders(boxes: list[tuple[float, ...]]) -> Callable[[Word], list[tuple[float, int]]]:
    """For a word, (area, index) of each of ``boxes`` (left, top, right, bottom; top-left
    origin) that holds its centre, within half a point; the boxes bucketed by 8-pt rows."""
    buckets: dict[int, list[int]] = {}
    for k, (_l, t_, _r, b_) in enumerate(boxes):
        for y in range(int(t_ // 8), int(b_ // 8) + 1):
            buckets.setdefault(y, []).append(k)

    def held(w: Word) -> list[tuple[float, int]]:
        out = []
        for k in buckets.get(int(w.cy // 8), []):
            l_, t_, r_, b_ = boxes[k]
            if l_ - 0.5 <= w.cx <= r_ + 0.5 and t_ - 0.5 <= w.cy <= b_ + 0.5:
                out.append(((r_ - l_) * (b_ - t_), k))
        return out

    return held


def _close_false_spaces(text: str, words: list[Word]) -> str:
    """Remove the spaces docling-parse puts inside a word.

    It splits a word where a ligature glyph ends ("infl ammation", "signifi cant")
    and where letter-spaced display type moves the pen ("sécuri té"); the pieces
    touch, or nearly: a real word space is a quarter of an em or more. Two word
    boxes of one row less than a tenth of their height apart are one word.
    """
    if len(words) < 2 or is_rtl(text):
        return text
    ordered = sorted(words, key=lambda w: w.order)
    pos = 0
    for a, b in itertools.pairwise(ordered):
        i = text.find(a.text, pos)
        if i < 0:
            continue
        pos = i + len(a.text)
        h = min(a.height, b.height)
        if (
            text.startswith(" " + b.text, pos)
            and a.text[-1:].isalpha()
            and b.text[:1].isalpha()
            and abs(a.cy - b.cy) <= 0.25 * h
            and -0.05 * h <= b.left - a.right <= 0.1 * h
        ):
            text = text[:pos] + text[pos + 1 :]
    return text


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
        heights = sorted((w.pt or w.height, n) for w, n in letters)
        half = sum(n for _, n in heights) / 2
        acc = 0
        for h, n in heights:
            acc += n
            if acc >= half:
                size = h
                break
        total = sum(n for _, n in letters)
        bold = sum(n for w, n in letters if w.stroked or is_bold_face(w.font)) / total
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
        if out and _hangs_off(out[-1], ln):
            out[-1] = _join_keeping_band(out[-1], ln)
            continue
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
                reach = 4.0 * em if MARKER.match(prev.text.strip()) else 1.5 * em
                # Sizes are ink heights: a piece holding an underscore reads taller
                # than its neighbour. Pieces that touch on one baseline are one word;
                # a superscript touches its word too, but ends well above it.
                touching = gap <= 0.15 * em and abs(prev.bottom - ln.bottom) <= 0.3 * em
                if (
                    (abs(prev.fsize - ln.fsize) <= 0.2 * max(prev.fsize, ln.fsize) or touching)
                    and -1.0 <= gap <= reach
                    and (gap <= 1.5 * em or ln.left > prev.right)
                ):
                    out[-1] = _join(prev, ln)
                    continue
        out.append(ln)
    return out


def _punctuation_only(text: str) -> bool:
    return bool(text.strip()) and not any(ch.isalnum() for ch in text)


def _hangs_off(prev: Line, ln: Line) -> bool:
    """A piece of punctuation alone (an underscore, a quote, a dot) drawn where the
    piece before it ends, or a piece drawn where such punctuation ends, on one row.

    The text layer cuts a line at such a glyph, and its box is the glyph's own: an
    underscore's lies under the baseline and a quote's above the x-height, so it does
    not overlap its row's box and the row test below keeps it apart; an identifier
    like ``insert_random_character`` came out as five paragraphs."""
    if prev.page_no != ln.page_no or not (
        _punctuation_only(prev.text) or _punctuation_only(ln.text)
    ):
        return False
    em = max(prev.height, ln.height)
    near = ln.top <= prev.bottom + 0.5 * em and ln.bottom >= prev.top - 0.5 * em
    return near and -1.0 <= ln.left - prev.right <= 0.3 * em


def _join_keeping_band(a: Line, b: Line) -> Line:
    """``_join``, with the row's top and bottom taken from its letters, not from the
    punctuation's glyph box (line gaps decide paragraphs)."""
    joined = _join(a, b)
    letters = [x for x in (a, b) if not _punctuation_only(x.text)]
    if not letters:
        return joined
    return replace(joined, top=min(x.top for x in letters), bottom=max(x.bottom for x in letters))


def _join(a: Line, b: Line) -> Line:
    rtl = is_rtl(a.text + b.text)
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


@dataclass(slots=True)
class _PageCells:
    """What ``native_content`` reads of one page: its words, and its text lines as
    (text, box) pairs, boxes (left, top, right, bottom) from the top left; the faces
    docling-parse could only name by their resource key ("/F3")."""

    words: list[Word]
    lines: list[tuple[str, tuple[float, float, float, float]]]
    unresolved: set[str]


def _top_left(box: Any, page_h: float) -> tuple[float, float, float, float]:
    from docling_core.types.doc import CoordOrigin

    if box.coord_origin == CoordOrigin.BOTTOMLEFT:
        box = box.to_top_left_origin(page_height=page_h)
    return (box.l, box.t, box.r, box.b)


def _page_cells(parsed: Any, page_h: float) -> _PageCells:
    """docling's parsed page (a SegmentedPdfPage) as our words and lines."""
    words = []
    unresolved: set[str] = set()
    for i, cell in enumerate(parsed.word_cells):
        if not cell.text.strip():
            continue
        l_, t_, r_, b_ = _top_left(cell.rect.to_bounding_box(), page_h)
        font_name = getattr(cell, "font_name", "") or ""
        # One string per face, not one per word: a long document has ~500 words a page.
        face = sys.intern(face_name(font_name))
        if font_name and font_name == getattr(cell, "font_key", ""):
            unresolved.add(face)
        mode = getattr(cell, "rendering_mode", None)
        stroked = getattr(mode, "value", mode) in _FILL_THEN_STROKE
        words.append(Word(fold_radicals(cell.text), l_, t_, r_, b_, face, i, stroked))
    lines = [
        (fold_radicals(cell.text), _top_left(cell.rect.to_bounding_box(), page_h))
        for cell in parsed.textline_cells
        if cell.text
    ]
    return _PageCells(words, lines, unresolved)


def _page_lines(
    page_no: int, page_lines: list[tuple[str, tuple[float, float, float, float]]], words: list[Word]
) -> list[Line]:
    """One page's text lines with their words' typography, pieces of a row joined."""
    # Each word belongs to the line whose box holds its centre: the smallest such line
    # whose text holds the word, else the smallest.
    holders = _holders([box for _text, box in page_lines])
    owned: list[list[Word]] = [[] for _ in page_lines]
    for w in words:
        held = holders(w)
        if held:
            word = w.text.strip()
            _score, k = min(((word not in page_lines[k][0], area), k) for area, k in held)
            owned[k].append(w)
    built = [
        _line_from_words(
            page_no, _close_false_spaces(_with_word_spaces(text, owned[k]), owned[k]), box, owned[k]
        )
        for k, (text, box) in enumerate(page_lines)
    ]
    return _merge_row_fragments(built)


@dataclass(slots=True)
class _Page:
    """What is kept of one page docling read: its lines, and its tables when it has
    words (None: no words). Its words are not kept."""

    lines: list[Line]
    tables: PageTables | None


# pdfium keeps the objects it parsed (fonts, content streams) until the document is
# closed; it is opened again after this many pages.
_PDFIUM_PAGES = 64


class _PageReader:
    """One conversion's pages, each turned into its lines and tables as docling reads
    it (``_compact_pipeline``), with pdfium (font names, table borders) on the same
    page; the words are dropped then. Every page needs its words only while it is read,
    so the peak does not grow with the page count (a 1,000-page PDF kept ~170 MiB of
    words for table detection at its last page: docs/benchmarks.md, "A 1,000-page PDF").

    A pdfium failure costs the font names or the borders of the page it happened on
    (when each was one pass over the whole document, it cost the pages after it, or all
    pages); the first of each kind is reported once, as then. Any other error is raised
    by ``native_content`` after the conversion, not left to docling."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pages: dict[int, _Page] = {}
        self.font_error: str | None = None
        self.borders_error: str | None = None
        self.error: Exception | None = None
        self._pdf: Any = None
        self._pdf_error: Exception | None = None
        self._opened = 0  # pages read since the document was opened

    def _document(self) -> Any:
        """The PDF opened with pdfium once for all pages (a failure is kept)."""
        if self._pdf_error is not None:
            raise self._pdf_error
        if self._pdf is None:
            import pypdfium2 as pdfium

            try:
                self._pdf = pdfium.PdfDocument(self.path)
            except Exception as exc:
                self._pdf_error = exc
                raise
        return self._pdf

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
            self._pdf = None
            self._opened = 0

    def read(self, page_no: int, parsed: Any, page_h: float) -> None:
        """Keep the lines and tables of docling's parsed page (a SegmentedPdfPage)."""
        try:
            cells = _page_cells(parsed, page_h)
            words, rules = self._with_pdfium(page_no, cells.words, cells.unresolved)
            lines = _page_lines(page_no, cells.lines, words)
            tables = PageTables(*page_tables(page_no, words, rules)) if words else None
        except Exception as exc:  # raised by native_content: docling would hide it
            if self.error is None:
                self.error = exc
            return
        self.pages[page_no] = _Page(lines, tables)

    def _with_pdfium(
        self, page_no: int, words: list[Word], unresolved: set[str]
    ) -> tuple[list[Word], list[Rule]]:
        """The words with their fonts named (the faces in ``unresolved``) and the
        page's table borders, read with pdfium; a page without words needs neither."""
        if not words:
            return words, []
        try:
            pdf = self._document()
            if not 1 <= page_no <= len(pdf):
                return words, []
            page = pdf[page_no - 1]
        except Exception as exc:
            if unresolved:
                self.font_error = self.font_error or str(exc)
            self.borders_error = self.borders_error or str(exc)
            return words, []
        self._opened += 1
        rules: list[Rule] = []
        try:
            try:
                words = _with_text_objects(page, words, unresolved)
            except Exception as exc:  # typography is a hint; the text stands without it
                self.font_error = self.font_error or str(exc)
            try:
                words = _with_pdfium_spaces(page, words)
            except Exception as exc:  # spacing is a hint, as the fonts are
                self.font_error = self.font_error or str(exc)
            try:
                rules = page_rules(page)
            except Exception as exc:  # graphics are a hint; text-only tables still work
                self.borders_error = self.borders_error or str(exc)
        finally:
            page.close()
            if self._opened >= _PDFIUM_PAGES:
                self.close()  # pdfium keeps what it parsed of every page until then
        return words, rules


# The pages ``_compact_pipeline`` is reading, by id() of their ConversionResult (removed
# when that result is collected, or taken by ``native_content``).
_READ: dict[int, _PageReader] = {}


def _discard(key: int) -> None:
    reader = _READ.pop(key, None)
    if reader is not None:
        reader.close()


@functools.lru_cache(maxsize=1)
def _compact_pipeline() -> type:
    """docling's NativePdfPipeline, turning each page into our lines and tables
    (``_PageReader``, in ``_READ``) and dropping docling's parsed page as soon as it
    is read.

    docling keeps every page's SegmentedPdfPage (word and line cells, each a pydantic
    model with a rectangle of eight floats) and a text item per line in the result
    until the result is gone: ~2.5 MiB a page of text, so the parser's peak grew with
    the page count and a 1,000-page PDF went over ``parse.memory_limit_mb``
    (docs/benchmarks.md, "A 1,000-page PDF"). Its pages come out without text items,
    which ``native_content`` never used."""
    from docling.pipeline.native_pdf_pipeline import NativePdfPipeline

    class CompactNativePdfPipeline(NativePdfPipeline):
        def _parse_page(self, timings: Any, conv_res: Any, page_backend: Any) -> Any:
            page = super()._parse_page(timings, conv_res, page_backend)
            if page is None or page.parsed_page is None:
                return page
            key = id(conv_res)
            if key not in _READ:
                _READ[key] = _PageReader(Path(conv_res.input.file))
                weakref.finalize(conv_res, _discard, key)
            height = page.size.height if page.size is not None else 0.0
            _READ[key].read(page.page_no, page.parsed_page, height)
            page.parsed_page = None
            return page

    return CompactNativePdfPipeline


@functools.lru_cache(maxsize=2)
def native_converter(compact: bool = False) -> Any:
    """docling's model-free converter (NativePdfPipeline), one per parser process:
    building it costs seconds, converting reuses it. ``compact``: the one
    ``native_content`` reads with (``_compact_pipeline``); without it, plain docling."""
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, PdfFormatOption
    from docling.pipeline.native_pdf_pipeline import NativePdfPipeline

    opts = NativePdfPipelineOptions(
        generate_page_images=False, generate_picture_images=False, parser_threads=1
    )
    if not compact:
        fmt = PdfFormatOption(pipeline_cls=NativePdfPipeline, pipeline_options=opts)
    else:
        from docling.datamodel.backend_options import ThreadedDoclingParseBackendOptions

        # docling-parse renders every page while decoding it (nothing here uses the
        # images: OCR renders its own) and buffers up to 32 decoded pages ahead of the
        # pipeline; one parser thread needs a few. Both together: ~250 MiB less peak.
        backend = ThreadedDoclingParseBackendOptions(render_pages=False, max_concurrent_results=4)
        fmt = PdfFormatOption(
            pipeline_cls=_compact_pipeline(), pipeline_options=opts, backend_options=backend
        )
    return DocumentConverter(format_options={InputFormat.PDF: fmt})


def native_content(path: Path) -> TextLayer:
    """Text layer (lines with typography) of every page, and the tables in each page's
    words, via docling's model-free NativePdfPipeline, page by page
    (``_compact_pipeline``). Raises ParseError when docling cannot read the file."""
    from parsers.docling_backend import conversion_result

    result = native_converter(compact=True).convert(path, raises_on_error=False)
    reader = _READ.pop(id(result), None)
    if reader is not None:
        reader.close()
        if reader.error is not None:
            raise reader.error
    parsed = reader.pages if reader is not None else {}
    converted = conversion_result(result, "pdf-offline")
    warnings = converted.warnings
    doc = converted.doc
    sizes = {no: (p.size.width, p.size.height) for no, p in doc.pages.items()}
    page_count, partial_result = converted.page_count, converted.partial
    del result, converted  # docling's pages: what is left of them is not needed
    if reader is not None and reader.font_error is not None:
        warnings.append(ParseWarning("pdf", f"font names: {reader.font_error}"))

    failed: list[int] = []
    partial = False
    if parsed:
        page_total = max(page_count, len(sizes))
        failed = [p for p in range(1, page_total + 1) if p not in parsed]
    elif partial_result:
        partial = True
        warnings.append(ParseWarning("pdf", "partial conversion without per-page results"))
    lines: list[Line] = []
    if parsed:
        for page_no in sorted(parsed):
            lines += parsed[page_no].lines
    else:  # no parsed pages kept: fall back to the document's text items
        for item, _level in doc.iterate_items():
            text = getattr(item, "text", "")
            provs = getattr(item, "prov", None)
            if not text or not provs:
                continue
            prov = provs[0]
            page_h = sizes.get(prov.page_no, (0.0, 0.0))[1]
            lines.append(Line(prov.page_no, fold_radicals(text), *_top_left(prov.bbox, page_h)))
    page_count = max([len(sizes), *failed, *sizes], default=0)
    tables = {p: page.tables for p, page in parsed.items() if page.tables is not None}
    borders_error = reader.borders_error if reader is not None else None
    return TextLayer(lines, sizes, warnings, tables, borders_error, failed, partial, page_count)
