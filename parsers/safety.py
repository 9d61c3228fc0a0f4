"""Cheap checks that run before any parser touches a file.

They decide the real format from the file's bytes (not its name), refuse
non-regular files (a FIFO or device would block the parser), empty, oversized
and encrypted files (PDF, password-protected and rights-managed Office files of
every generation, encrypted OpenDocument and ZIP members), and inspect ZIP
containers (member count, inflated sizes, compression ratio above a size floor)
so a zip bomb is rejected before python-docx or openpyxl inflate it.

XML parts of those containers may name a DTD (OpenOffice manifests and macro
parts, XHTML and SVG in EPUBs do): no parser here loads it (lxml's ``load_dtd``
and network access are off by default; expat never reads external DTDs), so
that is harmless and the file is read. A DTD whose internal subset declares
entities is how entity-expansion bombs ("billion laughs", quadratic blow-up)
and external-entity (XXE) reads are delivered: such a part is refused.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import zipfile
from pathlib import Path
from typing import Any, NoReturn

from common.encodings import OLE_MAGIC
from common.settings import ParseSettings
from common.zipguard import zip_problem
from parsers.errors import Category, ParseError
from parsers.formats import (
    ARCHIVE_EXTENSIONS,
    BINARY_FORMATS,
    EXTENSION_FORMATS,
    MAIN_PARTS,
    ZIP_FORMATS,
)

# What the format table says (``FormatSpec.binary``, ``container``, ``main_part``):
# ZIP containers by the format they hold (all of them get the bomb and DTD checks),
# the part every OOXML container of a kind has, the formats whose bytes are binary.
_OFFICE_MAIN_PART = MAIN_PARTS
_BINARY_FORMATS = BINARY_FORMATS
# The ``mimetype`` member of OpenDocument and EPUB containers (templates add a suffix).
_ZIP_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/epub+zip": "epub",
}
# ZIP containers of kinds no backend reads, told apart by a member only they have:
# "dir/" matches a folder, ".ext" a suffix, anything else a member's last path part.
_IWORK = "Apple iWork file: not read; export it to PDF, DOCX, XLSX or PPTX to index it"
_UNREAD_ZIPS = (
    (".fdseq", "XPS document: not read; print it to PDF to index it"),
    ("Index.zip", _IWORK),
    ("Document.iwa", _IWORK),
    ("index.xml", _IWORK),
    ("index.apxl", _IWORK),
    ("theme/", "Office theme: holds no document text"),
    ("AndroidManifest.xml", "Android package (code, not a document): not indexed"),
    (
        "MANIFEST.MF",
        "Java archive (code, not a document): not indexed; exclude *.jar/*.war/*.ear",
    ),
)
_ODF_OTHER = "application/vnd.oasis.opendocument."
_STAROFFICE = "application/vnd.sun.xml."
# OLE2 (97-2003) containers by the stream that names their kind.
_OLE_STREAMS = (
    ("worddocument", "doc"),
    ("workbook", "xls"),
    ("book", "xls"),
    ("powerpoint document", "ppt"),
    ("visiodocument", "vsd"),
)


def ole_format(streams: set[str]) -> str | None:
    """The kind, "doc", "xls", "ppt" or "vsd", that the main stream among ``streams``
    (lower-cased paths, ``olefile``'s ``listdir`` joined by '/') makes it; else None."""
    return next((fmt for stream, fmt in _OLE_STREAMS if stream in streams), None)


_HEIC_BRANDS = (b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1")
FORMATS_HELP = "run `corpusflow formats` for the list of supported kinds"
ENCRYPTED_HELP = "corpusflow cannot read it: exclude it (source.exclude) or index a decrypted copy"
# For what parsers.decrypt opens (PDF; OOXML, Word and Excel 97-2003 files).
PASSWORD_HELP = (
    "if you have its password, add a parse.passwords rule for its path and run "
    "`corpusflow retry-failed`; otherwise exclude it (source.exclude) or index a decrypted copy"
)
# Parts that inflate to less than this are harmless whatever their ratio (a blank EMF
# picture compresses 667:1 and inflates to 1.4 MiB): container bombs are judged by the
# inflated sizes (this floor, the total cap), the ratio only above the floor.
OFFICE_RATIO_FLOOR = 8 * 1024 * 1024
# Small members read to sniff a container (mimetype, manifests) are capped at this.
_SNIFF_LIMIT = 64 * 1024


def _read_member(zf: zipfile.ZipFile, name: str, limit: int = _SNIFF_LIMIT) -> bytes:
    try:
        with zf.open(name) as fh:
            return fh.read(limit)
    except KeyError:
        return b""
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
        if zf.getinfo(name).flag_bits & 0x1:
            raise ParseError(
                Category.ENCRYPTED, f"ZIP container member {name} is encrypted; {ENCRYPTED_HELP}"
            ) from exc
        raise ParseError(Category.CORRUPT, f"container part {name} cannot be read: {exc}") from exc


def _epub_rootfile(zf: zipfile.ZipFile, names: set[str]) -> bool:
    """An EPUB without (or with a misplaced) mimetype: container.xml naming an OPF."""
    container = next((n for n in names if n.lower() == "meta-inf/container.xml"), None)
    if container is None:
        return False
    found = re.search(rb'full-path\s*=\s*["\']([^"\']+\.opf)["\']', _read_member(zf, container))
    return found is not None and found.group(1).decode("utf-8", "replace") in names


def _zip_format(path: Path, named: str | None, ext: str) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            mimetype = ""
            if "mimetype" in names:
                mimetype = _read_member(zf, "mimetype", 256).decode("ascii", "replace").strip()
            # EPUB by its mimetype wherever the member sits, or by container.xml naming
            # an OPF (no mimetype, or a variant such as iBooks' application/x-ibooks+zip).
            epub = mimetype == "application/epub+zip" or (
                not mimetype.startswith((_ODF_OTHER, _STAROFFICE)) and _epub_rootfile(zf, names)
            )
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
        raise ParseError(Category.CORRUPT, f"broken ZIP container: {exc}") from exc
    if epub:
        return "epub"
    for prefix, fmt in _ZIP_MIMETYPES.items():
        if mimetype.startswith(prefix):  # templates: "...text-template"
            return fmt
    if mimetype.startswith((_ODF_OTHER, _STAROFFICE)):
        kind = mimetype.rsplit(".", 1)[-1]
        _unsupported_zip(ext, f"OpenDocument/StarOffice {kind} ({mimetype}): not read")
    if named in _OFFICE_MAIN_PART and any(n.startswith(_OFFICE_MAIN_PART[named]) for n in names):
        return named
    for fmt, prefix in _OFFICE_MAIN_PART.items():
        if any(n.startswith(prefix) for n in names):
            return fmt
    for member, why in _UNREAD_ZIPS:
        if any(_zip_member_is(n, member) for n in names):
            _unsupported_zip(ext, why)
    if named in ZIP_FORMATS:
        raise ParseError(Category.CORRUPT, f"file named {ext} is a ZIP without {named} parts")
    if ext in ARCHIVE_EXTENSIONS:
        _unsupported_zip(
            ext,
            "ZIP archive: ingest the folder that holds it, and its members are indexed one by "
            "one as archive.zip/member",
        )
    _unsupported_zip(ext, f"ZIP container of an unknown kind: not read; {FORMATS_HELP}")


def _zip_member_is(name: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        return name.startswith(pattern)
    if pattern.startswith("."):
        return name.lower().endswith(pattern)
    return name.rsplit("/", 1)[-1] == pattern


def _unsupported_zip(ext: str, why: str) -> NoReturn:
    raise ParseError(Category.UNSUPPORTED, f"{why} ({ext or 'no extension'})")


def _ole_encryption(ole: object, streams: set[str], fmt: str | None) -> str | None:
    """Why an OLE2 Office file cannot be read without its password, or None.

    ``EncryptionInfo`` + ``EncryptedPackage``: a password-protected DOCX/XLSX/PPTX
    (MS-OFFCRYPTO); ``DRMContent``: rights-managed (IRM). Legacy binaries carry a
    flag in their own stream: Word's FIB ``fEncrypted`` bit, Excel's FILEPASS record
    in the workbook globals, PowerPoint's encrypted CurrentUserAtom token or
    encrypted UserEditAtom (as msoffcrypto-tool detects them).
    """
    if "encryptedpackage" in streams and "encryptioninfo" in streams:
        return "password-protected Office file (encrypted OOXML package)"
    if any(s.endswith("drmcontent") for s in streams):
        return "rights-managed (IRM/DRM) Office file"
    read = ole.openstream  # type: ignore[attr-defined]
    try:
        if fmt == "doc" and "worddocument" in streams:
            fib = read("worddocument").read(12)
            if len(fib) == 12 and struct.unpack_from("<H", fib, 10)[0] & 0x0100:
                return "password-protected Word 97-2003 file"
        if fmt == "xls":
            book = "workbook" if "workbook" in streams else "book"
            if book in streams and _biff_filepass(read(book).read(1 << 20)):
                return "password-protected Excel 97-2003 file"
        if fmt == "ppt" and ("encryptedsummary" in streams or _ppt_encrypted(ole, streams)):
            return "password-protected PowerPoint 97-2003 file"
    except (OSError, struct.error):
        return None  # a broken stream is the parser's to report
    return None


def _biff_filepass(data: bytes) -> bool:
    """A FILEPASS record (0x002F) before the end of the workbook globals (EOF 0x000A)."""
    pos = 0
    while pos + 4 <= len(data):
        kind, size = struct.unpack_from("<HH", data, pos)
        if kind == 0x002F:
            return True
        if kind == 0x000A:
            return False
        pos += 4 + size
    return False


def _ppt_encrypted(ole: object, streams: set[str]) -> bool:
    if "current user" not in streams or "powerpoint document" not in streams:
        return False
    read = ole.openstream  # type: ignore[attr-defined]
    atom = read("current user").read(20)
    if len(atom) < 20:
        return False
    token, offset = struct.unpack_from("<II", atom, 12)
    if token == 0xF3D1C4DF:  # headerToken of an encrypted document
        return True
    doc = read("powerpoint document")
    doc.seek(offset)
    header = doc.read(8)
    # UserEditAtom (0x0FF5) of 0x20 bytes: it carries encryptSessionPersistIdRef.
    return (
        len(header) == 8
        and struct.unpack_from("<H", header, 2)[0] == 0x0FF5
        and struct.unpack_from("<I", header, 4)[0] == 0x20
    )


def _ole_format(path: Path, named: str | None, ext: str) -> str:
    import olefile

    try:
        with olefile.OleFileIO(str(path)) as ole:
            # Stream names are case-insensitive in OLE2 (MS-CFB); compared lower-cased.
            streams = {"/".join(entry).lower() for entry in ole.listdir()}
            fmt = ole_format(streams)
            if named in {"doc", "ppt", "xls"} and fmt is None:
                fmt = named
            encrypted = _ole_encryption(ole, streams, fmt)
    except Exception as exc:  # olefile raises OSError, ValueError, ... on broken files
        if named in {"msg", "doc", "ppt", "xls"}:
            return named  # its parser reports what is broken
        raise ParseError(Category.CORRUPT, f"broken OLE2 container: {exc}") from exc
    if encrypted:
        unopenable = "rights-managed" in encrypted or "PowerPoint" in encrypted
        help_ = ENCRYPTED_HELP if unopenable else PASSWORD_HELP
        raise ParseError(Category.ENCRYPTED, f"{encrypted} ({ext or 'no extension'}); {help_}")
    if named == "msg" or (fmt is None and any(s.startswith("__substg1.0_") for s in streams)):
        return "msg"
    if fmt is not None:
        return fmt
    raise ParseError(
        Category.UNSUPPORTED, f"OLE2 file of an unknown kind ({ext or 'no extension'})"
    )


def _is_bmp(head: bytes) -> bool:
    """A real BMP header, not text that starts with "BM" ("BMW ...")."""
    if len(head) < 30 or not head.startswith(b"BM"):
        return False
    reserved1, reserved2, offset, dib = struct.unpack_from("<HHII", head, 6)
    return (
        reserved1 == 0
        and reserved2 == 0
        and dib in (12, 40, 52, 56, 64, 108, 124)
        and 14 + dib <= offset < 1 << 26
    )


# Excel 2.x-4.x worksheets are bare BIFF streams (no OLE2): a BOF record first.
_BIFF_BOF = (b"\x09\x00", b"\x09\x02", b"\x09\x04")


def _is_biff(head: bytes) -> bool:
    if len(head) < 8 or head[:2] not in _BIFF_BOF:
        return False
    size, _version, kind = struct.unpack_from("<HHH", head, 2)
    return 4 <= size <= 16 and kind in (0x10, 0x20, 0x40, 0x100)


# A Word for Windows 2.0 file's first bytes (its FIB's wIdent).
_WORD2_MAGIC = b"\xdb\xa5"
# Word/Excel 2003 XML ("WordprocessingML", "SpreadsheetML 2003") saved under .doc/.xls:
# LibreOffice, which converts those formats, reads them too.
_OFFICE_2003_XML = re.compile(rb'<\?mso-application\s+progid="(Word\.Document|Excel\.Sheet)"\s*\?>')


def _office_2003_xml(head: bytes) -> str | None:
    found = _OFFICE_2003_XML.search(head[:4096])
    if found is None:
        return None
    return "doc" if found.group(1) == b"Word.Document" else "xls"


def _image_format(head: bytes) -> str | None:
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"GIF8")):
        return "image"
    if _is_bmp(head):
        return "image"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image"
    if head[4:8] == b"ftyp" and head[8:12] in _HEIC_BRANDS:
        return "heic"
    return None


def _is_metafile(head: bytes, named: str | None) -> bool:
    """A Windows metafile: EMF (an EMR_HEADER record with its " EMF" signature; Mac
    writers embed a PDF in one, so this is asked before "%PDF-" is looked for), a
    placeable WMF, or a plain WMF header in a file named as a metafile."""
    if head[:4] == b"\x01\x00\x00\x00" and head[40:44] == b" EMF":
        return True
    if head[:4] == b"\xd7\xcd\xc6\x9a":
        return True
    return named == "metafile" and head[:6] in (
        b"\x01\x00\x09\x00\x00\x03",
        b"\x02\x00\x09\x00\x00\x03",
    )


def is_pdf_head(head: bytes) -> bool:
    """Whether a file's first bytes say PDF: "%PDF-" within the first KiB (mail gateways
    and some writers put bytes before it), unless a metafile carries an embedded PDF."""
    return b"%PDF-" in head[:1024] and not _is_metafile(head, None)


def sniff_format(path: Path, head: bytes) -> str:
    """The format of a file from its bytes, using the extension to break ties."""
    ext = path.suffix.lower()
    named = EXTENSION_FORMATS.get(ext)
    if _is_metafile(head, named):
        return "metafile"
    if is_pdf_head(head):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_format(path, named, ext)
    image = _image_format(head)
    if image is not None:
        return image
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith(OLE_MAGIC[:4]):
        return _ole_format(path, named, ext)
    if _is_biff(head):
        return "xls"  # Excel 2-4: LibreOffice reads BIFF2-5
    if named == "doc" and head[:2] == _WORD2_MAGIC:
        return "doc"  # Word for Windows 2.0 (before OLE2): LibreOffice reads it
    if named in ("doc", "xls") and (office_xml := _office_2003_xml(head)) is not None:
        return office_xml
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
        infos,
        settings.zip_max_members,
        settings.zip_max_uncompressed_mb,
        settings.zip_max_ratio,
        ratio_floor=OFFICE_RATIO_FLOOR,
    )
    if problem:
        raise ParseError(Category.CORRUPT, problem)


