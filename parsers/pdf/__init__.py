"""PDF and image backends: the text layer with headings and tables, OCR for scans.

Backends (``parsers.backend.Backend``; the format table in ``parsers.formats`` names
them): ``PDF`` and ``IMAGE``; ``warm_up(settings)`` builds the converters a parser
process reuses.

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
from typing import TYPE_CHECKING

from common.settings import ParseSettings
from parsers.backend import TableBackend
from parsers.errors import Category, ParseError
from parsers.models import BackendResult

if TYPE_CHECKING:
    from parsers.formats import FormatSpec


def _ocr_settings(settings: ParseSettings) -> dict[str, object]:
    return {
        "ocr": settings.ocr,
        "ocr_engine": settings.ocr_engine,
        "ocr_min_chars_per_page": settings.ocr_min_chars_per_page,
        "ocr_scale": settings.ocr_scale,
    }


class PdfBackend(TableBackend):
    """PDF: ``parse.pdf_pipeline``: 'layout' -> docling's layout models (an error without
    them); 'auto' -> layout when its models are on this machine, else model-free.
    Its fingerprint names the path that will run, so models arriving on (or leaving)
    the machine re-parse PDFs under ``auto``."""

    name = "parsers.pdf:parse_pdf"

    def fingerprint(self, settings: ParseSettings) -> dict[str, object]:
        from parsers.pdf.layout import fingerprint_part

        return {
            **_ocr_settings(settings),
            **fingerprint_part(settings),
            "pdf_pipeline": settings.pdf_pipeline,
            "join_continued_tables": settings.join_continued_tables,
        }

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        from parsers.pdf.layout import layout_models_available, parse_layout
        from parsers.pdf.offline import parse_offline

        self.check_valid(path, spec)
        if settings.pdf_pipeline == "layout" or (
            settings.pdf_pipeline == "auto" and layout_models_available(settings)
        ):
            result = parse_layout(path, settings)
        else:
            result = parse_offline(path, settings)
        if settings.join_continued_tables:
            from parsers.table_joins import join_result_tables

            result = join_result_tables(result)
        return result


class ImageBackend(TableBackend):
    """An image file read by OCR, as one page. Option ``image_opener``
    (``module:function``): registers the Pillow opener the format needs."""

    name = "parsers.pdf:parse_image"

    def fingerprint(self, settings: ParseSettings) -> dict[str, object]:
        return _ocr_settings(settings)

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        from parsers.pdf.assemble import lines_to_document
        from parsers.pdf.ocr import ocr_image_file

        if not settings.ocr:
            raise ParseError(Category.UNSUPPORTED, "image file and OCR is disabled (parse.ocr)")
        if spec.option("image_opener"):
            from parsers.formats import resolve

            resolve(spec.option("image_opener"))()
        self.check_valid(path, spec)
        try:
            lines, size, warnings = ocr_image_file(path)
        except OSError as exc:  # Pillow: a truncated or unidentifiable image
            raise ParseError(Category.CORRUPT, f"image cannot be read: {exc}"[:500]) from exc
        doc = lines_to_document(lines, {1: size}, path.stem, [])
        return BackendResult(doc=doc, parser="ocr", warnings=warnings, page_count=1)


PDF = PdfBackend()
IMAGE = ImageBackend()


def warm_up(settings: ParseSettings) -> None:
    """Build the PDF converters now, so a document's deadline covers parsing only."""
    import pypdfium2  # noqa: F401

    from parsers.pdf.layout import warm_up_layout
    from parsers.pdf.textlayer import native_converter

    native_converter(compact=True)
    warm_up_layout(settings)
