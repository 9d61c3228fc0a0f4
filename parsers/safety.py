"""Cheap checks that run before any parser touches a file.

They decide the real format from the file's bytes (not its name), refuse
non-regular files (a FIFO or device would block the parser), empty, oversized
and encrypted files, and inspect office ZIP containers (member count, total
uncompressed size, compression ratio) so a zip bomb is rejected before
python-docx or openpyxl inflate it. Office XML parts that declare a DTD are
refused too: OOXML never uses one, and a DTD is how entity-expansion bombs
("billion laughs") and external-entity (XXE) reads are delivered.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from pathlib import Path

from corpusflow.settings import ParseSettings
from corpusflow.zipguard import zip_problem
from parsers.errors import Category, ParseError
from parsers.formats import ARCHIVE_EXTENSIONS, EXTENSION_FORMATS

# ZIP containers by the format they hold; all of them get the bomb and DTD checks.
ZIP_FORMATS = {"docx", "pptx", "xlsx", "odt", "ods", "odp", "epub"}
# The part every ZIP container of that kind has.
_OFFICE_MAIN_PART = {"docx": "word/", "pptx": "ppt/", "xlsx": "xl/"}
# The ``mimetype`` member of OpenDocument and EPUB containers.
_ZIP_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    b"application/vnd.oasis.opendocument.presentation": "odp",
    b"application/epub+zip": "epub",
}
# OLE2 (97-2003) containers by the stream that names their kind.
_OLE_STREAMS = (
    ("WordDocument", "doc"),
    ("Workbook", "xls"),
    ("Book", "xls"),
    ("PowerPoint Document", "ppt"),
)
_BINARY_FORMATS = {"pdf", "image", "heic", "msg", "rtf", "doc", "ppt", "xls", *ZIP_FORMATS}
_HEIC_BRANDS = (b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1")
FORMATS_HELP = "run `corpusflow formats` for the list of supported kinds"


def _zip_format(path: Path, named: str | None, ext: str) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            mimetype = zf.read("mimetype").strip() if "mimetype" in names else b""
    except (zipfile.BadZipFile, OSError, KeyError, RuntimeError) as exc:
        raise ParseError(Category.CORRUPT, f"broken ZIP container: {exc}") from exc
    if mimetype in _ZIP_MIMETYPES:
        return _ZIP_MIMETYPES[mimetype]
    if named in _OFFICE_MAIN_PART and any(n.startswith(_OFFICE_MAIN_PART[named]) for n in names):
        return named
    for fmt, prefix in _OFFICE_MAIN_PART.items():
        if any(n.startswith(prefix) for n in names):
            return fmt
    if named in ZIP_FORMATS:
        raise ParseError(Category.CORRUPT, f"file named {ext} is a ZIP without {named} parts")
    raise ParseError(
        Category.UNSUPPORTED,
        f"ZIP archive ({ext or 'no extension'}): ingest the folder that holds it, and its "
        "members are indexed one by one as archive.zip/member",
    )


def _ole_format(path: Path, named: str | None, ext: str) -> str:
    if named in {"msg", "doc", "ppt", "xls"}:
        return named
    import olefile

    try:
        with olefile.OleFileIO(str(path)) as ole:
            streams = {"/".join(entry) for entry in ole.listdir()}
    except OSError as exc:
        raise ParseError(Category.CORRUPT, f"broken OLE2 container: {exc}") from exc
    for stream, fmt in _OLE_STREAMS:
        if stream in streams:
            return fmt
    if any(s.startswith("__substg1.0_") for s in streams):
        return "msg"
    raise ParseError(
        Category.UNSUPPORTED, f"OLE2 file of an unknown kind ({ext or 'no extension'})"
    )


def _image_format(head: bytes) -> str | None:
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"BM", b"GIF8")):
        return "image"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image"
    if head[4:8] == b"ftyp" and head[8:12] in _HEIC_BRANDS:
        return "heic"
    return None


def sniff_format(path: Path, head: bytes) -> str:
    """The format of a file from its bytes, using the extension to break ties."""
    ext = path.suffix.lower()
    named = EXTENSION_FORMATS.get(ext)
    if head.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_format(path, named, ext)
    image = _image_format(head)
    if image is not None:
        return image
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        return _ole_format(path, named, ext)
    if named in _BINARY_FORMATS:
        raise ParseError(
            Category.CORRUPT, f"file named {ext} does not contain {named.upper()} data"
        )
    if named is not None:
        return named  # a text format: parsers.textcodec decodes it, whatever its encoding
    if ext in ARCHIVE_EXTENSIONS:
        raise ParseError(Category.CORRUPT, f"file named {ext} is not a ZIP archive")
    if not ext or ext in (".cfg", ".conf", ".ini", ".properties"):
        from parsers.textcodec import decode

        try:
            decode(head, "file")
        except ParseError:
            pass
        else:
            return "txt"  # README, LICENSE, configuration files: text without a name
    raise ParseError(
        Category.UNSUPPORTED, f"unsupported file type {ext or '(no extension)'}; {FORMATS_HELP}"
    )


def check_zip(path: Path, settings: ParseSettings) -> None:
    """Reject ZIP containers whose members would inflate beyond the limits."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise ParseError(Category.CORRUPT, f"broken ZIP container: {exc}") from exc
    problem = zip_problem(
        infos, settings.zip_max_members, settings.zip_max_uncompressed_mb, settings.zip_max_ratio
    )
    if problem:
        raise ParseError(Category.CORRUPT, problem)
    # Sizes are known to be sane now, so reading the parts' prologs is cheap.
    with zipfile.ZipFile(path) as zf:
        _check_xml_parts(zf, infos)


