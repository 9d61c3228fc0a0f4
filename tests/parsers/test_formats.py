"""Breadth of formats: every kind the format table lists parses from a file these tests
make (or the repository ships), text files in any encoding, no silent loss, the
backend contract for every row, and a hung converter (LibreOffice) killed in time."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from common.errors import Category
from common.settings import ChunkSettings, ParseSettings
from parsers import ParseError, ParserPool, parse_file
from parsers.backend import load_backend
from parsers.formats import EXTENSION_FORMATS, FORMATS

needs_soffice = pytest.mark.skipif(
    shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed"
)


def _text_f1(out: str, ref: str) -> float:
    """Bag-of-words F1 (the shared parse metric's definition)."""
    import re
    from collections import Counter

    def bag(text: str) -> Counter[str]:
        return Counter(w.lower() for w in re.findall(r"[\w\u4e00-\u9fff]+", text))

    a, b = bag(out), bag(ref)
    common = sum((a & b).values())
    if not common:
        return 0.0
    p, r = common / sum(a.values()), common / sum(b.values())
    return 2 * p * r / (p + r)


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


# -- text families ---------------------------------------------------------------------

RST = """\
=============
Field Manual
=============

Safety
======

Wear a helmet on the **turbine deck** at all times.

Ladders
-------

A second person holds the ladder. See `the rules <https://example.com>`_.

.. note:: Inspections happen weekly.
"""

ORG = """\
#+TITLE: Release plan
* Milestones
Beta ships in March.
** Risks
| risk | owner |
|------+-------|
| supplier delay | Dana |
"""

ADOC = """\
= Gateway Guide

== Installation

Mount the Modbus gateway on the DIN rail.

== Configuration

Set the baud rate to 19200.
"""

LATEX = r"""\documentclass{article}
\begin{document}
\section{Calibration}
Calibrate the anemometer every six months.
\end{document}
"""


@pytest.mark.parametrize(
    ("name", "content", "fmt", "heading", "phrase"),
    [
        ("manual.rst", RST, "rst", "Ladders", "second person holds the ladder"),
        ("plan.org", ORG, "org", "Risks", "supplier delay"),
        ("guide.adoc", ADOC, "asciidoc", "Configuration", "baud rate to 19200"),
        ("calibration.tex", LATEX, "latex", "Calibration", "anemometer every six months"),
    ],
)
def test_markup_text_keeps_headings(
    tmp_path: Path, name: str, content: str, fmt: str, heading: str, phrase: str
) -> None:
    doc = parse_file(_write(tmp_path / name, content))
    assert doc.format == fmt
    assert phrase in " ".join(doc.markdown.split())
    assert any(
        line.lstrip("#").strip() == heading
        for line in doc.markdown.splitlines()
        if line.startswith("#")
    ), doc.markdown


def test_rst_heading_levels_follow_adornment_order(tmp_path: Path) -> None:
    doc = parse_file(_write(tmp_path / "manual.rst", RST))
    levels = {
        line.lstrip("#").strip(): len(line) - len(line.lstrip("#"))
        for line in doc.markdown.splitlines()
        if line.startswith("#")
    }
    assert levels["Safety"] < levels["Ladders"]
    assert "Inspections happen weekly" in doc.markdown
    assert "https://example.com" not in doc.markdown  # link targets are not text


def test_json_yaml_ndjson_xml_keep_structure(tmp_path: Path) -> None:
    data = {
        "service": "billing",
        "owners": ["ana", "li"],
        "limits": {"requests_per_minute": 600, "burst": 50},
        "regions": [{"name": "eu-west", "tier": 1}, {"name": "ap-east", "tier": 2}],
    }
    js = parse_file(_write(tmp_path / "service.json", json.dumps(data)))
    assert js.format == "json"
    md = " ".join(js.markdown.split())  # underscores are not escaped
    assert "- requests_per_minute: 600" in md
    assert "## limits" in js.markdown
    assert "| eu-west | 1 |" in md  # a list of records is a table

    import yaml

    ym = parse_file(_write(tmp_path / "service.yaml", yaml.safe_dump(data)))
    assert ym.format == "yaml" and "burst: 50" in ym.markdown

    lines = [json.dumps({"id": i, "event": f"deploy {i}"}) for i in range(3)] + ["not json"]
    nd = parse_file(_write(tmp_path / "events.ndjson", "\n".join(lines)))
    assert nd.format == "ndjson"
    assert "deploy 2" in nd.markdown and "not json" in nd.markdown  # no line lost
    assert any("not JSON" in str(w) for w in nd.warnings)

    xml = parse_file(
        _write(
            tmp_path / "catalog.xml",
            '<?xml version="1.0"?><catalog><part id="P-7"><name>Rotor hub</name>'
            "<weight unit='kg'>420</weight></part></catalog>",
        )
    )
    assert xml.format == "xml"
    assert "part: P-7" in xml.markdown and "Rotor hub" in xml.markdown and "420" in xml.markdown


def test_xml_entities_are_not_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("CANARY-xml-91")
    bomb = (
        f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">'
        '<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        "<r><t>&x;</t><t>&b;</t><t>kept text</t></r>"
    )
    doc = parse_file(_write(tmp_path / "bomb.xml", bomb))
    assert "CANARY-xml-91" not in doc.markdown
    assert "aaaaaaaaaaaaaaaaaaaa" not in doc.markdown
    assert "kept text" in doc.markdown


def test_web_archive_and_captions(tmp_path: Path) -> None:
    mhtml = _write(
        tmp_path / "runbook.mhtml",
        "From: <Saved by Blink>\nSubject: Runbook\nMIME-Version: 1.0\n"
        'Content-Type: multipart/related; type="text/html"; boundary="B"\n\n--B\n'
        'Content-Type: text/html; charset="utf-8"\nContent-Transfer-Encoding: quoted-printable\n\n'
        "<html><body><h1>Runbook</h1><p>Restart the yaw controller before the =\n"
        "brake test.</p></body></html>\n--B--\n",
    )
    doc = parse_file(mhtml)
    assert doc.format == "mhtml"
    assert "# Runbook" in doc.markdown and "yaw controller before the brake test" in doc.markdown
    vtt = _write(
        tmp_path / "standup.vtt",
        "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\n<v Dana>We ship the gearbox fix on Thursday.\n",
    )
    captions = parse_file(vtt)
    assert captions.format == "vtt" and "gearbox fix on Thursday" in captions.markdown


def test_csv_and_tsv_become_tables(tmp_path: Path) -> None:
    rows = "city,nightly cap\nShanghai,500\nBerlin,180\n"
    csv = parse_file(_write(tmp_path / "caps.csv", rows))
    tsv = parse_file(_write(tmp_path / "caps.tsv", rows.replace(",", "\t")))
    semi = parse_file(_write(tmp_path / "caps_semicolon.csv", rows.replace(",", ";")))
    for doc in (csv, tsv, semi):
        assert "| Shanghai" in doc.markdown and "500" in doc.markdown, doc.markdown
    assert (csv.format, tsv.format) == ("csv", "tsv")


# -- encodings -------------------------------------------------------------------------

_TEXT = "Überstunden werden mit 25 % vergütet.\n\n加班按百分之二十五补偿。\n"


@pytest.mark.parametrize(
    "encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"]
)
def test_unicode_encodings_with_and_without_bom(tmp_path: Path, encoding: str) -> None:
    doc = parse_file(_write(tmp_path / "policy.txt", _TEXT, encoding))
    assert "Überstunden" in doc.markdown and "加班按百分之二十五补偿" in doc.markdown


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("cp1252", "Café: Überstunden — 25 %"), ("gb18030", "固定变更窗口为每周四凌晨一点至五点")],
)
def test_legacy_encodings(tmp_path: Path, encoding: str, text: str) -> None:
    body = f"{text}\n\n" * 3
    doc = parse_file(_write(tmp_path / "legacy.txt", body, encoding))
    assert text in doc.markdown


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-le"])
def test_wide_encodings_for_html_markdown_csv_and_email(tmp_path: Path, encoding: str) -> None:
    html = parse_file(
        _write(
            tmp_path / "page.html",
            '<html><head><meta charset="utf-16"><title>T</title></head>'
            "<body><h1>Zugang</h1><p>Der Schlüssel liegt am Empfang.</p></body></html>",
            encoding,
        )
    )
    assert "Schlüssel liegt am Empfang" in html.markdown
    md = parse_file(_write(tmp_path / "notes.md", "# Übersicht\n\nAlles grün.\n", encoding))
    assert "# Übersicht" in md.markdown and "Alles grün" in md.markdown
    csv = parse_file(_write(tmp_path / "t.csv", "name,wert\nSchäfer,3\n", encoding))
    assert "Schäfer" in csv.markdown
    mail = parse_file(
        _write(
            tmp_path / "note.eml",
            "From: a@example.com\nTo: b@example.com\nSubject: Grüße\n"
            "Content-Type: text/plain; charset=utf-8\n\nDie Lieferung kommt Dienstag.\n",
            encoding,
        )
    )
    assert "Die Lieferung kommt Dienstag" in mail.markdown


