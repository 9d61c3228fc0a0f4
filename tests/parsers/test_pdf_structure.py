"""Structure recovered by the model-free PDF path: headings, lists and tables.

Two kinds of evidence: the shared docling corpus with its ground truth (skipped
when ../shared/corpus is missing), and small PDFs drawn here with pypdfium2 so
that each rule is exercised on a page whose right answer is known.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.settings import ParseSettings
from parsers.pdf.assemble import lines_to_document
from parsers.pdf.blocks import Block
from parsers.pdf.offline import parse_offline
from parsers.pdf.primitives import Line, Word, fold_radicals, is_bold_face
from parsers.registry import stored_markdown
from tests.helpers.pdfdraw import Page, add_outline, make_pdf


def parse_pdf_offline(path: Path, settings: ParseSettings) -> tuple[Any, str, list[Any]]:
    result = parse_offline(path, settings)
    return result.doc, result.parser, result.warnings


# --------------------------------------------------------------------------- #
# Drawing test PDFs
# --------------------------------------------------------------------------- #

BODY = [
    "The review covers the operations of the quarter and the figures of each site",
    "that reported on time, with the exceptions noted in the sections that follow.",
]


def report_page(p: Page) -> None:
    """Title, bold headings in the body size, a ruled table and an aligned table."""
    y = 72.0
    p.text("Quarterly Review", 72, y, "Helvetica-Bold", 18)
    y += 32
    for s in BODY:
        p.text(s, 72, y)
        y += 13
    y += 14
    p.text("Regional Results", 72, y, "Helvetica-Bold", 10)  # bold, body size
    y += 14
    for s in BODY:
        p.text(s, 72, y)
        y += 13
    y += 10
    # A ruled 3 x 4 grid whose header's first two cells are one spanning cell.
    xs = [72.0, 200.0, 320.0, 440.0]
    top = y
    rows = [["Region and quarter", "", "Staff"], ["North", "1200", "14"], ["South", "980", "11"]]
    rows.append(["East", "1430", "17"])
    for r, row in enumerate(rows):
        for k, cell in enumerate(row):
            if cell:
                p.text(cell, xs[k] + 4, y + 12, "Helvetica-Bold" if r == 0 else "Helvetica")
        y += 16
    for i in range(len(rows) + 1):
        p.line(xs[0], top + 16 * i, xs[-1], top + 16 * i)
    for k, x in enumerate(xs):
        if k == 1:  # no border between the two header cells
            p.line(x, top + 16, x, y)
        else:
            p.line(x, top, x, y)
    y += 24
    p.text("Staffing grew in every region compared with the previous quarter.", 72, y)
    y += 26
    p.text("Site Figures", 72, y, "Helvetica-Bold", 10)
    y += 16
    # An unruled table: three columns aligned by white space, written row by row.
    for row in [["Site", "Units", "Defects"], ["Delft", "310", "4"], ["Ghent", "287", "7"]]:
        for k, cell in enumerate(row):
            p.text(cell, [72, 200, 320][k], y)
        y += 14
    p.text("Lyon", 72, y)
    p.text("402", 200, y)
    p.text("2", 320, y)
    y += 28
    # A bold lead-in phrase starts a paragraph; it is not a heading.
    p.text("Note:", 72, y, "Helvetica-Bold", 10)
    p.text("defect rates stayed below the target at all sites this quarter.", 102, y)
    y += 13
    p.text("The target is reviewed every year by the quality board.", 72, y)
    # A bold running foot, far below the text.
    p.text("Northwind Internal", 72, 760, "Helvetica-Bold", 9)


def columns_page(p: Page) -> None:
    """Two columns of short lines, written column after column: not a table."""
    words = ["alpha beta gamma", "delta epsilon", "zeta eta theta", "iota kappa", "lambda mu nu"]
    for i, s in enumerate(words * 2):
        p.text(s, 72, 100 + 14 * i)
    for i, s in enumerate(words * 2):
        p.text(s.upper(), 330, 100 + 14 * i)


def lists_and_code_page(p: Page) -> None:
    """Prose, a numbered list with hanging markers, then a code listing aligned with spaces."""
    y = 80.0
    for s in BODY * 2:
        p.text(s, 72, y)
        y += 13
    y += 12
    for i, s in enumerate(["Apples", "Pears", "Plums", "Cherries"]):
        p.text(f"{i + 1}.", 72, y)
        p.text(s, 115, y)  # a tab stop away from its marker
        y += 14
    y += 14
    for code, comment in [("x = 1", "# init"), ("y = x + 2", "# add"), ("z = y * 3", "# mul")]:
        p.text(code, 72, y, "Courier")
        p.text(comment, 200, y, "Courier")
        y += 12
    y += 14
    for s in BODY:
        p.text(s, 72, y)
        y += 13


MANUAL = [
    "The elastic stop nut is a standard nut with its height increased to hold a",
    "fibre collar; the bolt threads cut into the collar as the nut is tightened,",
    "and the collar presses the threads together so that the nut cannot loosen.",
]


def manual_page(p: Page) -> None:
    """Side headings in italics at the body size, run straight into their text."""
    y = p.paragraph(MANUAL, 80.0)
    p.text("Elastic Stop Nut", 72, y, "Times-Italic")  # no gap above or below
    y = p.paragraph(MANUAL, y + 12)
    # An italic line inside a paragraph runs to the margin: emphasis, not a heading.
    p.text(MANUAL[0], 72, y, "Times-Roman")
    p.text(MANUAL[1], 72, y + 12, "Times-Italic")
    p.text(MANUAL[2], 72, y + 24, "Times-Roman")
    y += 48
    # An italic caption is a sentence: not a heading either.
    p.text("Figure 7-26. Self-locking nuts.", 72, y, "Times-Italic")
    p.paragraph(MANUAL, y + 12)


def test_italic_side_heading_at_body_size(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "manual.pdf", manual_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    md = doc.export_to_markdown()
    assert _headings(md) == ["Elastic Stop Nut"], md
    assert "Elastic Stop Nut\n\nThe elastic stop nut" in md  # split off the text below
    assert "fibre collar; the bolt threads" in md
    assert "Figure 7-26. Self-locking nuts." in md


def paper_page(p: Page) -> None:
    """A paper's italic subsection headings standing alone, nearer to the text they
    introduce than to the text above; a stroked (fake bold) line at body size."""
    y = 80.0
    for title in ("Animals", "Statistical Analysis"):
        y = p.paragraph(MANUAL, y) + 22  # white space above the heading...
        p.text(title, 72, y, "Times-Italic")
        y = p.paragraph(MANUAL, y + 18) + 10  # ...more than below it
    p.text("Investment Summary", 72, y + 14, "Times-Roman", stroked=True)
    p.paragraph(MANUAL, y + 28)


def test_headings_by_spacing_and_by_stroke(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "paper.pdf", paper_page)
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    assert _headings(md) == ["Animals", "Statistical Analysis", "Investment Summary"], md


def figure_beside_rules_page(p: Page) -> None:
    """A table ruled above and below only, and a figure whose white backdrop and
    diagonal pointer reach across those rules, with prose beside the figure."""
    for y in (80, 96, 150):
        p.line(72, y, 540, y)
    rows = {91: ("Sample", "Density", "Porosity"), 112: ("A-2", "2.797", "9.69")}
    rows[130] = ("B-8", "2.856", "1.36")
    for y, row in rows.items():
        for x, cell in zip((80, 250, 420), row, strict=True):
            p.text(cell, x, y)
    p.white_box(330, 60, 545, 330)  # reaches above the top rule, below the prose
    p.line(340, 70, 530, 320)  # the pointer of an annotated micrograph
    p.paragraph([s[:40] for s in MANUAL], 180.0)  # prose beside the figure


def test_invisible_boxes_and_diagonals_do_not_make_a_table(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "figure.pdf", figure_beside_rules_page)
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    prose = [ln for ln in md.splitlines() if "elastic stop nut" in ln]
    assert prose and not any(ln.startswith("|") for ln in prose), md


def test_spaces_inside_a_word_are_closed() -> None:
    """docling-parse splits a word where a ligature glyph ends; pieces that touch
    are one word, pieces a word space apart stay two."""
    from parsers.pdf.textlayer import _close_false_spaces

    def word(text: str, left: float, right: float, order: int) -> Word:
        return Word(text, left, 100, right, 110, order=order)

    words = [
        word("of", 196.2, 204.6, 0),
        word("infl", 207.6, 220.9, 1),
        word("ammation", 220.9, 260.9, 2),
        word("and", 264.0, 278.4, 3),
    ]
    text = "of infl ammation and"
    assert _close_false_spaces(text, words) == "of inflammation and"
    spaced = [word("sécuri", 442.2, 493.7, 0), word("té", 494.5, 510.4, 1)]
    assert _close_false_spaces("sécuri té", spaced) == "sécurité"
    apart = [word("toute", 391.9, 434.5, 0), word("sécurité", 437.2, 510.4, 1)]
    assert _close_false_spaces("toute sécurité", apart) == "toute sécurité"


def test_a_gap_where_chinese_meets_latin_is_a_space(tmp_path: Path) -> None:
    """Where Chinese meets Latin letters the typesetter leaves a gap (xeCJK's glue, the
    space the writer typed) that docling-parse may keep inside one word: the reader
    sees "基于 LightGBM", and so does the stored text. Touching glyphs stay joined,
    and so do gaps inside one script."""
    from tests.helpers.pdfgen import write_cjk_pdf

    pdf = write_cjk_pdf(
        tmp_path / "mixed.pdf",
        [
            ["基于", "LightGBM", "的模型"],
            ["基于", 120, "LightGBM", 250, "的", 250, "RUL", 250, "预测"],
            ["运行", 120, "Tester.exe", 0, "即可"],
        ],
    )
    _doc, _parser, _warnings = parse_pdf_offline(pdf, ParseSettings())
    text = stored_markdown(_doc)
    assert "基于LightGBM的模型" in text
    assert "基于 LightGBM 的 RUL 预测" in text
    assert "运行 Tester.exe即可" in text


def _guide_page(prose: str, prose_size: float, code_size: float) -> Callable[[Page], None]:
    """A deployment guide: a bold title, then numbered steps in ``prose`` each followed
    by a listing in Courier; the listings hold most of the page's characters."""

    def draw(p: Page) -> None:
        p.text("Deploying the service", 72, 80, "Helvetica-Bold", 16)
        y = 120.0
        for n, step in enumerate(["Install the tools", "Start the broker", "Load the data"], 1):
            p.text(f"{n}. {step}", 72, y, prose, prose_size)
            y += 22
            for k in range(6):
                p.text(
                    f"sudo dnf -y install gcc make openssl-devel libffi-devel pkg{n}{k}",
                    84,
                    y,
                    "Courier",
                    code_size,
                )
                y += code_size + 3
            y += 14
        p.text(
            "The broker keeps its queues on disk; restart it after the upgrade.",
            72,
            y,
            prose,
            prose_size,
        )

    return draw


