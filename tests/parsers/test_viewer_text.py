"""The text a viewer shows (issue #32): PowerPoint layout/master shapes, SmartArt and
speaker notes; Word headers, footers, text boxes and altChunk parts.

The files are written here: python-pptx / python-docx for the ordinary parts, then the
parts those libraries cannot write (a SmartArt data part, an altChunk HTML part, shapes
on a master) added as PowerPoint and Word write them. Every file goes through the
product's ``parse_file``.
"""

from __future__ import annotations

import copy
import io
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from parsers import parse_file

_DGM_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData"
_DGM_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml"
_ALT_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/aFChunk"

_POINT = (
    '<dgm:pt modelId="{{{i}}}"><dgm:prSet/><dgm:spPr/><dgm:t><a:bodyPr/><a:lstStyle/>'
    '<a:p><a:r><a:rPr lang="en-US"/><a:t>{text}</a:t></a:r></a:p></dgm:t></dgm:pt>'
)
_CONNECTION = '<dgm:pt modelId="{{c{i}}}" type="parTrans"><dgm:prSet/><dgm:spPr/></dgm:pt>'


def _diagram_data(texts: list[str]) -> str:
    points = "".join(_POINT.format(i=i + 1, text=t) for i, t in enumerate(texts))
    points += "".join(_CONNECTION.format(i=i) for i in range(len(texts)))
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"'
        ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>'
        '<dgm:pt modelId="{0}" type="doc"><dgm:prSet/><dgm:spPr/><dgm:t><a:bodyPr/>'
        '<a:lstStyle/><a:p><a:endParaRPr lang="en-US"/></a:p></dgm:t></dgm:pt>'
        f"{points}</dgm:ptLst><dgm:cxnLst/><dgm:bg/><dgm:whole/></dgm:dataModel>"
    )


_FRAME = (
    '<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
    ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
    '<p:nvGraphicFramePr><p:cNvPr id="99" name="Diagram 1"/><p:cNvGraphicFramePr/><p:nvPr/>'
    '</p:nvGraphicFramePr><p:xfrm><a:off x="914400" y="1828800"/><a:ext cx="6000000"'
    ' cy="3000000"/></p:xfrm><a:graphic><a:graphicData'
    ' uri="http://schemas.openxmlformats.org/drawingml/2006/diagram"><dgm:relIds'
    ' xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"'
    ' xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    ' r:dm="rIdDgm1" r:lo="rIdDgm2" r:qs="rIdDgm3" r:cs="rIdDgm4"/></a:graphicData>'
    "</a:graphic></p:graphicFrame>"
)


def _rewrite_zip(data: bytes, edits: dict[str, Any], extra: dict[str, bytes]) -> bytes:
    """The package with ``edits[name](bytes) -> bytes`` applied and ``extra`` parts added."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename in edits:
                body = edits[info.filename](body)
            dst.writestr(info, body)
        for name, body in extra.items():
            dst.writestr(name, body)
    return out.getvalue()


def _with_smartart(
    data: bytes, data_xml: str, part: str = "slides/slide1.xml", number: int = 1
) -> bytes:
    """A SmartArt diagram frame on ``ppt/<part>`` (a slide, layout or master) with its
    data part ``ppt/diagrams/data<number>.xml``."""
    folder, name = part.rsplit("/", 1)
    target = f"../diagrams/data{number}.xml"
    rel = f'<Relationship Id="rIdDgm1" Type="{_DGM_REL}" Target="{target}"/>'
    override = f'<Override PartName="/ppt/diagrams/data{number}.xml" ContentType="{_DGM_TYPE}"/>'
    return _rewrite_zip(
        data,
        {
            f"ppt/{part}": lambda b: b.replace(b"</p:spTree>", _FRAME.encode() + b"</p:spTree>", 1),
            f"ppt/{folder}/_rels/{name}.rels": lambda b: b.replace(
                b"</Relationships>", rel.encode() + b"</Relationships>"
            ),
            "[Content_Types].xml": lambda b: b.replace(
                b"</Types>", override.encode() + b"</Types>"
            ),
        },
        {f"ppt/diagrams/data{number}.xml": data_xml.encode()},
    )


def _deck(
    path: Path,
    *,
    master_text: bool = True,
    smartart: str | None = None,
    notes: bool = True,
    hide_master_on_first: bool = False,
) -> Path:
    """Three slides on the 'Title and Content' layout; the layout and the master carry a
    real text box each (not a placeholder); slide 1 has notes and a SmartArt diagram."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    layout = prs.slide_layouts[1]
    if master_text:
        # python-pptx adds shapes to slides only: a text box made on a scratch slide is
        # copied into the master's and the layout's shape tree, as PowerPoint stores it.
        scratch = Presentation()
        sheet = scratch.slides.add_slide(scratch.slide_layouts[6])
        for owner, text in (
            (prs.slide_master, "Zephyrine Confidential Masterline"),
            (layout, "Layoutish Quarterwave Banner"),
        ):
            box = sheet.shapes.add_textbox(Inches(0.2), Inches(7), Inches(4), Inches(0.4))
            box.text_frame.text = text
            owner.shapes._spTree.append(copy.deepcopy(box._element))
    for i in range(3):
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = f"Slide title number {i}"
        slide.placeholders[1].text = f"Body words of slide {i}"
    if notes:
        prs.slides[0].notes_slide.notes_text_frame.text = "Speaker notes mention Hyperborean"
    if hide_master_on_first:
        prs.slides[0]._element.set("showMasterSp", "0")
    buf = io.BytesIO()
    prs.save(buf)
    data = buf.getvalue()
    if smartart is not None:
        data = _with_smartart(data, smartart)
    path.write_bytes(data)
    return path