def test_binary_named_txt_is_corrupt(tmp_path: Path) -> None:
    blob = tmp_path / "blob.txt"
    blob.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ParseError) as err:
        parse_file(blob)
    assert err.value.category == Category.CORRUPT


def test_text_without_extension_is_read(tmp_path: Path) -> None:
    doc = parse_file(_write(tmp_path / "README", "Run make install first.\n"))
    assert doc.format == "txt" and "make install" in doc.markdown


def test_unknown_kind_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "model.step"
    path.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ParseError) as err:
        parse_file(path)
    assert err.value.category == Category.UNSUPPORTED
    assert ".step" in err.value.message and "corpusflow formats" in err.value.message


# -- containers: EPUB, OpenDocument and legacy Office ----------------------------------


_XHTML_DOCTYPE = (
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
    '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">'
)


def _epub(path: Path, mimetype: str = "first") -> Path:
    """An EPUB; ``mimetype`` "first" (as OCF asks), "last" or "none" (as e-books in the
    wild have it). The chapter carries the standard XHTML 1.1 DOCTYPE."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if mimetype == "first":
            zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        zf.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
            'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            '<dc:identifier id="id">x</dc:identifier><dc:title>Wind Notes</dc:title>'
            '<dc:language>en</dc:language></metadata><manifest><item id="c1" href="c1.xhtml" '
            'media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/>'
            "</spine></package>",
        )
        zf.writestr(
            "OEBPS/c1.xhtml",
            f'<?xml version="1.0"?>{_XHTML_DOCTYPE}<html xmlns="http://www.w3.org/1999/xhtml">'
            "<head><title>c1</title></head><body><h1>Gearbox care</h1><p>Change the gearbox "
            "oil every 18 months.</p></body></html>",
        )
        if mimetype == "last":
            zf.writestr("mimetype", "application/epub+zip")
    return path


@pytest.mark.parametrize("mimetype", ["first", "last", "none"])
def test_epub(tmp_path: Path, mimetype: str) -> None:
    """docling reads a ZIP as an EPUB only with a stored mimetype member first; e-books
    with it elsewhere, or without it, are EPUBs all the same (container.xml + OPF)."""
    doc = parse_file(_epub(tmp_path / "notes.epub", mimetype))
    assert doc.format == "epub"
    assert "gearbox oil every 18 months" in doc.markdown


def test_text_that_starts_with_bm_is_text_and_a_bmp_is_an_image(tmp_path: Path) -> None:
    from PIL import Image

    from parsers.safety import sniff_format

    note = _write(tmp_path / "news.txt", "BMW to make hybrid sports car.\n\nLeipzig plant.\n")
    doc = parse_file(note)
    assert doc.format == "txt"
    assert "BMW to make hybrid sports car." in doc.markdown
    bmp = tmp_path / "scan.bmp"
    Image.new("RGB", (8, 8), "white").save(bmp)
    assert sniff_format(bmp, bmp.read_bytes()[:8192]) == "image"
    # The same bytes without a name are still a BMP, and text named .bmp is not one.
    assert sniff_format(tmp_path / "scan", bmp.read_bytes()[:64]) == "image"
    with pytest.raises(ParseError) as err:
        sniff_format(tmp_path / "fake.bmp", b"BMW to make hybrid sports car" * 3)
    assert err.value.category == Category.CORRUPT


def test_concatenated_json_values_are_read_as_a_stream(tmp_path: Path) -> None:
    stream = (
        '{"id": 1, "event": "pump started"}{"id": 2, "event": "valve closed"}\n'
        '  {"id": 3, "event": "alarm cleared"}'
    )
    doc = parse_file(_write(tmp_path / "events.json", stream))
    assert doc.format == "json"
    for text in ("pump started", "valve closed", "alarm cleared"):
        assert text in doc.markdown
    with pytest.raises(ParseError) as err:
        parse_file(_write(tmp_path / "broken.json", '{"id": 1}{"id": '))
    assert err.value.category == Category.CORRUPT


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


@pytest.mark.parametrize(
    ("name", "members", "reason"),
    [
        ("app.jar", {"META-INF/MANIFEST.MF": "Manifest-Version: 1.0\n", "A.class": "x"}, "Java"),
        ("print.xps", {"FixedDocumentSequence.fdseq": "<FixedDocumentSequence/>"}, "XPS"),
        ("model.3mf", {"3D/3dmodel.model": "<model/>"}, "unknown kind"),
    ],
)
def test_zip_containers_nobody_reads_say_what_they_are(
    tmp_path: Path, name: str, members: dict[str, str], reason: str
) -> None:
    with pytest.raises(ParseError) as err:
        parse_file(_zip(tmp_path / name, members))
    assert err.value.category == Category.UNSUPPORTED
    assert reason in err.value.message
    assert "ingest the folder" not in err.value.message  # only a .zip is an archive to list


def test_every_fallback_can_be_imported() -> None:
    """A fallback that cannot import (unstructured's XLSX reader needs xlrd) would turn
    every file it should rescue into a ModuleNotFoundError."""
    import importlib

    from parsers.formats import UNSTRUCTURED

    with_fallback = [
        spec.option("unstructured") for spec in FORMATS if spec.fallback == UNSTRUCTURED
    ]
    assert with_fallback
    for kind in with_fallback:
        importlib.import_module(f"unstructured.partition.{kind}")


_TIKA = Path(__file__).parents[1] / "data" / "tika"


@needs_soffice
def test_strict_ooxml_workbook_is_read() -> None:
    doc = parse_file(_TIKA / "testEXCEL.strict.xlsx")
    assert (doc.format, doc.parser) == ("xlsx", "docling")
    assert "Test spreadsheet" in doc.markdown and "2nd row 2nd column" in doc.markdown


@needs_soffice
def test_excel_4_worksheet_is_read_by_libreoffice() -> None:
    doc = parse_file(_TIKA / "testEXCEL_4.xls")
    assert doc.format == "xls"
    assert "Examination Coverage" in doc.markdown


_POI = Path(__file__).parents[1] / "data" / "poi"


@needs_soffice
def test_binary_workbook_is_read_through_libreoffice() -> None:
    """An .xlsb (a ZIP with ``xl/workbook.bin``, no XML for openpyxl) was `corrupt`."""
    doc = parse_file(_POI / "51519.xlsb")
    assert (doc.format, doc.parser) == ("xlsx", "docling")
    assert "豊田車会社" in doc.markdown and "CompanyName" in doc.markdown


@needs_soffice
def test_word_2_file_is_read_through_libreoffice() -> None:
    """A Word for Windows 2.0 file (no OLE2 container) was `corrupt`: "does not contain
    DOC data"."""
    doc = parse_file(_POI / "word2.doc")
    assert doc.format == "doc"
    assert "PARTICIPANTS LIST" in doc.markdown and "benni.alexander@nokia.com" in doc.markdown


@needs_soffice
@pytest.mark.parametrize(
    ("name", "fmt", "texts"),
    [
        ("test_text_extraction.vsdx", "vsdx", ("Router here", "Text, text, everywhere!")),
        ("Test_Visio-Some_Random_Text.vsd", "vsd", ("I am a test view", "Some random text")),
    ],
)
def test_visio_drawings_are_read_as_their_pages(
    name: str, fmt: str, texts: tuple[str, ...]
) -> None:
    """Visio drawings were `unsupported` (.vsdx: "no Visio reader") or "OLE2 file of an
    unknown kind" (.vsd); LibreOffice Draw exports their pages as PDF pages."""
    doc = parse_file(_POI / name)
    assert doc.format == fmt and doc.parser.startswith("libreoffice+"), doc.parser
    for text in texts:
        assert text in doc.markdown


@needs_soffice
def test_windows_metafiles_are_read_as_drawings(tmp_path: Path) -> None:
    """.emf and .wmf pictures were `unsupported`, and an EMF from a Mac (a PDF embedded in
    its first records) was taken for a PDF and failed `corrupt`."""
    svg = tmp_path / "chart.svg"
    svg.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="200">'
        '<text x="40" y="100" font-size="24">Cooling loop pressure chart</text></svg>'
    )
    for kind in ("emf", "wmf"):
        subprocess.run(
            ["soffice", "--headless", "--convert-to", kind, "--outdir", str(tmp_path), str(svg)],
            check=True,
            capture_output=True,
            timeout=180,
        )
        doc = parse_file(tmp_path / f"chart.{kind}")
        assert doc.format == "metafile" and doc.parser.startswith("libreoffice+"), doc.parser
        assert "Cooling loop pressure chart" in doc.markdown
    emf = (tmp_path / "chart.emf").read_bytes()
    mac = tmp_path / "mac.emf"
    mac.write_bytes(emf[:100] + b"%PDF-1.3 embedded" + emf[100:])
    from parsers.pages import is_pdf
    from parsers.safety import sniff_format

    assert sniff_format(mac, mac.read_bytes()[:8192]) == "metafile"
    assert not is_pdf(mac)  # the pool's page isolation asks the same question


