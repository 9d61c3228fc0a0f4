"""The format table: every file kind corpusflow reads, its backend and what it needs.

One row per format, and everything format-specific lives in the row: how the
sniffer (``parsers.safety``) recognises it (``binary``, ``container``,
``main_part``), which backend reads it and with which per-format options
(``options``: docling's input format and backend class, the text reader, the
unstructured partitioner, a fix-up before conversion), its fallback, what it needs
installed, and its version in the parser fingerprint (``parsers.fingerprint``).
Backends (``parsers.backend.Backend``) never branch on a format's name. Adding a
format is one row here and, where no existing backend reads it, one backend module.

``backend`` and ``fallback`` name a ``Backend`` object as ``"module:attribute"``
(``parsers.backend.load_backend``); it is imported only when a file of that format
is parsed (or a fingerprint is taken), so
this module stays free of heavy imports (the sniffer, the CLI's ``formats`` command
and the docs read it).

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

from common import zipguard

DOCLING = "parsers.docling_backend:BACKEND"
UNSTRUCTURED = "parsers.unstructured_backend:BACKEND"
TEXT = "parsers.text_backend:BACKEND"
PDF = "parsers.pdf:PDF"
IMAGE = "parsers.pdf:IMAGE"
DRAWING = "parsers.drawing:DRAWING"

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
    # Bump when this format's parse output changes for the same bytes and settings
    # (also when one of its options changes): its documents, and only they, are
    # parsed again (parsers.fingerprint.parser_fingerprints).
    version: str = "1"
    # Bump when a release reads files of this format that it failed before, while every
    # file it read parses as before: the documents that failed (any format) are tried
    # once more, and no indexed one is parsed again (corpusflow.fingerprints.failure_judge).
    reads: str = "1"
    # Binary data: a file named as this format whose bytes are not is corrupt
    # (text formats, and MHTML, are taken at their name and decoded).
    binary: bool = False
    # "zip": a ZIP container whose members the pre-checks inspect (bombs, DTDs, encryption).
    container: str = ""
    # The member folder every container of this kind has (OOXML: "word/"); the sniffer
    # tells OOXML kinds apart by it.
    main_part: str = ""
    # What the backend (and fallback) need to know about this format, as (key, value)
    # pairs: see each backend module for the keys it reads.
    options: tuple[tuple[str, str], ...] = ()

    def missing(self) -> str | None:
        """What is missing on this machine to read this format, or None."""
        if self.requirement is None:
            return None
        return _call(self.requirement)()

    def option(self, key: str, default: str = "") -> str:
        """The row's option ``key`` for its backends, ``default`` when not set."""
        return next((v for k, v in self.options if k == key), default)


