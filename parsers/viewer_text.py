"""The text a viewer shows that docling's Office readers leave out (issue #32).

docling's PowerPoint and Word backends read a slide's own shapes and a document's body.
What PowerPoint or Word also puts on the screen, and what this module adds:

PowerPoint (``ViewerPptxBackend``; also ``.ppt`` after LibreOffice):

- **Layout and master shapes.** Text in real shapes of a slide layout or master (a
  confidentiality line, a banner, a caption beside a logo) shows on every slide that uses
  it. Placeholders there are left out: their text is prompt text ("Click to edit Master
  title style") that a slide replaces with its own. Each layout's and master's text is
  added **once**, at the end of the first visible slide that shows it (a slide or layout
  with ``showMasterSp="0"`` hides what lies below it), so chunks do not repeat it per slide.
- **SmartArt.** A diagram's text lives in its data part (``ppt/diagrams/data*.xml``,
  the ``dgm:t`` of each ``dgm:pt``), which python-pptx does not read. Each point's text is
  one item at the end of the slide that holds the diagram; a diagram on a layout or master
  is read once, as that layout's or master's text boxes are.
- **Speaker notes.** docling keeps them in its ``notes`` layer, out of the Markdown; they
  are moved to the body after the slide's content (a hidden slide's stay where they are).
- **Footers.** docling puts a slide's footer, date and slide-number placeholders in its
  ``furniture`` layer, out of the Markdown. A footer line with letters is moved to the body
  once per deck (on the first visible slide that shows it; a line also on a layout counts
  as the same line); slide numbers and numeric dates stay out.

Word (``ViewerDocxBackend``; also ``.doc``/``.rtf`` after LibreOffice):

- **Headers, footers, footnotes and endnotes.** docling reads each distinct header and
  footer part once (and every note), in its ``furniture`` layer, out of the Markdown; they
  are moved to the body, where docling put them: after the document's text.
- **altChunk.** A ``w:altChunk`` imports a whole part (HTML, XHTML, MHT, plain text, RTF
  or a nested Word document) into the document where it stands; docling skips it. Each is
  read as a file of its kind is (docling's HTML/MHTML readers; RTF through LibreOffice; a
  DOCX by this backend) and inserted in its place. Other kinds are left out with a warning.
- Text boxes are docling's own reading (already in the body).

Excel (``ViewerXlsxBackend``; also ``.xls`` after LibreOffice), after each sheet's tables:

- **Cell comments** (openpyxl keeps them on the cells docling reads), as
  "Comment on B3: ...", in cell order.
- **Text boxes and shapes** of the sheet's drawing part (``xdr:sp`` text bodies; hidden
  shapes left out), which openpyxl drops.
- **Chart titles** docling did not already read as the chart's caption.

Embedded objects (Word and PowerPoint): a worksheet, document or deck embedded as a
package (``embeddings/*.xlsx``) or as an OLE object holding a 97-2003 file or a wrapped
package (``oleObjectN.bin``) is read as a file of its kind, carried over as its Markdown
read back (headings, lists and tables kept), after a line naming it: at the end of the
slide that holds it, or of the Word document. At most ``MAX_EMBEDDED`` per document;
pictures and other programs' objects are not read.

Every addition is a bounded step after docling's reading: if one fails on an odd file,
docling's document stays as it was and the failure is a parse warning
(``supplement_warnings``, which ``parsers.docling_backend.conversion_result`` reports).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from common.encodings import guess_encoding
from parsers.docx_words import WordsDocxBackend
from parsers.pptx_charts import ChartPptxBackend
from parsers.xlsx_cells import FormattedXlsxBackend

_log = logging.getLogger(__name__)

_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS = {"p": _P, "a": _A, "dgm": _DGM, "r": _R, "w": _W}
# dgm:pt types that carry no text of their own (connections, presentation points).
_NON_TEXT_POINTS = frozenset({"parTrans", "sibTrans", "pres", "doc"})


def _safe_xml(blob: bytes) -> Any:
    """An XML part parsed with no DTD loading, no entity expansion, no network."""
    from lxml import etree

    from parsers.safety import xml_dtd_problem

    problem = xml_dtd_problem(blob[:65536], complete=len(blob) <= 65536)
    if problem:
        raise ValueError(f"XML part {problem}")
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    return etree.fromstring(blob, parser)


def _clean(text: str) -> str:
    return " ".join(text.split())


# -- PowerPoint ---------------------------------------------------------------------------


def diagram_point_texts(data_xml: bytes) -> list[str]:
    """The text of each point of a SmartArt data part, in the part's order."""
    root = _safe_xml(data_xml)
    out: list[str] = []
    for pt in root.iterfind("dgm:ptLst/dgm:pt", _NS):
        if pt.get("type") in _NON_TEXT_POINTS:
            continue
        paragraphs = [_clean("".join(p.itertext())) for p in pt.iterfind("dgm:t/a:p", _NS)]
        text = "\n".join(p for p in paragraphs if p)
        if text:
            out.append(text)
    return out