def _retyped(package: Path, out: Path, main_type: str) -> Path:
    """``package`` with its main part's content type replaced by ``main_type``."""
    import re

    with zipfile.ZipFile(package) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            body = zin.read(info)
            if info.filename == "[Content_Types].xml":
                body = re.sub(
                    rb'ContentType="[^"]+\.(?:document|presentation)\.main\+xml"',
                    f'ContentType="{main_type}"'.encode(),
                    body,
                )
                assert main_type.encode() in body
            zout.writestr(info, body)
    return out


def test_macro_enabled_files_templates_and_slide_shows_are_read(tmp_path: Path) -> None:
    """.docm, .dotx, .potx, .ppsx: python-docx and python-pptx refuse their main part's
    content type under docling's and unstructured's readers; each failed `corrupt`."""
    import docx
    import pptx

    word = docx.Document()
    word.add_paragraph("Quarterly reconciliation macro notes")
    word.save(tmp_path / "plain.docx")
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Regional rollout template"
    deck.save(tmp_path / "plain.pptx")
    wml = "application/vnd.openxmlformats-officedocument.wordprocessingml"
    pml = "application/vnd.openxmlformats-officedocument.presentationml"
    cases = [
        ("plain.docx", "a.docm", "application/vnd.ms-word.document.macroEnabled.main+xml"),
        ("plain.docx", "b.dotx", f"{wml}.template.main+xml"),
        ("plain.docx", "c.dotm", "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"),
        ("plain.pptx", "d.potx", f"{pml}.template.main+xml"),
        ("plain.pptx", "e.ppsx", f"{pml}.slideshow.main+xml"),
    ]
    for source, name, main_type in cases:
        doc = parse_file(_retyped(tmp_path / source, tmp_path / name, main_type))
        assert doc.parser == "docling", name
        expected = (
            "Quarterly reconciliation macro notes" if "docx" in source else "Regional rollout"
        )
        assert expected in doc.markdown, name
    # The same package embedded in another document (word/embeddings/*.docm).
    from parsers.viewer_text import embedded_object

    found = embedded_object("word/embeddings/notes.docm", (tmp_path / "a.docm").read_bytes(), [])
    assert found is not None
    assert "Quarterly reconciliation macro notes" in found[1].export_to_markdown()


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, samples_dir: Path) -> Path:
    """The shipped samples saved by LibreOffice as 97-2003 and OpenDocument files."""
    if shutil.which("soffice") is None:
        pytest.skip("LibreOffice (soffice) is not installed")
    out = tmp_path_factory.mktemp("converted")
    jobs = [
        ("doc", "travel_policy.docx"),
        ("odt", "travel_policy.docx"),
        ("xls", "component_warranty.xlsx"),
        ("ods", "component_warranty.xlsx"),
        ("ppt", "service_review.pptx"),
        ("odp", "service_review.pptx"),
    ]
    for target, name in jobs:
        subprocess.run(
            [
                "soffice",
                "--headless",
                f"-env:UserInstallation=file://{out}/profile",
                "--convert-to",
                target,
                "--outdir",
                str(out),
                str(samples_dir / name),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
    return out


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("travel_policy.doc", "doc"),
        ("travel_policy.odt", "odt"),
        ("component_warranty.xls", "xls"),
        ("component_warranty.ods", "ods"),
        ("service_review.ppt", "ppt"),
        ("service_review.odp", "odp"),
    ],
)
def test_legacy_and_opendocument_office(
    converted: Path, samples_dir: Path, name: str, fmt: str
) -> None:
    doc = parse_file(converted / name)
    modern = {"doc": "docx", "odt": "docx", "xls": "xlsx", "ods": "xlsx"}.get(fmt, "pptx")
    original = parse_file(samples_dir / f"{Path(name).stem}.{modern}")
    assert doc.format == fmt
    assert _text_f1(doc.markdown, original.markdown) >= 0.9


