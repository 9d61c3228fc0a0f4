"""Draw text PDFs with pypdfium2: text at positions, rules and boxes, top-left origin."""

from __future__ import annotations

import ctypes
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