def _sections(markdown: str) -> dict[str, str]:
    """Markdown split at the slide titles: title -> the text up to the next one."""
    out: dict[str, str] = {}
    title = ""
    for line in markdown.splitlines():
        if line.startswith("# "):
            title = line[2:].strip()
            out[title] = ""
        else:
            out[title] = out.get(title, "") + line + "\n"
    return out


def test_pptx_master_layout_smartart_and_notes_read_once(tmp_path: Path) -> None:
    deck = _deck(
        tmp_path / "deck.pptx",
        smartart=_diagram_data(["Kappaflux Discovery", "Omniverge Delivery"]),
    )
    doc = parse_file(deck)
    md = doc.markdown
    for text in (
        "Zephyrine Confidential Masterline",
        "Layoutish Quarterwave Banner",
        "Kappaflux Discovery",
        "Omniverge Delivery",
        "Speaker notes mention Hyperborean",
    ):
        assert md.count(text) == 1, (text, md)
    first = _sections(md)["Slide title number 0"]
    # SmartArt and the layout/master text on the slide that shows them first, notes last.
    order = [
        first.index(t)
        for t in (
            "Body words of slide 0",
            "Kappaflux Discovery",
            "Omniverge Delivery",
            "Layoutish Quarterwave Banner",
            "Zephyrine Confidential Masterline",
            "Speaker notes mention Hyperborean",
        )
    ]
    assert order == sorted(order)
    # The master's placeholders hold prompt text that no slide shows.
    assert "Click to edit" not in md
    assert not doc.warnings


def test_pptx_smartart_on_layout_and_master_read_once(tmp_path: Path) -> None:
    """A SmartArt diagram drawn on the layout and another on the master show on every
    slide: each point's text is read once, on the first slide that shows them."""
    deck = _deck(tmp_path / "deck.pptx", master_text=False, notes=False)
    data = _with_smartart(
        deck.read_bytes(),
        _diagram_data(["Quillon Intake Stage", "Vorpalite Review Stage"]),
        "slideLayouts/slideLayout2.xml",
        1,
    )
    data = _with_smartart(
        data, _diagram_data(["Masterwide Brindlecap Process"]), "slideMasters/slideMaster1.xml", 2
    )
    deck.write_bytes(data)
    doc = parse_file(deck)
    sections = _sections(doc.markdown)
    for text in ("Quillon Intake Stage", "Vorpalite Review Stage", "Masterwide Brindlecap Process"):
        assert doc.markdown.count(text) == 1, (text, doc.markdown)
        assert text in sections["Slide title number 0"]
    assert not doc.warnings


def test_pptx_master_text_goes_to_first_slide_that_shows_it(tmp_path: Path) -> None:
    deck = _deck(tmp_path / "deck.pptx", notes=False, hide_master_on_first=True)
    sections = _sections(parse_file(deck).markdown)
    assert "Masterline" not in sections["Slide title number 0"]
    assert sections["Slide title number 1"].count("Zephyrine Confidential Masterline") == 1
    assert "Masterline" not in sections["Slide title number 2"]