def test_legacy_file_without_extension_is_detected_by_content(
    converted: Path, tmp_path: Path
) -> None:
    for name, fmt in (("travel_policy.doc", "doc"), ("component_warranty.xls", "xls")):
        noext = tmp_path / Path(name).stem
        shutil.copy(converted / name, noext)
        assert parse_file(noext).format == fmt


# -- images ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scan_image(samples_dir: Path) -> Any:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(samples_dir / "scanned_incident_report.pdf")
    try:
        return pdf[0].render(scale=2).to_pil().convert("RGB")
    finally:
        pdf.close()


@pytest.mark.parametrize("ext", [".png", ".jpg", ".tiff", ".bmp", ".webp", ".gif", ".heic"])
def test_images_through_ocr(tmp_path: Path, scan_image: Any, ext: str) -> None:
    if ext == ".heic":
        import pillow_heif

        pillow_heif.register_heif_opener()
    path = tmp_path / f"scan{ext}"
    scan_image.save(path, quality=90) if ext in (".jpg", ".webp", ".heic") else scan_image.save(
        path
    )
    doc = parse_file(path)
    assert doc.format == ("heic" if ext == ".heic" else "image")
    assert doc.parser == "ocr"
    assert "incident" in doc.markdown.lower(), doc.markdown[:300]


