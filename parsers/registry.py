"""Pick the backend for a file from the format table and produce a ParsedDocument.

``parse_file`` runs in this process (``ParserPool`` runs it in killable
children): pre-checks and format detection (``parsers.safety``), the format's
requirement check (LibreOffice for legacy Office, ...), text decoding for text
formats (``parsers.textcodec``: any encoding, a UTF-8 copy for the backend),
the backend from ``parsers.formats`` (a ``parsers.backend.Backend``) with its
fallback, then one
``ParsedDocument`` whatever the backend.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.settings import ParseSettings
from parsers.backend import load_backend
from parsers.errors import Category, ParseError
from parsers.formats import FormatSpec, spec_for
from parsers.models import BackendResult, ParsedDocument, ParseWarning
from parsers.safety import precheck

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

_META_CHARSET = re.compile(rb"(<meta[^>]+charset\s*=\s*[\"']?)([\w-]+)", re.I)
# The settings of the parse under way and how many files deep it is: a file embedded in
# another (``parse_embedded``) is read with the same settings, and only so deep.
_PARSING: ContextVar[tuple[ParseSettings, int] | None] = ContextVar(
    "corpusflow_parsing", default=None
)
MAX_EMBEDDED_DEPTH = 2  # a document and the files in it; a file in one of those is not read


def _title(doc: DoclingDocument, fallback: str) -> str:
    from docling_core.types.doc import SectionHeaderItem, TitleItem

    for item, _level in doc.iterate_items():
        if isinstance(item, TitleItem | SectionHeaderItem) and item.text.strip():
            return item.text.strip()
    return fallback


# A line Markdown reads as a heading: up to three spaces, one to six '#', then a blank.
_ATX_START = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)", re.MULTILINE)


def stored_markdown(doc: DoclingDocument) -> str:
    """The Markdown of ``doc`` as the product stores and chunks it: docling-core's
    ``export_to_markdown`` with three differences.

    Underscores stay as written (SESSION_USER, snake_case keys), and so do '<', '>' and
    '&' (``vector<Task*>``, "R&D", not ``vector&lt;Task*&gt;``): the Markdown is read by
    people and search, not rendered, and an escaped one splits the word for both, or adds
    words ("lt", "amp") the document does not hold. Chunks never held the escapes.
    Body text that begins like a heading ("# load the seeds": a comment in a listing
    read as text, a paragraph typed with a leading '#') has its '#' escaped, so neither a
    reader of the Markdown nor the outline of its headings takes it for one."""
    from docling_core.transforms.serializer.markdown import (
        MarkdownDocSerializer,
        MarkdownParams,
    )

    serializer = MarkdownDocSerializer(
        doc=doc,
        params=MarkdownParams(escape_underscores=False, escape_html=False),
        text_serializer=_body_text_serializer(),
    )
    return str(serializer.serialize().text)


@functools.cache
def _body_text_serializer() -> Any:
    """docling-core's Markdown text serializer with body text's opening '#' escaped (built
    on first use: docling-core is a heavy import; it holds no state, so one serves all)."""
    from docling_core.transforms.serializer.base import SerializationResult
    from docling_core.transforms.serializer.markdown import MarkdownTextSerializer
    from docling_core.types.doc import DocItemLabel, ListItem, SectionHeaderItem, TitleItem

    literal = (DocItemLabel.CODE, DocItemLabel.FORMULA)

    def opens_its_group(item: Any, doc: Any) -> bool:
        """The item is the first piece of the inline group (a paragraph of several runs)
        that holds it."""
        parent = item.parent.resolve(doc) if item.parent is not None else None
        children = getattr(parent, "children", None) or []
        return bool(children) and children[0].cref == item.self_ref

    class BodyText(MarkdownTextSerializer):
        """docling-core's text serializer; a '#' opening a line of body text is escaped."""

        def serialize(self, *, item, doc_serializer, doc, **kwargs):
            res = super().serialize(item=item, doc_serializer=doc_serializer, doc=doc, **kwargs)
            if (
                isinstance(item, TitleItem | SectionHeaderItem | ListItem)
                or item.label in literal
                or kwargs.get("in_table_cell")  # a cell holds no heading: "# of users" stays
                or (kwargs.get("is_inline_scope") and not opens_its_group(item, doc))
            ):
                return res  # mid-line: "Count the # of users" stays as written
            text = _ATX_START.sub(r"\1\\\2", res.text)
            return res if text == res.text else SerializationResult(text=text, spans=res.spans)

    return BodyText()


