"""Shared primitives of the PDF package: lines, words, script and font tests, markers,
clustering, and pdfium access.

Every other module of ``parsers.pdf`` imports from here and nothing here imports
from them, so the package has no import cycles. Coordinates are PDF points with
a top-left origin (y grows downwards) everywhere in the package.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of text on a page.

    The typographic fields are known for text-layer lines only; OCR lines keep
    the defaults (size 0 means: use the box height).
    """

    page_no: int
    text: str
    left: float
    top: float
    right: float
    bottom: float
    size: float = 0.0  # points its words are set at (median); else their glyph-box height
    bold: float = 0.0  # share of its letters set in a bold face
    font: str = ""  # the face most of its letters are set in
    bullet: bool = False  # starts with a lone glyph from a symbol font (a drawn bullet)
    # Read by OCR from a picture on a page that has a text layer (a screenshot on a
    # slide): the picture's own text, never a heading or the body's style.
    picture: bool = False

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 0.1)

    @property
    def fsize(self) -> float:
        return self.size if self.size > 0 else self.height


@dataclass(frozen=True, slots=True)
class Word:
    """One word of the text layer, in content-stream order on its page."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    font: str = ""
    order: int = 0
    # Filled and stroked: how PDFs embolden a face that has no bold (Chinese
    # fonts above all); the stroke thickens every glyph.
    stroked: bool = False
    # The size its glyphs are set at, in points on the page (pdfium: the font size
    # times the text matrix's scale), the same for "use" and "Type"; 0 when unknown.
    # Its box above is the ink of its glyphs when the PDF gives no font metrics
    # (browser prints, Type 3 fonts): there "use" reads smaller than "Type".
    pt: float = 0.0

    @property
    def cx(self) -> float:
        return (self.left + self.right) / 2

    @property
    def cy(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 0.1)


# --------------------------------------------------------------------------- #
# Scripts and joining text
# --------------------------------------------------------------------------- #

# Chinese and Japanese run words together, so their pieces join without a space.
# Korean separates words with spaces like Latin scripts do, so it is not here.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def _radical_table() -> dict[int, str]:
    """Kangxi radicals, CJK radical supplements and compatibility ideographs ->
    the unified ideographs they stand for (their NFKC form)."""
    table: dict[int, str] = {}
    for lo, hi in ((0x2E80, 0x2EFF), (0x2F00, 0x2FDF), (0xF900, 0xFAFF)):
        for cp in range(lo, hi + 1):
            folded = unicodedata.normalize("NFKC", chr(cp))
            if folded != chr(cp) and len(folded) == 1:
                table[cp] = folded
    return table


_RADICALS = _radical_table()


def fold_radicals(text: str) -> str:
    """Chinese text as the reader sees it: "⽼师" (KANGXI RADICAL OLD) -> "老师".

    Many PDF producers (XeTeX, macOS) map glyphs that double as radicals to the
    radical code points; they look the same but neither search nor a tokenizer
    matches them to the ordinary characters. Other text is left as written
    (full NFKC would also turn full-width punctuation into ASCII).
    """
    if not any(0x2E80 <= ord(c) <= 0x2FDF or ord(c) in _RADICALS for c in text):
        return text
    # Some producers (macOS printing from WebKit) map one glyph to all its forms at
    # once: "⺫⽬目" (a radical supplement, a Kangxi radical, the ideograph) for one 目.
    # The forms after the first are the same glyph again, not more text.
    out: list[str] = []
    radical = False  # the last character kept was written as a radical
    for c in text:
        cp = ord(c)
        folded = _RADICALS.get(cp, c)
        is_radical = 0x2E80 <= cp <= 0x2FDF
        if out and radical and not is_radical and folded == out[-1]:
            radical = False
            continue  # "⽐比": the ideograph after its own radical form
        if out and radical and 0x2E80 <= ord(out[-1]) <= 0x2EFF and (is_radical or is_cjk(c)):
            out[-1] = folded  # "⺫⽬": a supplement form with no ideograph of its own
        else:
            out.append(folded)
        radical = is_radical
    return "".join(out)


def is_cjk(ch: str) -> bool:
    return bool(ch) and bool(_CJK.match(ch))


def is_rtl(text: str) -> bool:
    """Most of the letters are of a right-to-left script (Arabic, Hebrew, Persian)."""
    strong = [unicodedata.bidirectional(c) for c in text if c.isalpha()]
    rtl = sum(1 for b in strong if b in ("R", "AL"))
    return rtl * 2 > len(strong) > 0


def visual_to_logical(
    pieces: Sequence[T], text: Callable[[T], str], x: Callable[[T], float]
) -> list[T]:
    """Pieces of one right-to-left line (words, fragments) in reading order: right to
    left, except that a run of left-to-right pieces (a Latin word, a number) inside
    it keeps its own left-to-right order."""
    ordered = sorted(pieces, key=lambda p: -x(p))
    out: list[T] = []
    run: list[T] = []
    for p in ordered:
        dirs = {unicodedata.bidirectional(c) for c in text(p)}
        if dirs & {"R", "AL"} or not dirs & {"L", "EN", "AN"}:
            out += reversed(run)
            run = []
            out.append(p)
        else:
            run.append(p)
    return out + list(reversed(run))


def join_pieces(pieces: Iterable[str]) -> str:
    """Pieces of running text (lines of a paragraph, words of a cell) as one string:
    a hyphenated word re-joined, CJK pieces joined without a space."""
    out = ""
    for raw in pieces:
        piece = raw.strip()
        if not piece:
            continue
        if not out:
            out = piece
        elif out.endswith("-") and not out.endswith(" -") and piece[:1].islower():
            out = out[:-1] + piece
        elif is_cjk(out[-1:]) and is_cjk(piece[:1]):
            out += piece
        else:
            out += " " + piece
    return out


# --------------------------------------------------------------------------- #
# List markers
# --------------------------------------------------------------------------- #

# A list marker: a bullet glyph, or numbering "1.", "(a)", "iv)".
_BULLETS = r"[•●▪◦‣∙·\-–*]"
# Marks that open an item, not a cell of their own: the arrows and check marks of
# slides and task lists ("✓ Slower CI/CD pipelines"). Not squares and diamonds:
# Japanese and Korean reports mark section titles with them ("■ 会社概要"). Alone, a
# check mark is a table's value ("✓" under "Supported"), so it is no hanging marker.
_ITEM_MARKS = r"[►▸▶➢➤✓✔✗✘☐☑☒⁃]"
_NUMBERING = r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxlc]{1,5})[.)]"
# The marker standing alone (a hanging marker, a table cell).
MARKER = re.compile(rf"^(?:{_BULLETS}|{_NUMBERING})$")
# A line that starts with a bullet glyph and goes on with text.
BULLET_START = re.compile(rf"^(?:{_BULLETS}|{_ITEM_MARKS})\s+\S")
# Numbering alone: the item is enumerated.
NUMBERING = re.compile(rf"^{_NUMBERING}$")
# A line that starts with a marker and goes on with text: a list item.
LIST_START = re.compile(rf"^(?:{_BULLETS}|{_ITEM_MARKS}|{_NUMBERING})\s+\S")


# --------------------------------------------------------------------------- #
# Fonts
# --------------------------------------------------------------------------- #

# Text this many times the size of the text around it is set clearly larger: a heading
# by size alone (a browser's h3 is 1.17 em), not a table's row. Sizes are points, so no
# allowance for box noise.
LARGER = 1.12

# Faces by name. PDF font names carry the weight by convention ("Arial-BoldMT",
# "MyriadPro-Bd", "NotoSansCJKkr-Black"; TeX's Computer Modern "CMBX12", "SFBX1000").
_BOLD_WORDS = re.compile(r"bold|black|heavy|demi", re.I)
# Abbreviated weights as a separate part of the name: "MyriadPro-Bd", "MyriadBdIt",
# URW's "NimbusRomNo9L-Medi" (their bold); TeX's bold extended "CMBX12", "SFBX1000".
_BOLD_PARTS = {"bd", "medi", "hv", "blk"}
# TeX's bold faces: bold extended "CMBX12", bold extended italic "SFBI1095", bold
# slanted "ECBL", roman bold "ECRB", plain bold "CMB10".
_TEX_BOLD = re.compile(r"^(?:cm|sf|lm|ec|tc)(?:bx|bi|bl|rb|b\d)", re.I)
# A style code as the last part of the name: "AdvGulliv-B", "Frutiger-BI",
# "Univers,BO" (bold, bold italic, bold oblique), "Gill-SB" (semibold).
# Japanese faces number their weights: "HiraKakuStdN-W8", "HiraginoSans-W6".
_BOLD_SUFFIX = re.compile(r"[-,](?:S?B|B[IO]|BIt|BdCn|W[6-9])$")
_SYMBOL_FACE = re.compile(r"symbol|dingbat|wingding|webding|zapf|marlett|fontawesome", re.I)
# Fixed-pitch faces: code, listings, typewriter text. URW's "NimbusMonL" is Courier.
_MONO_FACE = re.compile(
    r"mono|courier|nimbusmon|consol|menlo|inconsolata|andale|sourcecode|firacode"
    r"|letter ?gothic|cmtt|sftt|typewriter",
    re.I,
)


def face_name(font_name: str) -> str:
    """'/ABCDEF+Arial-BoldMT' -> 'Arial-BoldMT' (drop the subset tag)."""
    name = font_name.lstrip("/")
    return re.sub(r"^[A-Z]{6}\+", "", name)


def is_bold_face(face: str) -> bool:
    if _BOLD_WORDS.search(face) or _TEX_BOLD.match(face) or _BOLD_SUFFIX.search(face):
        return True
    parts = re.findall(r"[A-Z][a-z]*|[a-z]+", face)  # camel case, '-' and ',' split
    return any(p.lower() in _BOLD_PARTS for p in parts[1:])


def is_symbol_face(face: str) -> bool:
    return bool(_SYMBOL_FACE.search(face))


def is_mono_face(face: str) -> bool:
    return bool(_MONO_FACE.search(face))


# --------------------------------------------------------------------------- #
# Clustering
# --------------------------------------------------------------------------- #


def cluster(items: Iterable[T], key: Callable[[T], float], tol: float) -> list[list[T]]:
    """Items sorted by ``key``, in runs whose consecutive keys are within ``tol``."""
    out: list[list[T]] = []
    last = 0.0
    for item in sorted(items, key=key):
        k = key(item)
        if out and k - last <= tol:
            out[-1].append(item)
        else:
            out.append([item])
        last = k
    return out


def cluster_values(values: Iterable[float], tol: float) -> list[float]:
    """Sorted representatives of values, those within tol of each other merged."""
    return [sum(g) / len(g) for g in cluster(values, float, tol)]


class DisjointSets:
    """Union-find over 0..n-1 (path halving)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)

    def groups(self) -> list[list[int]]:
        """Members of each set, in order of first member."""
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            out.setdefault(self.find(i), []).append(i)
        return list(out.values())


