"""The format table: every file kind corpusflow reads, its backend and what it needs.

One row per format. ``backend`` is ``"module:function"`` with the signature
``(path, fmt, settings) -> BackendResult`` and is imported only when a file of
that format is parsed, so this module stays free of heavy imports (the
sniffer, the CLI's ``formats`` command and the docs read it). Adding a format
is one row here and, where no existing backend reads it, one module.

``needs`` says, for people, what must be installed beyond corpusflow's own
packages; ``requirement`` (``"module:function"`` returning ``None`` or what is
missing) checks it before a file is handed to the backend, so a missing
LibreOffice is an ``unsupported`` error that says what to install instead of a
stack trace. ``fallback`` is a second backend tried when the first rejects a
file as corrupt.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from corpusflow import zipguard

DOCLING = "parsers.docling_backend:parse"
UNSTRUCTURED = "parsers.unstructured_backend:parse"
TEXT = "parsers.text_backend:parse"
PDF = "parsers.pdf:parse_pdf"
IMAGE = "parsers.pdf:parse_image"

LIBREOFFICE_HELP = (
    "install LibreOffice headless (Debian/Ubuntu: apt-get install -y --no-install-recommends "
    "libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui) so that "
    "`soffice` is on PATH, or set DOCLING_LIBREOFFICE_CMD"
)


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """One file kind: how it is recognised, which backend reads it, what that needs."""

    fmt: str
    extensions: tuple[str, ...]
    backend: str
    description: str
    needs: str = ""
    requirement: str | None = None
    fallback: str | None = None
    # Text formats are decoded (any encoding) before the backend sees them.
    text: bool = False
    # Bump when this format's parse output changes for the same bytes and settings:
    # its documents, and only they, are parsed again (parsers.models.parser_fingerprints).
    version: str = "1"

    def missing(self) -> str | None:
        """What is missing on this machine to read this format, or None."""
        if self.requirement is None:
            return None
        return _call(self.requirement)()


def _call(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    return cast(Callable[..., Any], getattr(importlib.import_module(module), attr))


def resolve(target: str) -> Callable[..., Any]:
    """The backend function named ``module:function``."""
    return _call(target)


def libreoffice_missing() -> str | None:
    import os

    if os.environ.get("DOCLING_LIBREOFFICE_CMD") or shutil.which("soffice"):
        return None
    if shutil.which("libreoffice"):
        return None
    return f"LibreOffice is not installed: {LIBREOFFICE_HELP}"


def odfdo_missing() -> str | None:
    from importlib.util import find_spec

    if find_spec("odfdo") is None:
        return "the odfdo package is missing: pip install 'docling-slim[format-opendocument]'"
    return None


def heif_missing() -> str | None:
    from importlib.util import find_spec

    if find_spec("pillow_heif") is None:
        return "the pillow-heif package is missing: pip install pillow-heif"
    return None


_LO = "parsers.formats:libreoffice_missing"

FORMATS: tuple[FormatSpec, ...] = (
    FormatSpec(
        "pdf",
        (".pdf",),
        PDF,
        "PDF: text layer with headings and tables; OCR for scans",
        # 2: OCR never replaces a page's text layer with less text.
        version="2",
    ),
    FormatSpec(
        "docx",
        (".docx", ".docm", ".dotx", ".dotm"),
        DOCLING,
        "Word (Strict OOXML converted by LibreOffice first)",
        fallback=UNSTRUCTURED,
        # 2: formatting runs never split a word; ruby keeps its base text.
        version="2",
    ),
    FormatSpec(
        "pptx",
        (".pptx", ".pptm", ".ppsx", ".potx"),
        DOCLING,
        "PowerPoint (charts read as tables; Strict OOXML converted by LibreOffice first)",
        fallback=UNSTRUCTURED,
    ),
    FormatSpec(
        "xlsx",
        (".xlsx", ".xlsm", ".xltx", ".xltm"),
        DOCLING,
        "Excel (Strict OOXML converted by LibreOffice first)",
        fallback=UNSTRUCTURED,
        version="2",  # 2: cells as formatted (3%, 6:15 AM, $1,599.99)
    ),
    FormatSpec(
        "doc",
        (".doc", ".dot"),
        DOCLING,
        "Word 97-2003",
        "LibreOffice",
        _LO,
        version="2",  # as docx 2
    ),
    FormatSpec("ppt", (".ppt", ".pps", ".pot"), DOCLING, "PowerPoint 97-2003", "LibreOffice", _LO),
    FormatSpec(
        "xls",
        (".xls", ".xlt"),
        DOCLING,
        "Excel 97-2003 and 2.x-4.x (BIFF)",
        "LibreOffice",
        _LO,
        version="2",  # as xlsx 2
    ),
    FormatSpec(
        "odt",
        (".odt", ".ott"),
        DOCLING,
        "OpenDocument text",
        "odfdo",
        "parsers.formats:odfdo_missing",
    ),
    FormatSpec(
        "ods",
        (".ods", ".ots"),
        DOCLING,
        "OpenDocument spreadsheet",
        "odfdo",
        "parsers.formats:odfdo_missing",
    ),
    FormatSpec(
        "odp",
        (".odp", ".otp"),
        DOCLING,
        "OpenDocument presentation",
        "odfdo",
        "parsers.formats:odfdo_missing",
    ),
    # 2: found by its mimetype member or container.xml wherever they sit in the ZIP.
    FormatSpec("epub", (".epub",), DOCLING, "EPUB e-book", version="2"),
    FormatSpec(
        "html", (".html", ".htm", ".xhtml"), DOCLING, "HTML", fallback=UNSTRUCTURED, text=True
    ),
    FormatSpec("mhtml", (".mhtml", ".mht"), DOCLING, "web archive (MHTML)"),
    FormatSpec("vtt", (".vtt",), DOCLING, "WebVTT captions and meeting transcripts", text=True),
    FormatSpec("csv", (".csv",), DOCLING, "CSV (delimiter detected)", text=True),
    FormatSpec("tsv", (".tsv", ".tab"), DOCLING, "tab-separated values", text=True),
    FormatSpec(
        "md", (".md", ".markdown", ".mdown"), TEXT, "Markdown (YAML front matter read)", text=True
    ),
    FormatSpec("asciidoc", (".adoc", ".asciidoc", ".asc"), DOCLING, "AsciiDoc", text=True),
    FormatSpec("latex", (".tex", ".latex"), DOCLING, "LaTeX", text=True),
    FormatSpec("rst", (".rst", ".rest"), TEXT, "reStructuredText (section titles kept)", text=True),
    FormatSpec("org", (".org",), TEXT, "Org mode (outline kept)", text=True),
    # 2: a stream of concatenated JSON values is read as a list of records.
    FormatSpec(
        "json",
        (".json",),
        TEXT,
        "JSON, or concatenated JSON values (keys become headings and fields)",
        text=True,
        version="2",
    ),
    FormatSpec("ndjson", (".ndjson", ".jsonl"), TEXT, "JSON lines, one record each", text=True),
    FormatSpec(
        "yaml", (".yaml", ".yml"), TEXT, "YAML (keys become headings and fields)", text=True
    ),
    FormatSpec("xml", (".xml",), TEXT, "XML (element text under its element path)", text=True),
    FormatSpec("txt", (".txt", ".text", ".log"), UNSTRUCTURED, "plain text", text=True),
    FormatSpec("eml", (".eml",), UNSTRUCTURED, "e-mail (headers to metadata)", text=True),
    FormatSpec("msg", (".msg",), UNSTRUCTURED, "Outlook e-mail"),
    FormatSpec(
        "rtf",
        (".rtf",),
        DOCLING,
        "Rich Text (LibreOffice, code pages decoded as declared)",
        "LibreOffice",
        _LO,
        # pandoc reads a file LibreOffice cannot (or reads no text from), and every RTF
        # on a machine without LibreOffice; it decodes only Western code pages.
        fallback=UNSTRUCTURED,
        # 2: LibreOffice -> DOCX -> docling instead of pandoc.
        version="2",
    ),
    FormatSpec(
        "image",
        (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
        IMAGE,
        "image, read by OCR (any right-angle orientation)",
    ),
    FormatSpec(
        "heic",
        (".heic", ".heif"),
        IMAGE,
        "HEIC/HEIF photo, read by OCR",
        "pillow-heif",
        "parsers.formats:heif_missing",
    ),
)

BY_FORMAT: dict[str, FormatSpec] = {spec.fmt: spec for spec in FORMATS}
EXTENSION_FORMATS: dict[str, str] = {ext: spec.fmt for spec in FORMATS for ext in spec.extensions}
# ZIP archives are not parsed as one document: sources list their members.
ARCHIVE_EXTENSIONS = zipguard.ARCHIVE_EXTENSIONS


def spec_for(fmt: str) -> FormatSpec:
    return BY_FORMAT[fmt]