# The item lists of a DoclingDocument, serialised one item at a time by ``docling_json``.
_ITEM_LISTS = ("groups", "texts", "pictures", "tables")


def docling_json(doc: DoclingDocument) -> str:
    """``json.dumps(doc.export_to_dict(), ensure_ascii=False)``, the same text, without
    the whole document as one dict: each item of the large lists is turned into a dict
    and into JSON on its own. That dict was ~6x the JSON (~90 MiB for a 1,000-page PDF,
    the parser's peak: docs/benchmarks.md, "A 1,000-page PDF")."""
    fields = list(type(doc).model_fields)
    head = doc.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=set(_ITEM_LISTS))
    if any(key not in fields for key in head) or any(
        type(doc).model_fields[name].alias not in (None, name) for name in _ITEM_LISTS
    ):
        return json.dumps(doc.export_to_dict(), ensure_ascii=False)  # not the shape known here
    parts: list[str] = []
    for name in fields:
        if name in _ITEM_LISTS:
            items = ", ".join(
                json.dumps(
                    item.model_dump(mode="json", by_alias=True, exclude_none=True),
                    ensure_ascii=False,
                )
                for item in getattr(doc, name)
            )
            parts.append(f"{json.dumps(name)}: [{items}]")
        elif name in head:
            parts.append(f"{json.dumps(name)}: {json.dumps(head[name], ensure_ascii=False)}")
    return "{" + ", ".join(parts) + "}"


def warm_up(settings: ParseSettings | None = None) -> None:
    """Import the heavy parser libraries (and load the layout models when PDFs will
    use them) now, so a document's deadline covers parsing only."""
    from parsers.docling_backend import get_converter
    from parsers.pdf import warm_up as warm_up_pdf

    get_converter()
    warm_up_pdf(settings or ParseSettings())


