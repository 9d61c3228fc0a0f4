"""docling's own backends for every non-PDF format it reads without models.

Office (DOCX, PPTX, XLSX), their 97-2003 forms (DOC, PPT, XLS) and RTF: docling converts
the legacy forms and RTF to Office Open XML with LibreOffice (which ``parsers.formats``
checks for first) and reads the result with its Office backends, so RTF code pages
(``\\ansicpg``, ``\\fcharset``: Cyrillic, Central European, Shift-JIS, ...) are decoded as
declared. Also OpenDocument (ODT, ODS, ODP), EPUB, HTML, MHTML web archives, WebVTT,
CSV/TSV, AsciiDoc and LaTeX. PPTX goes through
``parsers.pptx_charts.ChartPptxBackend``: docling's PowerPoint backend with
charts read in full. ``conversion_result`` is the one place a docling
``ConversionResult`` becomes a ``BackendResult`` (status -> partial or error,
error items -> warnings); the PDF backends use it too.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.errors import Category, ParseError
from parsers.models import BackendResult, ParseWarning

if TYPE_CHECKING:
    from corpusflow.settings import ParseSettings

# Our format -> (docling InputFormat name, the extension the stream is given).
_FORMATS = {
    "docx": ("DOCX", ".docx"),
    "pptx": ("PPTX", ".pptx"),
    "xlsx": ("XLSX", ".xlsx"),
    "doc": ("DOC", ".doc"),
    "rtf": ("RTF", ".rtf"),
    "ppt": ("PPT", ".ppt"),
    "xls": ("XLS", ".xls"),
    "odt": ("ODT", ".odt"),
    "ods": ("ODS", ".ods"),
    "odp": ("ODP", ".odp"),
    "epub": ("EPUB", ".epub"),
    "html": ("HTML", ".html"),
    "mhtml": ("MHTML", ".mhtml"),
    "vtt": ("VTT", ".vtt"),
    "md": ("MD", ".md"),
    "csv": ("CSV", ".csv"),
    "tsv": ("CSV", ".csv"),
    "asciidoc": ("ASCIIDOC", ".adoc"),
    "latex": ("LATEX", ".tex"),
}


@functools.lru_cache(maxsize=1)
def get_converter() -> Any:
    from corpusflow.runtime import import_without

    # docling's VLM options import transformers (~2-5 s of CPU per parser process) only
    # to annotate a field; the models that need it import it when they are built.
    import_without("docling.document_converter", "transformers")
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import (
        DocumentConverter,
        ExcelFormatOption,
        PowerpointFormatOption,
        WordFormatOption,
    )

    from parsers.docx_words import WordsDocxBackend
    from parsers.pptx_charts import ChartPptxBackend
    from parsers.xlsx_cells import FormattedXlsxBackend

    # PowerPoint charts keep X values, bubble sizes, category groups and axis titles
    # (.ppt too: docling converts it to .pptx and then runs the same backend).
    chart_pptx = PowerpointFormatOption(backend=ChartPptxBackend)
    # Word: formatting runs never split a word, ruby keeps its base text (.doc and .rtf
    # too: docling converts them to .docx and then runs the same backend).
    words_docx = WordFormatOption(backend=WordsDocxBackend)
    # Excel: cells as formatted (3%, 6:15 AM, $1,599.99), .xls too.
    shown_xlsx = ExcelFormatOption(backend=FormattedXlsxBackend)
    return DocumentConverter(
        allowed_formats=sorted({InputFormat[name] for name, _ext in _FORMATS.values()}),
        format_options={
            InputFormat.PPTX: chart_pptx,
            InputFormat.PPT: chart_pptx,
            InputFormat.DOCX: words_docx,
            InputFormat.DOC: words_docx,
            InputFormat.RTF: words_docx,
            InputFormat.XLSX: shown_xlsx,
            InputFormat.XLS: shown_xlsx,
        },
    )


def conversion_result(result: Any, parser: str) -> BackendResult:
    """A docling ConversionResult as a BackendResult; raises ParseError when it failed."""
    from docling.datamodel.base_models import ConversionStatus

    warnings = [ParseWarning(f"docling/{e.module_name}", e.error_message) for e in result.errors]
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        detail = "; ".join(str(w) for w in warnings) or f"docling status {result.status.value}"
        raise ParseError(Category.CORRUPT, detail)
    doc = result.document
    page_count = max(int(getattr(result.input, "page_count", 0) or 0), len(doc.pages))
    return BackendResult(
        doc=doc,
        parser=parser,
        warnings=warnings,
        partial=result.status == ConversionStatus.PARTIAL_SUCCESS,
        page_count=page_count,
    )


def convert_bytes(data: bytes, name: str, fmt: str) -> BackendResult:
    """Convert ``data`` as format ``fmt`` (``name`` is the document's name)."""
    if fmt not in _FORMATS:
        raise ParseError(Category.UNSUPPORTED, f"docling backend does not handle {fmt}")
    from docling.datamodel.document import DocumentStream

    # The stream carries the *detected* format's extension so a misnamed file
    # reaches the right docling backend.
    stream = DocumentStream(name=f"{name}{_FORMATS[fmt][1]}", stream=io.BytesIO(data))
    try:
        result = get_converter().convert(stream, raises_on_error=False)
    except Exception as exc:  # docling raises plain exceptions for broken input
        raise ParseError(Category.CORRUPT, f"{type(exc).__name__}: {exc}"[:2000]) from exc
    if result.input.format is not None and result.input.format.name != _FORMATS[fmt][0]:
        # docling sniffs content too; say when it read the file as something else.
        out = conversion_result(result, "docling")
        out.warn("docling", f"read as {result.input.format.value}, not {fmt}")
        return out
    return conversion_result(result, "docling")


def parse(path: Path, fmt: str, settings: ParseSettings) -> BackendResult:
    """The backend entry point (see ``parsers.formats``)."""
    data = path.read_bytes()
    if fmt == "epub":  # docling reads an EPUB as one only with its mimetype member first
        from parsers.containers import epub_mimetype_first

        data = epub_mimetype_first(data)
    elif fmt in ("docx", "xlsx", "pptx"):
        data = _transitional(data, fmt)
    return convert_bytes(data, path.stem, fmt)


def _transitional(data: bytes, fmt: str) -> bytes:
    """Strict OOXML saved as Transitional by LibreOffice; other files as they are."""
    from parsers.containers import is_strict_ooxml, strict_to_transitional
    from parsers.formats import libreoffice_missing

    if not is_strict_ooxml(data):
        return data
    missing = libreoffice_missing()
    if missing:
        raise ParseError(Category.UNSUPPORTED, f"Strict OOXML {fmt} needs LibreOffice: {missing}")
    try:
        return strict_to_transitional(data, fmt)
    except Exception as exc:  # subprocess errors, timeouts, no output
        raise ParseError(
            Category.CORRUPT, f"Strict OOXML {fmt}: LibreOffice could not convert it: {exc}"[:500]
        ) from exc