# -- no silent loss --------------------------------------------------------------------


def _chunks(path: Path, tokenizer: Any) -> list[Any]:
    from chunking import chunk_document

    return list(chunk_document(parse_file(path), "d", tokenizer, 128, ChunkSettings()).children)


def test_heading_only_documents_yield_chunks(tmp_path: Path, minilm_tokenizer: Any) -> None:
    from pptx import Presentation

    deck = Presentation()
    for title in ("Quarterly review", "Hiring plan", "Open questions"):
        slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
        slide.shapes.title.text = title
    deck.save(tmp_path / "titles.pptx")
    texts = " ".join(c.text for c in _chunks(tmp_path / "titles.pptx", minilm_tokenizer))
    for title in ("Quarterly review", "Hiring plan", "Open questions"):
        assert title in texts

    one = _write(tmp_path / "one.md", "# Only a heading\n")
    assert [c.text for c in _chunks(one, minilm_tokenizer)] == ["Only a heading"]
    two = _write(tmp_path / "two.txt", "Quarterly numbers\nRevenue grew 4 percent.\n")
    chunks = _chunks(two, minilm_tokenizer)
    assert chunks and "Revenue grew 4 percent" in " ".join(c.text for c in chunks)


def test_heading_without_body_among_sections_is_kept(tmp_path: Path, minilm_tokenizer: Any) -> None:
    md = _write(tmp_path / "m.md", "# Guide\n\n## Intro\n\nHello there.\n\n## Appendix Z\n")
    texts = [c.text for c in _chunks(md, minilm_tokenizer)]
    assert "Appendix Z" in texts and any("Hello there" in t for t in texts)


