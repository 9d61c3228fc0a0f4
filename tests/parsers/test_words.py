"""No text lost, words as the reader sees them (issue 32), on files the tests make."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from parsers import parse_file
from tests.helpers.pdfgen import write_pdf

needs_soffice = pytest.mark.skipif(
    shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed"
)

# --------------------------------------------------------------------------- #
# PDF: a fallback never replaces text already extracted with less
# --------------------------------------------------------------------------- #


def test_two_word_text_layer_is_indexed(tmp_path: Path) -> None:
    # Two words at 12 pt: under the OCR threshold, so the page is OCR'd, and RapidOCR
    # finds nothing that small on a full page. The text layer's words must stay.
    path = write_pdf(tmp_path / "hello.pdf", [[(12, "Hello World")]])
    doc = parse_file(path)
    assert doc.markdown.strip() == "Hello World"
    assert doc.status == "success"
    assert doc.parser == "pdf-offline"
    assert any("text layer kept" in w.message for w in doc.warnings)


# --------------------------------------------------------------------------- #
# RTF: LibreOffice reads it with its code pages; pandoc only as a fallback
# --------------------------------------------------------------------------- #


def _hex(text: str, encoding: str) -> str:
    """``text`` as RTF ``\\'hh`` escapes of its bytes in ``encoding``."""
    return "".join(f"\\'{b:02x}" for b in text.encode(encoding))


RUSSIAN = "Отчёт о работе насоса: давление 40 бар, проверка еженедельно."
POLISH = "Zażółć gęślą jaźń: raport kwartalny."
JAPANESE = "東京の天気は晴れです。ポンプの点検は毎週行います。"


@needs_soffice
@pytest.mark.parametrize(
    ("header", "text", "encoding"),
    [
        # Cyrillic: the document's ANSI code page and the font's charset (204) both say so.
        (r"\ansi\ansicpg1251{\fonttbl{\f0\fswiss\fcharset204 Arial;}}", RUSSIAN, "cp1251"),
        (r"\ansi\ansicpg1250{\fonttbl{\f0\fswiss\fcharset238 Arial;}}", POLISH, "cp1250"),
        # Japanese as testRTFJapanese.rtf writes it: plain \ansi, the font says Shift-JIS.
        (r"\ansi{\fonttbl{\f0\fnil\fcharset128 MS Gothic;}}", JAPANESE, "shift_jis"),
    ],
    ids=["cp1251", "cp1250", "shift-jis"],
)
def test_rtf_code_pages_are_decoded_as_declared(
    tmp_path: Path, header: str, text: str, encoding: str
) -> None:
    path = tmp_path / f"{encoding}.rtf"
    path.write_text(r"{\rtf1" + header + r"\f0 " + _hex(text, encoding) + r"\par}", "ascii")
    doc = parse_file(path)
    assert (doc.format, doc.parser) == ("rtf", "docling")
    assert doc.markdown.strip() == text


@needs_soffice
def test_rtf_braces_and_characters_outside_the_bmp(tmp_path: Path) -> None:
    path = tmp_path / "braces.rtf"
    # \{ \} are literal braces; \uN? pairs are UTF-16 surrogates (U+1D11E, musical G clef).
    path.write_text(
        r"{\rtf1\ansi{\fonttbl{\f0 Arial;}}\f0 The set \{pump, seal\} is checked."
        r"\par Clef \u-10188?\u-8930? sign.\par}",
        "ascii",
    )
    doc = parse_file(path)
    assert "The set {pump, seal} is checked." in doc.markdown
    assert "Clef \U0001d11e sign." in doc.markdown
    assert "\ufffd" not in doc.markdown


def test_rtf_without_libreoffice_is_read_by_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plain.rtf"
    path.write_text(r"{\rtf1\ansi Pump {\b manual} for the night shift.\par}", "ascii")
    monkeypatch.setenv("PATH", str(tmp_path))  # no soffice, no libreoffice
    monkeypatch.delenv("DOCLING_LIBREOFFICE_CMD", raising=False)
    doc = parse_file(path)
    assert doc.parser == "unstructured-fallback"
    assert "night shift" in doc.markdown
    assert any(w.source == "fallback" and "LibreOffice" in w.message for w in doc.warnings)


