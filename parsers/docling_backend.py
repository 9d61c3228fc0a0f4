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

from parsers.backend import TableBackend
from parsers.errors import Category, ParseError
from parsers.models import BackendResult, ParseWarning

if TYPE_CHECKING:
    from common.settings import ParseSettings
    from parsers.formats import FormatSpec

# docling's own Markdown reader, which the text backend hands its Markdown to.
_MARKDOWN = ("MD", ".md")


@functools.lru_cache(maxsize=1)
def get_converter() -> Any:
    """One converter for every format whose row names a docling input format; a row's
    ``docling_backend`` option replaces docling's reader for that input format (Word:
    formatting runs never split a word, ruby keeps its base text; PowerPoint: charts
    keep X values, bubble sizes, category groups and axis titles; Excel: cells as
    formatted). The legacy forms and RTF name the same reader: docling converts them
    to OOXML first."""
    from common.imports import import_without

    # docling's VLM options import transformers (~2-5 s of CPU per parser process) only
    # to annotate a field; the models that need it import it when they are built.
    import_without("docling.document_converter", "transformers")
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, FormatOption
    from docling.pipeline.simple_pipeline import SimplePipeline

    from parsers.formats import FORMATS, resolve

    allowed = {InputFormat[_MARKDOWN[0]]}
    options: dict[Any, Any] = {}
    for spec in FORMATS:
        if not spec.option("docling"):
            continue
        fmt = InputFormat[spec.option("docling")]
        allowed.add(fmt)
        if spec.option("docling_backend"):
            backend = resolve(spec.option("docling_backend"))
            options[fmt] = FormatOption(pipeline_cls=SimplePipeline, backend=backend)
    return DocumentConverter(allowed_formats=sorted(allowed), format_options=options)


def conversion_result(result: Any, parser: str) -> BackendResult:
    """A docling ConversionResult as a BackendResult; raises ParseError when it failed."""
    from docling.datamodel.base_models import ConversionStatus

    warnings = [ParseWarning(f"docling/{e.module_name}", e.error_message) for e in result.errors]
    # What a reader of ours added after docling's own reading and could not
    # (parsers.viewer_text): docling keeps the backend on the input document.
    backend = getattr(result.input, "_backend", None)
    warnings += [ParseWarning(*w) for w in getattr(backend, "supplement_warnings", None) or ()]
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


def convert_bytes(data: bytes, name: str, input_format: str, suffix: str) -> BackendResult:
    """Convert ``data`` as docling's ``input_format`` (``name`` is the document's name;
    ``suffix`` the extension docling's reader takes the stream by)."""
    from docling.datamodel.document import DocumentStream

    # The stream carries the *detected* format's extension so a misnamed file
    # reaches the right docling backend.
    stream = DocumentStream(name=f"{name}{suffix}", stream=io.BytesIO(data))
    try:
        result = get_converter().convert(stream, raises_on_error=False)
    except Exception as exc:  # docling raises plain exceptions for broken input
        raise ParseError(Category.CORRUPT, f"{type(exc).__name__}: {exc}"[:2000]) from exc
    if result.input.format is not None and result.input.format.name != input_format:
        # docling sniffs content too; say when it read the file as something else.
        out = conversion_result(result, "docling")
        out.warn("docling", f"read as {result.input.format.value}, not {input_format}")
        return out
    return conversion_result(result, "docling")


def convert_markdown(markdown: str, name: str) -> BackendResult:
    """Markdown through docling's own Markdown reader."""
    return convert_bytes(markdown.encode("utf-8"), name, *_MARKDOWN)


class DoclingBackend(TableBackend):
    """docling's reader for the row's ``docling`` input format.

    Options: ``docling`` (docling's ``InputFormat`` name, required), ``stream_suffix``
    (the extension docling takes the stream by; the format's first extension),
    ``docling_backend`` (``module:Class`` replacing docling's reader, see
    ``get_converter``), ``prepare`` (``module:function``, ``(bytes, FormatSpec) ->
    bytes``, run before conversion: a container fix-up).
    """

    name = "parsers.docling_backend:parse"

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        input_format = spec.option("docling")
        if not input_format:
            raise ParseError(Category.UNSUPPORTED, f"docling backend does not handle {spec.fmt}")
        self.check_valid(path, spec)
        data = path.read_bytes()
        if spec.option("prepare"):
            from parsers.formats import resolve

            data = resolve(spec.option("prepare"))(data, spec)
        suffix = spec.option("stream_suffix", spec.extensions[0])
        return convert_bytes(data, path.stem, input_format, suffix)


BACKEND = DoclingBackend()


def plain_ooxml(data: bytes, spec: FormatSpec) -> bytes:
    """An OOXML file as docling's readers take it: Strict OOXML saved as Transitional
    and a binary workbook (.xlsb) as XLSX by LibreOffice; a macro-enabled file,
    template or slide show typed as the document it holds
    (``parsers.containers.main_part_as_document``)."""
    from parsers.containers import is_binary_workbook, is_strict_ooxml, main_part_as_document

    kind = spec.extensions[0].lstrip(".")
    if is_strict_ooxml(data):
        return _resaved(data, kind, kind, f"Strict OOXML {kind}")
    if is_binary_workbook(data):
        return _resaved(data, "xlsb", "xlsx", "binary Excel workbook (.xlsb)")
    return main_part_as_document(data)


def _resaved(data: bytes, source: str, target: str, what: str) -> bytes:
    """``data`` saved as ``target`` by LibreOffice, with categorised errors."""
    from parsers.containers import libreoffice_resave
    from parsers.formats import libreoffice_missing

    missing = libreoffice_missing()
    if missing:
        raise ParseError(Category.UNSUPPORTED, f"{what} needs LibreOffice: {missing}")
    try:
        return libreoffice_resave(data, source, target)
    except Exception as exc:  # subprocess errors, timeouts, no output
        raise ParseError(
            Category.CORRUPT, f"{what}: LibreOffice could not convert it: {exc}"[:500]
        ) from exc


def epub_mimetype_first(data: bytes, spec: FormatSpec) -> bytes:
    """An EPUB with its ``mimetype`` member first (``parsers.containers``)."""
    from parsers.containers import epub_mimetype_first as fixed

    return fixed(data)


def odf_list_headers(data: bytes, spec: FormatSpec) -> bytes:
    """An OpenDocument file with its list headers read as list items (``parsers.containers``)."""
    from parsers.containers import odf_list_headers_as_items

    return odf_list_headers_as_items(data)