def test_shared_heading_only_pptx(shared_corpus: Path, minilm_tokenizer: Any) -> None:
    chunks = _chunks(shared_corpus / "pptx" / "powerpoint_bad_text.pptx", minilm_tokenizer)
    assert chunks and any(c.text.strip() for c in chunks)


# -- the format table ------------------------------------------------------------------
# Each backend's contract (a real file of each of its formats, broken files, fingerprints)
# is the conformance suite in parsers/testing.py, run by tests/parsers/test_backend_conformance.py.


@pytest.mark.parametrize("spec", FORMATS, ids=lambda s: s.fmt)
def test_table_rows_resolve(spec: Any) -> None:
    """Every row: its extensions map back to it, its backend and fallback are Backends
    that count the format among theirs, its requirement check answers."""
    assert all(EXTENSION_FORMATS[ext] == spec.fmt for ext in spec.extensions)
    assert spec.fmt in load_backend(spec.backend).supported_formats()
    if spec.fallback:
        assert spec.fmt in load_backend(spec.fallback).supported_formats()
    assert spec.missing() is None or isinstance(spec.missing(), str)
    assert not (spec.text and spec.binary)
    assert spec.container in ("", "zip") and (not spec.container or spec.binary)


def test_missing_requirement_is_unsupported_with_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, converted: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no soffice, no libreoffice
    monkeypatch.delenv("DOCLING_LIBREOFFICE_CMD", raising=False)
    with pytest.raises(ParseError) as err:
        parse_file(converted / "travel_policy.doc")
    assert err.value.category == Category.UNSUPPORTED
    assert "apt-get install" in err.value.message and "soffice" in err.value.message