def slide_diagram_texts(slide: Any) -> list[tuple[Any, list[str]]]:
    """(graphic frame element, point texts) of every SmartArt diagram on ``slide`` (or on
    a slide layout or master: anything with a shape tree and part relationships)."""
    found = []
    seen: set[str] = set()  # a frame in both branches of an mc:AlternateContent: once
    for rel_ids in slide._element.iterfind(".//p:graphicFrame//dgm:relIds", _NS):
        rid = rel_ids.get(f"{{{_R}}}dm")
        if not rid or rid not in slide.part.rels or rid in seen:
            continue
        seen.add(rid)
        texts = diagram_point_texts(slide.part.rels[rid].target_part.blob)
        frame = next(a for a in rel_ids.iterancestors(f"{{{_P}}}graphicFrame"))
        found.append((frame, texts))
    return found


def _is_hidden(frame: Any) -> bool:
    """Whether a graphic frame is hidden (``cNvPr hidden``)."""
    c_nv_pr = frame.find("p:nvGraphicFramePr/p:cNvPr", _NS)
    return c_nv_pr is not None and c_nv_pr.get("hidden") in ("1", "true")


def _shows_below(owner: Any) -> bool:
    """Whether a slide or layout shows the shapes of its layout/master (``showMasterSp``)."""
    return owner._element.get("showMasterSp") not in ("0", "false")