# The prolog of an XML part (declaration, comments, processing instructions) is
# read up to this many bytes; a DOCTYPE must appear there, before the root.
_PROLOG_LIMIT = 64 * 1024
_PROLOG_SKIP = re.compile(rb"\s+|<\?.*?\?>|<!--.*?-->", re.S)
_ROOT_START = re.compile(rb"<[A-Za-z_:\x80-\xff]")


def xml_declares_dtd(head: bytes, complete: bool) -> bool:
    """Whether an XML document starting with ``head`` has a DOCTYPE before its root element.

    ``complete`` says ``head`` is the whole document; a prolog that fills the
    whole (truncated) head is treated as a DTD: no honest part has one that long.
    """
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head.decode("utf-16", errors="ignore").encode("utf-8")
    elif head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    pos = 0
    while (m := _PROLOG_SKIP.match(head, pos)) is not None and m.end() > pos:
        pos = m.end()
    rest = head[pos : pos + 9]
    if rest.upper().startswith(b"<!DOCTYPE"):
        return True
    # A root element ends the prolog; a prolog that fills a truncated head (or an
    # unterminated comment or instruction in it) is suspect.
    return not (_ROOT_START.match(rest) or complete)


def _check_xml_parts(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    for info in infos:
        if info.is_dir() or not info.filename.lower().endswith((".xml", ".rels", ".vml")):
            continue
        try:
            with zf.open(info) as fh:
                head = fh.read(_PROLOG_LIMIT)
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
            raise ParseError(
                Category.CORRUPT, f"office part {info.filename} cannot be read: {exc}"
            ) from exc
        if xml_declares_dtd(head, complete=len(head) < _PROLOG_LIMIT):
            raise ParseError(
                Category.CORRUPT,
                f"office part {info.filename} declares a DTD (entity expansion / external "
                "entity attack); refused before parsing",
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
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is then
        # checked on the opened descriptor, so a swap after the check cannot fool it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise ParseError(Category.SOURCE_CHANGED, "file vanished before it was parsed") from exc
    except OSError as exc:
        raise ParseError(Category.CORRUPT, f"file cannot be read: {exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "FIFO" if stat.S_ISFIFO(info.st_mode) else "device or socket"
            raise ParseError(
                Category.UNSUPPORTED, f"not a regular file ({kind}); refused before parsing"
            )
        size = info.st_size
        head = os.read(fd, 8192) if size else b""
    except OSError as exc:
        raise ParseError(Category.CORRUPT, f"file cannot be read: {exc}") from exc
    finally:
        os.close(fd)
    if size == 0:
        raise ParseError(Category.EMPTY, "zero-byte file")
    if head.startswith(b"PK\x03\x04"):
        check_zip(path, settings)  # before anything inflates a member, even to sniff
    fmt = sniff_format(path, head)
    if fmt == "pdf":
        check_pdf(path, settings)
    return fmt
