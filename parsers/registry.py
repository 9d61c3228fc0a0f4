"""Pick the backend for a file and produce a ParsedDocument (in this process)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from corpusflow.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import ParsedDocument
from parsers.safety import precheck

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from parsers.pdf_offline import PdfParse


def _text_document(path: Path) -> DoclingDocument:
    """Plain text: paragraphs separated by blank lines."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    doc = DoclingDocument(name=path.stem)
    for para in (p.strip() for p in text.replace("\r\n", "\n").split("\n\n")):
        if para:
            doc.add_text(label=DocItemLabel.TEXT, text=" ".join(para.split()))
    return doc


def _image_document(path: Path) -> DoclingDocument:
    from PIL import Image

    from parsers.ocr import ocr_image_file
    from parsers.pdf_offline import lines_to_document

    with Image.open(path) as img:
        size = (float(img.width), float(img.height))
    return lines_to_document(ocr_image_file(path), {1: size}, path.stem, [])


def _front_matter(path: Path) -> tuple[dict[str, object], str] | None:
    """YAML front matter of a Markdown file (``---`` ... ``---`` at the top) and the rest.

    None when there is none or it is not a YAML mapping (then the file is parsed as is).
    """
    import yaml

    text = path.read_text(encoding="utf-8", errors="replace")
    match = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", text, re.S)
    if match is None:
        return None
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    if not isinstance(meta, dict):
        return None
    # Dates and other YAML-typed values are kept as their ISO text (metadata is JSON).
    return json.loads(json.dumps(meta, default=str)), text[match.end() :]


def _title(doc: DoclingDocument, fallback: str) -> str:
    from docling_core.types.doc import SectionHeaderItem, TitleItem

    for item, _level in doc.iterate_items():
        if isinstance(item, TitleItem | SectionHeaderItem) and item.text.strip():
            return item.text.strip()
    return fallback


def warm_up(settings: ParseSettings | None = None) -> None:
    """Import the heavy parser libraries (and load the layout models when PDFs will
    use them) now, so a document's deadline covers parsing only."""
    import pypdfium2  # noqa: F401

    from parsers.docling_backend import get_converter
    from parsers.pdf_layout import warm_up_layout
    from parsers.pdf_offline import native_converter

    get_converter()
    native_converter()
    if settings is not None:
        warm_up_layout(settings)


def _docling_or_fallback(
    path: Path, fmt: str
) -> tuple[DoclingDocument, str, list[str], bool, dict[str, object]]:
    """docling first; when it rejects a file as corrupt, unstructured may still read it."""
    from parsers.docling_backend import convert
    from parsers.unstructured_backend import FALLBACK_FORMATS

    try:
        doc, warnings, partial = convert(path, fmt)
        return doc, "docling", warnings, partial, {}
    except ParseError as exc:
        if exc.category != Category.CORRUPT or fmt not in FALLBACK_FORMATS:
            raise
        docling_error = exc
    from parsers import unstructured_backend

    try:
        doc, warnings, meta = unstructured_backend.convert(path, fmt)
    except ParseError as exc:
        raise ParseError(
            docling_error.category,
            f"{docling_error.message}; fallback unstructured also failed: {exc.message}",
        ) from exc
    warnings = [f"docling failed: {docling_error.message}", *warnings]
    return doc, "unstructured-fallback", warnings, False, meta


def _unstructured_primary(
    path: Path, fmt: str
) -> tuple[DoclingDocument, str, list[str], dict[str, object]]:
    from parsers import unstructured_backend

    try:
        doc, warnings, meta = unstructured_backend.convert(path, fmt)
    except ParseError as exc:
        if fmt != "txt" or exc.category != Category.CORRUPT:
            raise
        # Plain text always has a reading: paragraphs split at blank lines.
        return _text_document(path), "text", [f"unstructured failed: {exc.message}"], {}
    return doc, "unstructured", warnings, meta


def _parse_pdf(path: Path, settings: ParseSettings) -> PdfParse:
    """parse.pdf_pipeline: 'layout' -> docling's layout models (an error without them);
    'auto' -> layout when its models are on this machine, else the model-free path."""
    from parsers.pdf_layout import layout_models_available, parse_pdf_layout
    from parsers.pdf_offline import parse_pdf

    if settings.pdf_pipeline == "layout" or (
        settings.pdf_pipeline == "auto" and layout_models_available(settings)
    ):
        return parse_pdf_layout(path, settings)
    return parse_pdf(path, settings)


def parse_file(
    path: str | Path,
    settings: ParseSettings | None = None,
    metadata: dict[str, object] | None = None,
) -> ParsedDocument:
    """Parse one file in this process. Raises ParseError with a category.

    Backends by detected format: PDF -> docling's layout-model pipeline or the
    model-free PDF path, by ``parse.pdf_pipeline`` (+ OCR for scanned pages);
    images -> OCR; e-mail (.eml, .msg), RTF and plain text -> unstructured;
    DOCX/PPTX/XLSX/HTML/Markdown -> docling, with unstructured as the fallback
    when docling rejects a DOCX/PPTX/XLSX/HTML file as corrupt.
    """
    from parsers.unstructured_backend import PRIMARY_FORMATS

    settings = settings or ParseSettings()
    path = Path(path)
    fmt = precheck(path, settings)
    warnings: list[str] = []
    partial = False
    missing: list[int] = []
    page_count = 0
    extra: dict[str, object] = {}
    if fmt == "pdf":
        result = _parse_pdf(path, settings)
        doc, parser, warnings = result.doc, result.parser, result.warnings
        missing, partial, page_count = result.missing_pages, result.partial, result.page_count
    elif fmt == "image":
        if not settings.ocr:
            raise ParseError(Category.UNSUPPORTED, "image file and OCR is disabled")
        doc, parser = _image_document(path), "ocr"
    elif fmt in PRIMARY_FORMATS:
        doc, parser, warnings, extra = _unstructured_primary(path, fmt)
    elif fmt == "md" and (front := _front_matter(path)) is not None:
        meta, body = front
        with tempfile.TemporaryDirectory(prefix="corpusflow-md-") as tmp:
            stripped = Path(tmp) / path.name
            stripped.write_text(body, encoding="utf-8")
            doc, parser, warnings, partial, extra = _docling_or_fallback(stripped, fmt)
        extra = {**meta, **extra}
    else:
        doc, parser, warnings, partial, extra = _docling_or_fallback(path, fmt)
    markdown = doc.export_to_markdown()
    if not markdown.strip():
        if missing:
            raise ParseError(Category.CORRUPT, f"no page could be read (failed pages {missing})")
        raise ParseError(Category.EMPTY, f"no text could be extracted ({parser})")
    return ParsedDocument(
        markdown=markdown,
        docling_json=json.dumps(doc.export_to_dict(), ensure_ascii=False),
        title=str(extra.get("title") or _title(doc, path.stem)),
        format=fmt,
        page_count=max(page_count, len(doc.pages), 1),
        parser=parser,
        status="partial" if partial or missing else "success",
        warnings=tuple(warnings),
        metadata={**extra, **dict(metadata or {})},
        missing_pages=tuple(missing),
    )