def _non_placeholder_text_shapes(shapes: Any) -> list[Any]:
    """Shapes with text that are not placeholders, groups opened, in z-order."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    out = []
    for shape in shapes:
        if shape.is_placeholder:
            continue
        hidden = shape._element.xpath("./*/p:cNvPr/@hidden")
        if hidden and hidden[0] in ("1", "true"):
            continue
        try:
            kind = shape.shape_type
        except NotImplementedError:
            kind = None
        if kind == MSO_SHAPE_TYPE.GROUP:
            out += _non_placeholder_text_shapes(shape.shapes)
        elif getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
            out.append(shape)
    return out


class ViewerPptxBackend(ChartPptxBackend):
    """docling's PowerPoint backend (charts in full) with layout/master text, SmartArt
    text and speaker notes in the body (see the module docstring)."""

    supplement_warnings: list[tuple[str, str]]

    def _walk_linear(self, pptx_obj: Any, doc: Any, *args: Any, **kwargs: Any) -> Any:
        from docling_core.types.doc import Size

        doc = super()._walk_linear(pptx_obj, doc, *args, **kwargs)
        self.supplement_warnings = []
        start = kwargs.get("start_page", args[1] if len(args) > 1 else 1) or 1
        end = kwargs.get("end_page", args[2] if len(args) > 2 else None)
        groups = {
            g.name: g for g in doc.groups if g.name.startswith("slide-") and g.parent is not None
        }
        shown: set[str] = set()  # layout/master part names and the lines read from them
        size = Size(width=pptx_obj.slide_width, height=pptx_obj.slide_height)
        for slide_ind, slide in list(enumerate(pptx_obj.slides))[start - 1 : end]:
            group = groups.get(f"slide-{slide_ind}")
            if group is None:
                continue
            try:
                self._supplement_slide(slide, slide_ind, group, doc, shown, size)
            except Exception as exc:  # never lose docling's reading over a supplement
                _log.warning("slide %d: %s", slide_ind + 1, exc)
                self.supplement_warnings.append(
                    ("viewer-text", f"slide {slide_ind + 1}: layout/SmartArt/notes text: {exc}")
                )
        return doc

    def _supplement_slide(
        self, slide: Any, slide_ind: int, group: Any, doc: Any, shown: set[str], size: Any
    ) -> None:
        from docling_core.types.doc import ContentLayer, DocItemLabel

        hidden_slide = slide._element.get("show") in ("0", "false")
        layer = ContentLayer.INVISIBLE if hidden_slide else ContentLayer.BODY
        before = list(group.children)
        notes = [
            ref
            for ref in before
            if getattr(ref.resolve(doc), "content_layer", None) == ContentLayer.NOTES
            and ref.resolve(doc).label == DocItemLabel.TEXT
        ]

        def add(shape: Any, text: str, item_layer: Any = layer) -> None:
            prov = self._generate_prov(shape, slide_ind, text, size)
            doc.add_text(
                label=DocItemLabel.TEXT,
                parent=group,
                text=text,
                prov=prov,
                content_layer=item_layer,
            )

        for frame, texts in slide_diagram_texts(slide):
            frame_layer = ContentLayer.INVISIBLE if _is_hidden(frame) else layer
            shape = _FrameBox(frame)
            for text in texts:
                add(shape, text, frame_layer)

        if not hidden_slide:
            parts = _embedding_parts(slide.part.rels)
            add_embedded_objects(doc, parts, group, self.supplement_warnings)

        if not hidden_slide:
            # docling puts a slide's footer, date and slide-number placeholders in its
            # furniture layer, out of the Markdown; a footer's words ("Acme confidential",
            # the talk's title) are read once per deck, numbers and numeric dates are not.
            for ref in before:
                item = ref.resolve(doc)
                text = _clean(getattr(item, "text", "") or "")
                if (
                    getattr(item, "content_layer", None) == ContentLayer.FURNITURE
                    and any(c.isalpha() for c in text)
                    and f"\0{text}" not in shown
                ):
                    shown.add(f"\0{text}")
                    item.content_layer = ContentLayer.BODY

        if not hidden_slide and _shows_below(slide):
            layout = slide.slide_layout
            owners = [layout]
            if _shows_below(layout):
                owners.append(layout.slide_master)
            for owner in owners:
                name = str(owner.part.partname)
                if name in shown:
                    continue
                shown.add(name)
                lines: list[tuple[Any, str]] = [
                    (shape, _clean(paragraph.text))
                    for shape in _non_placeholder_text_shapes(owner.shapes)
                    for paragraph in shape.text_frame.paragraphs
                ]
                # SmartArt drawn on the layout or master (a process banner on every slide)
                lines += [
                    (_FrameBox(frame), text)
                    for frame, texts in slide_diagram_texts(owner)
                    if not _is_hidden(frame)
                    for text in texts
                ]
                for shape, text in lines:
                    # The same line on several layouts (a footer box copied to each)
                    # is read once too; a slide-number field alone ("‹#›") has no
                    # words to read.
                    if not any(c.isalnum() for c in text) or f"\0{text}" in shown:
                        continue
                    shown.add(f"\0{text}")
                    add(shape, text)

        added = [ref for ref in group.children if ref not in before]
        if not hidden_slide:
            for ref in notes:
                ref.resolve(doc).content_layer = ContentLayer.BODY
        if added and notes:  # the slide's own content and additions first, notes last
            keep = [ref for ref in before if ref not in notes]
            group.children = keep + added + notes


class _FrameBox:
    """The position of a graphic frame, as ``_generate_prov`` reads a shape's."""

    def __init__(self, frame: Any) -> None:
        off = frame.find("p:xfrm/a:off", _NS)
        ext = frame.find("p:xfrm/a:ext", _NS)
        self.left = int(off.get("x")) if off is not None else None
        self.top = int(off.get("y")) if off is not None else None
        self.width = int(ext.get("cx")) if ext is not None else None
        self.height = int(ext.get("cy")) if ext is not None else None
        if None in (self.left, self.top, self.width, self.height):
            self.left = self.top = self.width = self.height = None
        self._element = frame


# -- Word ---------------------------------------------------------------------------------

# The placeholder paragraph an altChunk becomes before docling reads the body.
_MARK = "\u2063corpusflow-altchunk:{rid}\u2063"
_MARK_RE = re.compile("^\u2063corpusflow-altchunk:(.+?)\u2063$")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_MHT_TYPES = ("message/rfc822", "multipart/related")
_RTF_TYPES = ("application/rtf", "text/rtf")
# A nested Word document: the package's type, or its main part's.
_DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml."
_DOCX_MAIN_TYPES = ("application/vnd.ms-word.document.macroenabled.main+xml",)


def _paragraph(text: str) -> Any:
    from lxml import etree

    p = etree.Element(f"{{{_W}}}p")
    r = etree.SubElement(p, f"{{{_W}}}r")
    t = etree.SubElement(r, f"{{{_W}}}t")
    t.text = text
    return p


# What a content control may hand its parent when unwrapped: rows to a table, cells to a
# row, runs (and what holds runs) to a paragraph. A control holding anything else (a
# malformed file's paragraph inside a paragraph) is left as it is.
_UNWRAP_INTO = {
    "tbl": {"tr", "sdt", "bookmarkStart", "bookmarkEnd", "customXml", "proofErr"},
    "tr": {"tc", "sdt", "bookmarkStart", "bookmarkEnd", "customXml", "proofErr"},
    "p": {
        "r",
        "sdt",
        "hyperlink",
        "ins",
        "del",
        "moveTo",
        "moveFrom",
        "smartTag",
        "fldSimple",
        "bookmarkStart",
        "bookmarkEnd",
        "commentRangeStart",
        "commentRangeEnd",
        "proofErr",
        "customXml",
        "oMath",
        "oMathPara",
    },
}