@contextlib.contextmanager
def as_utf8(path: Path, spec: FormatSpec) -> Iterator[tuple[Path, list[ParseWarning]]]:
    """A text file as UTF-8 for its backend: itself when it already is, else a copy."""
    from parsers.textcodec import decode

    raw = path.read_bytes()
    text, encoding = decode(raw, f"{path.suffix or spec.fmt} file")
    if encoding == "utf-8" and not raw.startswith(b"\xef\xbb\xbf"):
        yield path, []
        return
    data = text.encode("utf-8")
    if spec.option("meta_charset") == "yes":  # the page's declaration must agree with the copy
        data = _META_CHARSET.sub(rb"\1utf-8", data, count=1)
    with tempfile.TemporaryDirectory(prefix="corpusflow-text-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_bytes(data)
        yield copy, [ParseWarning("encoding", f"decoded from {encoding}")]


def _word_count(result: BackendResult) -> int:
    return len(stored_markdown(result.doc).split())


def _fallback(path: Path, spec: FormatSpec, settings: ParseSettings, why: str) -> BackendResult:
    """The format's fallback backend, marked as such; ``why`` says why it was needed."""
    assert spec.fallback is not None
    result = load_backend(spec.fallback).parse(path, spec, settings)
    result.parser = f"{result.parser}-fallback"
    result.warnings.insert(0, ParseWarning("fallback", why))
    result.partial = False
    return result


def _run_backend(
    path: Path, spec: FormatSpec, settings: ParseSettings, unavailable: str | None = None
) -> BackendResult:
    """The format's backend; its fallback when the first rejects the file as corrupt or
    reads no text. A fallback never replaces text already extracted with less: when the
    first backend read something, the fallback's reading is kept only if it has more words.

    ``unavailable`` says why the first backend cannot run on this machine (RTF without
    LibreOffice): the fallback then reads the file, and the warning says what is missing.
    """
    if unavailable:
        try:
            return _fallback(path, spec, settings, unavailable)
        except ParseError as exc:
            raise ParseError(exc.category, f"{unavailable}; fallback: {exc.message}") from exc
    try:
        first_result = load_backend(spec.backend).parse(path, spec, settings)
    except ParseError as exc:
        if exc.category != Category.CORRUPT or spec.fallback is None:
            raise
        try:
            return _fallback(path, spec, settings, f"first backend failed: {exc.message}")
        except ParseError as second:
            raise ParseError(
                exc.category, f"{exc.message}; fallback also failed: {second.message}"
            ) from second
    if spec.fallback is None or _word_count(first_result) > 0:
        return first_result
    try:
        result = _fallback(path, spec, settings, "first backend read no text")
    except ParseError as exc:
        first_result.warn("fallback", f"fallback failed too: {exc.message}")
        return first_result
    return result if _word_count(result) > 0 else first_result


def parse_file(
    path: str | Path,
    settings: ParseSettings | None = None,
    metadata: dict[str, object] | None = None,
) -> ParsedDocument:
    """Parse one file in this process. Raises ParseError with a category.

    The backend comes from the format table (``parsers.formats.FORMATS``; see
    ``corpusflow formats``), chosen by the format detected from the file's bytes.
    """
    settings = settings or ParseSettings()
    path = Path(path)
    fmt = precheck(path, settings)
    spec = spec_for(fmt)
    missing = spec.missing()
    if missing and spec.fallback is None:
        raise ParseError(Category.UNSUPPORTED, f"{spec.description} ({fmt}): {missing}")
    outer = _PARSING.get()
    token = _PARSING.set((settings, (outer[1] if outer else 0) + 1))
    try:
        if spec.text:
            with as_utf8(path, spec) as (source, codec_warnings):
                result = _run_backend(source, spec, settings, missing)
            result.warnings[:0] = codec_warnings
        else:
            result = _run_backend(path, spec, settings, missing)
    finally:
        _PARSING.reset(token)
    return _document(path, fmt, result, metadata)


def parse_embedded(name: str, data: bytes) -> ParsedDocument:
    """A file carried inside the document being parsed (an OLE package in a slide, say),
    parsed as a file of its own kind (detected from its bytes, as any file's is) with
    the enclosing parse's settings, in a temporary folder (the parser child's scratch
    folder). Raises ParseError as ``parse_file`` does, and ``too_large`` past
    ``MAX_EMBEDDED_DEPTH`` files deep."""
    outer = _PARSING.get()
    settings, depth = outer if outer else (ParseSettings(), 0)
    if depth >= MAX_EMBEDDED_DEPTH:
        raise ParseError(
            Category.TOO_LARGE, f"{name}: embedded more than {MAX_EMBEDDED_DEPTH} files deep"
        )
    # Only the last component of the name the object carries, without characters a
    # file name cannot hold; the extension helps tell text kinds apart.
    base = re.sub(r"[\x00-\x1f/\\:]", "_", name.replace("\\", "/").rsplit("/", 1)[-1])
    base = base.strip(". ")[:120] or "embedded"
    with tempfile.TemporaryDirectory(prefix="corpusflow-embedded-") as folder:
        path = Path(folder) / base
        path.write_bytes(data)
        return parse_file(path, settings)


def _document(
    path: Path, fmt: str, result: BackendResult, metadata: dict[str, object] | None
) -> ParsedDocument:
    """One ParsedDocument from a backend's result; a document without text is ``empty``."""
    doc = result.doc
    markdown = stored_markdown(doc)
    if not markdown.strip():
        if result.missing_pages:
            raise ParseError(
                Category.CORRUPT, f"no page could be read (failed pages {result.missing_pages})"
            )
        raise ParseError(Category.EMPTY, f"no text could be extracted ({result.parser})")
    extra = result.metadata
    return ParsedDocument(
        markdown=markdown,
        docling_json=docling_json(doc),
        title=str(extra.get("title") or _title(doc, path.stem)),
        format=fmt,
        page_count=max(result.page_count, len(doc.pages), 1),
        parser=result.parser,
        status="partial" if result.partial or result.missing_pages else "success",
        warnings=tuple(result.warnings),
        metadata={**extra, **dict(metadata or {})},
        missing_pages=tuple(result.missing_pages),
    )
