"""Model-free PDF path: text lines -> paragraphs, headings and lists.

docling's NativePdfPipeline (no models, works offline) yields one text item per
line, in content-stream order, with a bounding box and no structure. This module
rebuilds the structure from what a PDF still tells without models:

- the outline (bookmarks), whose titles and levels become headings;
- line height, a proxy for font size: short paragraphs set clearly larger than
  the body text become headings, one level per distinct size;
- vertical gaps and indentation, which separate paragraphs;
- bullet and numbering markers, which start list items.

Scanned pages (no usable text layer) are OCR'd (parsers.ocr) and their lines
go through the same assembly, so a mixed document is one DoclingDocument.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from corpusflow.settings import ParseSettings

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument


@dataclass(frozen=True, slots=True)
class Line:
    """One line of text on a page, box in points with a top-left origin."""

    page_no: int
    text: str
    left: float
    top: float
    right: float
    bottom: float

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 0.1)


@dataclass(slots=True)
class Block:
    kind: str  # "paragraph" | "heading" | "list_item"
    lines: list[Line]
    level: int = 0

    @property
    def text(self) -> str:
        out = ""
        for line in self.lines:
            piece = line.text.strip()
            if not out:
                out = piece
            elif out.endswith("-") and not out.endswith(" -") and piece[:1].islower():
                out = out[:-1] + piece  # re-join a hyphenated word
            elif _is_cjk(out[-1:]) and _is_cjk(piece[:1]):
                out += piece
            else:
                out += " " + piece
        return out

    @property
    def height(self) -> float:
        return statistics.median(line.height for line in self.lines)


_BULLET = re.compile(r"^(?:[•●▪◦‣∙·\-–*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+\S")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _is_cjk(ch: str) -> bool:
    return bool(ch) and bool(_CJK.match(ch))


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def group_blocks(lines: list[Line]) -> list[Block]:
    """Group consecutive lines of one page into paragraphs and list items."""
    blocks: list[Block] = []
    current: Block | None = None
    prev: Line | None = None
    for line in lines:
        if not line.text.strip():
            continue
        starts_list = bool(_BULLET.match(line.text.strip()))
        new_block = True
        if current is not None and prev is not None and prev.page_no == line.page_no:
            gap = line.top - prev.bottom
            similar_size = abs(line.height - prev.height) <= 0.2 * max(line.height, prev.height)
            overlaps = line.left < prev.right and line.right > prev.left
            new_block = (
                starts_list
                or not similar_size
                or not overlaps
                or gap > 0.9 * max(line.height, prev.height)
                or gap < -0.5 * line.height  # moved up: a new column or region
            )
        if new_block:
            current = Block("list_item" if starts_list else "paragraph", [line])
            blocks.append(current)
        else:
            assert current is not None
            current.lines.append(line)
        prev = line
    return blocks


def classify_headings(blocks: list[Block], outline: list[tuple[int, str]]) -> None:
    """Mark heading blocks and their levels (in place)."""
    outline_levels = {_norm(title): level for level, title in outline if _norm(title)}
    # "1. Scope" set large is a numbered heading, not a list item.
    text_blocks = [b for b in blocks if b.kind in ("paragraph", "list_item")]
    if not text_blocks:
        return
    weights = [(b.height, len(b.text)) for b in blocks]
    total = sum(w for _, w in weights) or 1
    # Body size: the height that carries the most characters.
    by_height: dict[float, int] = {}
    for h, w in weights:
        size = round(h, 0)
        by_height[size] = by_height.get(size, 0) + w
    body = max(by_height.items(), key=lambda kv: kv[1])[0] if total else 10.0

    candidates: list[Block] = []
    for block in text_blocks:
        text = block.text
        key = _norm(text)
        if key in outline_levels:
            block.kind = "heading"
            block.level = outline_levels[key] + 1
            continue
        short = len(text) <= 120 and len(block.lines) <= 2
        no_sentence_end = not text.rstrip().endswith((".", ",", ";", "。", "，"))
        larger = block.height >= body * 1.15 + 0.5
        if short and larger and no_sentence_end and any(c.isalpha() for c in text):
            candidates.append(block)
    # One level per distinct size, largest first; the outline levels win where present.
    sizes = sorted({round(b.height, 0) for b in candidates}, reverse=True)
    level_of = {size: min(i + 1, 6) for i, size in enumerate(sizes)}
    base = max(outline_levels.values(), default=-1) + 1 if outline_levels else 0
    for block in candidates:
        block.kind = "heading"
        block.level = min(level_of[round(block.height, 0)] + base, 6)


def lines_to_document(
    lines: list[Line],
    page_sizes: dict[int, tuple[float, float]],
    name: str,
    outline: list[tuple[int, str]],
) -> DoclingDocument:
    """Assemble a structured DoclingDocument from page lines."""
    from docling_core.types.doc import (
        BoundingBox,
        CoordOrigin,
        DocItemLabel,
        DoclingDocument,
        ProvenanceItem,
        Size,
    )

    doc = DoclingDocument(name=name)
    for page_no, (width, height) in sorted(page_sizes.items()):
        doc.add_page(page_no=page_no, size=Size(width=width, height=height))
    blocks = group_blocks(lines)
    classify_headings(blocks, outline)

    list_group = None
    for block in blocks:
        text = block.text
        first, last = block.lines[0], block.lines[-1]
        bbox = BoundingBox(
            l=min(ln.left for ln in block.lines),
            t=first.top,
            r=max(ln.right for ln in block.lines),
            b=last.bottom,
            coord_origin=CoordOrigin.TOPLEFT,
        )
        prov = ProvenanceItem(page_no=first.page_no, bbox=bbox, charspan=(0, len(text)))
        if block.kind == "list_item":
            if list_group is None:
                list_group = doc.add_list_group()
            marker_match = re.match(r"^(\S+)\s+", text)
            marker = marker_match.group(1) if marker_match else ""
            body = text[marker_match.end() :] if marker_match else text
            enumerated = bool(re.match(r"^\(?[\da-zA-Z]{1,3}[.)]$", marker))
            doc.add_list_item(
                body, enumerated=enumerated, marker=marker, prov=prov, parent=list_group
            )
            continue
        list_group = None
        if block.kind == "heading":
            doc.add_heading(text, level=max(1, block.level), prov=prov)
        else:
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    return doc


def read_outline(path: Path) -> list[tuple[int, str]]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        return [(b.level, b.get_title() or "") for b in pdf.get_toc(max_depth=6)]
    except Exception:  # a broken outline is not a broken document
        return []
    finally:
        pdf.close()


def native_lines(path: Path) -> tuple[list[Line], dict[int, tuple[float, float]], list[str]]:
    """Text-layer lines of every page via docling's model-free NativePdfPipeline."""
    from docling.datamodel.base_models import ConversionStatus, InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, PdfFormatOption
    from docling.pipeline.native_pdf_pipeline import NativePdfPipeline
    from docling_core.types.doc import CoordOrigin

    opts = NativePdfPipelineOptions(
        generate_page_images=False, generate_picture_images=False, parser_threads=1
    )
    converter = DocumentConverter(
        format_options={
            InputFormat.PDF: PdfFormatOption(pipeline_cls=NativePdfPipeline, pipeline_options=opts)
        }
    )
    result = converter.convert(path, raises_on_error=False)
    warnings = [f"{e.module_name}: {e.error_message}" for e in result.errors]
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        from parsers.errors import Category, ParseError

        raise ParseError(
            Category.CORRUPT, "; ".join(warnings) or f"PDF conversion {result.status.value}"
        )
    doc = result.document
    sizes = {no: (p.size.width, p.size.height) for no, p in doc.pages.items()}
    lines: list[Line] = []
    for item, _level in doc.iterate_items():
        text = getattr(item, "text", "")
        provs = getattr(item, "prov", None)
        if not text or not provs:
            continue
        prov = provs[0]
        page_h = sizes.get(prov.page_no, (0.0, 0.0))[1]
        box = prov.bbox
        if box.coord_origin == CoordOrigin.BOTTOMLEFT:
            box = box.to_top_left_origin(page_height=page_h)
        lines.append(Line(prov.page_no, text, box.l, box.t, box.r, box.b))
    return lines, sizes, warnings


def parse_pdf_offline(
    path: Path, settings: ParseSettings
) -> tuple[DoclingDocument, str, list[str]]:
    """Structured DoclingDocument of a PDF without layout models; OCR for scanned pages."""
    lines, sizes, warnings = native_lines(path)
    parser = "pdf-offline"
    if settings.ocr:
        chars: dict[int, int] = {}
        for line in lines:
            chars[line.page_no] = chars.get(line.page_no, 0) + len(line.text.strip())
        scanned = [p for p in sizes if chars.get(p, 0) < settings.ocr_min_chars_per_page]
        if scanned:
            from parsers.ocr import ocr_pdf_pages

            ocr_lines, ocr_warnings = ocr_pdf_pages(path, scanned, settings)
            warnings.extend(ocr_warnings)
            lines = [ln for ln in lines if ln.page_no not in set(scanned)] + ocr_lines
            lines.sort(key=lambda ln: ln.page_no)  # stable: keeps order inside a page
            parser = "pdf-offline+ocr"
    doc = lines_to_document(lines, sizes, path.stem, read_outline(path))
    return doc, parser, warnings