def unwrap_row_controls(body: Any) -> int:
    """Take table rows, cells and a cell's runs out of the content controls (``w:sdt``)
    that wrap them: a repeating section's rows, a drop-down list in a cell, a text field
    in a cell's paragraph. docling's Word reader walks a table's ``w:tr`` children and a
    cell's runs only, so a form's rows and fields inside a control were dropped with
    their text. Controls in paragraphs outside tables stay: docling reads them (and
    tells a check box by its control's properties). Returns how many were unwrapped."""
    sdt, content = f"{{{_W}}}sdt", f"{{{_W}}}sdtContent"
    cell = f"{{{_W}}}tc"

    def eligible(control: Any) -> bool:
        parent = control.getparent()
        if parent is None or not parent.tag.startswith(f"{{{_W}}}"):
            return False
        allowed = _UNWRAP_INTO.get(parent.tag.split("}", 1)[1])
        if allowed is None:
            return False
        if parent.tag == f"{{{_W}}}p" and not any(a.tag == cell for a in parent.iterancestors()):
            return False
        inner = control.find(content)
        return inner is None or all(
            isinstance(child.tag, str) and child.tag.split("}", 1)[-1] in allowed for child in inner
        )

    unwrapped = 0
    while True:
        found = [el for el in body.iter(sdt) if eligible(el)]
        if not found:
            return unwrapped
        for control in found:  # nested controls surface in the next round
            parent = control.getparent()
            at = parent.index(control)
            inner = control.find(content)
            parent.remove(control)
            for offset, child in enumerate(list(inner) if inner is not None else []):
                parent.insert(at + offset, child)
            unwrapped += 1


def _mark_alt_chunks(document_part: Any) -> int:
    """Replace each ``w:altChunk`` of the body by a paragraph naming its relationship
    (``ViewerDocxBackend.convert`` puts the part's reading there). One inside a table
    cell or a content control, where docling reads plain text, becomes the part's text
    as plain paragraphs. Returns how many were left as they were (not readable)."""
    left = 0
    body = document_part.element.body
    for chunk in list(document_part.element.iter(f"{{{_W}}}altChunk")):
        parent = chunk.getparent()
        rid = chunk.get(f"{{{_R}}}id")
        if parent is None or not rid:
            left += 1
            continue
        if parent is body:
            parent.replace(chunk, _paragraph(_MARK.format(rid=rid)))
            continue
        try:
            part = document_part.rels[rid].target_part
            sub = alt_chunk_document(part.blob, part.content_type, str(part.partname))
        except Exception:  # the part is missing or unreadable: left as docling sees it
            sub = None
        if sub is None:
            left += 1
            continue
        paragraphs = [_clean(p) for p in re.split(r"\n\s*\n", sub.export_to_text()) if p.strip()]
        position = parent.index(chunk)
        parent.remove(chunk)
        for offset, text in enumerate(paragraphs):
            parent.insert(position + offset, _paragraph(text))
    return left


def alt_chunk_document(blob: bytes, content_type: str, name: str) -> Any:
    """An altChunk part as a DoclingDocument (docling's HTML/MHTML reader; a nested Word
    document or RTF as those files are read), or None for a kind not read here."""
    from parsers.docling_backend import convert_bytes

    kind = content_type.split(";")[0].strip().lower()
    if kind in _HTML_TYPES or name.lower().endswith((".htm", ".html", ".xhtml")):
        return convert_bytes(blob, "altchunk", "HTML", ".html").doc
    if kind in _MHT_TYPES or name.lower().endswith((".mht", ".mhtml")):
        return convert_bytes(blob, "altchunk", "MHTML", ".mhtml").doc
    if (
        kind.startswith(_DOCX_TYPE)
        or kind in _DOCX_MAIN_TYPES
        or name.lower().endswith((".docx", ".docm", ".dotx"))
    ):
        # Read as any Word document, by this backend: its own altChunks, headers and notes too.
        return convert_bytes(blob, "altchunk", "DOCX", ".docx").doc
    if kind in _RTF_TYPES or name.lower().endswith(".rtf"):
        return convert_bytes(blob, "altchunk", "RTF", ".rtf").doc  # LibreOffice, as .rtf files
    if kind == "text/plain" or name.lower().endswith(".txt"):
        from docling_core.types.doc import DocItemLabel, DoclingDocument

        from parsers.textcodec import decode

        text, _encoding = decode(blob, "altChunk text")
        doc = DoclingDocument(name="altchunk")
        for para in re.split(r"\n\s*\n", text):
            if para.strip():
                doc.add_text(label=DocItemLabel.TEXT, text=_clean(para))
        return doc
    return None