# -- a hung converter ------------------------------------------------------------------


@needs_soffice
def test_hung_libreoffice_is_killed_and_next_file_parses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, converted: Path, samples_dir: Path
) -> None:
    pidfile = tmp_path / "soffice.pid"
    fake = tmp_path / "soffice"
    tmpfile = tmp_path / "soffice.tmpdir"
    fake.write_text(f'#!/bin/sh\necho $$ > {pidfile}\necho "$TMPDIR" > {tmpfile}\nexec sleep 600\n')
    fake.chmod(0o755)
    monkeypatch.setenv("DOCLING_LIBREOFFICE_CMD", str(fake))  # inherited by the children
    with ParserPool(ParseSettings(timeout_s=8, workers=1)) as pool:
        start = time.monotonic()
        with pytest.raises(ParseError) as err:
            pool.parse(converted / "travel_policy.doc")
        assert err.value.category == Category.TIMEOUT
        assert time.monotonic() - start < 60
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        assert not alive, "the hung soffice outlived its parser"
        # docling's LibreOffice profile and converted copy lived in the child's temp folder
        soffice_tmp = Path(tmpfile.read_text().strip())
        assert soffice_tmp.name.startswith("corpusflow-parser-")
        assert not soffice_tmp.exists(), "the killed conversion's temp files outlived it"
        assert "Day One" in pool.parse(samples_dir / "onboarding.html").markdown


