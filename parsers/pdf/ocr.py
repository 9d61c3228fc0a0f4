"""OCR for pages without a usable text layer and for image files, in any orientation.

RapidOCR ships its PP-OCR ONNX models (Chinese + English) inside its wheel, so
this works offline. Scans come rotated by 90, 180 or 270 degrees and slightly
skewed; the page orientation is found from the reading itself:

- RapidOCR runs *without* its text-line classifier. That classifier turns each
  upside-down line the right way round, so a page at 180 degrees reads
  confidently, but its lines come out bottom-to-top and right-to-left. Without
  it an upside-down page reads poorly (mean score ~0.65 against ~0.99), which
  is what tells the orientation.
- Line boxes taller than wide mean the page lies on its side (90 or 270).
  RapidOCR turns tall crops a quarter turn before reading them, which reads one
  of the two sides well and the other poorly: that picks which side.
- An upright page that reads confidently is read once. A rotated page, or an
  upright one that reads poorly (a poor scan, a script the models do not know),
  costs one more reading (two when the first guess of the side was wrong).
- A small skew (up to ~15 degrees) is measured from the direction of the line
  boxes and removed from their coordinates (no second reading: the recogniser
  reads skewed lines well, only their order and grouping need straight boxes).
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.settings import ParseSettings
from parsers.models import ParseWarning
from parsers.pdf.primitives import Line, open_page, open_pdf

# A reading at least this confident (character-weighted mean score, enough
# characters, lines lying horizontally) is accepted without another rotation.
_GOOD_SCORE = 0.9
_MIN_CHARS = 8
# A line box this much taller than wide is a line written top-down (a page on its side).
_TALL = 1.5
# Skew below this is noise of the box fit; above the maximum it is not a skewed
# page but a drawing or rotated stamp.
_MIN_SKEW = 0.3
_MAX_SKEW = 15.0


@dataclass(frozen=True, slots=True)
class TextBox:
    """One OCR'd line: its text, score and four corners (pixels, top-left origin)."""

    text: str
    score: float
    points: tuple[tuple[float, float], ...]

    @property
    def width(self) -> float:
        p = self.points
        return math.dist(p[0], p[1])

    @property
    def height(self) -> float:
        p = self.points
        return math.dist(p[1], p[2])


@dataclass(frozen=True, slots=True)
class Reading:
    """An OCR reading of one image.

    ``angle`` is the counter-clockwise right-angle rotation that was applied to
    the image to read it upright (PIL's ``Image.rotate`` convention); ``skew``
    the small angle (degrees) removed from the box coordinates; ``boxes`` are in
    the upright, deskewed frame of size ``size``.
    """

    angle: int
    skew: float
    boxes: tuple[TextBox, ...]
    size: tuple[float, float]

    @property
    def n_chars(self) -> int:
        return sum(len(b.text) for b in self.boxes)

    @property
    def quality(self) -> float:
        return sum(b.score * len(b.text) for b in self.boxes)

    @property
    def mean_score(self) -> float:
        return self.quality / self.n_chars if self.n_chars else 0.0

    @property
    def vertical(self) -> bool:
        """Most text sits in boxes taller than wide: lines running top-down."""
        tall = wide = 0
        for b in self.boxes:
            if len(b.text) < 3:
                continue
            if b.height > _TALL * b.width:
                tall += len(b.text)
            else:
                wide += len(b.text)
        return tall > wide

    @property
    def confident(self) -> bool:
        return not self.vertical and self.n_chars >= _MIN_CHARS and self.mean_score >= _GOOD_SCORE


@functools.lru_cache(maxsize=1)
def _engine() -> Any:
    from rapidocr import RapidOCR

    engine = RapidOCR(params={"Global.log_level": "error"})
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    return engine


def _read(image: Any, angle: int) -> Reading:
    """One RapidOCR reading of ``image`` turned ``angle`` degrees counter-clockwise."""
    import numpy as np

    if angle:
        image = image.rotate(angle, expand=True)
    result = _engine()(np.asarray(image.convert("RGB")), use_cls=False)
    txts = result.txts or ()
    scores = result.scores or ()
    raw = result.boxes if result.boxes is not None else []
    boxes = tuple(
        TextBox(t, float(s), tuple((float(p[0]), float(p[1])) for p in b))
        for t, s, b in zip(txts, scores, raw, strict=False)
        if t.strip()
    )
    return Reading(angle, 0.0, boxes, (float(image.width), float(image.height)))


def _skew(boxes: tuple[TextBox, ...]) -> float:
    """Direction of the text lines in degrees, image coordinates (y down): a page
    turned clockwise gives a positive angle."""
    angles: list[tuple[float, float]] = []
    for b in boxes:
        if len(b.text) < 3 or b.width < 3 * b.height:
            continue
        (x0, y0), (x1, y1) = b.points[0], b.points[1]
        a = math.degrees(math.atan2(y1 - y0, x1 - x0))
        if -45 < a < 45:
            angles.append((a, b.width))
    if not angles:
        return 0.0
    # Width-weighted median: long lines measure the direction best.
    angles.sort()
    half = sum(w for _, w in angles) / 2
    acc = 0.0
    for a, w in angles:
        acc += w
        if acc >= half:
            return a
    return angles[-1][0]


