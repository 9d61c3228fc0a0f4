"""docling backends for office, web and Markdown files (no models needed).

PPTX goes through ``parsers.pptx_charts.ChartPptxBackend``: docling's PowerPoint
backend with charts read in full.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.errors import Category, ParseError

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

_FORMATS = {"docx": "DOCX", "pptx": "PPTX", "xlsx": "XLSX", "html": "HTML", "md": "MD"}


@functools.lru_cache(maxsize=1)
def get_converter() -> Any:
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, PowerpointFormatOption

    from parsers.pptx_charts import ChartPptxBackend

    return DocumentConverter(
        allowed_formats=[InputFormat[name] for name in _FORMATS.values()],
        # PowerPoint charts keep X values, bubble sizes, category groups and axis titles.
        format_options={InputFormat.PPTX: PowerpointFormatOption(backend=ChartPptxBackend)},
    )


def convert(path: Path, fmt: str) -> tuple[DoclingDocument, list[str], bool]:
    """Convert with docling's simple pipeline; returns (document, warnings, partial)."""
    from docling.datamodel.base_models import ConversionStatus, InputFormat
    from docling.datamodel.document import DocumentStream

    if fmt not in _FORMATS:
        raise ParseError(Category.UNSUPPORTED, f"docling backend does not handle {fmt}")
    # Feed the bytes with the *detected* format's extension so a misnamed file
    # is parsed by the right backend.
    ext = {"md": ".md", "html": ".html"}.get(fmt, f".{fmt}")
    stream = DocumentStream(name=f"{path.stem}{ext}", stream=_open_bytes(path))
    try:
        result = get_converter().convert(stream, raises_on_error=False)
    except Exception as exc:  # docling raises plain exceptions for broken input
        raise ParseError(Category.CORRUPT, f"{type(exc).__name__}: {exc}") from exc
    warnings = [f"{e.module_name}: {e.error_message}" for e in result.errors]
    if result.status == ConversionStatus.SUCCESS:
        return result.document, warnings, False
    if result.status == ConversionStatus.PARTIAL_SUCCESS:
        return result.document, warnings, True
    detail = "; ".join(warnings) or f"docling status {result.status.value}"
    _ = InputFormat  # format enum import keeps docling's registry initialised
    raise ParseError(Category.CORRUPT, detail)


def _open_bytes(path: Path) -> Any:
    import io

    return io.BytesIO(path.read_bytes())
