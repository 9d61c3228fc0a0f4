"""PDF and image backends: the text layer with headings and tables, OCR for scans.

Entry points (the format table in ``parsers.formats`` names them):
``parse_pdf(path, fmt, settings)`` and ``parse_image(path, fmt, settings)``
return a ``BackendResult``; ``warm_up(settings)`` builds the converters a
parser process reuses.
"""

from __future__ import annotations

from pathlib import Path

from corpusflow.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import BackendResult, ParseWarning


def parse_pdf(path: Path, fmt: str, settings: ParseSettings) -> BackendResult:
    """``parse.pdf_pipeline``: 'layout' -> docling's layout models (an error without
    them); 'auto' -> layout when its models are on this machine, else model-free."""
    from parsers.pdf_layout import layout_models_available, parse_pdf_layout
    from parsers.pdf_offline import parse_pdf as parse_offline

    if settings.pdf_pipeline == "layout" or (
        settings.pdf_pipeline == "auto" and layout_models_available(settings)
    ):
        result = parse_pdf_layout(path, settings)
    else:
        result = parse_offline(path, settings)
    return BackendResult(
        doc=result.doc,
        parser=result.parser,
        warnings=[ParseWarning("pdf", w) for w in result.warnings],
        missing_pages=list(result.missing_pages),
        partial=result.partial,
        page_count=result.page_count,
    )


def parse_image(path: Path, fmt: str, settings: ParseSettings) -> BackendResult:
    """An image file read by OCR, as one page."""
    from PIL import Image

    from parsers.ocr import ocr_image_file
    from parsers.pdf_offline import lines_to_document

    if not settings.ocr:
        raise ParseError(Category.UNSUPPORTED, "image file and OCR is disabled (parse.ocr)")
    if fmt == "heic":
        import pillow_heif

        pillow_heif.register_heif_opener()
    with Image.open(path) as img:
        size = (float(img.width), float(img.height))
    doc = lines_to_document(ocr_image_file(path), {1: size}, path.stem, [])
    return BackendResult(doc=doc, parser="ocr", page_count=1)


def warm_up(settings: ParseSettings) -> None:
    """Build the PDF converters now, so a document's deadline covers parsing only."""
    import pypdfium2  # noqa: F401

    from parsers.pdf_layout import warm_up_layout
    from parsers.pdf_offline import native_converter

    native_converter()
    warm_up_layout(settings)