def _deskewed(reading: Reading) -> Reading:
    skew = _skew(reading.boxes)
    if not _MIN_SKEW <= abs(skew) <= _MAX_SKEW:
        return reading
    cx, cy = reading.size[0] / 2, reading.size[1] / 2
    c, s = math.cos(math.radians(-skew)), math.sin(math.radians(-skew))

    def turn(p: tuple[float, float]) -> tuple[float, float]:
        x, y = p[0] - cx, p[1] - cy
        return (cx + c * x - s * y, cy + s * x + c * y)

    boxes = tuple(TextBox(b.text, b.score, tuple(turn(p) for p in b.points)) for b in reading.boxes)
    return Reading(reading.angle, skew, boxes, reading.size)


def ocr_image(image: Any) -> Reading:
    """OCR a PIL image in whatever orientation it lies (see the module docstring).

    Lines lying horizontally leave two candidates, upright and upside down; lines
    running top-down leave the two sides. Only a reading with (almost) no text
    gives no hint, and then every right angle is tried.
    """
    first = _read(image, 0)
    readings = [first]
    if not first.confident and first.boxes:
        order: tuple[int, ...]
        if first.n_chars < _MIN_CHARS:
            order = (90, 270, 180)
        elif first.vertical:
            # RapidOCR's quarter turn of tall crops read the lines well: the page
            # lies turned clockwise, and a counter-clockwise turn sets it upright.
            order = (90, 270) if first.mean_score >= _GOOD_SCORE else (270, 90)
        else:
            order = (180,)
        for angle in order:
            reading = _read(image, angle)
            readings.append(reading)
            if reading.confident:
                break
    # Lines lying horizontally first (a page on its side can read well through
    # RapidOCR's turned crops, but its boxes run top-down), then the best text.
    return _deskewed(max(readings, key=lambda r: (not r.vertical, r.quality)))


def _lines(reading: Reading, page_no: int, scale: float) -> list[Line]:
    """Reading boxes as Lines in points (pixels / scale), top to bottom, left to right."""
    out = []
    for b in reading.boxes:
        xs = [p[0] for p in b.points]
        ys = [p[1] for p in b.points]
        out.append(
            Line(
                page_no, b.text, min(xs) / scale, min(ys) / scale, max(xs) / scale, max(ys) / scale
            )
        )
    # Rows by their vertical middle; a row's boxes left to right.
    out.sort(key=lambda ln: (ln.top + ln.bottom) / 2)
    rows: list[list[Line]] = []
    for ln in out:
        if rows:
            row = rows[-1]
            ref = statistics.median((r.top + r.bottom) / 2 for r in row)
            if abs((ln.top + ln.bottom) / 2 - ref) <= 0.5 * min(ln.height, row[0].height):
                row.append(ln)
                continue
        rows.append([ln])
    return [ln for row in rows for ln in sorted(row, key=lambda ln: ln.left)]


def _orientation_warnings(reading: Reading, page_no: int | None) -> list[ParseWarning]:
    out = []
    if reading.angle:
        out.append(ParseWarning("ocr", f"scan rotated, read at {reading.angle} degrees", page_no))
    if reading.skew:
        out.append(ParseWarning("ocr", f"scan skewed by {reading.skew:.1f} degrees", page_no))
    if not reading.boxes:
        out.append(ParseWarning("ocr", "OCR found no text", page_no))
    return out


def ocr_pdf_pages(
    path: Path, page_nos: list[int], settings: ParseSettings
) -> tuple[list[Line], list[ParseWarning], list[int], dict[int, tuple[float, float]]]:
    """OCR the given 1-based pages of a PDF into lines (boxes in points, top-left origin).

    Returns (lines, warnings, failed pages, turned page sizes): a page that cannot
    be rendered or read is reported and skipped, so the other pages still count;
    a page read on its side has its lines in the upright frame, whose size (in
    points, width and height swapped) is in the last item.
    """
    lines: list[Line] = []
    warnings: list[ParseWarning] = []
    failed: list[int] = []
    turned: dict[int, tuple[float, float]] = {}
    with open_pdf(path) as pdf:
        for page_no in page_nos:
            try:
                with open_page(pdf, page_no) as page:
                    image = page.render(scale=settings.ocr_scale).to_pil()
                reading = ocr_image(image)
            except MemoryError:
                raise
            except Exception as exc:
                warnings.append(
                    ParseWarning("ocr", f"OCR failed: {type(exc).__name__}: {exc}", page_no)
                )
                failed.append(page_no)
                continue
            lines += _lines(reading, page_no, settings.ocr_scale)
            warnings += _orientation_warnings(reading, page_no)
            if reading.angle in (90, 270):
                width, height = reading.size
                turned[page_no] = (width / settings.ocr_scale, height / settings.ocr_scale)
    return lines, warnings, failed, turned


def ocr_image_file(
    path: Path,
) -> tuple[list[Line], tuple[float, float], list[ParseWarning]]:
    """OCR a standalone image file into lines of page 1 (pixel units).

    Returns (lines, page size of the upright image, warnings).
    """
    from PIL import Image

    with Image.open(path) as img:
        image = img.convert("RGB")
    reading = ocr_image(image)
    return _lines(reading, 1, 1.0), reading.size, _orientation_warnings(reading, None)
