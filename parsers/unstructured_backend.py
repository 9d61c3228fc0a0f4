"""unstructured backends: e-mail (.eml, .msg) and plain text, and the fallback for
office/web files and RTF that docling rejects or reads no text from (RTF through pandoc
also where LibreOffice is missing).

Offline operation. unstructured's element classifier (``partition.text_type``:
narrative text vs. title) asks spaCy for sentences and part-of-speech tags
through ``unstructured.nlp.tokenize``, whose loader downloads the
``en_core_web_sm`` wheel from GitHub *and installs it into site-packages* at run
time when the model is missing. Every partitioner used here (text, HTML, DOCX,
PPTX, XLSX, and the e-mail and RTF ones, which hand their bodies to the text or
HTML partitioner) reaches that classifier. ``_offline_nlp`` therefore replaces
that loader before any partitioner runs:

- with ``en_core_web_sm`` installed as a package, it is loaded from disk (full
  classifier quality, no network);
- otherwise a model-free spaCy English pipeline (tokenizer + rule-based
  sentencizer) is used. It has no tagger, so unstructured sees no verbs: a short
  line is never "narrative" and may be classified as a title. ``_to_document``
  keeps a title that ends like a sentence (``. ! ?``) as a paragraph, which is
  what the tagger would have decided for those lines.

The model installer is replaced too, so no code path can write to
site-packages. unstructured's load-time analytics ping and its banner are
turned off (``SCARF_NO_ANALYTICS``, ``UNSTRUCTURED_DISABLE_NOTICE``).

Elements become a DoclingDocument (Title -> heading, ListItem -> list, Table ->
table model via ``parsers.tables``), so Markdown export, table linearisation
and chunking work exactly as for docling's own output.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.backend import TableBackend
from parsers.errors import Category, ParseError
from parsers.models import BackendResult

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from common.settings import ParseSettings
    from parsers.formats import FormatSpec

_SPACY_MODEL = "en_core_web_sm"
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@functools.lru_cache(maxsize=1)
def _offline_nlp() -> str:
    """Make unstructured's NLP helpers offline; returns which pipeline is used."""
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    import spacy
    import unstructured.nlp.tokenize as tokenize

    if spacy.util.is_package(_SPACY_MODEL):
        nlp = spacy.load(_SPACY_MODEL, exclude=["ner", "lemmatizer", "attribute_ruler"])
        kind = _SPACY_MODEL
    else:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        kind = "spacy-blank-en+sentencizer"

    def get_nlp() -> Any:
        return nlp

    def refuse_install() -> None:
        raise RuntimeError(
            f"corpusflow never downloads {_SPACY_MODEL} at run time; "
            f"install it as a package to use it"
        )

    tokenize._get_nlp = get_nlp  # type: ignore[assignment]
    tokenize._install_spacy_model = refuse_install
    return kind


def _pandoc_missing() -> str | None:
    """Why RTF cannot be converted here, or None when pandoc is available."""
    try:
        import pypandoc
    except ImportError:
        return "RTF needs pandoc: pip install pypandoc-binary (bundles the pandoc binary)"
    try:
        pypandoc.get_pandoc_version()
    except OSError:
        return (
            "RTF needs the pandoc binary, which was not found: "
            "pip install pypandoc-binary, or install pandoc (apt-get install pandoc)"
        )
    return None