def _options(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def _call(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    return cast(Callable[..., Any], getattr(importlib.import_module(module), attr))


def resolve(target: str) -> Callable[..., Any]:
    """The function named ``module:function`` (requirements, options that name one)."""
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

# docling's own readers that replace its defaults (docling_backend reads the option).
# Word: no word split by a formatting run; headers, footers, notes, altChunk parts read.
_WORDS = "parsers.viewer_text:ViewerDocxBackend"
# PowerPoint: charts read in full; layout/master text, SmartArt, speaker notes read.
_CHARTS = "parsers.viewer_text:ViewerPptxBackend"
_CELLS = "parsers.viewer_text:ViewerXlsxBackend"  # cells as formatted, comments, text boxes
_STRICT = "parsers.docling_backend:plain_ooxml"
_ODF = "parsers.formats:odfdo_missing"

FORMATS: tuple[FormatSpec, ...] = (
    FormatSpec(
        "pdf",
        (".pdf",),
        PDF,
        "PDF: text layer with headings and tables; OCR for scans",
        # 2: OCR never replaces a page's text layer with less text.
        # 3: tables continued on the next page are joined (parsers.table_joins).
        # 4: fewer false headings: code in a monospace face, upright text, lines ending
        #    in a colon or a broken word, labels above tick values, and running heads
        #    that spell an outline title stay text (issue #32).
        # 5: a side heading in one text column is no table cell for what shares its
        #    row in the next column (a chart's tick values); a page docling's parser
        #    reads as the symbols of a wrong glyph mapping, and a file it cannot load,
        #    are read with pdfium; ".notdef" glyph names read as spaces (issue #32).
        # 6: fewer false headings: text set aslant, one-letter labels, page numbers,
        #    formulas in a math face, lines smaller than the body over nothing smaller,
        #    bold lines of a paragraph, numbered list items, captions with their text,
        #    bylines, display formulas, a title repeated atop its continuation page;
        #    body text opening with '#' is escaped in the Markdown (issue #32).
        # 7: a title the outline names is the heading where its bookmark points, not in
        #    a contents list; a page with a thin text layer keeps it and OCR adds only
        #    its pictures' text, never headings; a page's one large line is a heading
        #    (a divider slide); authors over their affiliations, captions numbered
        #    without a colon ("图2 ..."), and lines at body size with a clause break
        #    ("，") or a web address in them are not; where the outline lists the
        #    headings, neither is a bold line at the body's size in none of the
        #    outline headings' styles; a short line a little larger than the body over
        #    a list or paragraph is a side heading in Chinese too; a divider slide's
        #    title over nothing but the slide's number is a heading; a line's size is the
        #    size its text is set at in points, not its glyphs' ink (browser prints read
        #    "use" smaller than "Type"), a browser's h3 (1.17 em) is larger, and labels
        #    side by side in a diagram are not headings however large (issue #32).
        # 8: short lines the writer broke (a list whose bullets are drawn shapes, one
        #    item per line) are paragraphs of their own, never headings, so Chinese items
        #    no longer run together; a section heading right above or below a table
        #    without vertical borders stays a heading; a cell keeps "DATABASE_URL" whole
        #    where a browser wrote it in runs (issue #32).
        # 9: a gap where Chinese or Japanese meets Latin letters or digits is a space
        #    ("基于 LightGBM 的"), as pdfium reads the page; a short line above a longer one
        #    that had room for its first word was broken by the writer (issue #32).
        # 10: the body text is the prose, not the code listings that may hold most of a
        #    guide's characters, so its numbered steps and code set larger than the prose
        #    are not headings (issue #32).
        # 11: a run of Latin letters too long for a word takes the spaces pdfium reads in
        #    it ("beensuccessfullytestedwith": XeLaTeX, English in a CJK font) (issue #32).
        # 12: bold lines at the body's size that the document's own contents list names
        #    are the level its outline leaves out (pandoc's LaTeX bookmarks stop above
        #    subsubsections) (issue #32).
        # 13: a glyph mapped to its radical forms and the ideograph at once ("⺫⽬目" for
        #    目, macOS prints) is read as one character, not three (issue #32).
        # 14: two lines at one left that each open with a label ("训练数据：5002条") are
        #    items of their own where no full line gives the column's edge (issue #32).
        # 15: a step of a sixth or more in the size the words are set at, in one face,
        #    starts a block: "2.2.2 账户" at 12 pt right under 10 pt bold items (issue #32).
        version="15",
        binary=True,
    ),
    FormatSpec(
        "docx",
        (".docx", ".docm", ".dotx", ".dotm"),
        DOCLING,
        "Word (headers, footers, footnotes and altChunk parts read; Strict OOXML converted"
        " by LibreOffice first)",
        fallback=UNSTRUCTURED,
        # 2: formatting runs never split a word; ruby keeps its base text.
        # 3: headers, footers, footnotes and altChunk parts in the text (issue #32).
        # 4: RTF and nested-DOCX altChunk parts read too; embedded objects read.
        # 5: OLE Packager objects (any file) and Acrobat-embedded PDFs read.
        # 6: text moved with tracked changes (w:moveTo) read at its new place.
        # 7: table rows and cells inside content controls (repeating sections, drop-downs);
        #    embedded macro-enabled packages (.docm, .pptm objects) read.
        version="7",
        # reads 2: macro-enabled files and templates (.docm, .dotx, .dotm).
        reads="2",
        binary=True,
        container="zip",
        main_part="word/",
        options=_options(
            docling="DOCX", docling_backend=_WORDS, prepare=_STRICT, unstructured="docx"
        ),
    ),
    FormatSpec(
        "pptx",
        (".pptx", ".pptm", ".ppsx", ".potx", ".ppsm", ".potm"),
        DOCLING,
        "PowerPoint (charts read as tables; layout/master text, SmartArt and speaker notes"
        " read; Strict OOXML converted by LibreOffice first)",
        fallback=UNSTRUCTURED,
        # 2: layout/master shapes, SmartArt and notes in the text (issue #32).
        # 3: embedded objects (worksheets, documents, decks; OLE 97-2003 ones too) read.
        # 4: SmartArt on layouts and masters; OLE Packager objects and Acrobat PDFs read.
        # 5: a slide's footer placeholder text read once per deck.
        version="5",
        # reads 2: templates and slide shows (.potx, .ppsx and their macro forms).
        reads="2",
        binary=True,
        container="zip",
        main_part="ppt/",
        options=_options(
            docling="PPTX", docling_backend=_CHARTS, prepare=_STRICT, unstructured="pptx"
        ),
    ),
    FormatSpec(
        "xlsx",
        (".xlsx", ".xlsm", ".xltx", ".xltm", ".xlsb"),
        DOCLING,
        "Excel (Strict OOXML and binary .xlsb workbooks converted by LibreOffice first)",
        fallback=UNSTRUCTURED,
        # 2: cells as formatted (3%, 6:15 AM, $1,599.99); 3: comments, text boxes, chart titles;
        # 4: the stored number after a shown text that hides it (3% (0.025))
        # 5: conditional number formats ([>999]#,"K"), scaling commas after decimals
        version="5",
        # reads 2: binary workbooks (.xlsb), through LibreOffice.
        reads="2",
        binary=True,
        container="zip",
        main_part="xl/",
        options=_options(
            docling="XLSX", docling_backend=_CELLS, prepare=_STRICT, unstructured="xlsx"
        ),
    ),
    # docling converts the 97-2003 forms (and RTF) to OOXML with LibreOffice, then
    # reads them with the same backend as the OOXML form.
    FormatSpec(
        "doc",
        (".doc", ".dot"),
        DOCLING,
        "Word 97-2003, 6.0/95 and 2.0",
        "LibreOffice",
        _LO,
        version="7",  # as docx 7
        reads="2",  # Word for Windows 2.0 files (not OLE2)
        binary=True,
        options=_options(docling="DOC", docling_backend=_WORDS),
    ),
    FormatSpec(
        "ppt",
        (".ppt", ".pps", ".pot"),
        DOCLING,
        "PowerPoint 97-2003",
        "LibreOffice",
        _LO,
        version="5",  # as pptx 5
        binary=True,
        options=_options(docling="PPT", docling_backend=_CHARTS),
    ),
    FormatSpec(
        "xls",
        (".xls", ".xlt"),
        DOCLING,
        "Excel 97-2003 and 2.x-4.x (BIFF)",
        "LibreOffice",
        _LO,
        version="5",  # as xlsx 5
        binary=True,
        options=_options(docling="XLS", docling_backend=_CELLS),
    ),
    # Visio drawings and Windows metafiles: LibreOffice Draw exports the pages as PDF, read
    # by the PDF path (its text layer; OCR where a picture holds no text).
    FormatSpec(
        "vsdx",
        (".vsdx", ".vsdm"),
        DRAWING,
        "Visio drawing (exported to PDF by LibreOffice, read as a PDF)",
        "LibreOffice",
        _LO,
        binary=True,
        container="zip",
        main_part="visio/",
    ),
    FormatSpec(
        "vsd",
        (".vsd",),
        DRAWING,
        "Visio 2003-2010 drawing (exported to PDF by LibreOffice, read as a PDF)",
        "LibreOffice",
        _LO,
        binary=True,
    ),
    FormatSpec(
        "metafile",
        (".emf", ".wmf"),
        DRAWING,
        "Windows metafile picture (EMF/WMF, exported to PDF by LibreOffice, read as a PDF)",
        "LibreOffice",
        _LO,
        binary=True,
    ),
    FormatSpec(
        "odt",
        (".odt", ".ott"),
        DOCLING,
        "OpenDocument text",
        "odfdo",
        _ODF,
        binary=True,
        container="zip",
        # 2: list headers (a list's unbulleted first entry) are read, as list items.
        version="2",
        options=_options(docling="ODT", prepare="parsers.docling_backend:odf_list_headers"),
    ),
    FormatSpec(
        "ods",
        (".ods", ".ots"),
        DOCLING,
        "OpenDocument spreadsheet",
        "odfdo",
        _ODF,
        binary=True,
        container="zip",
        options=_options(docling="ODS"),
    ),
    FormatSpec(
        "odp",
        (".odp", ".otp"),
        DOCLING,
        "OpenDocument presentation",
        "odfdo",
        _ODF,
        binary=True,
        container="zip",
        options=_options(docling="ODP"),
    ),
    FormatSpec(
        "epub",
        (".epub",),
        DOCLING,
        "EPUB e-book",
        # 2: found by its mimetype member or container.xml wherever they sit in the ZIP.
        version="2",
        binary=True,
        container="zip",
        # docling reads an EPUB as one only with its mimetype member first.
        options=_options(docling="EPUB", prepare="parsers.docling_backend:epub_mimetype_first"),
    ),
    FormatSpec(
        "html",
        (".html", ".htm", ".xhtml"),
        DOCLING,
        "HTML",
        fallback=UNSTRUCTURED,
        text=True,
        # the page's own charset declaration is rewritten when it is decoded to UTF-8
        options=_options(docling="HTML", unstructured="html", meta_charset="yes"),
    ),
    FormatSpec(
        "mhtml",
        (".mhtml", ".mht"),
        DOCLING,
        "web archive (MHTML)",
        options=_options(docling="MHTML"),
    ),
    FormatSpec(
        "vtt",
        (".vtt",),
        DOCLING,
        "WebVTT captions and meeting transcripts",
        text=True,
        options=_options(docling="VTT"),
    ),
    FormatSpec(
        "csv",
        (".csv",),
        DOCLING,
        "CSV (delimiter detected)",
        text=True,
        options=_options(docling="CSV"),
    ),
    FormatSpec(
        "tsv",
        (".tsv", ".tab"),
        DOCLING,
        "tab-separated values",
        text=True,
        # docling's CSV reader detects the tab; it takes the stream by its .csv name
        options=_options(docling="CSV", stream_suffix=".csv"),
    ),
    FormatSpec(
        "md",
        (".md", ".markdown", ".mdown"),
        TEXT,
        "Markdown (YAML front matter read)",
        text=True,
        # 2: the front matter fields a reader is shown (authors, abstract, ...) are
        # text too, and all of its text when the body has none (no longer empty).
        version="2",
        options=_options(reader="markdown", parser="docling"),
    ),
    FormatSpec(
        "asciidoc",
        (".adoc", ".asciidoc", ".asc"),
        DOCLING,
        "AsciiDoc",
        text=True,
        options=_options(docling="ASCIIDOC"),
    ),
    FormatSpec(
        "latex",
        (".tex", ".latex"),
        DOCLING,
        "LaTeX",
        text=True,
        options=_options(docling="LATEX"),
    ),
    FormatSpec(
        "rst",
        (".rst", ".rest"),
        TEXT,
        "reStructuredText (section titles kept)",
        text=True,
        options=_options(reader="rst"),
    ),
    FormatSpec(
        "org",
        (".org",),
        TEXT,
        "Org mode (outline kept)",
        text=True,
        options=_options(reader="org"),
    ),
    FormatSpec(
        "json",
        (".json",),
        TEXT,
        "JSON, or concatenated JSON values (keys become headings and fields)",
        text=True,
        # 2: a stream of concatenated JSON values is read as a list of records.
        version="2",
        options=_options(reader="json"),
    ),
    FormatSpec(
        "ipynb",
        (".ipynb",),
        TEXT,
        "Jupyter notebook (Markdown cells, code cells and their text outputs)",
        text=True,
        options=_options(reader="notebook"),
    ),
    FormatSpec(
        "ndjson",
        (".ndjson", ".jsonl"),
        TEXT,
        "JSON lines, one record each",
        text=True,
        options=_options(reader="ndjson"),
    ),
    FormatSpec(
        "yaml",
        (".yaml", ".yml"),
        TEXT,
        "YAML (keys become headings and fields)",
        text=True,
        options=_options(reader="yaml"),
    ),
    FormatSpec(
        "xml",
        (".xml",),
        TEXT,
        "XML (element text under its element path)",
        text=True,
        options=_options(reader="xml"),
    ),
    FormatSpec(
        "txt",
        (".txt", ".text", ".log"),
        UNSTRUCTURED,
        "plain text",
        text=True,
        # a file unstructured cannot partition is still read, as plain paragraphs
        options=_options(unstructured="text", paragraphs="yes"),
    ),
    FormatSpec(
        "eml",
        (".eml",),
        UNSTRUCTURED,
        "e-mail: headers (to metadata) and body; in a source folder each attachment is its "
        "own document, path mail.eml/attachment (sources.mail)",
        text=True,
        options=_options(unstructured="email"),
    ),
    FormatSpec(
        "msg",
        (".msg",),
        UNSTRUCTURED,
        "Outlook e-mail; in a source folder each attached file is its own document, path "
        "mail.msg/attachment (sources.mail)",
        binary=True,
        version="2",  # RFC 2047 sender, recipient, subject and attachment names decoded
        options=_options(unstructured="msg"),
    ),
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
        # 3: as docx 3 (headers, footers, footnotes in the text). 4: as docx 4. 5: as docx 5.
        # 6: as docx 6. 7: as docx 7.
        version="7",
        binary=True,
        options=_options(docling="RTF", docling_backend=_WORDS, unstructured="rtf"),
    ),
    FormatSpec(
        "image",
        (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
        IMAGE,
        "image, read by OCR (any right-angle orientation)",
        binary=True,
    ),
    FormatSpec(
        "heic",
        (".heic", ".heif"),
        IMAGE,
        "HEIC/HEIF photo, read by OCR",
        "pillow-heif",
        "parsers.formats:heif_missing",
        binary=True,
        # Pillow opens HEIC once pillow-heif registers its opener.
        options=_options(image_opener="pillow_heif:register_heif_opener"),
    ),
)

BY_FORMAT: dict[str, FormatSpec] = {spec.fmt: spec for spec in FORMATS}
EXTENSION_FORMATS: dict[str, str] = {ext: spec.fmt for spec in FORMATS for ext in spec.extensions}
# ZIP archives are not parsed as one document: sources list their members.
ARCHIVE_EXTENSIONS = zipguard.ARCHIVE_EXTENSIONS


def spec_for(fmt: str) -> FormatSpec:
    return BY_FORMAT[fmt]


# What the pre-checks (parsers.safety) read from the rows.
BINARY_FORMATS = frozenset(spec.fmt for spec in FORMATS if spec.binary)
ZIP_FORMATS = frozenset(spec.fmt for spec in FORMATS if spec.container == "zip")
# The OOXML kinds by the member folder each has, in table order.
MAIN_PARTS = {spec.fmt: spec.main_part for spec in FORMATS if spec.main_part}