# --------------------------------------------------------------------------- #
# Word: formatting never splits a word; ruby keeps its base text
# --------------------------------------------------------------------------- #


def _runs_docx(path: Path, runs: list[tuple[str, bool]]) -> Path:
    """A DOCX with one paragraph made of (text, bold) runs, as Word writes mixed formatting."""
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph()
    for text, bold in runs:
        paragraph.add_run(text).bold = bold
    document.save(str(path))
    return path


def _to_doc(path: Path) -> Path:
    import subprocess

    out = path.parent / "doc"
    profile = f"-env:UserInstallation=file://{path.parent}/profile"
    subprocess.run(
        ["soffice", "--headless", profile, "--convert-to", "doc", "--outdir", str(out), str(path)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return out / f"{path.stem}.doc"


@pytest.mark.parametrize("kind", ["docx", pytest.param("doc", marks=needs_soffice)])
def test_bold_run_inside_a_word_keeps_the_word(tmp_path: Path, kind: str) -> None:
    # "Foobar" with "oob" and "r" in bold (testWORD_bold_character_runs), then a bold
    # word of its own, which keeps its emphasis.
    runs = [("F", False), ("oob", True), ("a", False), ("r", True), (" and a ", False)]
    path = _runs_docx(tmp_path / "runs.docx", [*runs, ("bold", True), (" word.", False)])
    if kind == "doc":
        path = _to_doc(path)
    doc = parse_file(path)
    assert doc.format == kind
    assert "Foobar and a **bold** word." in doc.markdown
    assert "oob**" not in doc.markdown


def test_formatting_at_punctuation_keeps_words_and_emphasis(tmp_path: Path) -> None:
    runs = [("See ", False), ("Pump", True), ("-", False), ("3", True), (", then stop.", False)]
    doc = parse_file(_runs_docx(tmp_path / "punct.docx", runs))
    words = doc.markdown.replace("*", "").split()
    assert "Pump" in words and "3" in words and "stop." in words
    assert "**Pump**" in doc.markdown


def test_ruby_keeps_its_base_text(tmp_path: Path) -> None:
    import docx
    from docx.oxml import parse_xml

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

    def ruby(base: str, reading: str) -> str:
        return (
            f'<w:r xmlns:w="{w}"><w:ruby><w:rubyPr><w:lid w:val="ja-JP"/></w:rubyPr>'
            f"<w:rt><w:r><w:t>{reading}</w:t></w:r></w:rt>"
            f"<w:rubyBase><w:r><w:t>{base}</w:t></w:r></w:rubyBase></w:ruby></w:r>"
        )

    document = docx.Document()
    paragraph = document.add_paragraph()
    paragraph._p.append(parse_xml(ruby("東京", "とうきょう")))
    paragraph.add_run("の")
    paragraph._p.append(parse_xml(ruby("天気", "てんき")))
    paragraph.add_run("は晴れ。")
    path = tmp_path / "ruby.docx"
    document.save(str(path))
    doc = parse_file(path)
    assert doc.markdown.strip() == "東京の天気は晴れ。"


def test_moved_text_of_tracked_changes_is_read_at_its_new_place(tmp_path: Path) -> None:
    # pandoc's docx/track_changes_move.docx: the moved sentence was in neither place.
    import docx
    from docx.oxml import parse_xml

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    mark = f'<w:rPr xmlns:w="{w}"><w:moveTo w:id="9" w:author="A" w:date="2016-04-16T08:20:00Z"/></w:rPr>'

    def move(tag: str, text: str) -> str:
        return (
            f'<w:{tag} xmlns:w="{w}" w:id="1" w:author="A" w:date="2016-04-16T08:20:00Z">'
            f"<w:r><w:t>{text}</w:t></w:r></w:{tag}>"
        )

    document = docx.Document()
    document.add_paragraph("Here is some text.")
    moved_to = document.add_paragraph()
    moved_to._p.get_or_add_pPr().append(parse_xml(mark))
    moved_to._p.append(parse_xml(move("moveTo", "The valve is closed first.")))
    document.add_paragraph("Here is some more text.")
    document.add_paragraph()._p.append(parse_xml(move("moveFrom", "The old place.")))
    path = tmp_path / "moved.docx"
    document.save(str(path))
    doc = parse_file(path)
    assert doc.markdown.split("\n\n") == [
        "Here is some text.",
        "The valve is closed first.",
        "Here is some more text.",
    ]


def test_opendocument_list_headers_are_read(tmp_path: Path) -> None:
    # pandoc's odt/unorderedListHeader.odt: a list's header (its unbulleted first entry,
    # here with a list of its own) was left out.
    from odfdo import Document, Element

    odt = Document("text")
    odt.body.append(
        Element.from_tag(
            "<text:list><text:list-header><text:p>Spare parts kept on site</text:p>"
            "<text:list><text:list-item><text:p>Gaskets for the inlet</text:p>"
            "</text:list-item></text:list></text:list-header>"
            "<text:list-item><text:p>Filters</text:p></text:list-item></text:list>"
        )
    )
    path = tmp_path / "parts.odt"
    odt.save(str(path))
    doc = parse_file(path)
    for words in ("Spare parts kept on site", "Gaskets for the inlet", "Filters"):
        assert words in doc.markdown, doc.markdown


# --------------------------------------------------------------------------- #
# Spreadsheets: cells as formatted
# --------------------------------------------------------------------------- #


def test_xlsx_cells_read_as_formatted(tmp_path: Path) -> None:
    import datetime as dt

    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    rows = [
        ("Measure", "Value", None),
        ("Share", 0.025, "0%"),
        ("Growth", 0.1234, "0.00%"),
        ("Start", dt.datetime(1992, 12, 28, 6, 15, 0, 687000), "h:mm AM/PM"),
        ("Shift end", dt.time(18, 15), "h:mm"),
        ("Signed", dt.date(2007, 5, 17), "d-mmm-yy"),
        ("Long date", dt.date(2007, 5, 17), "dddd mmmm d, yyyy"),
        ("Price", -1599.99, '"$"#,##0.00_);[Red]\\("$"#,##0.00\\)'),
        ("Units", 1234567, "#,##0"),
        ("Pressure", 40.0, "0.0"),
    ]
    for r, (label, value, fmt) in enumerate(rows, start=1):
        sheet.cell(row=r, column=1, value=label)
        cell = sheet.cell(row=r, column=2, value=value)
        if fmt:
            cell.number_format = fmt
    path = tmp_path / "formats.xlsx"
    book.save(str(path))
    doc = parse_file(path)
    cells = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in doc.markdown.splitlines()
        if line.startswith("|") and "---" not in line
    }
    # 3% does not say 0.025: the stored number is kept after the shown text.
    assert cells["Share"] == "3% (0.025)"
    assert cells["Growth"] == "12.34%"
    assert cells["Start"] == "6:15 AM"
    assert cells["Shift end"] == "18:15"
    assert cells["Signed"] == "17-May-07"
    assert cells["Long date"] == "Thursday May 17, 2007"
    assert cells["Price"] == "($1,599.99)"
    assert cells["Units"] == "1,234,567"
    assert cells["Pressure"] == "40.0"


@pytest.mark.parametrize(
    ("value", "fmt", "shown"),
    [
        (0.025, "0%", "3%"),
        (0.5, "0.0%", "50.0%"),
        (1234.5, "#,##0.00", "1,234.50"),
        (1500000, '#,##0,,"M"', "2M"),
        (-3, '0;(0);"zero"', "(3)"),
        (0, '0;(0);"zero"', "zero"),
        (7, "000", "007"),
        (198356388, "0.00E+00", "1.98E+08"),
        (0.000123, "0.0E+00", "1.2E-04"),
        (12.5, "[$€-407]#,##0.00", "€12.50"),
        (19.99, '0\\ "dollars and"\\ .00\\ "cents"', "19 dollars and .99 cents"),
        (0.1 + 0.2, "General", "0.3"),
        (42.0, "General", "42"),
        (1234567890123451, "General", "1234567890123451"),
        (2.5, "# ?/?", "2.5"),  # fractions: General, never an error
        # Conditional sections (Apache POI's FormatKM.xls): the first whose condition
        # holds, else the one without a condition.
        (1021021.02, '[>999999]#,,"M";[>999]#,"K";#', "1M"),
        (102102.102, '[>999999]#,,"M";[>999]#,"K";#', "102K"),
        (102.102, '[>999999]#,,"M";[>999]#,"K";#', "102"),
        (10210210.2, '[>999999]#.000,,"M";[>999]#.000,"K";#.000', "10.210M"),
        (1021.02, '[>999999]#.000,,"M";[>999]#.000,"K";#.000', "1.021K"),
        (2, '[=1]"one";[=2]"two";0', "two"),
        # A section for negative numbers only writes the number without its sign.
        (-5, "[Red][<0]0.0;0", "5.0"),
        (-5, '[<0]"neg "0;0', "neg 5"),
        (-5, "[>=-10]0;0", "-5"),
        (-25, "[Red][<=-25]General;[Blue][>=25]General;General", "25"),
        (5, "[>100]0;[<=-100]0", "5"),  # no condition holds, none without: General
        (5, '[$-409][>999]#,"K";#', "5"),
        (1.5, "[h]:mm", "36:00"),  # elapsed hours, then minutes (was "36:12": a month)
        (True, "General", "TRUE"),
    ],
)
def test_excel_cell_text(value: object, fmt: str, shown: str) -> None:
    from parsers.tables import excel_cell_text

    assert excel_cell_text(value, fmt) == shown


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (0.025, "0%", "3% (0.025)"),  # rounded: the stored number follows
        (1599.99, "#,##0", "1,600 (1599.99)"),
        (1500000, '#,##0,,"M"', "2M (1500000)"),
        (198356388, "0.00E+00", "1.98E+08 (198356388)"),
        (0.1234, "0.00%", "12.34%"),  # says the number: as shown
        (-1599.99, '"$"#,##0.00_);[Red]\\("$"#,##0.00\\)', "($1,599.99)"),
        (-0.5, "0%", "-50%"),
        (7, "000", "007"),
        (0.1 + 0.2, "General", "0.3"),
        (0, '0;(0);"zero"', "zero"),  # no number shown: as shown
        (39219, "yyyy", "2007"),  # a date's serial number is not a figure to quote
        (True, "General", "TRUE"),
    ],
)
def test_excel_cells_keep_the_raw_number_the_shown_text_hides(
    value: object, fmt: str, text: str
) -> None:
    from parsers.xlsx_cells import shown_with_raw

    assert shown_with_raw(value, fmt) == text


