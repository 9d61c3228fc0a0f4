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
        upward: bool = False,
        angle: float = 0.0,
        scale: float = 1.0,
    ) -> None:
        """``scale``: the font size is ``size / scale`` under a text matrix that scales by
        ``scale``, as browsers write text (15 px at 0.75 for 11.25 pt): set at ``size``."""
        import math

        import pypdfium2.raw as c

        obj = c.FPDFPageObj_NewTextObj(self.pdf.raw, font.encode(), ctypes.c_float(size / scale))
        buf = ctypes.create_string_buffer((s + "\0").encode("utf-16-le"))
        c.FPDFText_SetText(obj, ctypes.cast(buf, ctypes.POINTER(c.FPDF_WCHAR)))
        if stroked:  # filled, then stroked: how a face without a bold is emboldened
            c.FPDFTextObj_SetTextRenderMode(obj, c.FPDF_TEXTRENDERMODE_FILL_STROKE)
        if upward:  # turned a quarter left, read bottom to top (a chart's y-axis title)
            c.FPDFPageObj_Transform(obj, 0, 1, -1, 0, x, PAGE_H - y)
        elif angle:  # turned ``angle`` degrees left: a label along a diagram's arrow
            cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
            c.FPDFPageObj_Transform(obj, cos, sin, -sin, cos, x, PAGE_H - y)
        else:
            c.FPDFPageObj_Transform(obj, scale, 0, 0, scale, x, PAGE_H - y)
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

    def picture(self, lines: list[str], x: float, y: float, width: float, height: float) -> None:
        """A picture (a screenshot: black words on white, drawn at 4x) at ``x``, ``y``
        sized ``width`` x ``height`` pt; its words are pixels, not text."""
        import pypdfium2 as pdfium
        from PIL import Image, ImageDraw, ImageFont

        image = Image.new("RGB", (int(width * 4), int(height * 4)), "white")
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default(size=int(min(64, image.height / (2 * len(lines)))))
        step = image.height / len(lines)
        for i, text in enumerate(lines):
            draw.text((24, i * step + step / 4), text, fill="black", font=font)
        obj = pdfium.PdfImage.new(self.pdf)
        obj.set_bitmap(pdfium.PdfBitmap.from_pil(image))
        obj.set_matrix(pdfium.PdfMatrix().scale(width, height).translate(x, PAGE_H - y - height))
        self.page.insert_obj(obj)


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