def test_a_guide_that_is_mostly_code_is_read_by_its_prose(tmp_path: Path) -> None:
    """Where listings hold most of the characters, the running text is still the prose:
    its numbered steps are neither set in "another face" than a Courier body (same size)
    nor "larger" than code set smaller than them, so they stay list items; code set
    larger than the prose is not a heading either. The title stays the one heading."""
    for name, prose_size, code_size in (
        ("same", 10.0, 10.0),
        ("smaller", 11.0, 8.0),
        ("larger", 8.0, 10.0),
    ):
        pdf = make_pdf(tmp_path / f"{name}.pdf", _guide_page("Helvetica", prose_size, code_size))
        doc, _parser, _warnings = parse_pdf_offline(pdf, ParseSettings())
        md = stored_markdown(doc)
        assert _headings(md) == ["Deploying the service"], (name, md)
        assert "Install the tools" in md and "pkg35" in md


def test_a_short_decks_titles_are_not_its_body_text() -> None:
    """A Beamer deck of short slides: the titles (14 pt) carry as many characters as the
    text (11 pt), and the code (11 pt, Courier) more than both. The body is the prose at
    11 pt, so the titles stay larger than it."""
    from parsers.pdf.headings import _body_style

    def block(text: str, top: float, size: float, font: str) -> Block:
        return Block("paragraph", [Line(1, text, 72, top, 400, top + size, size, 0.0, font)])

    blocks = [
        block("What is Reason: code vs code, again", 40, 14.0, "LMSans12-Regular"),
        block("A language for the evening shift", 80, 11.0, "LMSans10-Regular"),
        block('let greeting = name => "Hello " ++ name ++ "!";', 120, 11.0, "LMMono10-Regular"),
        block("let area = (w, h) => w * h; /* float */", 140, 11.0, "LMMono10-Regular"),
    ]
    body = _body_style(blocks)
    assert (round(body.size), body.face, round(body.code_size)) == (11, "LMSans10-Regular", 11)


def test_a_run_of_latin_letters_too_long_for_a_word_takes_the_pages_spaces() -> None:
    """XeLaTeX setting English in a CJK font and justifying it tightly leaves gaps that
    docling-parse reads as one word, "beensuccessfullytestedwith"; pdfium's text of the
    word's box has the spaces, and inside such a run they are taken. A word of ordinary
    length keeps docling-parse's reading, and a long compound without a gap stays whole."""
    from parsers.pdf.textlayer import _respaced

    assert (
        _respaced("beensuccessfullytestedwithPandoc", "been successfully tested withPandoc")
        == "been successfully tested withPandoc"
    )
    assert _respaced("seemnot", "seem not") == "seemnot"
    compound = "Donaudampfschifffahrtsgesellschaft"
    assert _respaced(compound, compound) == compound
    # pdfium reads other letters (a neighbour's glyph in the box): nothing is taken.
    assert _respaced("beensuccessfullytested", "y been successfully tested") == (
        "beensuccessfullytested"
    )


def tables_page(p: Page) -> None:
    """Captions set larger than the text, each above a ruled table; almost all the
    page's text is in the tables' cells."""
    y = 80.0
    for caption in ("Table with plain cells", "Table with merged cells"):
        p.text(caption, 72, y, "Helvetica", 14)
        y += 14
        top = y
        xs = [72.0, 200.0, 330.0, 460.0]
        for r in range(4):
            for k in range(3):
                p.text(f"Row {r + 1} column {k + 1} value", xs[k] + 4, y + 12)
            y += 16
        for i in range(5):
            p.line(xs[0], top + 16 * i, xs[-1], top + 16 * i)
        for x in xs:
            p.line(x, top, x, y)
        y += 30
    p.text("After the tables.", 72, y)


