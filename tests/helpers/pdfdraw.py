"""Draw text PDFs with pypdfium2: text at positions, rules and boxes, top-left origin."""

from __future__ import annotations

import ctypes
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE_W, PAGE_H = 612.0, 792.0


class Page:
    """Draw on a new PDF page with a top-left origin (y grows downwards)."""

    def __init__(self, pdf: Any, page: Any) -> None:
        self.pdf, self.page = pdf, page

    def text(
        self,
        s: str,
        x: float,
        y: float,
        font: str = "Helvetica",
        size: float = 10,
        stroked: bool = False,
    ) -> None:
        import pypdfium2.raw as c

        obj = c.FPDFPageObj_NewTextObj(self.pdf.raw, font.encode(), ctypes.c_float(size))
        buf = ctypes.create_string_buffer((s + "\0").encode("utf-16-le"))
        c.FPDFText_SetText(obj, ctypes.cast(buf, ctypes.POINTER(c.FPDF_WCHAR)))
        if stroked:  # filled, then stroked: how a face without a bold is emboldened
            c.FPDFTextObj_SetTextRenderMode(obj, c.FPDF_TEXTRENDERMODE_FILL_STROKE)
        c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, x, PAGE_H - y)
        c.FPDFPage_InsertObject(self.page.raw, obj)

    def line(self, x0: float, y0: float, x1: float, y1: float) -> None:
        import pypdfium2.raw as c

        obj = c.FPDFPageObj_CreateNewPath(ctypes.c_float(x0), ctypes.c_float(PAGE_H - y0))
        c.FPDFPath_LineTo(obj, ctypes.c_float(x1), ctypes.c_float(PAGE_H - y1))
        c.FPDFPageObj_SetStrokeWidth(obj, ctypes.c_float(0.5))
        c.FPDFPageObj_SetStrokeColor(obj, 0, 0, 0, 255)
        c.FPDFPath_SetDrawMode(obj, 0, 1)
        c.FPDFPage_InsertObject(self.page.raw, obj)

    def table(
        self, rows: list[list[str]], y: float, header: list[str] | None, xs: list[float]
    ) -> float:
        """A ruled table from ``y``, a column between each two of ``xs``, 16 pt rows (the
        header row bold); returns the y below it."""
        top = y
        lines = ([header] if header else []) + rows
        for r, row in enumerate(lines):
            for k, value in enumerate(row):
                font = "Helvetica-Bold" if header and r == 0 else "Helvetica"
                self.text(value, xs[k] + 4, y + 12, font)
            y += 16
        for i in range(len(lines) + 1):
            self.line(xs[0], top + 16 * i, xs[-1], top + 16 * i)
        for x in xs[: len(lines[0]) + 1]:
            self.line(x, top, x, y)
        return y

    def paragraph(self, lines: list[str], y: float, font: str = "Times-Roman") -> float:
        """Lines at 12 pt leading from ``y``; returns the y below the last one."""
        for s in lines:
            self.text(s, 72, y, font)
            y += 12
        return y

    def white_box(self, x0: float, y0: float, x1: float, y1: float) -> None:
        """A rectangle filled white, not stroked: the backdrop of a figure."""
        import pypdfium2.raw as c

        obj = c.FPDFPageObj_CreateNewRect(
            ctypes.c_float(x0),
            ctypes.c_float(PAGE_H - y1),
            ctypes.c_float(x1 - x0),
            ctypes.c_float(y1 - y0),
        )
        c.FPDFPageObj_SetFillColor(obj, 255, 255, 255, 255)
        c.FPDFPath_SetDrawMode(obj, c.FPDF_FILLMODE_WINDING, 0)
        c.FPDFPage_InsertObject(self.page.raw, obj)


def make_pdf(path: Path, *pages: Callable[[Page], None]) -> Path:
    import pypdfium2 as pdfium
    import pypdfium2.raw as c

    pdf = pdfium.PdfDocument.new()
    for draw in pages:
        page = pdf.new_page(PAGE_W, PAGE_H)
        draw(Page(pdf, page))
        c.FPDFPage_GenerateContent(page.raw)
    pdf.save(str(path))
    return path


def manual_pdf(path: Path, n_pages: int) -> Path:
    """A plant manual of ``n_pages`` pages: running header and page number, a chapter
    heading every 10 pages, numbered section headings, paragraphs of wrapped 10 pt text
    (~600 words a page) and a ruled table on every 4th page."""
    from tests.helpers.long_manual import heading, paragraph

    def draw(page_no: int) -> Callable[[Page], None]:
        def page(p: Page) -> None:
            p.text("Plant operations manual, revision 7", 72, 40, size=8)
            p.text(f"Page {page_no}", 290, 765, size=8)
            y = 70.0
            if page_no % 10 == 1:
                chapter = page_no // 10 + 1
                p.text(
                    f"Chapter {chapter}: maintenance of line {chapter}",
                    72,
                    y + 16,
                    size=16,
                    font="Helvetica-Bold",
                )
                y += 34
            section = page_no * 3
            n = 0
            while y < 700:
                if n % 3 == 0:
                    p.text(
                        f"{page_no}.{n // 3 + 1} {heading(section + n // 3)}",
                        72,
                        y + 12,
                        font="Helvetica-Bold",
                        size=12,
                    )
                    y += 22
                text = " ".join(paragraph(section, n + k) for k in range(3))
                lines = textwrap.wrap(text, 95)[: max(1, int((740 - y) // 12))]
                y = p.paragraph(lines, y + 10) + 8
                if page_no % 4 == 0 and n == 0:
                    rows = [
                        [
                            f"Unit {page_no}-{r}",
                            f"Line {r}",
                            f"{page_no * 7 + r} bar",
                            "ok" if (page_no + r) % 3 else "check",
                        ]
                        for r in range(1, 9)
                    ]
                    y = (
                        p.table(
                            rows,
                            y,
                            ["Unit", "Line", "Pressure", "Status"],
                            [72.0, 170.0, 290.0, 410.0, 540.0],
                        )
                        + 12
                    )
                n += 1

        return page

    return make_pdf(path, *(draw(i) for i in range(1, n_pages + 1)))
