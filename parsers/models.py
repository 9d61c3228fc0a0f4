"""Plain data models of the parse stage."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from corpusflow.settings import ParseSettings

# Bump when the parse output for the same bytes and settings changes.
PARSER_VERSION = "1"


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed file: Markdown for people, docling JSON for structure-aware chunking."""

    markdown: str
    docling_json: str
    title: str
    format: str
    page_count: int
    parser: str  # which path ran, e.g. "docling", "pdf-offline", "pdf-offline+ocr"
    status: Literal["success", "partial"] = "success"
    warnings: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

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
                "warnings": list(self.warnings),
                "metadata": self.metadata,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ParsedDocument:
        data = json.loads(text)
        data["warnings"] = tuple(data.get("warnings", ()))
        return cls(**data)


def parser_fingerprint(settings: ParseSettings) -> str:
    """Identifies parse output: the parser version plus settings that change output."""
    relevant = {
        "version": PARSER_VERSION,
        "ocr": settings.ocr,
        "ocr_engine": settings.ocr_engine,
        "ocr_min_chars_per_page": settings.ocr_min_chars_per_page,
        "ocr_scale": settings.ocr_scale,
        "pdf_pipeline": settings.pdf_pipeline,
    }
    blob = json.dumps(relevant, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