def test_every_shared_kind_parses(shared_corpus: Path) -> None:
    """One file of each kind the shared corpus holds parses to text (legacy kinds need
    LibreOffice)."""
    kinds = sorted(p.name for p in shared_corpus.iterdir() if p.is_dir())
    for kind in kinds:
        if kind == "pdf_password" or (
            kind in ("doc", "ppt", "xls") and not shutil.which("soffice")
        ):
            continue
        files = sorted(
            f for f in (shared_corpus / kind).iterdir() if f.is_file() and f.suffix != ".md"
        )
        for f in files[:2]:
            doc = parse_file(f)
            assert doc.markdown.strip(), f


def test_docs_formats_table_is_current() -> None:
    from typer.testing import CliRunner

    from corpusflow.cli import app

    out = CliRunner().invoke(app, ["formats", "--markdown"])
    assert out.exit_code == 0, out.output
    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    assert out.output.strip() in doc, (
        "run: corpusflow formats --markdown, paste into docs/formats.md"
    )


_WORDML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<?mso-application progid="Word.Document"?>
<w:wordDocument xmlns:w="http://schemas.microsoft.com/office/word/2003/wordml"><w:body>
<w:p><w:r><w:t>The cooling pump runs at 40 bar.</w:t></w:r></w:p></w:body></w:wordDocument>
"""


@needs_soffice
def test_word_2003_xml_saved_as_doc_is_read_by_libreoffice(tmp_path: Path) -> None:
    doc = parse_file(_write(tmp_path / "manual.doc", _WORDML))
    assert doc.format == "doc"
    assert "cooling pump runs at 40 bar" in doc.markdown


def test_body_text_that_opens_with_a_hash_is_not_a_heading(tmp_path: Path) -> None:
    """A paragraph that opens with '#' (a comment of a listing pasted as text) is stored
    with the '#' escaped: a reader of the Markdown, and the outline of headings built
    from it, do not take it for a heading. Headings, code and table cells are as before."""
    import docx

    d = docx.Document()
    d.add_heading("Loading the seeds", level=1)
    d.add_paragraph("# load the saved seeds and return them")
    d.add_paragraph("The loader reads every seed once.")
    table = d.add_table(rows=2, cols=2)
    for r, row in enumerate([["# of seeds", "Source"], ["12", "disk"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    path = tmp_path / "seeds.docx"
    d.save(str(path))
    md = parse_file(path).markdown
    heads = [ln for ln in md.splitlines() if re.match(r"^ {0,3}#{1,6}(\s|$)", ln)]
    assert heads == ["## Loading the seeds"], md
    assert "\\# load the saved seeds and return them" in md
    assert "# of seeds |" in md and "\\# of" not in md  # a cell holds no heading: as written


def test_a_hash_is_escaped_only_where_a_line_starts() -> None:
    """A paragraph of several runs (an inline group) is escaped at its first run only;
    a '#' inside a line stays as written."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    from parsers.registry import stored_markdown

    doc = DoclingDocument(name="runs")
    group = doc.add_inline_group()
    for run in ("# load the seeds", "and count the", "# of users"):
        doc.add_text(DocItemLabel.TEXT, run, parent=group)
    doc.add_text(DocItemLabel.TEXT, "plain text with # inside")
    md = stored_markdown(doc)
    assert md.splitlines()[0] == "\\# load the seeds and count the # of users", md
    assert "plain text with # inside" in md


def test_angle_brackets_and_ampersands_stay_as_written() -> None:
    """The stored Markdown is read and searched, not rendered: code in a paragraph,
    a company name and a comparison keep '<', '>' and '&' (docling escapes them to
    '&lt;', which adds the words "lt" and "amp" the document never held)."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    from parsers.registry import stored_markdown

    doc = DoclingDocument(name="code")
    doc.add_heading("R&D <draft>", level=1)
    doc.add_text(DocItemLabel.TEXT, "A category holds std::vector<Task*> when n > 3 & m < 2.")
    md = stored_markdown(doc)
    assert "# R&D <draft>" in md, md
    assert "std::vector<Task*> when n > 3 & m < 2." in md, md
    assert "&lt;" not in md and "&amp;" not in md and "&gt;" not in md, md
