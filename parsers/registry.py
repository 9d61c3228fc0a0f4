"""Pick the backend for a file and produce a ParsedDocument (in this process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from corpusflow.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import ParsedDocument
from parsers.safety import precheck

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument


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


def _title(doc: DoclingDocument, fallback: str) -> str:
    from docling_core.types.doc import SectionHeaderItem, TitleItem

    for item, _level in doc.iterate_items():
        if isinstance(item, TitleItem | SectionHeaderItem) and item.text.strip():
            return item.text.strip()
    return fallback


def warm_up() -> None:
    """Import the heavy parser libraries now, so a document's deadline covers parsing only."""
    import pypdfium2  # noqa: F401

    from parsers.docling_backend import get_converter
    from parsers.pdf_offline import native_converter

    get_converter()
    native_converter()


def parse_file(
    path: str | Path,
    settings: ParseSettings | None = None,
    metadata: dict[str, object] | None = None,
) -> ParsedDocument:
    """Parse one file in this process. Raises ParseError with a category."""
    settings = settings or ParseSettings()
    path = Path(path)
    fmt = precheck(path, settings)
    warnings: list[str] = []
    partial = False
    if fmt == "pdf":
        from parsers.pdf_offline import parse_pdf_offline

        if settings.pdf_pipeline == "layout":
            raise ParseError(
                Category.UNSUPPORTED,
                "pdf_pipeline='layout' needs docling's layout models, which are not installed; "
                "use 'offline' or 'auto'",
            )
        doc, parser, warnings = parse_pdf_offline(path, settings)
    elif fmt == "image":
        if not settings.ocr:
            raise ParseError(Category.UNSUPPORTED, "image file and OCR is disabled")
        doc, parser = _image_document(path), "ocr"
    elif fmt == "txt":
        doc, parser = _text_document(path), "text"
    else:
        from parsers.docling_backend import convert

        doc, warnings, partial = convert(path, fmt)
        parser = "docling"
    markdown = doc.export_to_markdown()
    if not markdown.strip():
        raise ParseError(Category.EMPTY, f"no text could be extracted ({parser})")
    return ParsedDocument(
        markdown=markdown,
        docling_json=json.dumps(doc.export_to_dict(), ensure_ascii=False),
        title=_title(doc, path.stem),
        format=fmt,
        page_count=max(len(doc.pages), 1),
        parser=parser,
        status="partial"
        if partial or any("page" in w for w in warnings if "failed" in w)
        else "success",
        warnings=tuple(warnings),
        metadata=dict(metadata or {}),
    )