class ViewerDocxBackend(WordsDocxBackend):
    """docling's Word backend (whole words, ruby base text) with headers, footers, notes
    and altChunk parts in the body (see the module docstring)."""

    supplement_warnings: list[tuple[str, str]]

    @staticmethod
    def load_msword_file(*args: Any, **kwargs: Any) -> Any:
        docx_obj = WordsDocxBackend.load_msword_file(*args, **kwargs)
        if docx_obj is not None:
            try:
                unwrap_row_controls(docx_obj.part.element)
            except Exception as exc:  # the tables as docling reads them
                _log.warning("content controls in tables: %s", exc)
            try:
                _mark_alt_chunks(docx_obj.part)
            except Exception as exc:  # the body as docling reads it (convert warns)
                _log.warning("altChunk: %s", exc)
        return docx_obj

    def convert(self) -> Any:
        doc = super().convert()
        self.supplement_warnings = []
        try:
            self._insert_alt_chunks(doc)
        except Exception as exc:
            self.supplement_warnings.append(("viewer-text", f"altChunk: {exc}"))
        self._drop_marks(doc)
        left = len(list(self.docx_obj.part.element.iter(f"{{{_W}}}altChunk")))
        if left:
            self.supplement_warnings.append(("viewer-text", f"{left} altChunk part(s) not read"))
        try:
            self._furniture_to_body(doc)
        except Exception as exc:
            self.supplement_warnings.append(("viewer-text", f"headers/footers: {exc}"))
        try:
            parts = _embedding_parts(self.docx_obj.part.rels)
            add_embedded_objects(doc, parts, None, self.supplement_warnings)
        except Exception as exc:
            self.supplement_warnings.append(("viewer-text", f"embedded objects: {exc}"))
        return doc

    def _marks(self, doc: Any) -> list[tuple[Any, str]]:
        from docling_core.types.doc import ContentLayer

        found = []
        for item, _level in doc.iterate_items(included_content_layers=set(ContentLayer)):
            match = _MARK_RE.match(getattr(item, "text", "") or "")
            if match:
                found.append((item, match.group(1)))
        return found

    def _insert_alt_chunks(self, doc: Any) -> None:
        rels = self.docx_obj.part.rels
        for item, rid in self._marks(doc):
            if rid not in rels or rels[rid].is_external:
                self.supplement_warnings.append(("viewer-text", f"altChunk {rid}: no part"))
                continue
            part = rels[rid].target_part
            name = str(part.partname)
            try:
                sub = alt_chunk_document(part.blob, part.content_type, name)
            except Exception as exc:
                self.supplement_warnings.append(("viewer-text", f"altChunk {name}: {exc}"))
                continue
            if sub is None:
                self.supplement_warnings.append(
                    ("viewer-text", f"altChunk {name} ({part.content_type}) not read")
                )
                continue
            if sub.body.children:
                doc.insert_document(sub, sibling=item, after=True)

    def _drop_marks(self, doc: Any) -> None:
        """Remove the placeholder paragraphs (and any mark docling joined to other text)."""
        marks = [item for item, _rid in self._marks(doc)]
        if marks:
            doc.delete_items(node_items=marks)
        for item in doc.texts:
            if "\u2063corpusflow-altchunk:" in item.text:
                item.text = _clean(
                    re.sub("\u2063corpusflow-altchunk:[^\u2063]*\u2063", " ", item.text)
                )
                item.orig = item.text

    @staticmethod
    def _furniture_to_body(doc: Any) -> None:
        """docling's header, footer and note items (its furniture layer) into the body."""
        from docling_core.types.doc import ContentLayer

        items = [
            item
            for item, _level in doc.iterate_items(
                with_groups=True,
                traverse_pictures=True,
                included_content_layers={ContentLayer.FURNITURE},
            )
        ]
        for item in items:
            if item.content_layer == ContentLayer.FURNITURE:
                item.content_layer = ContentLayer.BODY


# -- Excel --------------------------------------------------------------------------------

_XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
_C = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_SML = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"


