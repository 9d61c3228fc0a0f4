"""Plain data models of the parse stage."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

# Bump when the parse output of every format changes for the same bytes and settings
# (format detection, the registry's common handling); a change to one backend bumps
# that format's ``FormatSpec.version`` in parsers/formats.py instead (the fingerprint
# itself is taken in parsers/fingerprint.py), so only the
# documents of that format are parsed again. Fingerprints are per format since
# version 6 (every document is parsed once more on that upgrade).
# 2: unstructured backend (eml, msg, rtf, txt; fallback for docling failures),
#    missing_pages, office parts with a DTD refused.
# 3: docling's layout-model PDF path ("docling-layout"); PPTX charts keep X values,
#    bubble sizes, multi-level categories, axis and cell-linked titles.
# 4: YAML front matter of Markdown files read into metadata (and out of the text).
# 5: one backend registry; CSV/TSV, legacy and OpenDocument office, EPUB, LaTeX,
#    AsciiDoc, RST, Org, JSON/NDJSON, XML, YAML, WebP/HEIC; text encodings detected.
# 6: PDF text layer: Kangxi radicals read as the ordinary ideographs, no spaces
#    inside ligature-split words, paragraphs judged against the document's own
#    leading, more bold face names and stroked (fake bold) text; side headings
#    set apart by white space; running heads of a chapter, caption labels and
#    bullet items are not headings.
PARSER_VERSION = "6"


@dataclass(frozen=True, slots=True)
class ParseWarning:
    """A structured problem that did not stop the parse (docling's ``ErrorItem`` idea).

    ``source`` names who reported it (``docling``, ``ocr``, ``pdf-tables``,
    ``encoding``, ...); ``page`` is the 1-based page it concerns, when one does.
    """

    source: str
    message: str
    page: int | None = None

    def __str__(self) -> str:
        where = f"page {self.page}: " if self.page is not None else ""
        return f"{self.source}: {where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "message": self.message, "page": self.page}

    @classmethod
    def from_obj(cls, obj: Any) -> ParseWarning:
        """From its dict form, or from the plain string an older cache entry holds."""
        if isinstance(obj, dict):
            page = obj.get("page")
            return cls(str(obj["source"]), str(obj["message"]), int(page) if page else None)
        return cls("parser", str(obj))


@dataclass(slots=True)
class BackendResult:
    """What every parser backend returns: one shape for all formats.

    ``doc`` is the structured content; ``parser`` names the path that produced it
    (see ``ParsedDocument.parser``); ``missing_pages`` lists 1-based pages that
    could not be read; ``partial`` marks a backend's own partial result that no
    page list explains; ``metadata`` is what the file says about itself (e-mail
    headers, front matter); ``page_count`` is the source's page count when known.
    """

    doc: DoclingDocument
    parser: str
    warnings: list[ParseWarning] = field(default_factory=list)
    missing_pages: list[int] = field(default_factory=list)
    partial: bool = False
    page_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def warn(self, source: str, message: str, page: int | None = None) -> None:
        self.warnings.append(ParseWarning(source, message, page))


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed file: Markdown for people, docling JSON for structure-aware chunking.

    ``parser`` names the path that produced the content: ``docling``,
    ``docling-layout`` (PDF through docling's layout + TableFormer models),
    ``docling-layout+ocr`` (the same, with scanned pages OCR'd),
    ``pdf-offline``, ``pdf-offline+ocr`` (the model-free PDF path), ``ocr``, ``unstructured`` (e-mail,
    plain text), ``unstructured-fallback`` (docling failed on the file, read no text from
    it, or cannot run here, as RTF without LibreOffice, and unstructured read it; the
    reason is in ``warnings``) or ``text``
    (plain paragraphs, when unstructured could not read a text file).

    ``status`` is ``partial`` whenever content is known to be missing:
    ``missing_pages`` lists the 1-based pages that could not be read (a page
    the PDF parser or OCR failed on), and a backend's own partial result
    (docling's PARTIAL_SUCCESS) counts too. A document is never ``success``
    with pages missing. ``page_count`` is the number of pages of the source.
    """

    markdown: str
    docling_json: str
    title: str
    format: str
    page_count: int
    parser: str
    status: Literal["success", "partial"] = "success"
    warnings: tuple[ParseWarning, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    missing_pages: tuple[int, ...] = ()

    def to_docling(self) -> DoclingDocument:
        from docling_core.types.doc import DoclingDocument

        return DoclingDocument.model_validate_json(self.docling_json)

    def to_json(self) -> str:
        return json.dumps(
            {
                "markdown": self.markdown,
                "docling_json": self.docling_json,
                "title": self.title,
                "format": self.format,
                "page_count": self.page_count,
                "parser": self.parser,
                "status": self.status,
                "warnings": [w.to_dict() for w in self.warnings],
                "metadata": self.metadata,
                "missing_pages": list(self.missing_pages),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ParsedDocument:
        data = json.loads(text)
        data["warnings"] = tuple(ParseWarning.from_obj(w) for w in data.get("warnings", ()))
        data["missing_pages"] = tuple(int(p) for p in data.get("missing_pages", ()))
        return cls(**data)


@dataclass(frozen=True, slots=True)
class ParserFingerprints:
    """What identifies parse output, per format (``ParsedDocument.format``): a change to
    one backend, or to settings only it reads, re-parses only the documents it reads."""

    by_format: Mapping[str, str]

    def of(self, fmt: str | None) -> str:
        """The fingerprint of documents of ``fmt`` ("" for a format no backend reads)."""
        return self.by_format.get(fmt or "", "")

    def cached(self, hit: tuple[str, str] | None) -> ParsedDocument | None:
        """The parse a cache lookup under these fingerprints found, (fingerprint,
        JSON), when it is current for the format that parse found: not a fingerprint
        another format has now, were the same bytes read as another format."""
        if hit is None:
            return None
        parsed = ParsedDocument.from_json(hit[1])
        return parsed if self.of(parsed.format) == hit[0] else None