def test_body_size_is_read_in_table_cells_too(tmp_path: Path) -> None:
    """A page that is mostly tables: the body size is the cells' size, so the
    captions set larger are headings (they are most of the text outside the tables)."""
    path = make_pdf(tmp_path / "tables.pdf", tables_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    md = doc.export_to_markdown()
    assert len(_items(doc, "TableItem")) == 2
    assert _headings(md) == ["Table with plain cells", "Table with merged cells"], md
    assert "After the tables." not in _headings(md)


def bold_body_page(p: Page) -> None:
    """A document set in bold throughout, its sections numbered with hyphens: bold
    and size set nothing apart, the numbering does; bold lines without it stay text."""
    y = 80.0
    for heading in ("2-5- Standards of the product", "3- Admission to the exchange"):
        p.text(heading, 72, y, "Helvetica-Bold", 10)
        y += 24  # space below: a line of its own
        for s in BODY * 2:
            p.text(s, 72, y, "Helvetica-Bold", 10)
            y += 13
        y += 12
    p.text("Terms of delivery", 72, y, "Helvetica-Bold", 10)  # bold, not numbered
    y += 24
    for s in BODY:
        p.text(s, 72, y, "Helvetica-Bold", 10)
        y += 13


def test_numbered_heading_in_a_bold_body(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "bold.pdf", bold_body_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    md = doc.export_to_markdown()
    assert _headings(md) == ["2-5- Standards of the product", "3- Admission to the exchange"], md
    assert "Terms of delivery" in md


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    path = make_pdf(tmp_path_factory.mktemp("pdf") / "report.pdf", report_page)
    doc, parser, _warnings = parse_pdf_offline(path, ParseSettings())
    assert parser == "pdf-offline"
    yield doc, doc.export_to_markdown()


def _items(doc: Any, kind: str) -> list[Any]:
    return [item for item, _ in doc.iterate_items() if type(item).__name__ == kind]


def _headings(markdown: str) -> list[str]:
    return [ln.lstrip("#").strip() for ln in markdown.splitlines() if ln.startswith("#")]


# --------------------------------------------------------------------------- #
# Headings
# --------------------------------------------------------------------------- #


def test_title_and_body_size_bold_heading(report: tuple[Any, str]) -> None:
    _doc, md = report
    heads = _headings(md)
    assert "Quarterly Review" in heads
    # Bold at the body size, directly above its paragraph: split off as a heading.
    assert "Regional Results" in heads
    assert "Site Figures" in heads
    assert any(ln.startswith("The review covers") for ln in md.splitlines())


def test_bold_lead_in_and_running_foot_are_not_headings(report: tuple[Any, str]) -> None:
    _doc, md = report
    heads = _headings(md)
    assert not any(h.startswith("Note") for h in heads)
    assert "Northwind Internal" not in heads
    assert "Northwind Internal" in md  # still kept as text


def test_heading_levels_follow_size(report: tuple[Any, str]) -> None:
    doc, _md = report
    levels = {h.text: h.level for h in _items(doc, "SectionHeaderItem")}
    assert levels["Quarterly Review"] < levels["Regional Results"]


def test_bold_face_names() -> None:
    bold = ["Arial-BoldMT", "MyriadPro-Bd", "AdobeCorpID-MyriadBdIt", "CMBX12", "Roboto-Black"]
    # Style codes as the last part of the name, TeX's bold italic, numbered weights.
    bold += ["AdvGulliv-B", "Frutiger-BI", "Univers,BO", "SFBI1095", "CMB10", "HiraKakuStdN-W8"]
    regular = ["ArialMT", "MyriadPro-Regular", "CMR10", "KoPubDotumMedium", "Helvetica-Oblique"]
    regular += ["AdvGulliv-R", "AdvGulliv-I", "SFTI1095", "CMBSY10", "HiraKakuProN-W4", "Foo-LB"]
    assert all(is_bold_face(f) for f in bold)
    assert not any(is_bold_face(f) for f in regular)


def _column(text: str, tops: range, size: float, font: str) -> list[Line]:
    """Lines of running text on page 1, one at each of ``tops``; ``{k}`` in ``text`` counts."""
    return [
        Line(1, text.format(k=k), 72, y, 480, y + size, size, 0.0, font) for k, y in enumerate(tops)
    ]


def test_a_page_range_judges_headings_against_the_body_style_it_is_given() -> None:
    """A page range of a document set in 12 pt whose own pages are mostly 9 pt notes: on
    its own, a 12 pt line above the notes is larger than its body, a heading; given the
    body style of the range before it (``RangeHeadings``, as the pool gives it), it is
    running text, as in the whole document's parse. A range given none stores its own,
    and each heading's style is recorded for the merge."""
    from docling_core.types.doc import SectionHeaderItem

    from parsers.pdf.headings import BodyStyle, HeadingMark, RangeHeadings

    def lines() -> list[Line]:
        notes = _column(
            "Note {k}: the gauge on line {k} reads in bar, not in psi or kPa",
            range(100, 400, 12),
            9.0,
            "Helvetica",
        )
        lead = Line(1, "Readings of the gauges", 72, 70, 250, 82, 12.0, 0.0, "Times-Roman")
        return [lead, *notes]

    def headings(doc: Any) -> list[str]:
        return [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]

    alone = RangeHeadings()
    assert headings(lines_to_document(lines(), {1: (612.0, 792.0)}, "r", [], context=alone)) == [
        "Readings of the gauges"
    ]
    assert alone.body is not None and alone.body.size == 9.0
    assert alone.marks == [HeadingMark(12.0, False)]
    given = RangeHeadings(body=BodyStyle(12.0, False, "Times-Roman"))
    assert headings(lines_to_document(lines(), {1: (612.0, 792.0)}, "r", [], context=given)) == []
    assert given.marks == []
    assert RangeHeadings.from_dict(alone.to_dict()) == alone


def test_ocr_style_lines_still_assemble() -> None:
    """OCR and image parsing pass plain lines (no typography) to lines_to_document."""
    lines = [
        Line(1, "INCIDENT REPORT", 50, 40, 300, 70),
        Line(1, "The cooling pump stopped at 14:10 and was restarted", 50, 90, 500, 104),
        Line(1, "after the contactor was replaced.", 50, 106, 300, 120),
    ]
    doc = lines_to_document(lines, {1: (600.0, 800.0)}, "scan", [])
    md = doc.export_to_markdown()
    assert "## INCIDENT REPORT" in md
    assert "restarted after the contactor" in md


def test_kangxi_radicals_read_as_the_ordinary_characters() -> None:
    # XeTeX and macOS map some glyphs to the radical code points (U+2F00...):
    # "⼀维⽼师" looks like "一维老师" but matches nothing a reader types.
    assert fold_radicals("\u2f00维\u2f7c师，⽜顿法") == "一维老师，牛顿法"
    assert fold_radicals("全角，标点。ﬁ") == "全角，标点。ﬁ"  # nothing else is folded


def test_a_glyph_mapped_to_all_its_forms_is_read_once(tmp_path: Path) -> None:
    """macOS prints map one glyph to its radical forms and the ideograph at once
    ("⺫⽬目" for 目, "⽐比" for 比): the reader sees one character, and so does the
    stored text; a character the writer doubled stays doubled."""
    from tests.helpers.pdfgen import write_cjk_pdf

    pdf = write_cjk_pdf(
        tmp_path / "forms.pdf",
        [["目录"], ["比较分支"], ["比比皆是"]],
        maps={"目": "\u2eab\u2f6c目", "比": "\u2f50比", "支": "\u2f40支"},
    )
    text = stored_markdown(parse_pdf_offline(pdf, ParseSettings())[0])
    assert [ln for ln in text.split() if ln] == ["目录", "比较分支", "比比皆是"], text
    assert fold_radicals("\u2f50比\u2f50比皆是") == "比比皆是"
    assert fold_radicals("\u2f64\u2f64户") == "用用户"  # two radicals are two characters


def test_wide_leading_does_not_split_paragraphs() -> None:
    """Chinese set with a line gap larger than its glyphs, like a double-spaced
    manuscript: lines that run the full width are one paragraph; a wider gap
    still starts the next one."""
    row = "陣委百三秋康経重示面合雪減背井足府迷根間米式十良提馬紀研園要中募用刊考稿協中写万"
    lines, y = [], 100.0
    for _para in range(2):
        for k in range(4):
            text = row if k < 3 else "読性聞点社。"
            lines.append(Line(1, text, 72, y, 72 + (450 if k < 3 else 60), y + 7.5, 7.5))
            y += 16.3  # glyphs 7.5 pt high, a 8.8 pt gap between lines
        y += 6  # a paragraph gap
    md = lines_to_document(lines, {1: (600.0, 800.0)}, "zh", []).export_to_markdown()
    paragraphs = [p for p in md.split("\n\n") if p.strip()]
    assert len(paragraphs) == 2, paragraphs
    assert all(p.endswith("読性聞点社。") for p in paragraphs)


def book_page(chapter: str, with_title: bool) -> Callable[[Page], None]:
    def draw(p: Page) -> None:
        p.text(chapter, 240, 40, "Times-Roman", 9)  # the running head names the chapter
        y = 80.0
        if with_title:
            p.text("The Pool of Tears", 72, y, "Times-Bold", 16)
            y += 30
        for _ in range(3):
            for s in BODY:
                p.text(s, 72, y, "Times-Roman")
                y += 12
            y += 8
        p.text("Table 4", 72, y, "Times-Bold")  # a caption's label on its own line
        p.text("Opening hours of each site.", 72, y + 12, "Times-Roman")
        p.text("\u2022 Tensile strength", 90, y + 36, "Times-Bold")  # a bold list item
        p.text("measured at 20 degrees on three samples of each batch", 100, y + 48)
        p.text("and reported as the mean of the three values.", 100, y + 60)

    return draw


def test_running_heads_captions_and_bullets_are_not_headings(tmp_path: Path) -> None:
    """A chapter's running head repeats on its pages (not on 30% of a long book);
    a caption label and a bold bullet item are set off like headings, and are not."""
    pages = [book_page("CHAPTER II. THE POOL OF TEARS", k == 0) for k in range(4)]
    pages += [book_page("CHAPTER III. A CAUCUS-RACE", False) for _ in range(8)]
    path = make_pdf(tmp_path / "book.pdf", *pages)
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    heads = _headings(md)
    assert "The Pool of Tears" in heads
    assert not any("CHAPTER" in h for h in heads), heads
    assert not any(h.startswith(("Table", "\u2022")) for h in heads), heads
    assert "Tensile strength" in md and "Table 4" in md  # kept as text


def test_running_heads_stay_text_when_the_outline_names_their_chapter(tmp_path: Path) -> None:
    """The outline names each chapter once; a running head that spells the chapter's
    title ("CHAPTER II. THE POOL OF TEARS" on every page of it) is still page furniture,
    not one more heading per page."""
    pages = [book_page("CHAPTER II. THE POOL OF TEARS", k == 0) for k in range(4)]
    pages += [book_page("CHAPTER III. A CAUCUS-RACE", False) for _ in range(8)]
    path = make_pdf(tmp_path / "book.pdf", *pages)
    add_outline(path, [(0, "The Pool of Tears", 1), (0, "A Caucus-Race", 5)])
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    assert _headings(md) == ["The Pool of Tears"], md


def test_a_contents_list_stays_text_where_the_outline_points_elsewhere(tmp_path: Path) -> None:
    """A contents list spells every title the outline names, in the same face as the
    titles; the bookmarks point at the chapters' pages, so the headings are there and
    the list's entries stay text (Typora and Chrome print a linked contents list)."""

    def contents(p: Page) -> None:
        p.text("Pump manual", 72, 80, "Helvetica-Bold", 20)
        p.paragraph(MANUAL, 110)
        p.text("Contents", 72, 170, "Helvetica-Bold", 14)
        for k, entry in enumerate(("1. Pumps", "2. Valves")):
            p.text(entry, 90, 192 + 14 * k, "Helvetica-Bold", 10)

    def chapter(title: str) -> Callable[[Page], None]:
        def draw(p: Page) -> None:
            p.text(title, 72, 80, "Helvetica-Bold", 14)
            p.paragraph(MANUAL * 3, 104)

        return draw

    path = make_pdf(tmp_path / "toc.pdf", contents, chapter("1. Pumps"), chapter("2. Valves"))
    add_outline(path, [(0, "Pump manual", 1), (1, "1. Pumps", 2), (1, "2. Valves", 3)])
    doc = parse_offline(path, ParseSettings()).doc
    heads = [
        (item.text, item.prov[0].page_no) for item in doc.texts if item.label == "section_header"
    ]
    assert ("1. Pumps", 2) in heads and ("2. Valves", 3) in heads, heads
    assert not [h for h in heads if h[1] == 1 and h[0] in ("1. Pumps", "2. Valves")], heads
    assert "1. Pumps" in doc.export_to_markdown().split("Contents")[1].split("## 1. Pumps")[0]


_TITLES, _LABELS = ("1. Pumps", "2. Valves", "3. Seals"), ("Training", "Spares", "Records")


def _chapter(title: str, label: str, k: int) -> Callable[[Page], None]:
    """A chapter's page: its title set large, k paragraphs, a bold line at the body's
    size (``label``) and two more paragraphs."""

    def draw(p: Page) -> None:
        p.text(title, 72, 80, "Helvetica-Bold", 14)
        y = p.paragraph(MANUAL * k, 104) + 14
        p.text(label, 72, y, "Times-Bold", 10)
        p.paragraph(MANUAL * 2, y + 14)

    return draw


def test_bold_lines_the_outline_leaves_out_are_emphasis(tmp_path: Path) -> None:
    """Where the outline lists the headings, a bold line at the body's size in none of
    their styles is emphasis (a report's "**Training**" line, a template's "License"
    label); without an outline the same line is a side heading."""

    titles, labels = _TITLES, _LABELS
    pages = [
        _chapter(t, label, k + 1) for k, (t, label) in enumerate(zip(titles, labels, strict=True))
    ]
    plain = make_pdf(tmp_path / "plain.pdf", *pages)
    md = parse_offline(plain, ParseSettings()).doc.export_to_markdown()
    assert _headings(md) == ["1. Pumps", "Training", "2. Valves", "Spares", "3. Seals", "Records"]
    outlined = add_outline(plain, [(0, t, k + 1) for k, t in enumerate(titles)])
    md = parse_offline(outlined, ParseSettings()).doc.export_to_markdown()
    assert _headings(md) == list(titles), md
    assert all(label in md for label in labels)  # kept, as text


def test_bold_lines_a_contents_list_names_are_the_level_the_outline_leaves_out(
    tmp_path: Path,
) -> None:
    """The outline names the chapters only (pandoc's LaTeX bookmarks stop above
    subsubsections), but the document's own contents list names the bold lines
    under them: those are the next level down, not emphasis."""
    titles, labels = _TITLES, _LABELS

    def contents(p: Page) -> None:
        p.text("Table of Contents", 72, 80, "Helvetica-Bold", 14)
        y = 110.0
        for title, label in zip(titles, labels, strict=True):
            p.text(f"- {title}", 72, y, "Times-Roman", 10)
            p.text(f"- {label}", 90, y + 14, "Times-Roman", 10)
            y += 28
        p.paragraph(MANUAL, y + 10)

    pages = [_chapter(t, lb, k + 1) for k, (t, lb) in enumerate(zip(titles, labels, strict=True))]
    plain = make_pdf(tmp_path / "plain.pdf", contents, *pages)
    outlined = add_outline(plain, [(0, t, k + 2) for k, t in enumerate(titles)])
    md = parse_offline(outlined, ParseSettings()).doc.export_to_markdown()
    found = _headings(md)
    assert [h for h in found if h != "Table of Contents"] == [
        "1. Pumps",
        "Training",
        "2. Valves",
        "Spares",
        "3. Seals",
        "Records",
    ], md
    assert "- Training" in md  # the contents entry stays an entry


def test_text_ocr_reads_in_a_slides_picture_is_never_a_heading(tmp_path: Path) -> None:
    """A slide with a short title over a screenshot has too few characters in its text
    layer, so it is OCR'd: the title keeps its text layer's size (a heading), and the
    screenshot's words, which OCR reads at the sizes they are drawn, are the picture's
    text, never headings. A slide that holds only a large title is a divider: a heading."""

    def first(p: Page) -> None:
        p.text("Paying with a phone", 72, 90, "Helvetica-Bold", 22)
        p.paragraph(MANUAL, 130)

    def screens(p: Page) -> None:
        p.text("Wallet screens", 72, 90, "Helvetica-Bold", 22)
        p.picture(["Send to", "Cancel payment", "Balance 0.08 ETH"], 72, 130, 300, 200)

    def divider(p: Page) -> None:
        p.text("Appendix", 72, 300, "Helvetica-Bold", 22)

    result = parse_offline(
        make_pdf(tmp_path / "deck.pdf", first, screens, divider), ParseSettings()
    )
    md = stored_markdown(result.doc)
    assert _headings(md) == ["Paying with a phone", "Wallet screens", "Appendix"], md
    assert "Cancel payment" in md and "Balance" in md  # read, as text
    assert result.parser == "pdf-offline+ocr"
    assert any("OCR added" in w.message and w.page == 2 for w in result.warnings)


def test_authors_over_their_affiliations_are_not_a_heading(tmp_path: Path) -> None:
    """A paper's byline, each name carrying its affiliation's number, is set bold over
    the affiliations that the same numbers open: the authors, not a section."""

    def page(p: Page) -> None:
        p.text("A fault-tolerant event engine", 72, 70, "Helvetica-Bold", 18)
        p.text("Alexander Power 1, Jane Doe 2", 72, 100, "Helvetica-Bold", 12)
        p.text("1 Department of Computer Science, University of Bath", 72, 118, "Helvetica", 8)
        p.text("Summary", 72, 150, "Helvetica-Bold", 13)
        p.paragraph(MANUAL * 3, 170)

    md = parse_offline(make_pdf(tmp_path / "paper.pdf", page), ParseSettings()).doc
    assert _headings(md.export_to_markdown()) == ["A fault-tolerant event engine", "Summary"]


def not_headings_page(p: Page) -> None:
    """Lines set apart like headings that are not: a keyword of a code listing set bold,
    a chart's axis titles above or beside its tick values, a larger lead-in line that
    a hyphen breaks mid-word, a stamp turned upright in the margin, a bold lead-in
    ending in a colon; one real heading."""
    p.text("Overview", 72, 80, "Helvetica-Bold", 14)
    p.text("arXiv:2212.08410v3 [cs.CL] 1 Jun 2023", 40, 420, "Times-Roman", 20, upward=True)
    y = p.paragraph(MANUAL, 100.0) + 14
    p.text("class Solver {", 72, y, "Courier")
    p.text("public:", 72, y + 12, "Courier-Bold")  # syntax highlighting
    p.text("    Solver(int n);", 72, y + 24, "Courier")
    p.text("    double run();", 72, y + 36, "Courier")
    p.text("};", 72, y + 48, "Courier")
    y = p.paragraph(MANUAL, y + 74) + 30
    p.text("Number of ulcers", 80, y + 120, "Helvetica-Bold", 10, upward=True)
    for k, tick in enumerate(("0", "50", "100", "150")):
        p.text(tick, 100, y + 110 - 30 * k, "Helvetica", 8)
    p.text("GMP concentration (mg/L)", 200, y + 140, "Helvetica-Bold", 10)
    for k, tick in enumerate(("0", "10", "20", "30")):
        p.text(tick, 120 + 60 * k, y + 155, "Helvetica", 8)
    y += 190
    p.text("Tamen condeturque saxa pallorque num et fer-", 72, y, "Helvetica-Bold", 12)
    p.paragraph(["arum promittis inveni lilia iuvencae adessent arbore.", *MANUAL], y + 14)
    y = p.paragraph(MANUAL, y + 80) + 20
    p.text("Consider including:", 72, y, "Helvetica-Bold", 10)  # a lead-in to a list
    p.paragraph(["the time of the transfer and who was told;", "the medicines given."], y + 14)


@pytest.fixture(scope="module")
def not_headings_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = make_pdf(tmp_path_factory.mktemp("pdf") / "not_headings.pdf", not_headings_page)
    return str(parse_offline(path, ParseSettings()).doc.export_to_markdown())


@pytest.mark.parametrize(
    "line",
    [
        "public:",  # bold monospace: code, whatever its weight
        "Number of ulcers",  # upright: text set vertically is a label or a stamp
        "arXiv:2212.08410v3 [cs.CL] 1 Jun 2023",
        "GMP concentration (mg/L)",  # the text below it has no letters: tick values
        "Tamen condeturque saxa pallorque num et fer-",  # a word broken at its end
        "Consider including:",  # ends in a colon: it introduces what follows
    ],
)
def test_code_chart_labels_and_broken_lines_are_not_headings(
    not_headings_md: str, line: str
) -> None:
    heads = _headings(not_headings_md)
    assert "Overview" in heads, not_headings_md
    assert not any(line.rstrip("-") in h for h in heads), heads
    assert line.rstrip("-") in not_headings_md.replace("\\_", "_")  # kept as text


COLUMN = [
    "The excretion of the marker rose with the dose in",
    "every animal, and the rise was steeper above the",
    "middle dose than below it, as the figure shows for",
    "each of the groups that were given the compound.",
]


def two_column_page(p: Page) -> None:
    """A page set in two columns: in the left one a chart, between paragraphs of
    text and its caption, whose tick values sit on the row of a bold side heading
    at the body size in the right one."""
    y = 80.0
    for s in COLUMN * 2:
        p.text(s, 50, y, "Times-Roman", 9)
        y += 11
    for k, tick in enumerate(("0", "10", "30", "100", "300")):
        p.text(tick, 80 + 40 * k, 260, "Helvetica", 7)  # the chart's x axis
    p.text("Fig. 1 Excretion of the marker in the urine after each", 50, 280, "Times-Roman", 8)
    p.text("dose of the compound, as a share of the dose given.", 50, 290, "Times-Roman", 8)
    y = 80.0
    for s in COLUMN * 2 + COLUMN[:2]:
        p.text(s, 320, y, "Times-Roman", 9)
        y += 11
    p.text("Discussion", 320, 260, "Times-Bold", 9)
    y = 274.0
    for s in COLUMN * 2:
        p.text(s, 320, y, "Times-Roman", 9)
        y += 11


def header_row_page(p: Page) -> None:
    """One column: running text, then a table whose header row is set in bold at the
    body size, unruled, its cells side by side."""
    y = p.paragraph(MANUAL, 80.0) + 14
    for r, row in enumerate([["Dose", "Animals"], ["10 mg", "12"], ["30 mg", "11"]]):
        for k, cell in enumerate(row):
            p.text(cell, [72, 300][k], y, "Times-Bold" if r == 0 else "Times-Roman", 10)
        y += 14
    p.paragraph(MANUAL, y + 14)


def test_a_side_heading_beside_another_columns_chart_is_a_heading(tmp_path: Path) -> None:
    """A heading stands alone on its row of its column: what shares the row beyond the
    gutter (the other column's tick values) does not make it a table's cell. In one
    column, a bold header row of a table is still not a heading."""
    path = make_pdf(tmp_path / "columns.pdf", two_column_page)
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    assert "Discussion" in _headings(md), md
    path = make_pdf(tmp_path / "header_row.pdf", header_row_page)
    md = parse_offline(path, ParseSettings()).doc.export_to_markdown()
    assert not any(h.startswith(("Dose", "Animals")) for h in _headings(md)), md
    assert "Dose" in md and "Animals" in md  # kept as text


def test_korean_lines_join_with_a_space_chinese_without() -> None:
    ko = Block("paragraph", [Line(1, "보험금 지급", 0, 0, 100, 10), Line(1, "기준", 0, 12, 40, 22)])
    zh = Block("paragraph", [Line(1, "保险金支付", 0, 0, 100, 10), Line(1, "标准", 0, 12, 40, 22)])
    assert ko.text == "보험금 지급 기준"
    assert zh.text == "保险金支付标准"


# --------------------------------------------------------------------------- #
# Tables
# --------------------------------------------------------------------------- #


def test_ruled_table_with_spanning_header(report: tuple[Any, str]) -> None:
    doc, _md = report
    tables = _items(doc, "TableItem")
    ruled = next(t for t in tables if t.data.num_cols == 3 and t.data.num_rows == 4)
    grid = [[cell.text for cell in row] for row in ruled.data.grid]
    assert grid[0][:2] == ["Region and quarter", "Region and quarter"]  # one cell, two columns
    assert grid[0][2] == "Staff"
    assert grid[1:] == [["North", "1200", "14"], ["South", "980", "11"], ["East", "1430", "17"]]


def nested_table_page(p: Page) -> None:
    """A two-column ruled table whose last right cell holds a 3x2 table of its own,
    drawn a cell's padding (5 pt) inside the cell and sharing its bottom border, as
    word processors render a nested table."""
    xs, ys = [72.0, 300.0, 528.0], [100.0, 120.0, 140.0, 190.0]
    for r, (left, right) in enumerate([("Column A", "Column B"), ("Upper left", "Upper right")]):
        p.text(left, xs[0] + 4, ys[r] + 14)
        p.text(right, xs[1] + 4, ys[r] + 14)
    p.text("Plain cell", xs[0] + 4, ys[2] + 14)
    p.text("Rich cell", xs[1] + 4, ys[2] + 14)
    for y in ys:
        p.line(xs[0], y, xs[-1], y)
    for x in xs:
        p.line(x, ys[0], x, ys[-1])
    inner_x = [305.0, 378.0, 451.0, 523.0]
    inner_y = [150.0, 170.0, 190.0]
    for k, x in enumerate(inner_x[:-1]):
        p.text("ABC"[k], x + 4, inner_y[0] + 14)
        p.text(f"Cell {k + 1}", x + 4, inner_y[1] + 14)
    for y in inner_y:
        p.line(inner_x[0], y, inner_x[-1], y)
    for x in inner_x:
        p.line(x, inner_y[0], x, inner_y[-1])


def test_a_table_nested_in_a_cell_stays_in_that_cell(tmp_path: Path) -> None:
    """The nested table's columns do not become columns of the whole table (the outer
    cells would span them, their text repeated in each); its text is the cell's text."""
    path = make_pdf(tmp_path / "nested.pdf", nested_table_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    (table,) = _items(doc, "TableItem")
    grid = [[cell.text for cell in row] for row in table.data.grid]
    assert (table.data.num_rows, table.data.num_cols) == (3, 2), grid
    assert grid[0] == ["Column A", "Column B"]
    assert grid[1] == ["Upper left", "Upper right"]
    assert grid[2][0] == "Plain cell"
    assert grid[2][1].startswith("Rich cell") and "Cell 3" in grid[2][1]


def test_aligned_table_without_borders(report: tuple[Any, str]) -> None:
    doc, md = report
    tables = _items(doc, "TableItem")
    aligned = [t for t in tables if t.data.grid and t.data.grid[0][0].text == "Site"]
    assert len(aligned) == 1
    grid = [[cell.text for cell in row] for row in aligned[0].data.grid]
    assert grid == [
        ["Site", "Units", "Defects"],
        ["Delft", "310", "4"],
        ["Ghent", "287", "7"],
        ["Lyon", "402", "2"],
    ]
    # Paragraphs around the tables are untouched.
    assert "Staffing grew in every region compared with the previous quarter." in md
    assert "| Delft" in md  # Markdown export shows a Markdown table


def test_hanging_list_markers_and_code_are_not_tables(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "lists.pdf", lists_and_code_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    assert _items(doc, "TableItem") == []
    items = [(i.marker, i.text) for i in _items(doc, "ListItem")]
    assert items == [("1.", "Apples"), ("2.", "Pears"), ("3.", "Plums"), ("4.", "Cherries")]
    assert "y = x + 2" in doc.export_to_markdown()


def test_right_to_left_fragments_join_in_reading_order() -> None:
    """The text layer cuts an Arabic line where a Latin word starts; the pieces of
    one baseline join right to left, and a piece cut inside a word joins without
    a space."""
    from parsers.pdf.textlayer import _merge_row_fragments

    row = [
        Line(1, "البرمجة بلغة", 300, 100, 400, 110),
        Line(1, "Python", 250, 100, 297, 110),
        Line(1, "و", 243, 100, 247, 110),
        Line(1, "م", 230, 100, 240, 110),
        Line(1, "ن التطبيقات", 150, 100, 230, 110),
    ]
    (merged,) = _merge_row_fragments(row)
    assert merged.text == "البرمجة بلغة Python و من التطبيقات"
    assert (merged.left, merged.right) == (150, 400)


def test_underscores_below_the_baseline_stay_in_their_word() -> None:
    """A browser's PDF cuts a code line at each underscore, and the underscore's box
    lies under the baseline (boxes as docling-parse gave them for a Chrome-printed
    report): the identifier is one word again, in a line with its letters' band."""
    from parsers.pdf.textlayer import _merge_row_fragments

    row = [
        Line(1, "insert", 121.3, 438.3, 155.0, 445.5, 7.2),
        Line(1, "_", 155.0, 446.8, 160.6, 447.5),
        Line(1, "random", 160.6, 438.4, 194.3, 445.5, 7.1),
        Line(1, "_", 194.3, 446.8, 199.9, 447.5),
        Line(1, "character,", 199.9, 438.4, 256.0, 447.1, 8.7),
        Line(1, "flip_", 121.3, 452.6, 149.4, 461.7, 9.1),
        Line(1, "random", 149.4, 452.7, 183.1, 459.8, 7.1),
    ]
    merged = _merge_row_fragments(row)
    assert [m.text for m in merged] == ["insert_random_character,", "flip_random"]
    assert (merged[0].top, merged[0].bottom) == (438.3, 447.1)
    # A footnote mark touches its word but sits above the baseline: not glued into it.
    marked = [
        Line(1, "the results", 100, 100, 150, 110, 10),
        Line(1, "1", 150, 98, 154, 104, 5),
    ]
    assert [m.text for m in _merge_row_fragments(marked)] == ["the results", "1"]
    # A rule of underscores under a heading is its own line, not part of the heading.
    rule = [Line(1, "Results", 72, 100, 140, 112, 12), Line(1, "________", 72, 113, 140, 114)]
    assert len(_merge_row_fragments(rule)) == 2


def test_right_to_left_cell_words_in_reading_order() -> None:
    """A producer that writes an Arabic table cell's words in visual order (left to
    right): the cell reads right to left, a Latin phrase inside keeps its order."""
    from parsers.pdf.tables import join_words

    visual = ["التطبيقات", "و", "Python", "code", "بلغة", "البرمجة"]  # left to right
    words = [Word(t, 10 + 60 * i, 100, 60 + 60 * i, 110, order=i) for i, t in enumerate(visual)]
    assert join_words(words) == "البرمجة بلغة Python code و التطبيقات"
    latin = [Word(t, 10 + 60 * i, 100, 60 + 60 * i, 110, order=i) for i, t in enumerate(["a", "b"])]
    assert join_words(latin) == "a b"


def _ruled_grid(cells: list[list[str]], width: float = 240, height: float = 120) -> Any:
    """Words and borders of a fully ruled grid, one word per line of each cell's text."""
    from parsers.pdf.tables import Rule

    n_rows, n_cols = len(cells), len(cells[0])
    rules = [Rule(True, 50 + r * height, 50, 50 + n_cols * width) for r in range(n_rows + 1)]
    rules += [Rule(False, 50 + c * width, 50, 50 + n_rows * height) for c in range(n_cols + 1)]
    words = []
    for r, row in enumerate(cells):
        for c, text in enumerate(row):
            for i, line in enumerate(text.split("\n")):
                top = 60 + r * height + 14 * i
                left = 60 + c * width
                words.append(
                    Word(line, left, top, left + 10 * len(line), top + 10, order=len(words))
                )
    return words, rules


def test_a_ruled_page_of_chinese_prose_is_layout_not_a_table() -> None:
    """Chinese prose has no spaces: a cell holding a paragraph must still read as prose
    (a research report's sidebar and body inside the page's ruling lines), while a
    ruled table of short Chinese cells stays a table."""
    from parsers.pdf.tables import find_ruled_tables

    prose = "\n".join(
        [
            "公司拟与壶关县人民政府签署金刚线项目投资协议书，",
            "项目一期计划建设年产四千万千米金刚线产能，预计",
            "一期总投资额约六点六六亿元，后续项目尚未具体约定。",
        ]
    )
    words, rules = _ruled_grid([[prose, prose], [prose, prose]])
    assert find_ruled_tables(1, words, rules) == []
    figures = [
        ["项目", "二零二一年", "二零二二年"],
        ["营业收入", "十五亿元", "三十亿元"],
        ["净利润", "一亿元", "四亿元"],
    ]
    words, rules = _ruled_grid(figures)
    (table,) = find_ruled_tables(1, words, rules)
    assert (table.n_rows, table.n_cols) == (3, 3)
    assert [c.text for c in table.cells][:3] == ["项目", "二零二一年", "二零二二年"]


def test_columns_of_short_lines_are_not_a_table(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "columns.pdf", columns_page)
    doc, _parser, _warnings = parse_pdf_offline(path, ParseSettings())
    assert _items(doc, "TableItem") == []
    md = doc.export_to_markdown()
    assert "alpha beta gamma" in md and "ALPHA BETA GAMMA" in md


# --------------------------------------------------------------------------- #
# Shared corpus (docling's test PDFs and their ground truth)
# --------------------------------------------------------------------------- #


def _metrics(shared_corpus: Path) -> Any:
    sys.path.insert(0, str(shared_corpus.parents[1] / "tools"))
    import parse_metrics  # type: ignore[import-not-found]

    return parse_metrics


def _scored(shared_corpus: Path) -> list[tuple[Path, str]]:
    pdf_dir = shared_corpus / "pdf"
    out = []
    for gt in sorted((pdf_dir / "groundtruth").glob("*.md")):
        pdf = pdf_dir / f"{gt.stem}.pdf"
        if pdf.exists():
            out.append((pdf, gt.read_text()))
    if not out:
        pytest.skip("no scored PDFs in the shared corpus")
    return out


@pytest.fixture(scope="module")
def corpus_results(shared_corpus: Path) -> dict[str, tuple[Any, str, str]]:
    results = {}
    for pdf, gt in _scored(shared_corpus):
        doc, _parser, _warnings = parse_pdf_offline(pdf, ParseSettings())
        results[pdf.name] = (doc, doc.export_to_markdown(), gt)
    return results


def test_shared_pdfs_heading_recall(
    shared_corpus: Path, corpus_results: dict[str, tuple[Any, str, str]]
) -> None:
    m = _metrics(shared_corpus)
    recalls = {}
    for name, (_doc, md, gt) in corpus_results.items():
        r = m.heading_recall(md, gt)
        if r is not None:
            recalls[name] = r
    assert recalls
    low = {n: r for n, r in recalls.items() if r < 0.75}
    assert not low, low
    assert sum(recalls.values()) / len(recalls) >= 0.85, recalls


def test_shared_pdfs_text_is_kept(
    shared_corpus: Path, corpus_results: dict[str, tuple[Any, str, str]]
) -> None:
    """Tables and headings must not cost text: a false table breaks paragraphs."""
    m = _metrics(shared_corpus)
    f1 = {name: m.text_f1(md, gt) for name, (_doc, md, gt) in corpus_results.items()}
    assert min(f1.values()) >= 0.95, f1


def test_shared_pdfs_tables_recovered(
    shared_corpus: Path, corpus_results: dict[str, tuple[Any, str, str]]
) -> None:
    m = _metrics(shared_corpus)
    with_tables = 0
    for name, (doc, md, gt) in corpus_results.items():
        recall = m.table_cell_recall(md, gt)
        has_table = bool(_items(doc, "TableItem"))
        if recall is None:
            # No table in the ground truth: none invented either.
            assert not has_table, name
            continue
        with_tables += 1
        assert recall >= 0.9, (name, recall)
    assert with_tables >= 1


def test_shared_ruled_table_keeps_spans(corpus_results: dict[str, tuple[Any, str, str]]) -> None:
    name = "2305.03393v1-pg9.pdf"
    if name not in corpus_results:
        pytest.skip(f"{name} not in the shared corpus")
    doc, _md, _gt = corpus_results[name]
    (table,) = _items(doc, "TableItem")
    grid = [[cell.text for cell in row] for row in table.data.grid]
    assert table.data.num_cols == 8
    assert grid[0][3:6] == ["TEDs", "TEDs", "TEDs"]  # one header cell over three columns
    assert grid[1][3:6] == ["simple", "complex", "all"]
    assert grid[2][2] == "OTSL HTML"  # two text lines in one cell


def labels_page(p: Page) -> None:
    """Lines set apart like headings that are not, with two real headings: a diagram's
    labels set aslant along its arrows and its one-letter nodes, both larger than the
    body; small bold labels in a figure; a page number set large; a line of a
    paragraph set bold, which goes on from the line above; items of a numbered list
    in another face. A small bold heading over smaller print of two lines stays one,
    and so does a numbered heading set below the body size."""
    p.text("Overview", 72, 70, "Helvetica-Bold", 14)
    y = p.paragraph(MANUAL, 90.0) + 30
    p.text("constraint relaxation", 120, y + 60, "Times-Roman", 14, angle=35)
    p.text("globalization mechanism", 300, y + 60, "Times-Roman", 14, angle=-30)
    for k, node in enumerate(("a", "b", "c")):
        p.text(node, 150 + 120 * k, y + 90, "Helvetica", 16)
    p.text("User with", 200, y + 110, "Helvetica-Bold", 6)
    p.text("all-object access", 200, y + 118, "Helvetica-Bold", 6)
    y = p.paragraph(MANUAL, y + 150) + 14
    p.text(
        "The collar is made of nylon or fibre, and the threads of the bolt", 72, y, "Times-Roman"
    )
    p.text(
        "cut into it as the nut is turned down so that it holds the bolt", 72, y + 12, "Times-Bold"
    )
    p.text("30 per cent more firmly than a plain nut, under every load.", 72, y + 24, "Times-Roman")
    y += 50
    p.text("1. Fit the washer over the bolt", 90, y, "Helvetica")
    p.text("2. Turn the nut down by hand", 90, y + 12, "Helvetica")
    y = p.paragraph(MANUAL, y + 40) + 20
    p.text("Servicing", 72, y, "Helvetica-Bold", 8)
    p.text(
        "Nuts are replaced at each overhaul, and whenever one turns", 72, y + 12, "Times-Roman", 7
    )
    p.text(
        "down by hand past the collar; the old nut is never used again.",
        72,
        y + 21,
        "Times-Roman",
        7,
    )
    y += 40
    p.text("2.3 Locking", 72, y, "Helvetica-Bold", 8)  # HTML's h5 and h6: below the body size
    p.paragraph(MANUAL, y + 14)
    p.text("Page 1/2", 280, 40, "Helvetica", 12)  # at the head of the page


def text_rules_page(p: Page) -> None:
    """Lines set bold and larger above running text that read as text: a caption with
    its text, a byline, a formula, an address."""
    y = 70.0
    for line in (
        "Figure 2: The stop nut, cut away",
        "H. Ashuri, A. Hassani and M. Walley",
        "F = k * x + c",
        "github.com/corpusflow/corpusflow",
    ):
        p.text(line, 72, y, "Helvetica-Bold", 12)
        y = p.paragraph(MANUAL[:2], y + 16) + 16


@pytest.fixture(scope="module")
def labels_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = make_pdf(tmp_path_factory.mktemp("pdf") / "labels.pdf", labels_page, text_rules_page)
    return str(parse_offline(path, ParseSettings()).doc.export_to_markdown())


@pytest.mark.parametrize(
    "line",
    [
        "constraint relaxation",  # aslant: a label along an arrow
        "globalization mechanism",
        "a",  # one letter: a diagram's node
        "User with",  # smaller than the body, over nothing smaller: a figure's label
        "cut into it as the nut",  # a bold line of a paragraph: it goes on from above
        "1. Fit the washer",  # numbered like the line below it: a list
        "2. Turn the nut",
        "Page 1/2",  # a page's number, however large
        "Figure 2: The stop nut",  # a caption with its text
        "H. Ashuri, A. Hassani",  # the authors
        "F = k * x + c",  # a relation between spaces: a formula
        "github.com/corpusflow",  # an address to follow
    ],
)
def test_labels_numbers_and_bold_lines_are_not_headings(labels_md: str, line: str) -> None:
    heads = _headings(labels_md)
    assert {"Overview", "Servicing", "2.3 Locking"} <= set(heads), labels_md
    assert not any(h == line or h.startswith(line) for h in heads), heads


def test_a_formula_set_in_a_math_face_is_not_a_heading() -> None:
    """A display formula set larger than the body in a math face (MathJax, TeX's math
    italic) is not a heading; a line of the same size in a text face is."""
    from docling_core.types.doc import SectionHeaderItem

    body = _column(
        "line {k} of the running text of this page, set at ten points",
        range(100, 300, 12),
        10.0,
        "Times-Roman",
    )
    formula = Line(1, "n = k + ik", 72, 320, 160, 336, 16.0, 0.0, "MathJax_Math-Italic")
    heading = Line(1, "Results", 72, 360, 160, 376, 16.0, 0.0, "Times-Roman")
    more = _column(
        "line {k} of the text after it, set at ten points as well",
        range(390, 450, 12),
        10.0,
        "Times-Roman",
    )
    lines = [*body, formula, *more[:2], heading, *more]
    doc = lines_to_document(lines, {1: (612.0, 792.0)}, "f", [])
    heads = [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]
    assert heads == ["Results"], heads


def test_bold_sentences_at_body_size_are_not_headings() -> None:
    """A bold line at the body's size is a heading when it is a phrase; one with a
    clause break ("，") or a web address in it is an emphasised sentence, and a Chinese
    caption ("图2 ...", number and text without a colon) is a caption."""
    from docling_core.types.doc import SectionHeaderItem

    def bold(text: str, top: float) -> Line:
        return Line(1, text, 72, top, 400, top + 10, 10.0, 1.0, "SimHei-Bold")

    def body(top: int) -> list[Line]:
        return _column(
            "第{k}行正文，说明服务器的设置与使用方法，字号为十磅。",
            range(top, top + 36, 12),
            10.0,
            "SimSun",
        )

    lines = [
        bold("训练方法", 60), *body(76),
        bold("此处提到的指令仅为本服务器包含的，在其它服务器可能失效", 130), *body(146),
        bold("项目仓库地址：https://github.com/example/report", 200), *body(216),
        bold("图2 LoRA模型的回答：结构更完整", 270), *body(286),
    ]  # fmt: skip
    doc = lines_to_document(lines, {1: (612.0, 792.0)}, "zh", [])
    heads = [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]
    assert heads == ["训练方法"], heads


def test_a_slightly_larger_line_over_its_text_is_a_side_heading() -> None:
    """A short line a little larger than the body (an HTML h3 in a browser's print, a
    Chinese one among them), nearer to the list or paragraph below it than to the text
    above, is a heading; the same line at the body size is not."""
    from docling_core.types.doc import SectionHeaderItem

    def lines(size: float) -> list[Line]:
        para = _column(
            "第{k}行正文，说明数据的来源与处理方法，字号为十磅。",
            range(60, 108, 12),
            10.0,
            "NotoSansCJK",
        )
        head = Line(1, "数据来源", 72, 130, 120, 130 + size, size, 0.0, "NotoSansCJK")
        items = [
            Line(
                1,
                f"{k}. 数据来源于公开数据集，按日期整理为表格。",
                90,
                y,
                400,
                y + 10,
                10.0,
                0.0,
                "NotoSansCJK",
            )
            for k, y in ((1, 146), (2, 160))
        ]
        return [*para, head, *items]

    def heads(size: float) -> list[str]:
        doc = lines_to_document(lines(size), {1: (612.0, 792.0)}, "zh", [])
        return [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]

    assert heads(11.2) == ["数据来源"]
    assert heads(10.0) == []


def test_sizes_are_the_points_text_is_set_at_whatever_its_ink(tmp_path: Path) -> None:
    """A line's size is the size its text is set at, in points (the font size under the
    text matrix's scale, as a browser writes 15 px at 0.75), not the height of its ink:
    "use" and "Type" are one size. A browser's h3 is 1.17 times the body and a heading;
    so is its bold h4 at the body's size; a paragraph in any mix of letters is not."""
    from docling_core.types.doc import SectionHeaderItem

    from parsers.pdf.textlayer import native_content

    def page(p: Page) -> None:
        y = 80.0
        for head, size, font in (
            ("Question one answered", 11 * 1.17, "Helvetica-Bold"),
            ("Other credits", 11.0, "Helvetica-Bold"),
        ):
            p.text(head, 72, y, font, size, scale=0.75)
            y += 22
            for k in range(4):
                text = f"use our nice resources over a row {k}" if k % 2 else "Type TT Hyphy Qj"
                p.text(text, 72, y, "Helvetica", 11.0, scale=0.75)
                y += 15
            y += 12

    pdf = make_pdf(tmp_path / "browser.pdf", page)
    sizes = {ln.text: round(ln.size, 1) for ln in native_content(pdf).lines}
    assert sizes["Question one answered"] == 12.9, sizes
    assert sizes["Other credits"] == 11.0, sizes
    assert {sizes["Type TT Hyphy Qj"], sizes["use our nice resources over a row 1"]} == {11.0}
    doc = parse_offline(pdf, ParseSettings(ocr=False)).doc
    heads = [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]
    assert heads == ["Question one answered", "Other credits"], heads


def test_labels_side_by_side_in_a_diagram_are_not_headings() -> None:
    """A module graph's labels set larger than the text, two or three on a row in the
    same face and size, are a diagram's, not section titles; a heading stands alone on
    its row, and one over its text still is."""
    from docling_core.types.doc import SectionHeaderItem

    body = _column(
        "Line {k} of the report explains how the pipeline loads its modules at start.",
        range(60, 132, 12),
        8.0,
        "NotoSerif",
    )
    head = Line(1, "Dependencies", 72, 150, 180, 162, 12.0, 1.0, "NotoSerif-Bold")
    after = _column(
        "The graph below shows which module imports which one, drawn by pydeps {k}.",
        range(170, 206, 12),
        8.0,
        "NotoSerif",
    )
    labels = [
        Line(1, name, x, y, x + 70, y + 10.3, 10.3, 0.0, "NimbusSans")
        for name, x, y in (
            ("dotenv", 240, 272),
            ("sqlalchemy", 334, 272),
            ("pandas", 445, 357),
            ("requests", 300, 357),
            ("sqlalchemy.orm", 160, 112 + 330),
            ("sqlalchemy.ext", 285, 112 + 330),
        )
    ]
    doc = lines_to_document([*body, head, *after, *labels], {1: (612.0, 792.0)}, "r", [])
    heads = [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]
    assert heads == ["Dependencies"], heads


def test_a_divider_slide_over_its_page_number_is_a_heading() -> None:
    """A section divider slide holds its title and, far below it, the slide's number:
    the number is the page's, not a chart's tick value or an equation's number under
    the line, so the title is a heading. A number that is not the page's, right under
    the line, still makes it a label."""
    from docling_core.types.doc import SectionHeaderItem

    def deck(number: str, gap: float) -> list[Line]:
        out: list[Line] = []
        for p in (1, 2, 3):
            if p == 2:
                out.append(Line(2, "Installation", 300, 240, 660, 268, 28.0, 0.0, "Lato"))
                y = 268 + gap
                out.append(Line(2, number, 900, y, 912, y + 9, 9.0, 0.0, "Lato"))
                continue
            out.append(Line(p, f"Part {p} overview", 60, 40, 400, 64, 24.0, 0.0, "Lato"))
            for k, y in enumerate(range(100, 400, 30)):
                text = f"Point {k} of slide {p} explains one step of the setup in a sentence"
                out.append(Line(p, text, 60, y, 800, y + 14, 14.0, 0.0, "Lato"))
            out.append(Line(p, str(p), 900, 515, 912, 524, 9.0, 0.0, "Lato"))
        return out

    def heads(number: str, gap: float) -> list[str]:
        sizes = {p: (960.0, 540.0) for p in (1, 2, 3)}
        doc = lines_to_document(deck(number, gap), sizes, "en", [])
        return [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]

    assert "Installation" in heads("2", 247.0)  # slide 2's number in its corner
    assert "Installation" not in heads("17", 6.0)  # a value right under the line


def test_a_heading_repeated_on_the_next_page_is_one_heading(tmp_path: Path) -> None:
    """A slide's or a page's title repeated above its continuation, with nothing titled
    between, continues the section: one heading."""

    def page(p: Page) -> None:
        p.text("Fitting the nut", 72, 70, "Helvetica-Bold", 14)
        p.paragraph(MANUAL * 3, 90.0)

    def last(p: Page) -> None:
        p.text("Fitting the nut", 72, 120, "Helvetica-Bold", 14)  # lower: no running head
        p.paragraph(MANUAL, 140.0)
        p.text("Removing the nut", 72, 220, "Helvetica-Bold", 14)
        p.paragraph(MANUAL, 240.0)

    md = parse_offline(make_pdf(tmp_path / "repeat.pdf", page, last), ParseSettings())
    heads = _headings(md.doc.export_to_markdown())
    assert heads == ["Fitting the nut", "Removing the nut"], heads


def test_lines_that_read_as_text() -> None:
    """The text-only tests behind the rules above, and lines they leave to typography."""
    from parsers.pdf.headings import _reads_as_text

    for line in (
        "The risks can be even higher when\u2026",  # a lead-in cut by an ellipsis
        "表 2：测试结果",  # a caption with its text
        "M. Walley and I. Bjarnason *",
        "rid(t + 1) = min{rid(t), n}",
        "图2 LoRA模型校园卡回答",  # a Chinese caption: number, a space, its text
        "Figure 3 Pressure over time",
    ):
        assert _reads_as_text(line), line
    for line in (
        "Table 2",
        "March 3, 2021",  # a dated section: minutes, a changelog
        "Walley and Bjarnason",
        "Part A. Setup and Part B. Usage",
        "E=mc2 in practice",
    ):
        assert not _reads_as_text(line), line


def test_check_marks_and_arrows_start_list_items() -> None:
    """Slides and task lists bullet their items with check marks and arrows. A square
    opens a section title in Japanese and Korean reports, and a check mark alone is a
    table's value: neither is a list's marker."""
    from parsers.pdf.primitives import LIST_START, MARKER

    for item in ("✓ Slower CI/CD pipelines", "➢ Next steps", "☐ Sign the form"):
        assert LIST_START.match(item), item
    assert not LIST_START.match("■ 会社概要") and not LIST_START.match("✓")
    assert not MARKER.match("✓") and MARKER.match("•")


def test_headings_that_look_like_labels_stay_headings(tmp_path: Path) -> None:
    """Short headings, a framework's name with a dot and a slash, and a section title
    repeated lower on the same page (a second "Example") are headings all the same."""

    def page(p: Page) -> None:
        y = 70.0
        for title in ("5G", "Node.js/Express", "Example", "Example"):
            p.text(title, 72, y, "Helvetica-Bold", 14)
            y = p.paragraph(MANUAL, y + 18) + 24

    md = parse_offline(make_pdf(tmp_path / "short.pdf", page), ParseSettings())
    heads = _headings(md.doc.export_to_markdown())
    assert heads == ["5G", "Node.js/Express", "Example", "Example"], heads


def test_headings_right_above_an_aligned_table_stay_headings(tmp_path: Path) -> None:
    """LaTeX sets "1.3" a quad before its title, so a heading right above a table
    without vertical borders (pandoc's longtable) lines up with the table's columns as
    a row of two cells. It stays a heading, above a table of the rows below it; a table
    that numbers its rows keeps its numbers."""
    from docling_core.types.doc import SectionHeaderItem

    def page(p: Page) -> None:
        y = 80.0
        for s in BODY:
            p.text(s, 72, y, "Times-Roman", 10)
            y += 13
        y += 20
        p.text("1.3", 72, y, "Times-Bold", 12)
        p.text("Required Parameters", 96, y, "Times-Bold", 12)
        y += 20
        p.text("1.3.1", 72, y, "Times-Bold", 10)
        p.text("Location and Time", 102, y, "Times-Bold", 10)
        y += 22
        rows = [
            ["Parameter", "Format", "Example"],
            ["--date", "YYYY-MM-DD", "1990-01-15"],
            ["--time", "HH:MM:SS", "14:30:00"],
            ["--lat", "DD.DDDD", "40.7128"],
        ]
        for row in rows:
            for k, cell in enumerate(row):
                p.text(cell, [72, 180, 300][k], y, "Times-Roman", 10)
            y += 14
        y += 24
        p.text("Numbered clauses", 72, y, "Times-Bold", 12)
        y += 20
        clauses = [["1.1", "Scope", "All sites"], ["1.2", "Owner", "Quality board"]]
        for row in [*clauses, ["1.3", "Review", "Every year"]]:
            for k, cell in enumerate(row):
                p.text(cell, [72, 180, 300][k], y, "Times-Roman", 10)
            y += 14

    pdf = make_pdf(tmp_path / "longtable.pdf", page)
    doc = parse_offline(pdf, ParseSettings(ocr=False)).doc
    heads = [t.text for t in doc.texts if isinstance(t, SectionHeaderItem)]
    assert heads[:2] == ["1.3 Required Parameters", "1.3.1 Location and Time"], heads
    grids = [[[c.text for c in row] for row in t.data.grid] for t in _items(doc, "TableItem")]
    assert grids[0][0] == ["Parameter", "Format", "Example"], grids
    assert grids[0][-1] == ["--lat", "DD.DDDD", "40.7128"], grids
    assert [row[0] for row in grids[1]] == ["1.1", "1.2", "1.3"], grids


def test_short_lines_the_writer_broke_are_paragraphs_of_their_own() -> None:
    """A list whose markers are drawn shapes (a browser's or Typora's bullets) leaves
    short lines with room for more: each is its own paragraph, so Chinese items do not
    run together into one word. A paragraph's short last line above a full one, and
    lines wrapped at one x beside a figure, stay as they were."""
    from parsers.pdf.blocks import group_blocks

    def line(text: str, top: float, left: float, right: float) -> Line:
        return Line(1, text, left, top, right, top + 10, 10.0, 0.0, "MicrosoftYaHei")

    full = "SD Express Tester 是 SD Express 卡的测试软件，同时向下兼容传统模式，可进行控制器检测"
    lines = [
        line(full, 100, 72, 520),
        line("和稳定性测试等功能。", 115, 72, 170),  # a paragraph's short last line
        line("Windows 10/11", 135, 96, 166),
        line("自动检测SD卡和控制器状态", 150, 96, 216),
        line("支持多种测试项目：", 165, 96, 184),
        line("实时显示测试进度", 180, 96, 174),
        # Two lines wrapped beside a figure, ending at one x, then the text below it.
        line("The figure on the right shows the tester's main window with", 210, 72, 330),
        line("its status bar, its buttons and the area that lists results", 225, 72, 331),
        line("of the last run; the text goes on below it at the full width of the", 240, 72, 520),
        line("column.", 255, 72, 110),
    ]
    blocks = group_blocks(lines)
    assert [b.text for b in blocks] == [
        f"{full}和稳定性测试等功能。",
        "Windows 10/11",
        "自动检测SD卡和控制器状态",
        "支持多种测试项目：",
        "实时显示测试进度",
        "The figure on the right shows the tester's main window with its status bar, its"
        " buttons and the area that lists results of the last run; the text goes on below it"
        " at the full width of the column.",
    ], [b.text for b in blocks]
    # The items are a run: none of them can be taken for a heading.
    assert [b.in_run for b in blocks] == [False, True, True, True, True, False]


def test_a_short_line_above_a_longer_one_with_room_for_its_first_word_was_broken() -> None:
    """A page of list items only (Typora's nested lists): no line runs the column's full
    width, so the page's widest lines are items too. An item that a longer item below it
    shows had room for more is an item of its own; a wrapped line whose next word would
    not have fitted stays in its paragraph."""
    from parsers.pdf.blocks import group_blocks

    def line(text: str, top: float, right: float) -> Line:
        return Line(1, text, 143, top, right, top + 10, 10.0, 0.0, "MicrosoftYaHei")

    lines = [
        line("控制器：显示当前控制器型号", 100, 270),
        line("控制器能力：显示当前控制器支持的SD卡模式", 115, 341),
        line("Retries are counted per request and the limit is", 135, 341),
        line("configurable per client.", 150, 262),
    ]
    assert [b.text for b in group_blocks(lines)] == [
        "控制器：显示当前控制器型号",
        "控制器能力：显示当前控制器支持的SD卡模式",
        "Retries are counted per request and the limit is configurable per client.",
    ]


def test_labelled_lines_of_one_length_are_items_of_their_own() -> None:
    """Typora's "**训练数据**：5002条" items, bullets drawn as shapes, on a document whose
    lines never run a column's width: two items of one length end at one x, as lines
    wrapped at a figure do, but each opens with a label, so each is its own paragraph.
    A wrapped paragraph that happens to hold a colon stays one paragraph."""
    from parsers.pdf.blocks import group_blocks

    def line(text: str, top: float, left: float, right: float) -> Line:
        return Line(1, text, left, top, right, top + 10, 10.0, 0.0, "MicrosoftYaHei")

    # Lines set 20 pt apart, a paragraph's as wide apart as its items'.
    row = "家庭圈识别模型综合考虑地址账户设备与基站等多维度信息并结合规则与模型"
    lines = [line(row, 20.0 * k, 97, 388) for k in range(1, 5)]
    lines += [
        line("训练数据：5002条用户记录", 120, 119, 239),
        line("验证数据：2000条用户记录", 140, 119, 239),
        line("解决方案：", 160, 119, 168),
        line("Owner: the platform team, who keep the service and its", 200, 97, 388),
        line("alerts: each one pages the engineer on call.", 220, 97, 300),
    ]
    assert [b.text for b in group_blocks(lines)] == [
        row * 4,
        "训练数据：5002条用户记录",
        "验证数据：2000条用户记录",
        "解决方案：",
        "Owner: the platform team, who keep the service and its alerts: each one pages the"
        " engineer on call.",
    ], [b.text for b in group_blocks(lines)]


def test_a_larger_line_in_the_same_face_starts_its_own_block() -> None:
    """Typora sets "2.2.2 账户相关特征" at 12 pt in the bold face of the 10 pt items above
    it, as close under them as their own lines: a step in the size the words are set at
    starts a block, so the heading is found."""
    from parsers.pdf.blocks import group_blocks

    def line(text: str, top: float, left: float, size: float) -> Line:
        width = len(text) * size
        return Line(1, text, left, top, left + width, top + size, size, 1.0, "YaHei-Bold")

    lines = [
        line("地址唯一性：计算用户地址的唯一性指标", 100, 97, 9.8),
        line("地址相似度：基于地址字符串的相似度计算", 120, 97, 9.8),
        line("2.2.2 账户相关特征", 138, 74, 12.2),
        line("账户共享得分：用户之间共享缴费账户的程度", 160, 97, 9.8),
    ]
    texts = [b.text for b in group_blocks(lines)]
    assert "2.2.2 账户相关特征" in texts, texts


def test_a_cell_keeps_identifiers_whole_where_the_producer_cut_them() -> None:
    """A browser print writes "DATABASE_URL" as three runs, the underscore a flat glyph
    below the letters' box: the cell reads "DATABASE_URL", not "DATABASE URL _"; words
    with a space between them stay apart, and a row below stays below."""
    from parsers.pdf.tables import join_words

    words = [
        Word("PAPERS", 40.0, 129.9, 66.4, 133.8, order=1),
        Word("_", 66.4, 134.5, 69.7, 135.0, order=2),
        Word("DATABASE", 69.7, 129.9, 96.1, 133.8, order=3),
        Word("_", 96.1, 134.5, 99.4, 135.0, order=4),
        Word("URL", 99.4, 129.9, 109.3, 133.8, order=5),
        Word("(optional)", 111.0, 129.9, 135.0, 133.8, order=6),
        Word("news", 40.0, 135.6, 52.0, 139.5, order=7),
    ]
    assert join_words(words) == "PAPERS_DATABASE_URL (optional) news"
