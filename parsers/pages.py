"""Page isolation for PDFs: a bad page costs a page, not the document.

When a PDF's parse crashes, hangs or runs out of memory in a parser child
(``parsers.isolation``), the pool parses it again in page ranges, each range as
its own job in the child with its own deadline; a range that fails is split
(``split_range``) until the failing single pages are known. Each of those pages
is then read by a fallback chain, each step again a job in the child: the raw
text layer of the page (pypdfium2), then OCR of the rendered page (when
``parse.ocr``); a page nothing read is *missing*, and a repro bundle (the page
as a one-page PDF, a JSON with every backend's error) is written for it when
``parse.repro_dir`` is set. ``merge_parts`` joins the ranges' documents in page
order with the original page numbers.

A PDF longer than ``parse.page_batch`` pages is parsed in ranges from the start, so the
child's memory does not grow with the page count. The ranges keep the whole document's
structure: each is parsed with the original's outline and the body style the first
range found (``parsers.pdf.headings.RangeHeadings``, passed to the PDF parser by
``parsing_range``); the merge numbers every range's headings from their styles as one
document's, and joins a list (and a table) that a range boundary split. A paragraph
over a page break is two paragraphs in the whole document's parse too.

This module has two sides: ``run_task`` runs in the child (it opens the
untrusted file); the rest runs in the pool's process and never opens the PDF.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import ParsedDocument, ParseWarning
from parsers.pdf.headings import RangeHeadings
from parsers.safety import is_pdf_head

# Categories that kill (or killed) the child: what page isolation answers.
KILLED = frozenset({Category.CRASHED, Category.TIMEOUT, Category.OUT_OF_MEMORY})

# A failing range of at most this many pages is split into single pages at once, not
# halved: a failure kills the child, and a fresh one imports the parser libraries again
# (~4 s of CPU here), while a one-page range parses in ~0.02 s (docs/benchmarks.md).
SINGLES_AT = 8

SOURCE = "page-isolation"


def is_pdf(path: Path) -> bool:
    """Whether the file starts like a PDF (the pre-check's own test). Runs in the pool's
    process, so only a regular file is read: opening a FIFO would block it."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        with path.open("rb") as fh:
            return is_pdf_head(fh.read(1024))
    except OSError:
        return False


def split_range(first: int, last: int, singles_at: int = SINGLES_AT) -> list[tuple[int, int]]:
    """The ranges a failed range (1-based, inclusive) is retried as, in page order:
    halves, or single pages once it has at most ``singles_at`` pages."""
    n = last - first + 1
    if n <= 1:
        return []
    if n <= singles_at:
        return [(p, p) for p in range(first, last + 1)]
    mid = first + n // 2 - 1
    return [(first, mid), (mid + 1, last)]


def batch_ranges(page_count: int, batch: int) -> list[tuple[int, int]]:
    """``page_count`` pages in the fewest ranges of at most ``batch`` pages (one range
    when 0), of even lengths: never a short last range, whose few pages would show too
    little of the document (running heads repeat on several pages)."""
    if batch <= 0 or page_count <= batch:
        return [(1, max(page_count, 1))]
    n = -(-page_count // batch)
    size, longer = divmod(page_count, n)
    ranges: list[tuple[int, int]] = []
    first = 1
    for k in range(n):
        last = first + size - (0 if k < longer else 1)
        ranges.append((first, last))
        first = last + 1
    return ranges


def range_deadline(settings: ParseSettings, pages: int, page_count: int) -> float:
    """A range's wall-clock limit: its share of ``parse.timeout_s``, at least
    ``parse.page_timeout_min_s``, never more than ``parse.timeout_s`` itself."""
    share = settings.timeout_s * pages / max(page_count, 1)
    return min(settings.timeout_s, max(settings.page_timeout_min_s, share))


def page_deadline(settings: ParseSettings) -> float:
    """The limit of a one-page fallback job (and of the page count and page extraction):
    ``parse.page_timeout_min_s``, never more than ``parse.timeout_s``."""
    return min(settings.timeout_s, settings.page_timeout_min_s)


# --- the child's side ---------------------------------------------------------------


def _extract(path: Path, first: int, last: int, out: Path) -> Path:
    """Pages ``first``..``last`` of ``path`` as a PDF of their own at ``out``."""
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(str(path))
    try:
        if not 1 <= first <= last <= len(src):
            raise ParseError(Category.CORRUPT, f"pages {first}-{last} not in a {len(src)}-page PDF")
        new = pdfium.PdfDocument.new()
        try:
            new.import_pages(src, list(range(first - 1, last)))
            out.parent.mkdir(parents=True, exist_ok=True)
            new.save(str(out))
        finally:
            new.close()
    finally:
        src.close()
    return out


def _markdown(doc: Any) -> str:
    return str(doc.export_to_markdown(escape_underscores=False))


def _json(doc: Any) -> str:
    """The docling JSON of a merged document, written item by item (as a parse's is)."""
    from parsers.registry import docling_json

    return docling_json(doc)


def _one_page_document(
    path: Path, paragraphs: list[str], size: tuple[float, float], parser: str
) -> ParsedDocument:
    """A one-page DoclingDocument of plain paragraphs (a fallback's reading)."""
    from docling_core.types.doc import (
        BoundingBox,
        CoordOrigin,
        DocItemLabel,
        DoclingDocument,
        ProvenanceItem,
        Size,
    )

    width, height = size
    doc = DoclingDocument(name=path.stem)
    doc.add_page(page_no=1, size=Size(width=width, height=height))
    box = BoundingBox(l=0, t=height, r=width, b=0, coord_origin=CoordOrigin.BOTTOMLEFT)
    for text in paragraphs:
        prov = ProvenanceItem(page_no=1, bbox=box, charspan=(0, len(text)))
        doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    return ParsedDocument(
        markdown=_markdown(doc),
        docling_json=json.dumps(doc.export_to_dict(), ensure_ascii=False),
        title=path.stem,
        format="pdf",
        page_count=1,
        parser=parser,
    )


def _paragraphs(text: str) -> list[str]:
    """Raw text-layer text as paragraphs: blank lines separate them, lines join."""
    out: list[str] = []
    current: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return out


def _text_layer(page_pdf: Path) -> ParsedDocument:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(page_pdf))
    try:
        page = pdf[0]
        size = page.get_size()
        textpage = page.get_textpage()
        text = textpage.get_text_range()
        textpage.close()
        page.close()
    finally:
        pdf.close()
    paragraphs = _paragraphs(text)
    if not paragraphs:
        raise ParseError(Category.EMPTY, "the page's text layer has no text")
    return _one_page_document(page_pdf, paragraphs, (float(size[0]), float(size[1])), "pdf-text")


def _ocr(page_pdf: Path, settings: ParseSettings) -> ParsedDocument:
    from parsers.pdf.ocr import ocr_pdf_pages
    from parsers.pdf.primitives import page_sizes

    if not settings.ocr:
        raise ParseError(Category.UNSUPPORTED, "OCR is off (parse.ocr)")
    lines, warnings, failed, turned = ocr_pdf_pages(page_pdf, [1], settings)
    if failed:
        raise ParseError(Category.CORRUPT, "; ".join(w.message for w in warnings) or "OCR failed")
    width, height = turned.get(1) or page_sizes(page_pdf, [1])[1]
    # Lines in reading order; each OCR line its own paragraph (no layout to join them).
    paragraphs = [ln.text.strip() for ln in lines if ln.text.strip()]
    if not paragraphs:
        raise ParseError(Category.EMPTY, "OCR read no text on the page")
    return _one_page_document(page_pdf, paragraphs, (width, height), "ocr")


def run_task(
    task: dict[str, Any],
    path: Path,
    settings: ParseSettings,
    metadata: dict[str, Any],
    parse: Callable[..., ParsedDocument],
) -> tuple[str, dict[str, Any] | None]:
    """Run one page job in the parser child; returns its reply's payload and, for a
    range, its heading context (``RangeHeadings.to_dict``: the body style and the
    heading styles its parse found), which the pool passes on and merges.

    ``task["kind"]``: ``count`` (the page count), ``range`` (pages ``first``..``last``
    parsed by ``parse``, the pool's parse function, as a PDF of their own, with the
    original's outline and ``task["headings"]``, what earlier ranges found),
    ``text`` and ``ocr`` (page ``page`` read by a fallback), ``extract`` (page ``page``
    saved as a one-page PDF at ``out``, for a repro bundle). Page-numbered results are
    numbered from 1; the pool shifts them back.
    """
    kind = task["kind"]
    if kind == "count":
        from parsers.safety import check_pdf, precheck

        # Every pre-check a whole-document parse runs (encrypted, over parse.max_pages,
        # ...), so a PDF parsed in ranges from the start is refused the same way.
        if precheck(path, settings) != "pdf":
            raise ParseError(Category.UNSUPPORTED, "not a PDF: no page ranges")
        return str(check_pdf(path, settings)), None
    if kind == "extract":
        _extract(path, task["page"], task["page"], Path(task["out"]))
        return "", None
    first = int(task.get("first", task.get("page", 1)))
    last = int(task.get("last", first))
    scratch = Path(tempfile.mkdtemp(prefix="pages-"))
    try:
        # Named as the original, so titles and document names fall back to its stem.
        part = _extract(path, first, last, scratch / path.name)
        if kind == "range":
            return _parse_range(path, part, task, settings, metadata, parse)
        if kind == "text":
            doc = _text_layer(part)
        elif kind == "ocr":
            doc = _ocr(part, settings)
        else:
            raise ValueError(f"unknown page task {kind!r}")
        return doc.to_json(), None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _parse_range(
    path: Path,
    part: Path,
    task: dict[str, Any],
    settings: ParseSettings,
    metadata: dict[str, Any],
    parse: Callable[..., ParsedDocument],
) -> tuple[str, dict[str, Any]]:
    """Parse ``part`` (a range of ``path`` as a PDF of its own) with the heading context
    of the whole document: ``path``'s outline and what earlier ranges found."""
    from parsers.pdf.headings import RangeHeadings, parsing_range, read_outline

    context = RangeHeadings.from_dict(task.get("headings") or {})
    context.outline = read_outline(path, first_page=int(task.get("first", 1)))
    with parsing_range(context):
        doc = parse(part, settings, metadata)
    found = RangeHeadings(body=context.body, marks=context.marks)  # the outline stays here
    return doc.to_json(), found.to_dict()


# --- the pool's side ----------------------------------------------------------------


@dataclass(slots=True)
class PageOutcome:
    """What page isolation found: the parsed ranges (first page, document) in page
    order, their heading contexts (first page -> what the range's parse found, for
    ranges the structured parser read), pages read by a fallback (page -> backend),
    pages nothing read, pages with nothing on them, and every failure (page or range ->
    messages)."""

    parts: list[tuple[int, ParsedDocument]] = field(default_factory=list)
    headings: dict[int, RangeHeadings] = field(default_factory=dict)
    degraded: dict[int, str] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    blank: list[int] = field(default_factory=list)
    errors: dict[int, list[dict[str, str]]] = field(default_factory=dict)
    warnings: list[ParseWarning] = field(default_factory=list)


def _shifted(doc: Any, offset: int) -> Any:
    """``doc`` with every page number (pages and provenance) moved by ``offset``."""
    from docling_core.types.doc import DoclingDocument

    data = doc.export_to_dict()
    for item_list in ("texts", "tables", "pictures", "key_value_items", "form_items"):
        for item in data.get(item_list) or []:
            for prov in item.get("prov") or []:
                prov["page_no"] += offset
    pages = {}
    for key, page in (data.get("pages") or {}).items():
        page["page_no"] = int(key) + offset
        pages[str(int(key) + offset)] = page
    data["pages"] = pages
    return DoclingDocument.model_validate(data)


def _first_page(node: Any, doc: Any) -> int:
    for item, _level in doc.iterate_items(root=node, with_groups=False):
        if getattr(item, "prov", None):
            return int(item.prov[0].page_no)
    return 0


def _last_page(node: Any, doc: Any) -> int:
    pages = [
        int(item.prov[-1].page_no)
        for item, _level in doc.iterate_items(root=node, with_groups=False)
        if getattr(item, "prov", None)
    ]
    return max(pages, default=0)


def _join_lists(doc: Any, starts: set[int]) -> None:
    """One list of a list split by a range boundary (``starts``: the first pages of the
    ranges after the first): a list that ends its range and one that opens the next,
    with nothing between them, are one list, as the whole document's parse makes them
    (``parsers.pdf.assemble`` keeps a list open over a page break)."""
    from docling_core.types.doc import ListGroup

    emptied = []
    prev = None  # the node before, in body order; a list emptied into it is skipped
    for ref in list(doc.body.children):
        node = ref.resolve(doc)
        if (
            isinstance(prev, ListGroup)
            and isinstance(node, ListGroup)
            and prev.children
            and node.children
            and any(_last_page(prev, doc) < s <= _first_page(node, doc) for s in starts)
        ):
            for child in node.children:
                child.resolve(doc).parent = prev.get_ref()
            prev.children += node.children
            node.children = []
            emptied.append(node)
            continue
        prev = node
    if emptied:  # childless now: deleting them renumbers the groups after them
        doc.delete_items(node_items=emptied)


def _concat(
    name: str, pieces: Iterable[tuple[int, Any]], join_tables: bool
) -> tuple[Any, list[int]]:
    """One DoclingDocument of ``pieces`` (page offset, document), in page order, pages
    numbered as in the original (each piece's page numbers moved by its offset); and
    the tables joined across their boundaries (with ``join_tables``). The pieces are
    taken one at a time: a generator that builds each document as it is asked for
    holds one of them beside the merged document, not all."""
    from docling_core.types.doc import DoclingDocument

    # docling-core's own concatenation renumbers pages to follow on; given the page
    # before each piece (its first page moved by its offset), it moves them by the
    # offset instead, gaps included.
    index = DoclingDocument._DocIndex()
    starts: set[int] = set()
    for k, (offset, doc) in enumerate(pieces):
        if doc.pages:
            index._max_page = min(doc.pages) - 1 + offset
            if k:
                starts.add(min(doc.pages) + offset)
        index.index(doc=_shifted(doc, offset) if offset and not doc.pages else doc)
        del doc
    merged = DoclingDocument(name=name)
    merged._update_from_index(index)
    merged.name = name
    _join_lists(merged, starts)
    joined: list[int] = []
    if join_tables:
        from parsers.table_joins import join_continued_tables

        merged, joined = join_continued_tables(merged)
    return merged, joined


def _range_levels(found: list[RangeHeadings | None]) -> list[list[int]]:
    """The levels of the headings each range's parse found (``found``: what each range,
    in page order, reported), numbered as one document's: a style keeps one level in
    every range, and a range that lacks the largest style numbers the others as the
    whole document does (``parsers.pdf.headings.mark_levels``)."""
    from parsers.pdf.headings import mark_levels

    marks = [f.marks if f is not None else [] for f in found]
    levels = iter(mark_levels([m for ms in marks for m in ms]))
    return [[next(levels) for _m in ms] for ms in marks]


def _set_levels(doc: Any, levels: list[int]) -> Any:
    """``doc`` with its headings at ``levels`` (in document order); as it is when it has
    another number of headings (another parse path than the one that reported them)."""
    from docling_core.types.doc import SectionHeaderItem

    items = [t for t in doc.texts if isinstance(t, SectionHeaderItem)]
    if levels and len(items) == len(levels):
        for item, level in zip(items, levels, strict=True):
            item.level = level
    return doc


def _gather(
    parts: list[tuple[int, ParsedDocument]],
    outcome: PageOutcome,
    joined: list[int],
    warnings: list[ParseWarning],
    missing: set[int],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """Adds the ranges' warnings and missing pages (renumbered as in the original), the
    outcome's warnings and the table joins' to ``warnings`` and ``missing``; returns the
    ranges' metadata over ``extra`` (the earlier range wins)."""
    for first, parsed in parts:
        extra = {**parsed.metadata, **extra}
        for w in parsed.warnings:
            page = w.page + first - 1 if w.page is not None else None
            warnings.append(ParseWarning(w.source, w.message, page))
        missing.update(p + first - 1 for p in parsed.missing_pages)
    warnings += outcome.warnings
    if joined:
        from parsers.table_joins import join_warnings

        warnings += join_warnings(joined)
    return extra


def merge_parts(
    path: Path,
    outcome: PageOutcome,
    page_count: int,
    metadata: dict[str, Any],
    title: Callable[[Any, str], str],
    join_tables: bool = True,
) -> ParsedDocument:
    """One ParsedDocument from the ranges' documents, pages in order and numbered as in
    the original; degraded and missing pages in its warnings, ``missing_pages`` and
    ``status`` (``partial`` whenever a page was not read by the structured parser).
    With ``join_tables`` (``parse.join_continued_tables``), a table continued across
    a range boundary is joined like one inside a range (``parsers.table_joins``)."""
    parts = sorted(outcome.parts, key=lambda part: part[0])
    if not parts:
        raise ParseError(Category.CORRUPT, "page isolation read no page")
    levels = _range_levels([outcome.headings.get(first) for first, _parsed in parts])
    # Each range's document is built as the merge takes it, and dropped once merged.
    pieces = (
        (first - 1, _set_levels(parsed.to_docling(), mine))
        for (first, parsed), mine in zip(parts, levels, strict=True)
    )
    merged, joined = _concat(path.stem, pieces, join_tables)
    structured = [parsed for _first, parsed in parts if parsed.parser not in ("pdf-text", "ocr")]
    parser = structured[0].parser if structured else parts[0][1].parser
    warnings: list[ParseWarning] = []
    missing: set[int] = set(outcome.missing)
    extra = _gather(parts, outcome, joined, warnings, missing, {})
    markdown = _markdown(merged)
    if not markdown.strip():
        raise ParseError(
            Category.CORRUPT, f"no page could be read (failed pages {sorted(missing)})"
        )
    partial = bool(missing or outcome.degraded) or any(p.status == "partial" for _f, p in parts)
    return ParsedDocument(
        markdown=markdown,
        docling_json=_json(merged),
        title=str(extra.get("title") or title(merged, path.stem)),
        format="pdf",
        page_count=max(page_count, 1),
        parser=parser,
        status="partial" if partial else "success",
        warnings=tuple(warnings),
        metadata={**extra, **metadata},
        missing_pages=tuple(sorted(missing)),
    )


def _runs(pages: list[int]) -> list[list[int]]:
    """Consecutive runs of sorted page numbers: [1, 2, 4, 5, 7] -> [[1, 2], [4, 5], [7]]."""
    runs: list[list[int]] = []
    for page in pages:
        if runs and page == runs[-1][-1] + 1:
            runs[-1].append(page)
        else:
            runs.append([page])
    return runs


def _about_page(w: ParseWarning, pages: set[int]) -> bool:
    """A page-isolation warning about one of ``pages`` (missing, degraded, its bundle)."""
    return w.source == SOURCE and w.page is not None and w.page in pages


def splice_pages(
    path: Path,
    previous: ParsedDocument,
    outcome: PageOutcome,
    retried: list[int],
    metadata: dict[str, Any],
    title: Callable[[Any, str], str],
    join_tables: bool = True,
) -> ParsedDocument:
    """``previous`` (a parse of the same bytes with pages missing) with the pages in
    ``retried`` replaced by what ``outcome`` read of them (a page retry): the kept pages
    are taken from ``previous`` as they are, the read ones put in page order between them,
    the warnings about retried pages replaced by the retry's. Pages still unread stay in
    ``missing_pages``; the result is ``success`` when no page is missing or degraded."""
    again = set(retried)
    old = previous.to_docling()
    kept = sorted(p for p in old.pages if p not in again)
    pieces: list[tuple[int, int, Any]] = [
        (run[0], 0, old.filter(page_nrs=set(run))) for run in _runs(kept)
    ]
    pieces += [(first, first - 1, parsed.to_docling()) for first, parsed in outcome.parts]
    pieces.sort(key=lambda piece: piece[0])
    name = old.name or path.stem
    merged, joined = _concat(name, [(shift, doc) for _first, shift, doc in pieces], join_tables)
    warnings = [w for w in previous.warnings if not _about_page(w, again)]
    missing = {p for p in previous.missing_pages if p not in again} | set(outcome.missing)
    extra = _gather(outcome.parts, outcome, joined, warnings, missing, dict(previous.metadata))
    # Pages a fallback read, before or now, keep the document partial.
    degraded = bool(outcome.degraded) or any(
        w.source == SOURCE and w.page is not None and w.message.startswith("degraded:")
        for w in warnings
    )
    partial = bool(missing or degraded) or any(p.status == "partial" for _f, p in outcome.parts)
    return ParsedDocument(
        markdown=_markdown(merged),
        docling_json=_json(merged),
        title=previous.title if 1 not in again else str(title(merged, path.stem)),
        format=previous.format,
        page_count=previous.page_count,
        parser=previous.parser,
        status="partial" if partial else "success",
        warnings=tuple(warnings),
        metadata={**extra, **metadata},
        missing_pages=tuple(sorted(missing)),
    )


def content_key(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256: a bundle folder's name, the same
    prefix the ledger's ``content_sha256`` starts with."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def bundle_folder(repro_dir: str, key: str) -> Path:
    return Path(repro_dir).expanduser() / key


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from parsers.models import PARSER_VERSION

    out = {"corpusflow-parser": PARSER_VERSION, "python": platform.python_version()}
    for package in ("docling-slim", "docling", "docling-core", "docling-parse", "pypdfium2"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            continue
    return out


def write_bundle_json(
    folder: Path,
    page: int,
    source: Path,
    page_count: int,
    errors: list[dict[str, str]],
    settings: ParseSettings,
    page_pdf: str,
    metadata: dict[str, Any],
) -> Path:
    """The JSON of a page's repro bundle: what failed, with what, under which settings."""
    relevant = settings.model_dump(
        include={
            "timeout_s",
            "memory_limit_mb",
            "pdf_pipeline",
            "ocr",
            "ocr_engine",
            "ocr_scale",
            "ocr_min_chars_per_page",
            "page_batch",
            "page_timeout_min_s",
        }
    )
    out = folder / f"page-{page:05d}.json"
    folder.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "source": str(source),
                "metadata": {k: str(v) for k, v in metadata.items()},
                "page": page,
                "page_count": page_count,
                "page_pdf": page_pdf,
                "errors": errors,
                "versions": _versions(),
                "settings": relevant,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return out


def remove_bundles(repro_dir: str, content_sha256: str) -> bool:
    """Remove the repro bundles of a document by its content hash; whether any existed."""
    if not repro_dir or not content_sha256:
        return False
    folder = bundle_folder(repro_dir, content_sha256[:16])
    if not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def remove_page_bundles(repro_dir: str, key: str, pages: list[int]) -> int:
    """Remove the repro bundles of ``pages`` of the document whose ``content_key`` is
    ``key`` (pages a retry read); the folder too once it is empty. Returns how many files."""
    if not repro_dir or not pages:
        return 0
    folder = bundle_folder(repro_dir, key)
    removed = 0
    for page in pages:
        for suffix in (".pdf", ".json"):
            target = folder / f"page-{page:05d}{suffix}"
            if target.is_file():
                target.unlink(missing_ok=True)
                removed += 1
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return removed
