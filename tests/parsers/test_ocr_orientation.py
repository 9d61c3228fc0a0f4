"""OCR of scans in any orientation: right angles and slight skew, PDFs and images.

The rotated and skewed copies are made here from the shared scan
``ocr/ocr_test.pdf`` (rendered with pypdfium2, turned with PIL), so every
reading is scored against the same ground truth ``ocr/groundtruth/ocr_test.md``:
bag-of-words F1 (the shared metric) and, because a page read upside down keeps
its words but loses their order, the word order too.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parsers import parse_file

ANGLES = (0, 90, 180, 270)


@pytest.fixture(scope="module")
def scan(shared_corpus: Path) -> tuple[Any, str]:
    """The shared scan rendered as an image, and its ground truth."""
    import pypdfium2 as pdfium

    source = shared_corpus / "ocr" / "ocr_test.pdf"
    truth = shared_corpus / "ocr" / "groundtruth" / "ocr_test.md"
    if not source.exists() or not truth.exists():
        pytest.skip("ocr_test.pdf or its ground truth is not in the shared corpus")
    pdf = pdfium.PdfDocument(source)
    try:
        image = pdf[0].render(scale=2).to_pil().convert("RGB")
    finally:
        pdf.close()
    return image, truth.read_text()


@pytest.fixture(scope="module")
def text_f1(shared_corpus: Path) -> Callable[[str, str], float]:
    sys.path.insert(0, str(shared_corpus.parents[1] / "tools"))
    from parse_metrics import text_f1  # type: ignore[import-not-found]

    return text_f1  # type: ignore[no-any-return]


def _order(markdown: str, truth: str) -> float:
    """Similarity of the word sequences (1.0: same words in the same order)."""
    words = [re.findall(r"\w+", t.lower()) for t in (markdown, truth)]
    return difflib.SequenceMatcher(None, *words).ratio()


def _turned(image: Any, angle: float, tmp_path: Path, kind: str) -> Path:
    """``image`` turned ``angle`` degrees counter-clockwise, saved as a PDF page or a PNG."""
    turned = image.rotate(angle, expand=True, fillcolor="white")
    path = tmp_path / f"scan_{angle}.{kind}"
    if kind == "pdf":
        turned.save(path, "PDF", resolution=144.0)  # rendered at scale 2: 144 dpi
    else:
        turned.save(path)
    return path


@pytest.fixture()
def readings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rotations each OCR reading was made at, in order."""
    import parsers.pdf.ocr as ocr

    calls: list[int] = []
    real = ocr._read

    def counted(image: Any, angle: int) -> Any:
        calls.append(angle)
        return real(image, angle)

    monkeypatch.setattr(ocr, "_read", counted)
    return calls


@pytest.mark.parametrize("kind", ["pdf", "png"])
@pytest.mark.parametrize("angle", ANGLES)
def test_right_angle_scans_read_in_order(
    scan: tuple[Any, str],
    text_f1: Callable[[str, str], float],
    readings: list[int],
    tmp_path: Path,
    angle: int,
    kind: str,
) -> None:
    image, truth = scan
    doc = parse_file(_turned(image, angle, tmp_path, kind))
    assert doc.parser == ("pdf-offline+ocr" if kind == "pdf" else "ocr")
    assert text_f1(doc.markdown, truth) >= 0.95, doc.markdown
    assert _order(doc.markdown, truth) >= 0.95, doc.markdown
    # Said which way round the page was read: the turn that undoes ours.
    turned = [w for w in doc.warnings if w.source == "ocr" and "read at" in w.message]
    if angle:
        assert [w.message for w in turned] == [f"scan rotated, read at {360 - angle} degrees"]
        assert all(w.page == (1 if kind == "pdf" else None) for w in turned)
    else:
        assert turned == []
    # An upright page is read once; a turned one costs one more reading, not three.
    assert len(readings) == (1 if angle == 0 else 2), readings
    # The page is described upright, so every line's box lies on it.
    page = doc.to_docling().pages[1]
    assert page.size.width < page.size.height  # the scan is portrait once upright
    for item, _level in doc.to_docling().iterate_items():
        for prov in getattr(item, "prov", []):
            assert prov.bbox.r <= page.size.width + 1 and prov.bbox.b <= page.size.height + 1


@pytest.mark.parametrize("angle", [3.0, -4.0, 92.5])
def test_skewed_scans_are_straightened(
    scan: tuple[Any, str],
    text_f1: Callable[[str, str], float],
    tmp_path: Path,
    angle: float,
) -> None:
    """A few degrees of skew: the lines' boxes overlap vertically until straightened,
    which broke the paragraph into one block per line, out of order."""
    image, truth = scan
    doc = parse_file(_turned(image, angle, tmp_path, "pdf"))
    assert text_f1(doc.markdown, truth) >= 0.95, doc.markdown
    assert _order(doc.markdown, truth) >= 0.95, doc.markdown
    skew = [w for w in doc.warnings if w.source == "ocr" and "skewed" in w.message]
    assert len(skew) == 1
    measured = float(re.findall(r"-?\d+\.\d", skew[0].message)[0])
    residual = angle - round(angle / 90) * 90
    # Image coordinates have y down: a counter-clockwise turn reads as a negative angle.
    assert abs(measured + residual) <= 1.0, (measured, residual)
    # Straight lines of one paragraph join into one paragraph again.
    assert len([p for p in doc.markdown.split("\n\n") if p.strip()]) == 1, doc.markdown
