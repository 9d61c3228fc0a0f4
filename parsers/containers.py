"""Container fix-ups that let docling's own backends read files it would misdetect.

docling decides a ZIP's kind from its first bytes: an EPUB is an EPUB only when its
``mimetype`` member comes first and is stored (the EPUB OCF rule many real
e-books break); otherwise the ZIP is taken for a bundle of documents and the
conversion fails ("The source contains multiple documents"). ``epub_mimetype_first``
rewrites such a container in memory with that member first, so the file reaches
docling's EPUB backend. The caller has passed ``parsers.safety``'s checks, so the
container's inflated size is bounded.
"""

from __future__ import annotations

import io
import re
import zipfile

EPUB_MIMETYPE = b"application/epub+zip"


def epub_mimetype_first(data: bytes) -> bytes:
    """``data`` (an EPUB) with a stored ``mimetype`` member first; itself when it has one."""
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        infos = zin.infolist()
        first = infos[0] if infos else None
        if (
            first is not None
            and first.filename == "mimetype"
            and first.compress_type == zipfile.ZIP_STORED
            and zin.read(first).strip() == EPUB_MIMETYPE
        ):
            return data
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
            zout.writestr(zipfile.ZipInfo("mimetype"), EPUB_MIMETYPE, zipfile.ZIP_STORED)
            for info in infos:
                if info.filename == "mimetype" or info.is_dir():
                    continue
                zout.writestr(info.filename, zin.read(info))
    return out.getvalue()


# An OpenDocument list's header (``text:list-header``: its first entry, shown without a
# bullet or number, which may hold paragraphs and a nested list) is left out by docling's
# OpenDocument reader, which reads list items only.
_ODF_LIST_HEADER = re.compile(rb"<(/?)([A-Za-z_][\w.-]*):list-header(?=[\s/>])")


def odf_list_headers_as_items(data: bytes) -> bytes:
    """``data`` (an OpenDocument file) with each list header read as a list item, so that
    its text is kept; itself when its ``content.xml`` has none."""
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        try:
            content = zin.read("content.xml")
        except KeyError:
            return data
        fixed = _ODF_LIST_HEADER.sub(rb"<\1\2:list-item", content)
        return data if fixed == content else _with_member(zin, "content.xml", fixed)


def _with_member(zin: zipfile.ZipFile, name: str, body: bytes) -> bytes:
    """The container ``zin`` written again with member ``name`` holding ``body``, every
    other member as it was (same order, names and compression)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(
                info, body if info.filename == name else zin.read(info), info.compress_type
            )
    return out.getvalue()


# The main part's content type of a macro-enabled file, a template or a slide show
# (.docm, .dotx, .dotm, .pptm, .potx, .potm, .ppsx, .ppsm) and that of the plain
# document whose parts it shares. python-docx and python-pptx, under docling's and
# unstructured's Word and PowerPoint readers, refuse every main part but the plain
# one's ("... is not a Word file, content type is ...macroEnabled.main+xml").
_WML = "application/vnd.openxmlformats-officedocument.wordprocessingml"
_PML = "application/vnd.openxmlformats-officedocument.presentationml"
_PLAIN_MAIN = {  # lower case: MIME types are case-insensitive
    kind.lower(): plain
    for kind, plain in {
        "application/vnd.ms-word.document.macroEnabled.main+xml": f"{_WML}.document.main+xml",
        f"{_WML}.template.main+xml": f"{_WML}.document.main+xml",
        "application/vnd.ms-word.template.macroEnabledTemplate.main+xml": (
            f"{_WML}.document.main+xml"
        ),
        "application/vnd.ms-powerpoint.template.macroEnabled.main+xml": (
            f"{_PML}.presentation.main+xml"
        ),
        f"{_PML}.template.main+xml": f"{_PML}.presentation.main+xml",
        f"{_PML}.slideshow.main+xml": f"{_PML}.presentation.main+xml",
        "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml": (
            f"{_PML}.presentation.main+xml"
        ),
    }.items()
}
_CONTENT_TYPE = re.compile(r"""ContentType\s*=\s*(["'])(.+?)\1""")  # either quote


def _plain_content_type(found: re.Match[str]) -> str:
    plain = _PLAIN_MAIN.get(found.group(2).lower())
    return f'ContentType="{plain}"' if plain else found.group(0)


def main_part_as_document(data: bytes) -> bytes:
    """``data`` (a Word or PowerPoint package) with its main part typed as a plain
    document's, so that a macro-enabled file, a template or a slide show is read as
    the document it holds (macros are never run: they are parts nobody reads);
    itself when it is a plain document already."""
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        try:
            types = zin.read("[Content_Types].xml").decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            return data
        fixed = _CONTENT_TYPE.sub(_plain_content_type, types)
        if fixed == types:
            return data
        return _with_member(zin, "[Content_Types].xml", fixed.encode("utf-8"))


# The package relationship to the main part of an ISO/IEC 29500 Strict document; a
# Transitional one (what docling's readers, python-docx and openpyxl know) uses
# http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument.
_STRICT_MAIN = b"http://purl.oclc.org/ooxml/officeDocument/relationships/officeDocument"


def is_strict_ooxml(data: bytes) -> bool:
    """Whether this DOCX/XLSX/PPTX is Strict OOXML (its readers see no parts in it)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf, zf.open("_rels/.rels") as fh:
            return _STRICT_MAIN in fh.read(64 * 1024)
    except (KeyError, zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError):
        return False


def is_binary_workbook(data: bytes) -> bool:
    """Whether this Excel package is a binary workbook (.xlsb: ``xl/workbook.bin``, no
    XML parts for openpyxl)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            zf.getinfo("xl/workbook.bin")
            return True
    except (KeyError, zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError):
        return False


def libreoffice_resave(data: bytes, source: str, target: str, timeout_s: int = 120) -> bytes:
    """``data`` (a ``.source`` file) saved again as ``.target`` by LibreOffice, through
    docling's hardened converter (throwaway profile, macros off, process-group kill):
    Strict OOXML as Transitional, a binary workbook as XLSX."""
    import tempfile
    from pathlib import Path

    from docling.backend.docx.drawingml.utils import convert_to_modern_format

    with tempfile.TemporaryDirectory(prefix="corpusflow-resave-") as tmp:
        # The input lives apart from the converter's output folder: same name, maybe the same suffix.
        path = Path(tmp) / f"input.{source}"
        path.write_bytes(data)
        return convert_to_modern_format(path, source, target, timeout_s=timeout_s).getvalue()
