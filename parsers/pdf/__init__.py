"""PDF and image backends: the text layer with headings and tables, OCR for scans.

Entry points (the format table in ``parsers.formats`` names them):
``parse_pdf(path, fmt, settings)`` and ``parse_image(path, fmt, settings)``
return a ``BackendResult``; ``warm_up(settings)`` builds the converters a
parser process reuses.

Modules, by role (each imports only those above it in this list):

- ``primitives``: Line, Word, script/font tests, list markers, clustering, pdfium;
- ``tables``: ruled and aligned tables from words and vector graphics;
- ``blocks``: lines -> paragraphs and list items;
- ``headings``: outline and typography -> headings;
- ``assemble``: lines + tables -> DoclingDocument;
- ``textlayer``: docling's NativePdfPipeline content, pdfium font names, lines;
- ``ocr``: RapidOCR in any orientation, with deskew;
- ``offline``: the model-free path (text layer, OCR, tables, assembly);
- ``layout``: docling's layout-model path, with OCR for pages without text.
"""

from __future__ import annotations

from pathlib import Path

from corpusflow.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import BackendResult


def parse_pdf(path: Path, fmt: str, settings: ParseSettings) -> BackendResult:
    """``parse.pdf_pipeline``: 'layout' -> docling's layout models (an error without
    them); 'auto' -> layout when its models are on this machine, else model-free."""
    from parsers.pdf.layout import layout_models_available, parse_layout
    from parsers.pdf.offline import parse_offline

    if settings.pdf_pipeline == "layout" or (
        settings.pdf_pipeline == "auto" and layout_models_available(settings)
    ):
        return parse_layout(path, settings)
    return parse_offline(path, settings)


def parse_image(path: Path, fmt: str, settings: ParseSettings) -> BackendResult:
    """An image file read by OCR, as one page."""
    from parsers.pdf.assemble import lines_to_document
    from parsers.pdf.ocr import ocr_image_file

    if not settings.ocr:
        raise ParseError(Category.UNSUPPORTED, "image file and OCR is disabled (parse.ocr)")
    if fmt == "heic":
        import pillow_heif

        pillow_heif.register_heif_opener()
    lines, size, warnings = ocr_image_file(path)
    doc = lines_to_document(lines, {1: size}, path.stem, [])
    return BackendResult(doc=doc, parser="ocr", warnings=warnings, page_count=1)


def warm_up(settings: ParseSettings) -> None:
    """Build the PDF converters now, so a document's deadline covers parsing only."""
    import pypdfium2  # noqa: F401

    from parsers.pdf.layout import warm_up_layout
    from parsers.pdf.textlayer import native_converter

    native_converter()
    warm_up_layout(settings)