def add_outline(path: Path, entries: list[tuple[int, str, int]]) -> Path:
    """Give the PDF at ``path`` an outline (bookmarks): (level from 0, title, 1-based page)
    in order, each entry under the last one of the level above (pypdfium2 cannot write
    outlines; pypdf, installed with unstructured-client, can)."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=str(path))
    parents: list[Any] = []
    for level, title, page in entries:
        del parents[level:]
        parent = parents[-1] if parents else None
        parents.append(writer.add_outline_item(title=title, page_number=page - 1, parent=parent))
    out = path.with_name(path.stem + ".outlined.pdf")
    writer.write(out)
    out.replace(path)
    return path


# The headings ``structured_pdf`` draws, with the levels the whole document's parse gives.
STRUCTURED_HEADINGS = [
    ("Field service handbook", 1),  # 20 pt bold, page 1 only: larger than any outline title
    ("Chapter 1: Pumps", 1),  # 15 pt bold, in the outline at its top level
    ("1.1 Priming the pump", 2),  # 12 pt bold
    ("1.1.1 Vent screws", 3),  # 11 pt regular, numbered
    ("Checks before start", 2),  # body text style: a heading only because the outline says so
    ("1.2 Seals and packing", 2),
    ("1.2.1 Packing rings", 3),
    ("Chapter 2: Valves", 1),
    ("2.1 Gate valves", 2),
]


def structured_pdf(path: Path) -> Path:
    """A 9-page PDF whose structure is found from the whole document: a running head and
    page number on every page but 7; a 20 pt title on page 1 only; chapters (15 pt bold) on
    pages 1 and 7 only, named by the outline; sections (12 pt bold) and numbered
    subsections (11 pt) in between; a heading set as body text that only the outline
    names (page 4); a paragraph running from page 3 onto page 4, and a bullet list from
    page 6 onto page 7. Parsed in ranges of 3 pages, the middle range has no title and
    no chapter, and the boundaries split the paragraph and the list."""
    from tests.helpers.long_manual import paragraph

    def body(p: Page, y: float, section: int, n: int) -> float:
        lines = textwrap.wrap(" ".join(paragraph(section, k) for k in range(n)), 95)
        return p.paragraph(lines, y + 10) + 8

    def heading(p: Page, y: float, text: str, size: float, bold: bool = True) -> float:
        p.text(text, 72, y + size, font="Helvetica-Bold" if bold else "Helvetica", size=size)
        return y + size + 10

    def page(no: int, draw: Callable[[Page, float], None]) -> Callable[[Page], None]:
        def run(p: Page) -> None:
            if no != 7:  # a chapter's opening page has no running head
                p.text("Field service handbook, edition 3", 72, 40, size=8)
                p.text(f"Page {no}", 500, 40, size=8)
            draw(p, 70.0 if no != 7 else 40.0)

        return run

    def p1(p: Page, y: float) -> None:
        y = heading(p, y, "Field service handbook", 20)
        y = body(p, y, 1, 2)
        y = heading(p, y, "Chapter 1: Pumps", 15)
        y = body(p, y, 2, 3)
        y = heading(p, y, "1.1 Priming the pump", 12)
        body(p, y, 3, 6)

    def p2(p: Page, y: float) -> None:
        y = body(p, y, 4, 8)
        y = heading(p, y, "1.1.1 Vent screws", 11, bold=False)
        body(p, y, 5, 8)

    def p3(p: Page, y: float) -> None:
        y = body(p, y, 6, 14)
        # the paragraph that page 4 goes on with: ends mid-sentence at the foot
        p.paragraph(
            ["After venting, open the suction valve slowly and watch the gauge; the"], y + 10
        )

    def p4(p: Page, y: float) -> None:
        y = p.paragraph(["pressure must settle before the motor is started again."], y) + 8
        y = body(p, y, 7, 4)
        p.text("Checks before start", 72, y + 22, font="Times-Roman")  # body style
        y = body(p, y + 24, 8, 6)

    def p5(p: Page, y: float) -> None:
        y = heading(p, y, "1.2 Seals and packing", 12)
        y = body(p, y, 9, 6)
        y = heading(p, y, "1.2.1 Packing rings", 11, bold=False)
        body(p, y, 10, 6)

    def p6(p: Page, y: float) -> None:
        y = body(p, y, 11, 12)
        for k in range(1, 4):
            p.text(f"• Tighten gland nut {k} by a quarter turn.", 72, y + 14)
            y += 14

    def p7(p: Page, y: float) -> None:
        for k in range(4, 6):
            p.text(f"• Tighten gland nut {k} by a quarter turn.", 72, y + 10)
            y += 14
        y = heading(p, y + 8, "Chapter 2: Valves", 15)
        y = body(p, y, 12, 4)
        y = heading(p, y, "2.1 Gate valves", 12)
        body(p, y, 13, 6)

    def filler(section: int) -> Callable[[Page, float], None]:
        def draw(p: Page, y: float) -> None:
            body(p, y, section, 14)

        return draw

    make_pdf(
        path,
        *(
            page(i + 1, d)
            for i, d in enumerate([p1, p2, p3, p4, p5, p6, p7, filler(14), filler(15)])
        ),
    )
    return add_outline(
        path,
        [(0, "Chapter 1: Pumps", 1), (1, "Checks before start", 4), (0, "Chapter 2: Valves", 7)],
    )
