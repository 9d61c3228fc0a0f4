"""Cheap checks that run before any parser touches a file.

They decide the real format from the file's bytes (not its name), refuse empty,
oversized and encrypted files, and inspect office ZIP containers (member count,
total uncompressed size, compression ratio) so a zip bomb is rejected before
python-docx or openpyxl inflate it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from corpusflow.settings import ParseSettings
from parsers.errors import Category, ParseError

# Formats corpusflow parses, keyed by the file extension that names them.
EXTENSION_FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".docm": "docx",
    ".pptx": "pptx",
    ".pptm": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "md",
    ".markdown": "md",
    ".txt": "txt",
    ".text": "txt",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
    ".bmp": "image",
}
OFFICE_FORMATS = {"docx", "pptx", "xlsx"}
# The part every office container of that kind has.
_OFFICE_MAIN_PART = {"docx": "word/", "pptx": "ppt/", "xlsx": "xl/"}
_LEGACY_OFFICE = {".doc", ".ppt", ".xls", ".rtf", ".odt", ".ods", ".odp"}


def sniff_format(path: Path, head: bytes) -> str:
    """The format of a file from its bytes, using the extension to break ties."""
    ext = path.suffix.lower()
    named = EXTENSION_FORMATS.get(ext)
    if head.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        if named in OFFICE_FORMATS:
            return named
        try:
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise ParseError(Category.CORRUPT, f"broken ZIP container: {exc}") from exc
        for fmt, prefix in _OFFICE_MAIN_PART.items():
            if any(n.startswith(prefix) for n in names):
                return fmt
        raise ParseError(
            Category.UNSUPPORTED, f"ZIP archive that is not an office document ({ext})"
        )
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"BM")):
        return "image"
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        raise ParseError(
            Category.UNSUPPORTED,
            f"legacy OLE office file ({ext or 'no extension'}); convert to DOCX/PPTX/XLSX",
        )
    if named in {"pdf", *OFFICE_FORMATS, "image"}:
        raise ParseError(
            Category.CORRUPT, f"file named {ext} does not contain {named.upper()} data"
        )
    if ext in _LEGACY_OFFICE:
        raise ParseError(Category.UNSUPPORTED, f"unsupported format {ext}")
    if named in {"html", "md", "txt"}:
        if b"\x00" in head[:4096]:
            raise ParseError(Category.CORRUPT, f"binary data in a {ext} file")
        return named
    if named is None:
        raise ParseError(Category.UNSUPPORTED, f"unsupported file type {ext or '(no extension)'}")
    return named


def check_zip(path: Path, settings: ParseSettings) -> None:
    """Reject office containers whose members would inflate beyond the limits."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise ParseError(Category.CORRUPT, f"broken office container: {exc}") from exc
    if len(infos) > settings.zip_max_members:
        raise ParseError(
            Category.CORRUPT,
            f"office container has {len(infos)} members (limit {settings.zip_max_members})",
        )
    total = sum(i.file_size for i in infos)
    limit = settings.zip_max_uncompressed_mb * 1024 * 1024
    if total > limit:
        raise ParseError(
            Category.CORRUPT,
            f"office container inflates to {total / 2**20:.0f} MiB "
            f"(limit {settings.zip_max_uncompressed_mb} MiB): possible zip bomb",
        )
    for info in infos:
        if info.compress_size and info.file_size / info.compress_size > settings.zip_max_ratio:
            if info.file_size < 1024 * 1024:  # tiny members compress well and are harmless
                continue
            raise ParseError(
                Category.CORRUPT,
                f"member {info.filename} compresses {info.file_size / info.compress_size:.0f}:1 "
                f"(limit {settings.zip_max_ratio:.0f}:1): possible zip bomb",
            )


def check_pdf(path: Path, settings: ParseSettings) -> int:
    """Open the PDF once: detect encryption and corruption, enforce the page limit."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise ParseError(Category.ENCRYPTED, "PDF is password-protected") from exc
        raise ParseError(Category.CORRUPT, f"PDF cannot be opened: {exc}") from exc
    try:
        pages = len(pdf)
    finally:
        pdf.close()
    if pages == 0:
        raise ParseError(Category.EMPTY, "PDF has no pages")
    if pages > settings.max_pages:
        raise ParseError(Category.TOO_LARGE, f"PDF has {pages} pages (limit {settings.max_pages})")
    return pages


def precheck(path: Path, settings: ParseSettings) -> str:
    """Run every pre-parse check; returns the detected format."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8192)
    except FileNotFoundError as exc:
        raise ParseError(Category.SOURCE_CHANGED, "file vanished before it was parsed") from exc
    except OSError as exc:
        raise ParseError(Category.CORRUPT, f"file cannot be read: {exc}") from exc
    if size == 0:
        raise ParseError(Category.EMPTY, "zero-byte file")
    fmt = sniff_format(path, head)
    if fmt in OFFICE_FORMATS:
        check_zip(path, settings)
    elif fmt == "pdf":
        check_pdf(path, settings)
    return fmt