def _part_rels(zf: Any, part: str) -> dict[str, tuple[str, str]]:
    """A part's relationships: id -> (type's last segment, resolved part name)."""
    import posixpath

    folder, name = posixpath.split(part)
    rels_name = posixpath.join(folder, "_rels", f"{name}.rels")
    if rels_name not in zf.namelist():
        return {}
    out = {}
    for rel in _safe_xml(zf.read(rels_name)).iter(f"{{{_PKG_REL}}}Relationship"):
        if rel.get("TargetMode") == "External":
            continue
        target = rel.get("Target", "")
        resolved = (
            target.lstrip("/")
            if target.startswith("/")
            else posixpath.normpath(posixpath.join(folder, target))
        )
        out[rel.get("Id", "")] = (rel.get("Type", "").rsplit("/", 1)[-1], resolved)
    return out


def _paragraph_texts(element: Any) -> list[str]:
    texts = []
    for paragraph in element.iter(f"{{{_A}}}p"):
        text = _clean("".join(t.text or "" for t in paragraph.iter(f"{{{_A}}}t")))
        if any(c.isalnum() for c in text):
            texts.append(text)
    return texts


def sheet_drawing_texts(zf: Any) -> dict[str, list[tuple[str, str]]]:
    """Per sheet name, the text of its drawing: ("shape", text) for each paragraph of a
    text box or shape (not hidden ones), ("chart", title) for each chart's title."""
    book_rels = _part_rels(zf, "xl/workbook.xml")
    out: dict[str, list[tuple[str, str]]] = {}
    for sheet in _safe_xml(zf.read("xl/workbook.xml")).iter(f"{{{_SML}}}sheet"):
        rel = book_rels.get(sheet.get(f"{{{_R}}}id", ""))
        if rel is None:
            continue
        texts: list[tuple[str, str]] = []
        for kind, drawing in _part_rels(zf, rel[1]).values():
            if kind != "drawing" or drawing not in zf.namelist():
                continue
            root = _safe_xml(zf.read(drawing))
            for shape in root.iter(f"{{{_XDR}}}sp"):
                pr = shape.find(f"{{{_XDR}}}nvSpPr/{{{_XDR}}}cNvPr")
                body = shape.find(f"{{{_XDR}}}txBody")
                if body is None or (pr is not None and pr.get("hidden") in ("1", "true")):
                    continue
                texts += [("shape", t) for t in _paragraph_texts(body)]
            drawing_rels = _part_rels(zf, drawing)
            for ref in root.iter(f"{{{_C}}}chart"):
                chart = drawing_rels.get(ref.get(f"{{{_R}}}id", ""))
                if chart is None or chart[1] not in zf.namelist():
                    continue
                title = _safe_xml(zf.read(chart[1])).find(f".//{{{_C}}}title")
                if title is not None:
                    texts += [("chart", t) for t in _paragraph_texts(title)]
        out[sheet.get("name", "")] = texts
    return out


class ViewerXlsxBackend(FormattedXlsxBackend):
    """docling's Excel backend (cells as formatted) with each sheet's cell comments, the
    text of its text boxes and shapes, and chart titles docling did not read, after the
    sheet's tables. openpyxl keeps the comments; the drawings are read from the package."""

    supplement_warnings: list[tuple[str, str]]

    def _convert_workbook(self, doc: Any) -> Any:
        import zipfile

        self.supplement_warnings = []
        self._drawings: dict[str, list[tuple[str, str]]] = {}
        try:
            source = self.path_or_stream
            if hasattr(source, "seek"):
                source.seek(0)
            with zipfile.ZipFile(source) as zf:
                self._drawings = sheet_drawing_texts(zf)
        except Exception as exc:
            self.supplement_warnings.append(("viewer-text", f"text boxes/chart titles: {exc}"))
        return super()._convert_workbook(doc)

    def _convert_sheet(self, doc: Any, sheet: Any, page_no: int) -> Any:
        doc = super()._convert_sheet(doc, sheet, page_no)
        try:
            self._supplement_sheet(doc, sheet)
        except Exception as exc:  # never lose docling's reading over a supplement
            self.supplement_warnings.append(("viewer-text", f"sheet {sheet.title}: {exc}"))
        return doc

    def _supplement_sheet(self, doc: Any, sheet: Any) -> None:
        from docling_core.types.doc import DocItemLabel

        group: Any = self.parent  # the sheet's group, made by docling for this sheet
        layer = group.content_layer
        drawn = self._drawings.get(sheet.title, [])
        read: set[str] = set()
        if any(kind == "chart" for kind, _text in drawn):
            # What docling already read (captions included): only a sheet with a chart
            # needs it, and it walks the whole document.
            read = {_clean(getattr(item, "text", "") or "") for item in doc.texts}
            read |= {
                _clean(getattr(item, "caption_text", lambda _d: "")(doc) or "")
                for item in doc.pictures
            }

        def add(text: str) -> None:
            doc.add_text(label=DocItemLabel.TEXT, parent=group, text=text, content_layer=layer)

        for kind, text in drawn:
            if kind == "chart" and text in read:
                continue  # docling read the chart and its title
            add(text)
        cells = getattr(sheet, "_cells", {})
        for (_row, _col), cell in sorted(cells.items()):
            comment = getattr(cell, "comment", None)
            text = _clean(getattr(comment, "text", "") or "")
            if any(c.isalnum() for c in text):
                add(f"Comment on {cell.coordinate}: {text}")