def _email(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.email import partition_email

    return list(partition_email(filename=name, process_attachments=False, **common))


def _msg(name: str, common: dict[str, Any]) -> list[Any]:
    try:
        from unstructured.partition.msg import partition_msg
    except ImportError as exc:
        raise ParseError(
            Category.UNSUPPORTED,
            f"Outlook .msg needs python-oxmsg: pip install python-oxmsg ({exc})",
        ) from exc
    return list(partition_msg(filename=name, process_attachments=False, **common))


def _rtf(name: str, common: dict[str, Any]) -> list[Any]:
    missing = _pandoc_missing()
    if missing:
        raise ParseError(Category.UNSUPPORTED, missing)
    from unstructured.partition.rtf import partition_rtf

    return list(partition_rtf(filename=name, **common))


def _text(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.text import partition_text

    return list(partition_text(filename=name, **common))


def _docx(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.docx import partition_docx

    return list(partition_docx(filename=name, infer_table_structure=True, **common))


def _pptx(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.pptx import partition_pptx

    return list(partition_pptx(filename=name, infer_table_structure=True, **common))


def _xlsx(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.xlsx import partition_xlsx

    return list(partition_xlsx(filename=name, infer_table_structure=True, **common))


def _html(name: str, common: dict[str, Any]) -> list[Any]:
    from unstructured.partition.html import partition_html

    return list(partition_html(filename=name, **common))


# The partitioners a row's ``unstructured`` option names.
_PARTITIONERS: dict[str, Callable[[str, dict[str, Any]], list[Any]]] = {
    "email": _email,
    "msg": _msg,
    "rtf": _rtf,
    "text": _text,
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "html": _html,
}


def _partition(path: Path, kind: str) -> list[Any]:
    partitioner = _PARTITIONERS.get(kind)
    if partitioner is None:
        raise ParseError(Category.UNSUPPORTED, f"unstructured backend does not handle {kind}")
    _offline_nlp()
    # Documents are tagged as English without language detection: detection
    # only fills metadata we do not use and costs time on every element.
    return partitioner(str(path), {"languages": ["eng"]})


def _heading_level(element: Any) -> int:
    depth = getattr(element.metadata, "category_depth", None)
    return max(1, min(int(depth or 0) + 1, 6))


def _table(doc: DoclingDocument, element: Any, prov: Any) -> bool:
    from parsers.tables import cells_from_html, table_data

    html = getattr(element.metadata, "text_as_html", None)
    parsed = cells_from_html(html) if html else None
    if parsed is None:
        return False
    cells, n_rows, n_cols, header_rows = parsed
    # Same convention as the PDF tables: without marked header cells the first
    # row is the header, which the chunker repeats for every row.
    if header_rows == 0 and n_rows > 1:
        header_rows = 1
    doc.add_table(data=table_data(cells, n_rows, n_cols, header_rows), prov=prov)
    return True


def _provenance(doc: DoclingDocument, element: Any, text: str) -> Any:
    """Page provenance where unstructured knows the page (slides, sheets, page breaks)."""
    from docling_core.types.doc import BoundingBox, ProvenanceItem, Size

    page = getattr(element.metadata, "page_number", None)
    if not page:
        return None
    if page not in doc.pages:
        doc.add_page(page_no=page, size=Size(width=0.0, height=0.0))
    box = BoundingBox(l=0.0, t=0.0, r=0.0, b=0.0)
    return ProvenanceItem(page_no=page, bbox=box, charspan=(0, len(text)))


def _to_document(elements: list[Any], name: str) -> DoclingDocument:
    from docling_core.types.doc import DoclingDocument

    doc = DoclingDocument(name=name)
    _add_elements(doc, elements)
    return doc


def _add_elements(doc: DoclingDocument, elements: list[Any]) -> None:
    """Append elements: Title -> heading, ListItem -> list, Table -> table, rest -> text."""
    from docling_core.types.doc import DocItemLabel

    list_group = None
    for element in elements:
        kind = type(element).__name__
        text = " ".join((element.text or "").split())
        prov = _provenance(doc, element, text)
        if kind in ("Header", "Footer", "PageNumber", "PageBreak", "Image"):
            continue  # page furniture and pictures carry no body text
        if kind == "Table":
            list_group = None
            if _table(doc, element, prov) or not text:
                continue
        if not text:
            continue
        if kind == "ListItem":
            if list_group is None:
                list_group = doc.add_list_group()
            doc.add_list_item(text, parent=list_group, prov=prov)
            continue
        list_group = None
        if kind == "Title" and not _SENTENCE_END.search(text):
            doc.add_heading(text, level=_heading_level(element), prov=prov)
        elif kind == "CodeSnippet":
            doc.add_code(text, prov=prov)
        else:
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)


# --------------------------------------------------------------------------- #
# E-mail headers and attachments
# --------------------------------------------------------------------------- #


def _eml_headers(path: Path) -> dict[str, Any]:
    import email
    from email import policy

    with path.open("rb") as fh:
        msg = email.message_from_binary_file(fh, policy=policy.default)
    attachments = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        filename = part.get_filename()
        if part.get_content_disposition() != "attachment" and not filename:
            continue
        payload = part.get_payload(decode=True)
        attachments.append(
            {
                "filename": filename or "",
                "content_type": part.get_content_type(),
                "size": len(payload) if isinstance(payload, bytes) else 0,
            }
        )

    def addresses(name: str) -> list[str]:
        return [str(v) for v in msg.get_all(name, [])]

    return {
        "from": addresses("from"),
        "to": addresses("to"),
        "cc": addresses("cc"),
        "subject": str(msg.get("subject", "") or ""),
        "date": str(msg.get("date", "") or ""),
        "message_id": str(msg.get("message-id", "") or ""),
        "attachments": attachments,
    }


def _decoded(value: str | None) -> str:
    """A header value with its RFC 2047 encoded words decoded: Outlook keeps a sender
    such as ``=?UTF-8?B?TS4gQy4gS3VydHVsdcWf?= <a@b>`` as it came in."""
    text = value or ""
    if "=?" not in text:
        return text
    from email.header import decode_header, make_header

    try:
        return str(make_header(decode_header(text)))
    except (LookupError, UnicodeDecodeError, ValueError):  # an unknown or broken charset
        return text


def _msg_headers(path: Path) -> dict[str, Any]:
    from oxmsg import Message

    msg = Message.load(str(path))
    to: list[str] = []
    cc: list[str] = []
    for recipient in msg.recipients:
        name, address = _decoded(recipient.name), recipient.email_address or ""
        label = f"{name} <{address}>" if name and address and name != address else address or name
        if not label:  # Outlook keeps empty recipient entries
            continue
        # PR_RECIPIENT_TYPE (0x0C15): 1 = To, 2 = Cc, 3 = Bcc.
        kind = recipient.properties.int_prop_value(0x0C15)
        if kind == 2:
            cc.append(label)
        elif kind != 3:
            to.append(label)
    return {
        "from": [_decoded(msg.sender)] if msg.sender else [],
        "to": to,
        "cc": cc,
        "subject": _decoded(msg.subject),
        "date": msg.sent_date.isoformat() if msg.sent_date else "",
        "message_id": next(
            (v for k, v in msg.message_headers.items() if k.lower() == "message-id"), ""
        ),
        "attachments": [
            {
                "filename": _decoded(a.file_name),
                "content_type": a.mime_type or "",
                "size": int(a.size or 0),
            }
            for a in msg.attachments
        ],
    }


def _readable(addresses: list[str]) -> str:
    """'Name <a@b>' -> 'Name (a@b)': angle brackets would be escaped in Markdown."""
    from email.utils import getaddresses

    parts = [f"{n} ({a})" if n and a else (a or n) for n, a in getaddresses(addresses)]
    return ", ".join(p for p in parts if p) or ", ".join(addresses)


def _email_document(elements: list[Any], headers: dict[str, Any], name: str) -> DoclingDocument:
    """Subject as title, the headers as a short list, the body, then the attachment list."""
    from docling_core.types.doc import DoclingDocument

    doc = DoclingDocument(name=name)
    doc.add_title(headers["subject"] or name)
    fields = doc.add_list_group()
    for label, key in (("From", "from"), ("To", "to"), ("Cc", "cc")):
        if headers[key]:
            doc.add_list_item(f"{label}: {_readable(headers[key])}", parent=fields)
    if headers["date"]:
        doc.add_list_item(f"Date: {headers['date']}", parent=fields)
    _add_elements(doc, elements)
    if headers["attachments"]:
        doc.add_heading("Attachments", level=1)
        group = doc.add_list_group()
        for att in headers["attachments"]:
            doc.add_list_item(
                f"{att['filename'] or '(unnamed)'} ({att['content_type']}, {att['size']} bytes)",
                parent=group,
            )
    return doc


# Partitioners of e-mail, whose headers go to metadata, and the readers of those headers.
_HEADERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "email": lambda path: _eml_headers(path),
    "msg": lambda path: _msg_headers(path),
}


def convert(path: Path, kind: str) -> tuple[DoclingDocument, list[str], dict[str, Any]]:
    """Partition with unstructured's ``kind`` partitioner (``_PARTITIONERS``); returns
    (document, warnings, parser metadata)."""
    try:
        elements = _partition(path, kind)
        if kind in _HEADERS:
            headers = _HEADERS[kind](path)
            return _email_document(elements, headers, path.stem), [], {"email": headers}
    except ParseError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # unstructured raises plain exceptions for broken input
        raise ParseError(
            Category.CORRUPT, f"unstructured: {type(exc).__name__}: {exc}"[:2000]
        ) from exc
    return _to_document(elements, path.stem), [], {}


def _paragraphs(path: Path) -> DoclingDocument:
    """Plain text as paragraphs split at blank lines: the reading every text file has."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    text = path.read_text(encoding="utf-8", errors="replace")
    doc = DoclingDocument(name=path.stem)
    for para in (p.strip() for p in text.replace("\r\n", "\n").split("\n\n")):
        if para:
            doc.add_text(label=DocItemLabel.TEXT, text=" ".join(para.split()))
    return doc


class UnstructuredBackend(TableBackend):
    """unstructured's partitioners: e-mail, RTF, plain text, and docling's formats
    when docling rejected a file (``parser`` then says so).

    Options: ``unstructured`` (the partitioner, ``_PARTITIONERS``), ``paragraphs``
    (``yes``: a file the partitioner finds corrupt is read as plain paragraphs,
    parser ``text``).
    """

    name = "parsers.unstructured_backend:parse"

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        self.check_valid(path, spec)
        try:
            doc, warnings, meta = convert(path, spec.option("unstructured"))
        except ParseError as exc:
            if spec.option("paragraphs") != "yes" or exc.category != Category.CORRUPT:
                raise
            result = BackendResult(doc=_paragraphs(path), parser="text")
            result.warn("unstructured", exc.message)
            return result
        result = BackendResult(doc=doc, parser="unstructured", metadata=meta)
        for w in warnings:
            result.warn("unstructured", w)
        return result


BACKEND = UnstructuredBackend()
