"""OCR for pages without a usable text layer.

RapidOCR ships its PP-OCR ONNX models (Chinese + English) inside its wheel, so
this works offline. Scans are often rotated by 90/180/270 degrees; RapidOCR's
line classifier only fixes 180, so a page whose first pass reads poorly is
retried at each right-angle rotation and the reading with the most confident
text wins.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from corpusflow.settings import ParseSettings
from parsers.pdf_offline import Line

# A reading at least this confident (mean score, enough characters) is accepted
# without trying the other rotations.
_GOOD_SCORE = 0.9
_MIN_CHARS = 20


@functools.lru_cache(maxsize=1)
def _engine() -> Any:
    from rapidocr import RapidOCR

    engine = RapidOCR(params={"Global.log_level": "error"})
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    return engine


def _read(image: Any) -> tuple[float, list[tuple[str, float, list[list[float]]]]]:
    result = _engine()(image)
    txts = result.txts or ()
    scores = result.scores or ()
    boxes = result.boxes if result.boxes is not None else []
    items = [
        (t, float(s), [list(map(float, p)) for p in b])
        for t, s, b in zip(txts, scores, boxes, strict=False)
    ]
    quality = sum(s * len(t) for t, s, _ in items)
    return quality, items


def ocr_image(image: Any) -> tuple[int, list[tuple[str, float, list[list[float]]]]]:
    """OCR a PIL image, trying right-angle rotations when the upright reading is poor.

    Returns (rotation in degrees that was applied, [(text, score, box)...]).
    """
    quality, items = _read(image)
    n_chars = sum(len(t) for t, _, _ in items)
    mean = sum(s for _, s, _ in items) / len(items) if items else 0.0
    best = (quality, 0, items)
    if n_chars < _MIN_CHARS or mean < _GOOD_SCORE:
        for angle in (90, 270, 180):
            rotated = image.rotate(angle, expand=True)
            q, its = _read(rotated)
            if q > best[0]:
                best = (q, angle, its)
    return best[1], best[2]


def ocr_pdf_pages(
    path: Path, page_nos: list[int], settings: ParseSettings
) -> tuple[list[Line], list[str], list[int]]:
    """OCR the given 1-based pages of a PDF into lines (boxes in points, top-left origin).

    Returns (lines, warnings, failed pages): a page that cannot be rendered or
    read is reported and skipped, so the other pages still count.
    """
    import pypdfium2 as pdfium

    lines: list[Line] = []
    warnings: list[str] = []
    failed: list[int] = []
    pdf = pdfium.PdfDocument(path)
    try:
        for page_no in page_nos:
            try:
                page_lines, page_warnings = _ocr_page(pdf, page_no, settings)
            except MemoryError:
                raise
            except Exception as exc:
                warnings.append(f"page {page_no}: OCR failed: {type(exc).__name__}: {exc}")
                failed.append(page_no)
                continue
            lines += page_lines
            warnings += page_warnings
    finally:
        pdf.close()
    return lines, warnings, failed


def _ocr_page(pdf: Any, page_no: int, settings: ParseSettings) -> tuple[list[Line], list[str]]:
    warnings: list[str] = []
    lines: list[Line] = []
    page = pdf[page_no - 1]
    image = page.render(scale=settings.ocr_scale).to_pil()
    angle, items = ocr_image(image)
    if angle:
        warnings.append(f"page {page_no}: scan rotated, read at {angle} degrees")
        image = image.rotate(angle, expand=True)
    if not items:
        warnings.append(f"page {page_no}: OCR found no text")
    scale = settings.ocr_scale
    for text, _score, box in sorted(items, key=lambda it: (it[2][0][1], it[2][0][0])):
        xs = [p[0] for p in box]
        ys = [p[1] for p in box]
        lines.append(
            Line(
                page_no,
                text,
                min(xs) / scale,
                min(ys) / scale,
                max(xs) / scale,
                max(ys) / scale,
            )
        )
    return lines, warnings


def ocr_image_file(path: Path) -> list[Line]:
    """OCR a standalone image file into lines of page 1."""
    from PIL import Image

    with Image.open(path) as img:
        image = img.convert("RGB")
    angle, items = ocr_image(image)
    if angle:
        image = image.rotate(angle, expand=True)
    return [
        Line(
            1,
            text,
            min(p[0] for p in box),
            min(p[1] for p in box),
            max(p[0] for p in box),
            max(p[1] for p in box),
        )
        for text, _s, box in sorted(items, key=lambda it: (it[2][0][1], it[2][0][0]))
    ]