# --------------------------------------------------------------------------- #
# pdfium
# --------------------------------------------------------------------------- #


@contextlib.contextmanager
def open_pdf(path: Path) -> Iterator[Any]:
    """A pypdfium2 document, closed afterwards."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        yield pdf
    finally:
        pdf.close()


@contextlib.contextmanager
def open_page(pdf: Any, page_no: int) -> Iterator[Any]:
    """Page ``page_no`` (1-based) of an open document, closed afterwards."""
    page = pdf[page_no - 1]
    try:
        yield page
    finally:
        page.close()


def iter_pages(path: Path, page_nos: Iterable[int]) -> Iterator[tuple[int, Any]]:
    """(page_no, page) for the given 1-based pages that exist, in order, each page
    closed once the caller moves on and the document closed at the end."""
    with open_pdf(path) as pdf:
        for page_no in sorted(set(page_nos)):
            if not 1 <= page_no <= len(pdf):
                continue
            with open_page(pdf, page_no) as page:
                yield page_no, page


def page_sizes(path: Path, page_nos: Sequence[int]) -> dict[int, tuple[float, float]]:
    """(width, height) in points of the given 1-based pages."""
    with open_pdf(path) as pdf:
        sizes = {}
        for p in page_nos:
            width, height = pdf[p - 1].get_size()
            sizes[p] = (float(width), float(height))
        return sizes


def pdfium_lines(
    path: Path, page_nos: Iterable[int] | None = None
) -> tuple[list[Line], dict[int, tuple[float, float]]]:
    """The text of the given pages (all by default) as pdfium reads it, one ``Line`` per
    line pdfium breaks, in its order, top-left coordinates, no typography; and the page
    sizes. For a PDF whose text layer docling cannot load, or a page docling read as
    symbols (``parsers.pdf.offline``)."""
    lines: list[Line] = []
    sizes: dict[int, tuple[float, float]] = {}
    with open_pdf(path) as pdf:
        wanted = range(1, len(pdf) + 1) if page_nos is None else sorted(set(page_nos))
        for page_no in wanted:
            if not 1 <= page_no <= len(pdf):
                continue
            with open_page(pdf, page_no) as page:
                width, height = (float(v) for v in page.get_size())
                sizes[page_no] = (width, height)
                textpage = page.get_textpage()
                try:
                    lines += _page_lines(textpage, page_no, height)
                finally:
                    textpage.close()
    return lines, sizes


_CJK_SPACED = re.compile(
    r"(?<=[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60]) "
    r"(?=[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60])"
)


def _page_lines(textpage: Any, page_no: int, height: float) -> list[Line]:
    """The page's text in pdfium's reading order, cut where pdfium puts a line break,
    each line boxed by its characters' boxes (top-left coordinates)."""
    text = textpage.get_text_range()
    out: list[Line] = []
    chars: list[str] = []
    boxes: list[tuple[float, float, float, float]] = []

    def flush() -> None:
        # Chinese and Japanese are written without spaces: a letter-spaced line's
        # spaces between two such characters are layout, not word breaks.
        line = _CJK_SPACED.sub("", " ".join("".join(chars).split()))
        if line and boxes:
            left = min(b[0] for b in boxes)
            right = max(b[2] for b in boxes)
            out.append(
                Line(
                    page_no,
                    line,
                    left,
                    height - max(b[3] for b in boxes),
                    right,
                    height - min(b[1] for b in boxes),
                )
            )
        chars.clear()
        boxes.clear()

    hyphen = False
    for i, c in enumerate(text[: textpage.count_chars()]):
        if c in "\r\n":
            if not hyphen:  # a word hyphenated over the break goes on as one word
                flush()
            continue
        hyphen = c == "\ufffe"
        # U+FFFE marks a hyphen pdfium took out; control characters are a font's
        # unmapped quotes.
        if c < " " or c == "\ufffe":
            continue
        chars.append(c)
        if not c.isspace():
            left, bottom, right, top = textpage.get_charbox(i)
            boxes.append((left, bottom, right, top))
    flush()
    return out