def test_pptx_same_box_on_two_layouts_read_once(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    scratch = Presentation()
    sheet = scratch.slides.add_slide(scratch.slide_layouts[6])
    box = sheet.shapes.add_textbox(Inches(0.2), Inches(7), Inches(4), Inches(0.4))
    box.text_frame.text = "Copied Footerbox Strictly Internal"
    number = sheet.shapes.add_textbox(Inches(8), Inches(7), Inches(1), Inches(0.4))
    number.text_frame.text = "\u2039#\u203a"  # a slide-number field's shown text, no words
    for index in (5, 6):  # "Title Only" and "Blank", as a template copies a box to each
        prs.slide_layouts[index].shapes._spTree.append(copy.deepcopy(box._element))
        prs.slide_layouts[index].shapes._spTree.append(copy.deepcopy(number._element))
        slide = prs.slides.add_slide(prs.slide_layouts[index])
        if slide.shapes.title is not None:
            slide.shapes.title.text = "Titled slide"
        else:
            slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text = "Blank one"
    prs.save(tmp_path / "deck.pptx")
    md = parse_file(tmp_path / "deck.pptx").markdown
    assert md.count("Copied Footerbox Strictly Internal") == 1
    assert "Blank one" in md
    assert "\u2039#\u203a" not in md


def test_pptx_master_text_in_one_chunk(tmp_path: Path, minilm_tokenizer: Any) -> None:
    """The chunker sees the master text once, on the slide it was attributed to."""
    from chunking import chunk_document
    from common.settings import ChunkSettings

    deck = _deck(tmp_path / "deck.pptx", notes=False)
    chunks = chunk_document(parse_file(deck), "d", minilm_tokenizer, 128, ChunkSettings())
    holding = [c for c in chunks.children if "Zephyrine" in c.text]
    assert len(holding) == 1
    assert list(holding[0].page_numbers) == [1]


def test_pptx_slide_footer_read_once_numbers_and_dates_not(tmp_path: Path) -> None:
    # pandoc's pptx/footer/*_output.pptx: the footer on every slide was in no chunk.
    from pptx import Presentation
    from pptx.enum.shapes import PP_PLACEHOLDER

    deck = Presentation()
    layout = deck.slide_layouts[1]
    for title in ("Pump checks", "Valve checks"):
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = title
        for ph in layout.placeholders:
            kind = ph.placeholder_format.type
            texts = {
                PP_PLACEHOLDER.FOOTER: "Acme plant handbook",
                PP_PLACEHOLDER.DATE: "06/12/2026",
                PP_PLACEHOLDER.SLIDE_NUMBER: "7",
            }
            if kind in texts:
                slide.shapes.clone_placeholder(ph)
                slide.placeholders[ph.placeholder_format.idx].text = texts[kind]
    path = tmp_path / "footer.pptx"
    deck.save(str(path))
    markdown = parse_file(path).markdown
    assert markdown.count("Acme plant handbook") == 1, markdown
    assert "06/12/2026" not in markdown and "Valve checks" in markdown


def test_pptx_broken_smartart_keeps_docling_text_and_warns(tmp_path: Path) -> None:
    deck = _deck(tmp_path / "deck.pptx", smartart="<dgm:dataModel unclosed")
    doc = parse_file(deck)
    assert "Body words of slide 0" in doc.markdown
    assert "Body words of slide 2" in doc.markdown
    assert any(w.source == "viewer-text" and "slide 1" in w.message for w in doc.warnings)


_TEXTBOX = (
    '<w:p xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    ' xmlns:v="urn:schemas-microsoft-com:vml"><w:r><w:pict><v:shape id="tb1"'
    ' style="width:200pt;height:50pt" type="#_x0000_t202"><v:textbox><w:txbxContent><w:p>'
    "<w:r><w:t>Textboxed Quillmoss remark</w:t></w:r></w:p></w:txbxContent></v:textbox>"
    "</v:shape></w:pict></w:r></w:p>"
)
_ALT_CHUNK = (
    '<w:altChunk xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    ' xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    ' r:id="rIdAlt1"/>'
)
_HTML = (
    b"<html><head><meta charset='utf-8'></head><body><h2>Imported Vexillary Section</h2>"
    b"<p>Altchunk paragraph about Gorsebrook.</p>"
    b"<table><tr><td>Cellone Brindle</td><td>42</td></tr></table></body></html>"
)


def _document(
    path: Path,
    *,
    furniture: bool = True,
    textbox: bool = True,
    alt_chunk: tuple[str, str, bytes] | None = ("afchunk1.html", "text/html", _HTML),
    chunk_in_cell: bool = False,
) -> Path:
    """Heading and four paragraphs; a header and a footer; a text box after the first
    paragraph; an altChunk (part name, content type, bytes) after the second."""
    import docx
    from lxml import etree

    d = docx.Document()
    if furniture:
        d.sections[0].header.paragraphs[0].text = "Headerline Marsupial Holdings"
        d.sections[0].footer.paragraphs[0].text = "Footerline Page Policy Nimbus"
    d.add_heading("Main Heading", 1)
    first = d.add_paragraph("First body paragraph.")
    second = d.add_paragraph("Second body paragraph before chunk.")
    d.add_paragraph("Last body paragraph.")
    if textbox:
        first._p.addnext(etree.fromstring(_TEXTBOX))
    if alt_chunk is not None and chunk_in_cell:
        cell = d.add_table(rows=1, cols=2).cell(0, 1)
        cell.paragraphs[0]._p.addnext(etree.fromstring(_ALT_CHUNK))
        d.tables[0].cell(0, 0).text = "Tablecell Left"
    elif alt_chunk is not None:
        second._p.addnext(etree.fromstring(_ALT_CHUNK))
    buf = io.BytesIO()
    d.save(buf)
    data = buf.getvalue()
    if alt_chunk is not None:
        name, content_type, body = alt_chunk
        rel = f'<Relationship Id="rIdAlt1" Type="{_ALT_REL}" Target="{name}"/>'
        override = f'<Override PartName="/word/{name}" ContentType="{content_type}"/>'
        data = _rewrite_zip(
            data,
            {
                "word/_rels/document.xml.rels": lambda b: b.replace(
                    b"</Relationships>", rel.encode() + b"</Relationships>"
                ),
                "[Content_Types].xml": lambda b: b.replace(
                    b"</Types>", override.encode() + b"</Types>"
                ),
            },
            {f"word/{name}": body},
        )
    path.write_bytes(data)
    return path


def test_docx_header_footer_textbox_and_altchunk_read_once(tmp_path: Path) -> None:
    doc = parse_file(_document(tmp_path / "doc.docx"))
    md = doc.markdown
    for text in (
        "Headerline Marsupial Holdings",
        "Footerline Page Policy Nimbus",
        "Textboxed Quillmoss remark",
        "Imported Vexillary Section",
        "Altchunk paragraph about Gorsebrook.",
        "Cellone Brindle",
    ):
        assert md.count(text) == 1, (text, md)
    # The altChunk stands where it was in the body, its heading still a heading.
    assert (
        md.index("Second body paragraph before chunk.")
        < md.index("## Imported Vexillary Section")
        < md.index("Cellone Brindle")
        < md.index("Last body paragraph.")
        < md.index("Headerline Marsupial Holdings")
    )
    assert "\u2063" not in md and "corpusflow-altchunk" not in md
    assert not doc.warnings


def test_docx_altchunk_in_a_table_cell_read_as_text(tmp_path: Path) -> None:
    doc = parse_file(_document(tmp_path / "doc.docx", chunk_in_cell=True))
    md = doc.markdown
    assert md.count("Altchunk paragraph about Gorsebrook.") == 1
    table = next(line for line in md.splitlines() if "Tablecell Left" in line)
    assert "Gorsebrook" in table and "Cellone Brindle" in table
    assert "corpusflow-altchunk" not in md and not doc.warnings


def test_docx_altchunk_of_unread_kind_warns_and_keeps_body(tmp_path: Path) -> None:
    odd = (b"\x00\x01binary", "application/x-corpusflow-unknown")
    path = _document(tmp_path / "doc.docx", alt_chunk=("afchunk1.bin", odd[1], odd[0]))
    doc = parse_file(path)
    assert "Last body paragraph." in doc.markdown
    assert "corpusflow-altchunk" not in doc.markdown
    assert any(w.source == "viewer-text" and odd[1] in w.message for w in doc.warnings)


def test_docx_altchunk_rtf_and_nested_docx_read_in_place(tmp_path: Path) -> None:
    import docx

    rtf = b"{\\rtf1\\ansi Rich text chunk about Quillmoss ferns.\\par}"
    path = _document(tmp_path / "rtf.docx", alt_chunk=("afchunk1.rtf", "application/rtf", rtf))
    md = parse_file(path).markdown
    assert "Rich text chunk about Quillmoss ferns." in md
    assert md.index("before chunk") < md.index("Quillmoss ferns") < md.index("Last body")

    inner = docx.Document()
    inner.add_heading("Nested Docx Heading", 1)
    inner.add_paragraph("Nested paragraph about Gorsebrook.")
    buf = io.BytesIO()
    inner.save(buf)
    kind = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    path = _document(tmp_path / "nested.docx", alt_chunk=("afchunk1.docx", kind, buf.getvalue()))
    doc = parse_file(path)
    assert "## Nested Docx Heading" in doc.markdown  # its structure kept
    assert doc.markdown.index("before chunk") < doc.markdown.index("Gorsebrook")
    assert not [w for w in doc.warnings if w.source == "viewer-text"]


def test_docx_altchunk_plain_text(tmp_path: Path) -> None:
    text = (b"Plainchunk first paragraph.\n\nPlainchunk second paragraph.", "text/plain")
    path = _document(tmp_path / "doc.docx", alt_chunk=("afchunk1.txt", text[1], text[0]))
    md = parse_file(path).markdown
    assert md.count("Plainchunk first paragraph.") == 1
    assert md.index("Plainchunk second paragraph.") < md.index("Last body paragraph.")


def _without_supplement(path: Path) -> str:
    """The Markdown docling's readers as before issue #32 give (no supplement)."""
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, FormatOption
    from docling.pipeline.simple_pipeline import SimplePipeline

    from parsers.docx_words import WordsDocxBackend
    from parsers.pptx_charts import ChartPptxBackend
    from parsers.registry import stored_markdown

    converter = DocumentConverter(
        allowed_formats=[InputFormat.PPTX, InputFormat.DOCX],
        format_options={
            InputFormat.PPTX: FormatOption(pipeline_cls=SimplePipeline, backend=ChartPptxBackend),
            InputFormat.DOCX: FormatOption(pipeline_cls=SimplePipeline, backend=WordsDocxBackend),
        },
    )
    return stored_markdown(converter.convert(path).document)


def test_plain_deck_and_document_unchanged(tmp_path: Path) -> None:
    deck = _deck(tmp_path / "plain.pptx", master_text=False, notes=False)
    document = _document(tmp_path / "plain.docx", furniture=False, alt_chunk=None)
    for path in (deck, document):
        before = _without_supplement(path)
        assert "Body words of slide 1" in before or "Textboxed Quillmoss" in before
        assert parse_file(path).markdown == before


@pytest.mark.parametrize(
    "name",
    [
        "pptx/powerpoint_sample.pptx",
        "pptx/pptx_chart.pptx",
        "docx/word_sample.docx",
        "docx/unit_test_headers.docx",
    ],
)
def test_shared_files_lose_nothing(shared_corpus: Path, name: str) -> None:
    """On the shared files every line docling gave is still there, in its order."""
    path = shared_corpus / name
    before = [line for line in _without_supplement(path).splitlines() if line.strip()]
    after = iter(line for line in parse_file(path).markdown.splitlines() if line.strip())
    assert before and all(line in after for line in before)


# -- Excel ----------------------------------------------------------------------------------

_ANCHOR = (
    '<xdr:twoCellAnchor xmlns:xdr="http://schemas.openxmlformats.org/drawingml/2006/'
    'spreadsheetDrawing" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
    "<xdr:from><xdr:col>5</xdr:col><xdr:colOff>0</xdr:colOff><xdr:row>{row}"
    "</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:from><xdr:to><xdr:col>9</xdr:col><xdr:colOff>0"
    "</xdr:colOff><xdr:row>{end}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:to><xdr:sp>"
    '<xdr:nvSpPr><xdr:cNvPr id="{id}" name="TextBox {id}"{hidden}/><xdr:cNvSpPr txBox="1"/>'
    '</xdr:nvSpPr><xdr:spPr><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></xdr:spPr>'
    '<xdr:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang="en-US"/><a:t>{text}</a:t>'
    "</a:r></a:p></xdr:txBody></xdr:sp><xdr:clientData/></xdr:twoCellAnchor>"
)


def _workbook_with_drawing(path: Path) -> Path:
    """A workbook as Excel writes one with a cell comment, a titled chart, a text box and
    a hidden shape (openpyxl writes the first two; the shapes go into its drawing part)."""
    from openpyxl import Workbook
    from openpyxl.chart import BarChart, Reference
    from openpyxl.comments import Comment

    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    for row in [("Item", "Cost"), ("Turbine inspection", 1200), ("Valve spares", 340)]:
        ws.append(row)
    ws["A2"].comment = Comment("Quote from the Harbin supplier is pending", "Mei Lin")
    chart = BarChart()
    chart.title = "Depot costs by quarter"
    chart.add_data(Reference(ws, min_col=2, min_row=1, max_row=3), titles_from_data=True)
    ws.add_chart(chart, "D8")
    buf = io.BytesIO()
    wb.save(buf)
    shapes = _ANCHOR.format(
        row=1, end=4, id=90, hidden="", text="Figures exclude the Kestrel Ridge depot refit"
    ) + _ANCHOR.format(row=5, end=7, id=91, hidden=' hidden="1"', text="draft do not read")
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "xl/drawings/drawing1.xml":
                # openpyxl writes the drawing namespace as the default one
                data = data.replace(b"</wsDr>", shapes.encode() + b"</wsDr>")
            zout.writestr(info, data)
    return path


def test_excel_comments_text_boxes_and_chart_titles_are_read(tmp_path: Path) -> None:
    doc = parse_file(_workbook_with_drawing(tmp_path / "budget.xlsx"))
    md = doc.markdown
    assert "Figures exclude the Kestrel Ridge depot refit" in md
    assert "draft do not read" not in md  # a hidden shape is not shown
    assert "Comment on A2: Quote from the Harbin supplier is pending" in md
    assert md.count("Depot costs by quarter") == 1  # docling's chart caption, not repeated
    assert md.index("Valve spares") < md.index("Figures exclude")  # after the sheet's table
    assert not [w for w in doc.warnings if w.source == "viewer-text"]


# -- Embedded objects -------------------------------------------------------------------------


def _small_workbook() -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.append(["Depot", "Spares"])
    ws.append(["Kestrel Ridge", 14])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _docx_embedding(path: Path, workbook: bytes) -> Path:
    """A Word document with ``workbook`` embedded as a package, as Word embeds one."""
    rel = (
        '<Relationship Id="rIdEmb1" Type="http://schemas.openxmlformats.org/officeDocument/'
        '2006/relationships/package" Target="embeddings/Microsoft_Excel_Worksheet.xlsx"/>'
    )
    kind = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    path = _document(path, furniture=False, textbox=False, alt_chunk=None)
    path.write_bytes(
        _rewrite_zip(
            path.read_bytes(),
            {
                "word/_rels/document.xml.rels": lambda b: b.replace(
                    b"</Relationships>", rel.encode() + b"</Relationships>"
                ),
                "[Content_Types].xml": lambda b: b.replace(
                    b"</Types>",
                    f'<Default Extension="xlsx" ContentType="{kind}"/></Types>'.encode(),
                ),
            },
            {"word/embeddings/Microsoft_Excel_Worksheet.xlsx": workbook},
        )
    )
    return path


@pytest.mark.skipif(shutil.which("soffice") is None, reason="needs LibreOffice")
def test_an_embedded_strict_ooxml_workbook_is_read(tmp_path: Path) -> None:
    """A Strict OOXML workbook embedded in a Word document is read as a top-level one is
    (saved as Transitional by LibreOffice first), not lost to docling's refusal."""
    strict = (Path(__file__).parents[1] / "data" / "tika" / "testEXCEL.strict.xlsx").read_bytes()
    parsed = parse_file(_docx_embedding(tmp_path / "host.docx", strict))
    assert "Embedded Excel worksheet" in parsed.markdown
    assert "2nd row 2nd column" in parsed.markdown, parsed.markdown


def test_embedded_objects_read_as_their_kind(tmp_path: Path, shared_corpus: Path) -> None:
    """A worksheet embedded in a Word document and, in a deck, a worksheet package and a
    Word 97-2003 document in an OLE object (as python-pptx embeds them): each read as a
    file of its kind, in place (the slide that holds it), its structure kept."""
    from pptx import Presentation
    from pptx.enum.shapes import PROG_ID
    from pptx.util import Inches

    md = parse_file(_docx_embedding(tmp_path / "host.docx", _small_workbook())).markdown
    assert "Embedded Excel worksheet (Microsoft_Excel_Worksheet.xlsx):" in md
    assert "| Kestrel Ridge |" in md.replace("  ", " ").replace("  ", " ")

    prs = Presentation()
    for title, blob, prog_id in (
        ("Spares by depot", _small_workbook(), PROG_ID.XLSX),
        ("Legacy memo", (shared_corpus / "doc/legacy_sample.doc").read_bytes(), None),
        ("Closing", None, None),
    ):
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = title
        if blob is not None:
            slide.shapes.add_ole_object(
                io.BytesIO(blob), prog_id or "Word.Document.8", Inches(1), Inches(2)
            )
    prs.save(tmp_path / "deck.pptx")
    doc = parse_file(tmp_path / "deck.pptx")
    md = doc.markdown
    assert md.index("Spares by depot") < md.index("Kestrel Ridge") < md.index("Legacy memo")
    assert md.index("Legacy memo") < md.index("Embedded Word document") < md.index("Closing")
    assert "## Swimming in the lake" in md  # the memo's own headings
    assert "| Berries |" in md.replace("  ", " ").replace("  ", " ")  # and its table
    assert not [w for w in doc.warnings if w.source == "viewer-text"]


def _packager_deck(path: Path, objects: list[tuple[str, bytes | None]]) -> Path:
    """A deck with one slide per (title, OLE object bytes) on the 'Title Only' layout,
    each object embedded as PowerPoint embeds a Packager (or other OLE) object."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for title, blob in objects:
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = title
        if blob is not None:
            slide.shapes.add_ole_object(io.BytesIO(blob), "Package", Inches(1), Inches(2))
    prs.save(path)
    return path


def test_ole_packager_and_acrobat_objects_read_as_their_files(tmp_path: Path) -> None:
    """A PDF dropped on a slide (the Packager's ``\\x01Ole10Native``: any file, here a
    PDF) and a PDF embedded by Acrobat (its ``CONTENTS`` stream) are read as the PDFs
    they are, in place, under their own names; a packaged deck holding another package
    is read one level deep, and says so."""
    from tests.helpers.cfb import compound_file, ole10_native
    from tests.helpers.pdfgen import write_pdf

    annex = write_pdf(
        tmp_path / "annex.pdf", [[(18, "Audit Annex Findings"), (11, "Quorvex ledgers balance")]]
    ).read_bytes()
    acro = write_pdf(tmp_path / "acro.pdf", [[(11, "Acrobat stored Wendigrail memo")]])
    deck = _packager_deck(
        tmp_path / "deck.pptx",
        [
            (
                "Findings slide",
                compound_file({"\x01Ole10Native": ole10_native("annex.pdf", annex)}),
            ),
            ("Acrobat slide", compound_file({"CONTENTS": acro.read_bytes()})),
            ("Closing slide", None),
        ],
    )
    doc = parse_file(deck)
    md = doc.markdown
    assert "Quorvex ledgers balance" in md
    assert "Wendigrail memo" in md
    assert md.index("Findings slide") < md.index("(annex.pdf):") < md.index("Quorvex")
    assert md.index("Acrobat slide") < md.index("Wendigrail") < md.index("Closing slide")
    assert not [w for w in doc.warnings if w.source == "viewer-text"], doc.warnings

    # A package inside a packaged deck: the outer package is read, the inner is not.
    inner = compound_file({"\x01Ole10Native": ole10_native("annex.pdf", annex)})
    middle = _packager_deck(tmp_path / "middle.pptx", [("Middle deck Ysolde", inner)])
    outer = _packager_deck(
        tmp_path / "outer.pptx",
        [
            (
                "Outer",
                compound_file({"\x01Ole10Native": ole10_native("m.pptx", middle.read_bytes())}),
            )
        ],
    )
    doc = parse_file(outer)
    assert "Middle deck Ysolde" in doc.markdown
    assert "Quorvex" not in doc.markdown
    assert any("files deep" in w.message for w in doc.warnings), doc.warnings


def test_packaged_file_names_read_in_the_writers_code_page(tmp_path: Path) -> None:
    """A Packager object records its file's name in the writer's ANSI code page and does
    not say which: a Western name whose bytes are also valid GBK ("naïve") and a Chinese
    name from a Chinese Windows both come out as written."""
    from tests.helpers.cfb import compound_file, ole10_native
    from tests.helpers.pdfgen import write_pdf

    annex = write_pdf(tmp_path / "a.pdf", [[(11, "Quorvex ledgers balance")]]).read_bytes()
    deck = _packager_deck(
        tmp_path / "deck.pptx",
        [
            ("Western", compound_file({"\x01Ole10Native": ole10_native("naïve.pdf", annex)})),
            (
                "Chinese",
                compound_file({"\x01Ole10Native": ole10_native("季度财务报表.pdf", annex, "gbk")}),
            ),
        ],
    )
    md = parse_file(deck).markdown
    assert "(naïve.pdf):" in md, md
    assert "(季度财务报表.pdf):" in md, md


def test_docx_table_rows_inside_content_controls_are_read(tmp_path: Path) -> None:
    """A form's rows inside content controls (a repeating section: controls nested three
    deep around each row, as Word writes them; a drop-down list around one cell; a text
    field around a cell's run) were dropped: docling's reader walks a table's ``w:tr``
    children and a cell's runs only."""
    import docx

    document = docx.Document()
    document.add_paragraph("Site inspection form")
    table = document.add_table(rows=3, cols=2)
    for r, (left, right) in enumerate(
        [("Item", "Finding"), ("Fire exits", "Blocked by pallets"), ("Choose an item.", "Alarm")]
    ):
        table.cell(r, 0).text, table.cell(r, 1).text = left, right
    document.save(tmp_path / "plain.docx")
    with zipfile.ZipFile(tmp_path / "plain.docx") as zf:
        body = zf.read("word/document.xml").decode()

    def wrapped(xml: str, start: int, end: int, depth: int = 1) -> str:
        control = '<w:sdt><w:sdtPr><w:id w:val="7"/></w:sdtPr><w:sdtContent>'
        return (
            xml[:start]
            + control * depth
            + xml[start:end]
            + "</w:sdtContent></w:sdt>" * depth
            + xml[end:]
        )

    at = body.index("Fire exits")
    body = wrapped(body, body.rfind("<w:tr", 0, at), body.index("</w:tr>", at) + 7, depth=3)
    at = body.index("Choose an item.")
    body = wrapped(body, body.rfind("<w:tc>", 0, at), body.index("</w:tc>", at) + 7)
    at = body.index("Alarm")  # a text field: a control around the run, inside the cell
    body = wrapped(body, body.rfind("<w:r>", 0, at), body.index("</w:r>", at) + 6)
    out = tmp_path / "form.docx"
    with zipfile.ZipFile(tmp_path / "plain.docx") as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(
                info, body.encode() if info.filename == "word/document.xml" else zin.read(info)
            )
    doc = parse_file(out)
    rows = [ln for ln in doc.markdown.splitlines() if ln.startswith("|")]
    assert any("Fire exits" in ln and "Blocked by pallets" in ln for ln in rows), doc.markdown
    assert any("Choose an item." in ln and "Alarm" in ln for ln in rows)
    assert doc.markdown.count("Fire exits") == 1


def test_docx_check_box_outside_a_table_keeps_its_state(tmp_path: Path) -> None:
    """Content controls in paragraphs outside tables are left to docling, which tells a
    check box by its control's properties (unwrapping it lost "- [x]")."""
    import docx

    document = docx.Document()
    document.add_paragraph("I agree to the site rules")
    document.save(tmp_path / "plain.docx")
    with zipfile.ZipFile(tmp_path / "plain.docx") as zf:
        body = zf.read("word/document.xml").decode()
    at = body.rfind("<w:r>", 0, body.index("I agree"))
    box = (
        '<w:sdt><w:sdtPr><w:id w:val="4"/><w14:checkbox><w14:checked w14:val="1"/>'
        "</w14:checkbox></w:sdtPr><w:sdtContent><w:r><w:t>\u2612</w:t></w:r></w:sdtContent>"
        "</w:sdt>"
    )
    body = body[:at] + box + body[at:]
    if "xmlns:w14=" not in body:
        w14 = 'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" '
        body = body.replace("<w:document ", "<w:document " + w14, 1)
    out = tmp_path / "form.docx"
    with zipfile.ZipFile(tmp_path / "plain.docx") as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(
                info, body.encode() if info.filename == "word/document.xml" else zin.read(info)
            )
    assert "- [x] I agree to the site rules" in parse_file(out).markdown