# -- Embedded objects -----------------------------------------------------------------------

# Embedded packages by their part's extension: docling's input format and the suffix its
# reader takes the stream by.
_EMBEDDED_PACKAGES = {
    ".xlsx": ("XLSX", ".xlsx"),
    ".xlsm": ("XLSX", ".xlsx"),
    ".docx": ("DOCX", ".docx"),
    ".docm": ("DOCX", ".docx"),
    ".pptx": ("PPTX", ".pptx"),
    ".pptm": ("PPTX", ".pptx"),
}
# An OLE object (``oleObjectN.bin``) is a compound file; its streams say what it holds.
_PACKAGE_MAIN = (("xl/", "XLSX", ".xlsx"), ("word/", "DOCX", ".docx"), ("ppt/", "PPTX", ".pptx"))
_KIND_NAMES = {
    "XLSX": "Excel worksheet",
    "DOCX": "Word document",
    "PPTX": "PowerPoint presentation",
    "XLS": "Excel worksheet",
    "DOC": "Word document",
    "PPT": "PowerPoint presentation",
}
MAX_EMBEDDED = 20  # objects read per document; more are named in a warning


def _package_kind(blob: bytes) -> tuple[str, str] | None:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        names = zf.namelist()
    for prefix, fmt, suffix in _PACKAGE_MAIN:
        if any(n.startswith(prefix) for n in names):
            return fmt, suffix
    return None


def ole_package(native: bytes) -> tuple[str, bytes] | None:
    """(file name, bytes) of the file an OLE Packager object carries: its
    ``\\x01Ole10Native`` stream (MS-OLEDS 2.3.6 and the Packager's own layout: total size,
    a flags word, the label, the source path, two reserved words, the temporary path's
    length and the path, then the data's size and the data). None when the stream is not
    of that layout (a command-line package, say)."""
    import struct

    def cstring(at: int) -> tuple[bytes, int]:
        end = native.find(b"\0", at)
        if end < 0:
            raise ValueError("unterminated string")
        return native[at:end], end + 1

    try:
        at = 6  # total size, flags
        label, at = cstring(at)
        source, at = cstring(at)
        (kind,) = struct.unpack_from("<I", native, at)
        if kind >> 16 != 3:  # 3: an embedded file (1 is a link to one)
            return None
        (length,) = struct.unpack_from("<I", native, at + 4)
        temp = native[at + 8 : at + 8 + length].rstrip(b"\0")
        at += 8 + length
        (size,) = struct.unpack_from("<I", native, at)
        data = native[at + 4 : at + 4 + size]
    except (ValueError, struct.error):
        return None
    if len(data) != size or not data:
        return None
    # One writer's code page, which the object does not record: guessed from all three.
    encoding = guess_encoding([label, source, temp])
    names = [
        raw.decode(encoding, "replace").strip().replace("\\", "/").rsplit("/", 1)[-1]
        for raw in (label, source, temp)
    ]
    # The label is what Office shows under the icon; a path's name has the extension
    # when the label was edited to say something else.
    return next((n for n in names if "." in n), names[0] or "package"), data