def _transform(m: tuple[float, ...], x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _compose(outer: tuple[float, ...], inner: tuple[float, ...]) -> tuple[float, ...]:
    """Matrix of applying ``inner`` first, then ``outer`` (PDF row-vector convention)."""
    a1, b1, c1, d1, e1, f1 = inner
    a2, b2, c2, d2, e2, f2 = outer
    return (
        a1 * a2 + b1 * c2,
        a1 * b2 + b1 * d2,
        c1 * a2 + d1 * c2,
        c1 * b2 + d1 * d2,
        e1 * a2 + f1 * c2 + e2,
        e1 * b2 + f1 * d2 + f2,
    )


_IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def walk_objects(
    page: Any,
    kinds: set[int],
    parent: Any = None,
    matrix: tuple[float, ...] = _IDENTITY,
    depth: int = 0,
) -> list[tuple[Any, int, tuple[float, float, float, float], float]]:
    """(object, type, page-space bounds l, b, r, t, scale) of the page's objects of the
    given pdfium types, descending into Form XObjects (whose content has its own matrix);
    scale: how much the Form XObjects around the object scale it (1 on the page)."""
    import pypdfium2.raw as pdfium_c

    out: list[tuple[Any, int, tuple[float, float, float, float], float]] = []
    if parent is None:
        count = pdfium_c.FPDFPage_CountObjects(page.raw)
    else:
        count = pdfium_c.FPDFFormObj_CountObjects(parent)
    for i in range(max(count, 0)):
        if parent is None:
            obj = pdfium_c.FPDFPage_GetObject(page.raw, i)
        else:
            obj = pdfium_c.FPDFFormObj_GetObject(parent, i)
        if not obj:
            continue
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == pdfium_c.FPDF_PAGEOBJ_FORM:
            if depth < 8:
                fm = pdfium_c.FS_MATRIX()
                if pdfium_c.FPDFPageObj_GetMatrix(obj, ctypes.byref(fm)):
                    inner: tuple[float, ...] = (fm.a, fm.b, fm.c, fm.d, fm.e, fm.f)
                else:
                    inner = _IDENTITY
                out += walk_objects(page, kinds, obj, _compose(matrix, inner), depth + 1)
            continue
        if kind not in kinds:
            continue
        l_, b_, r_, t_ = (ctypes.c_float() for _ in range(4))
        if not pdfium_c.FPDFPageObj_GetBounds(
            obj, ctypes.byref(l_), ctypes.byref(b_), ctypes.byref(r_), ctypes.byref(t_)
        ):
            continue
        corners = [
            _transform(matrix, x, y) for x in (l_.value, r_.value) for y in (b_.value, t_.value)
        ]
        xs = [p[0] for p in corners]
        ys = [p[1] for p in corners]
        scale = math.sqrt(abs(matrix[0] * matrix[3] - matrix[1] * matrix[2]))
        out.append((obj, kind, (min(xs), min(ys), max(xs), max(ys)), scale))
    return out