def check_container(path: Path, fmt: str) -> None:
    """An office/OpenDocument/EPUB container whose sizes passed ``check_zip``: refuse
    encrypted ones and XML parts whose DTD declares entities."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if fmt in ("odt", "ods", "odp") and b"encryption-data" in _read_member(
            zf, "META-INF/manifest.xml", 1 << 20
        ):
            raise ParseError(
                Category.ENCRYPTED, f"password-protected OpenDocument file; {ENCRYPTED_HELP}"
            )
        _check_xml_parts(zf, infos)


# The prolog of an XML part (declaration, comments, processing instructions) is
# read up to this many bytes; a DOCTYPE must appear there, before the root.
_PROLOG_LIMIT = 64 * 1024
_PROLOG_SKIP = re.compile(rb"\s+|<\?.*?\?>|<!--.*?-->", re.S)
_ROOT_START = re.compile(rb"<[A-Za-z_:\x80-\xff]")
# Tokens of a DOCTYPE: quoted literals and comments (skipped whole), subset brackets, its end.
_DOCTYPE_TOKEN = re.compile(rb"\"[^\"]*\"|'[^']*'|<!--.*?-->|<\?.*?\?>|[\[\]>]", re.S)
_ENTITY_DECL = re.compile(rb"<!ENTITY", re.I)
XML_XHTML_PARTS = (".xml", ".rels", ".vml", ".xhtml", ".opf", ".ncx", ".svg", ".html", ".htm")


def xml_dtd_problem(head: bytes, complete: bool) -> str | None:
    """Why an XML document starting with ``head`` must not be parsed, or None.

    A DOCTYPE that only names its DTD (``PUBLIC``/``SYSTEM`` identifiers) or whose
    internal subset declares no entity is fine: parsers here never load external
    DTDs and have nothing to expand. Entity declarations in the internal subset
    are refused (entity expansion, external entities). ``complete`` says ``head``
    is the whole document; a prolog or DOCTYPE that runs past a truncated head is
    refused: no honest part has one that long.
    """
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head.decode("utf-16", errors="ignore").encode("utf-8")
    elif head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    pos = 0
    while (m := _PROLOG_SKIP.match(head, pos)) is not None and m.end() > pos:
        pos = m.end()
    if not head[pos : pos + 9].upper().startswith(b"<!DOCTYPE"):
        if _ROOT_START.match(head, pos) or complete:
            return None
        return "has a prolog longer than any real document part"
    subset = None
    start = None
    for token in _DOCTYPE_TOKEN.finditer(head, pos + 9):
        mark = token.group(0)
        if mark == b"[" and start is None:
            start = token.end()
        elif mark == b"]" and start is not None and subset is None:
            subset = head[start : token.start()]
        elif mark == b">" and (start is None or subset is not None):
            if subset is not None and _ENTITY_DECL.search(subset):
                return "declares entities in its DTD (entity expansion / external entity attack)"
            return None
    return "has a DTD that cannot be checked (unterminated or too long)"


def _check_xml_parts(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    for info in infos:
        if info.is_dir() or not info.filename.lower().endswith(XML_XHTML_PARTS):
            continue
        head = _read_member(zf, info.filename, _PROLOG_LIMIT)
        problem = xml_dtd_problem(head, complete=len(head) < _PROLOG_LIMIT)
        if problem:
            raise ParseError(
                Category.CORRUPT, f"office part {info.filename} {problem}; refused before parsing"
            )


def open_pdf(path: Path, password: str | None = None, locked: str = PASSWORD_HELP) -> Any:
    """The PDF opened with pdfium (with ``password``, if given); ``encrypted`` with
    ``locked`` as the advice when the password is missing or wrong, ``corrupt`` when pdfium
    cannot open it."""
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as exc:
        # pdfium's error code is its last error: a file it fails on without setting one
        # (a broken page tree) reads the code of the file before it, in a parser child
        # that opened an encrypted one. Password-protected only when the file says so.
        if getattr(exc, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            if _declares_encryption(path):
                raise ParseError(
                    Category.ENCRYPTED, f"PDF is password-protected; {locked}"
                ) from None
            raise ParseError(
                Category.CORRUPT, "PDF cannot be opened: pdfium cannot read its structure"
            ) from exc
        raise ParseError(Category.CORRUPT, f"PDF cannot be opened: {exc}") from exc


def _declares_encryption(path: Path) -> bool:
    """Whether the PDF names an encryption dictionary (``/Encrypt``, in its trailer or
    its cross-reference stream's dictionary, which is never itself compressed)."""
    import mmap

    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b"/Encrypt") >= 0
    except (OSError, ValueError):  # unreadable or empty: the pdfium error stands
        return True


def check_pdf(path: Path, settings: ParseSettings) -> int:
    """Open the PDF once: detect encryption and corruption, enforce the page limit."""
    pdf = open_pdf(path)
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
    elif fmt in ZIP_FORMATS:
        check_container(path, fmt)
    return fmt