def embedded_object(
    part_name: str, blob: bytes, warnings: list[tuple[str, str]] | None = None
) -> tuple[str, Any, str | None] | None:
    """An embedded object's kind ("Excel worksheet", ...), its content as a
    DoclingDocument, read as a file of that kind is, and the name of the file it holds
    where it says one (an OLE Packager object: any file the product reads, parsed as
    such a file is, whose parse warnings go to ``warnings``); None for a kind not read
    here (pictures, other programs' objects)."""
    import io
    from pathlib import PurePosixPath

    from common.encodings import OLE_MAGIC
    from parsers.docling_backend import convert_bytes, convert_markdown
    from parsers.safety import ole_format

    suffix = PurePosixPath(part_name).suffix.lower()
    kind: tuple[str, str] | None = _EMBEDDED_PACKAGES.get(suffix)
    packaged: tuple[str, bytes] | None = None
    if kind is None and blob.startswith(OLE_MAGIC):
        import olefile

        with olefile.OleFileIO(io.BytesIO(blob)) as ole:
            streams = {"/".join(s).lower() for s in ole.listdir()}
            legacy = ole_format(streams)
            if legacy in ("doc", "xls", "ppt"):  # the kinds docling reads through LibreOffice
                kind = (legacy.upper(), f".{legacy}")
            else:
                if "package" in streams:  # an OOXML package wrapped in an OLE object
                    blob = ole.openstream("Package").read()
                    kind = _package_kind(blob) if blob[:4] == b"PK\x03\x04" else None
                elif "\x01ole10native" in streams:  # the Packager: any file
                    packaged = ole_package(ole.openstream("\x01Ole10Native").read())
                elif "contents" in streams:  # Acrobat's object keeps the PDF itself
                    contents = ole.openstream("CONTENTS").read()
                    if contents.startswith(b"%PDF-"):
                        packaged = ("document.pdf", contents)
    if packaged is not None:
        from parsers.registry import parse_embedded

        parsed = parse_embedded(*packaged)
        if warnings is not None:
            warnings += [(w.source, f"{packaged[0]}: {w.message}") for w in parsed.warnings]
        markdown = parsed.markdown
        name = f"{parsed.format.upper()} file"  # "Embedded PDF file (annex.pdf):"
        shown: str | None = packaged[0]
    elif kind is not None:
        name = _KIND_NAMES[kind[0]]
        if blob[:4] == b"PK\x03\x04":  # as a file of its kind is: Strict OOXML and .xlsb
            from parsers.docling_backend import plain_ooxml  # saved as Transitional / XLSX,
            from parsers.formats import spec_for  # macro-enabled typed as the document

            blob = plain_ooxml(blob, spec_for(kind[1].lstrip(".")))
        from parsers.registry import stored_markdown

        markdown = stored_markdown(convert_bytes(blob, "embedded", *kind).doc)
        shown = None
    else:
        return None
    # Carried over as its Markdown, read back by docling's Markdown reader: headings,
    # lists and tables kept, and none of the cross-references (rich table cells) that
    # docling-core's add_document leaves inconsistent in the host document.
    sub = convert_markdown(markdown, "embedded").doc
    _flatten_rich_cells(sub)
    return name, sub, shown


def _flatten_rich_cells(doc: Any) -> None:
    """Tables with plain cells only (a rich cell's text kept, its items removed): the
    Markdown reader makes a cell holding a list a rich cell, whose group references
    docling-core's add_document does not carry over consistently."""
    from docling_core.types.doc import TableCell

    for table in doc.tables:
        cells = table.data.table_cells
        if all(getattr(c, "ref", None) is None for c in cells):
            continue
        table.data.table_cells = [
            TableCell(**{k: v for k, v in c.model_dump().items() if k != "ref"}) for c in cells
        ]
        children = [ref.resolve(doc) for ref in table.children]
        if children:
            doc.delete_items(node_items=children)


def add_embedded_objects(
    doc: Any, parts: list[Any], parent: Any, warnings: list[tuple[str, str]]
) -> None:
    """Read each embedded object part (python-docx / python-pptx parts) and add its
    content under ``parent``, after a line naming it; a failure is a warning."""
    from docling_core.types.doc import DocItemLabel

    seen: set[str] = set()
    for part in parts:
        name = str(part.partname)
        if name in seen:
            continue
        seen.add(name)
        if len(seen) > MAX_EMBEDDED:
            warnings.append(("viewer-text", f"embedded objects after {MAX_EMBEDDED} not read"))
            return
        try:
            found = embedded_object(name, part.blob, warnings)
        except Exception as exc:
            warnings.append(("viewer-text", f"embedded object {name}: {exc}"))
            continue
        if found is None:
            continue
        kind, sub, shown = found
        if not sub.body.children:
            continue
        base = shown or name.rsplit("/", 1)[-1]
        host = parent if parent is not None else doc.body
        before = list(host.children)
        doc.add_text(label=DocItemLabel.TEXT, parent=parent, text=f"Embedded {kind} ({base}):")
        doc.add_document(sub, parent=parent)
        if not doc.validate_tree(host):  # never let an addition break the host's reading
            added = [ref.resolve(doc) for ref in host.children if ref not in before]
            doc.delete_items(node_items=added)
            warnings.append(("viewer-text", f"embedded object {name}: not added (structure)"))


def _embedding_parts(rels: Any) -> list[Any]:
    """The parts a part's relationships embed (``oleObject`` and ``package`` relations)."""
    out = []
    for rel in rels.values():
        if rel.is_external:
            continue
        if rel.reltype.rsplit("/", 1)[-1] in ("oleObject", "package"):
            out.append(rel.target_part)
    return sorted(out, key=lambda p: str(p.partname))