# --------------------------------------------------------------------------- #
# Failures visible before the collection has a table
# --------------------------------------------------------------------------- #


def test_status_and_verify_list_failures_when_nothing_indexed(tmp_path: Path) -> None:
    from common.settings import load_settings
    from corpusflow.api import failed_documents, status
    from corpusflow.engine import InProcessExecutor, RefreshEngine
    from corpusflow.verify import nothing_lost

    src = tmp_path / "src"
    src.mkdir()
    (src / "empty.pdf").write_bytes(b"")
    (src / "fake.docx").write_text("not a zip")
    (src / "drawing.dwg").write_bytes(b"AC1032" + b"\0\x01\x02" * 64)
    settings = load_settings(
        None, {"storage": {"db": str(tmp_path / "db")}, "run": {"progress": False}}
    )
    report = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    assert report.failed == 3

    info = status(settings)
    assert info["active_table"] is None
    assert info["documents"] == {"failed": 3}
    shown = {f["path"]: f["category"] for f in info["failed_documents"]}
    assert shown == {"empty.pdf": "empty", "fake.docx": "corrupt", "drawing.dwg": "unsupported"}
    assert [f["path"] for f in failed_documents(settings)] == sorted(shown)

    checked = nothing_lost(settings, str(src))
    assert checked.ok, checked.violations  # every file failed with a reason: nothing lost
    assert checked.checked_files == 3
    assert any(line.startswith("fake.docx: [corrupt]") for line in checked.failed)
    assert len(checked.failed) == 3

    (src / "late.pdf").write_bytes(b"")  # a file no run has seen is not failed, it is new
    assert any("late.pdf" in p for p in nothing_lost(settings, str(src)).pending)
