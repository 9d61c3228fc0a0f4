"""A bad page costs a page, not the document (parsers/pages.py, parsers/isolation.py).

Faults are injected with ``ParserPool(target=...)``: the targets below run in the
spawned parser children and misbehave when the PDF they are given holds a marked page
(a page that says HANG-HERE or MEMORY-HOG, or a 500 x 500 pt page, which has no text);
otherwise they run the real parser. Page ranges are given to them as PDFs of their
own, so a range fails exactly when it holds the bad page.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from common.settings import ParseSettings
from parsers import ParsedDocument, ParseError, ParserPool
from parsers.errors import Category
from parsers.models import ParseWarning
from parsers.pages import batch_ranges, range_deadline, split_range
from tests.helpers.pdfgen import write_pdf

CRASH_SIZE = (500.0, 500.0)
SCAN_SIZE = (595.2000122070312, 841.9199829101562)  # samples/corpus/scanned_incident_report.pdf


def _marks(path: Path) -> tuple[str, list[tuple[float, float]]]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        text = "".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
        sizes = [tuple(pdf[i].get_size()) for i in range(len(pdf))]
    finally:
        pdf.close()
    return text, sizes  # type: ignore[return-value]


def faulty_parse(path: Path, settings: ParseSettings, metadata: dict[str, Any]) -> ParsedDocument:
    """Hangs, aborts or eats memory on a marked page; else the real parser."""
    from parsers.pages import is_pdf

    text, sizes = _marks(Path(path)) if is_pdf(Path(path)) else ("", [])
    if "HANG-HERE" in text:
        time.sleep(3600)
    if CRASH_SIZE in sizes or SCAN_SIZE in sizes:
        os.abort()
    if "MEMORY-HOG" in text:
        hog = []
        for _ in range(64):  # up to 4 GiB, written so it is resident; the cap stops it
            hog.append(bytearray(b"x") * (64 << 20))
            time.sleep(0.02)
        time.sleep(3600)
    from parsers.registry import parse_file

    return parse_file(path, settings, metadata)


def _pages(n: int, bad: int, mark: str) -> list[list[tuple[int, str]]]:
    pages = []
    for p in range(1, n + 1):
        lines = [(10, f"Page {p} line {k}: inspection record {p * 100 + k}.") for k in (1, 2)]
        if p == bad:
            lines.append((10, mark))
        pages.append(lines)
    return pages


def _with_blank_page(path: Path, n: int, bad: int) -> Path:
    """An n-page PDF whose page ``bad`` is a 500 x 500 pt page with no text at all."""
    import pypdfium2 as pdfium

    write_pdf(path, _pages(n, 0, ""))
    pdf = pdfium.PdfDocument(str(path))
    pdf.del_page(bad - 1)
    pdf.new_page(*CRASH_SIZE, index=bad - 1).close()
    out = path.with_name(path.stem + "-x.pdf")
    pdf.save(str(out))
    pdf.close()
    out.replace(path)
    return path


def _settings(tmp_path: Path, **kw: Any) -> ParseSettings:
    base: dict[str, Any] = {
        "timeout_s": 20,
        "page_timeout_min_s": 4,
        "nice": 0,
        "ocr": False,
        "pdf_pipeline": "offline",
        "repro_dir": str(tmp_path / "repro"),
    }
    return ParseSettings(**{**base, **kw})


def test_ranges_split_in_halves_then_single_pages() -> None:
    assert split_range(1, 600) == [(1, 300), (301, 600)]
    assert split_range(301, 600) == [(301, 450), (451, 600)]
    assert split_range(5, 12) == [(p, p) for p in range(5, 13)]
    assert split_range(7, 7) == []
    # the fewest ranges of at most 200 pages, of even lengths: no short last range
    assert batch_ranges(450, 200) == [(1, 150), (151, 300), (301, 450)]
    assert batch_ranges(201, 100) == [(1, 67), (68, 134), (135, 201)]
    assert batch_ranges(1000, 100) == [(a, a + 99) for a in range(1, 1000, 100)]
    assert batch_ranges(150, 200) == [(1, 150)]
    assert batch_ranges(200, 200) == [(1, 200)]
    assert batch_ranges(10, 0) == [(1, 10)]
    settings = ParseSettings(timeout_s=300, page_timeout_min_s=20)
    assert range_deadline(settings, 300, 600) == 150
    assert range_deadline(settings, 1, 600) == 20
    # never more than the whole document's limit
    assert range_deadline(ParseSettings(timeout_s=5, page_timeout_min_s=20), 1, 600) == 5


def test_hung_page_is_read_by_the_text_layer_and_the_rest_parsed(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "hang.pdf", _pages(8, 5, "HANG-HERE"))
    settings = _settings(tmp_path, timeout_s=4, page_timeout_min_s=2)
    start = time.monotonic()
    with ParserPool(settings, target=f"{__name__}:faulty_parse") as pool:
        doc = pool.parse(pdf)
    took = time.monotonic() - start
    assert doc.status == "partial" and doc.missing_pages == ()
    assert doc.page_count == 8
    for p in range(1, 9):
        assert f"Page {p} line 1" in doc.markdown
    degraded = [w for w in doc.warnings if w.source == "page-isolation" and w.page == 5]
    assert degraded and "text layer" in degraded[0].message
    assert "timeout" in degraded[0].message
    # page numbers are the original ones
    pages = {prov.page_no for item in doc.to_docling().texts for prov in item.prov}
    assert pages == set(range(1, 9))
    assert not (tmp_path / "repro").exists()  # nothing missing: no bundle
    print(f"hang isolated in {took:.1f}s")


def test_page_that_crashes_the_child_is_missing_with_a_bundle(tmp_path: Path) -> None:
    pdf = _with_blank_page(tmp_path / "crash.pdf", 8, 3)
    settings = _settings(tmp_path)
    with ParserPool(settings, target=f"{__name__}:faulty_parse") as pool:
        doc = pool.parse(pdf)
        # the pool goes on with the next document
        other = write_pdf(tmp_path / "fine.pdf", _pages(2, 0, ""))
        assert "Page 2 line 1" in pool.parse(other).markdown
    assert doc.status == "partial" and doc.missing_pages == (3,)
    for p in (1, 2, 4, 5, 6, 7, 8):
        assert f"Page {p} line 1" in doc.markdown
    bundles = list((tmp_path / "repro").glob("*/page-00003.*"))
    assert sorted(b.suffix for b in bundles) == [".json", ".pdf"]
    info = json.loads(next(b for b in bundles if b.suffix == ".json").read_text())
    assert info["page"] == 3 and info["page_pdf"] == "page-00003.pdf"
    assert [e["backend"] for e in info["errors"]] == ["structured", "text"]
    assert info["errors"][0]["category"] == "crashed"
    assert "pypdfium2" in info["versions"]
    import pypdfium2 as pdfium

    page_pdf = pdfium.PdfDocument(str(next(b for b in bundles if b.suffix == ".pdf")))
    assert len(page_pdf) == 1 and tuple(page_pdf[0].get_size()) == CRASH_SIZE
    page_pdf.close()


def test_page_over_the_memory_cap_is_isolated(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "hog.pdf", _pages(6, 2, "MEMORY-HOG"))
    settings = _settings(tmp_path, memory_limit_mb=1200)
    with ParserPool(settings, target=f"{__name__}:faulty_parse") as pool:
        doc = pool.parse(pdf)
    assert doc.status == "partial" and doc.missing_pages == ()
    assert all(f"Page {p} line 1" in doc.markdown for p in range(1, 7))
    degraded = [w for w in doc.warnings if w.source == "page-isolation" and w.page == 2]
    assert degraded and "out_of_memory" in degraded[0].message


def test_a_scanned_page_that_crashes_the_parser_is_read_by_ocr(
    tmp_path: Path, samples_dir: Path
) -> None:
    """Structured parse aborts, the page has no text layer, OCR reads it (degraded)."""
    import pypdfium2 as pdfium

    text = pdfium.PdfDocument(str(write_pdf(tmp_path / "text.pdf", _pages(3, 0, ""))))
    scan = pdfium.PdfDocument(str(samples_dir / "scanned_incident_report.pdf"))
    text.import_pages(scan, [0], index=1)
    text.save(str(tmp_path / "mixed.pdf"))
    text.close()
    scan.close()
    settings = _settings(tmp_path, ocr=True, page_timeout_min_s=15)
    with ParserPool(settings, target=f"{__name__}:faulty_parse") as pool:
        doc = pool.parse(tmp_path / "mixed.pdf")
    assert doc.status == "partial" and doc.missing_pages == () and doc.page_count == 4
    degraded = [w for w in doc.warnings if w.source == "page-isolation" and w.page == 2]
    assert degraded and "OCR" in degraded[0].message and "crashed" in degraded[0].message
    ocr_text = " ".join(t.text for t in doc.to_docling().texts if t.prov and t.prov[0].page_no == 2)
    assert len(ocr_text.split()) > 20  # the scan's words, on page 2
    on_page = {
        t.text.split(" line")[0]: t.prov[0].page_no for t in doc.to_docling().texts if t.prov
    }
    assert (on_page["Page 1"], on_page["Page 2"], on_page["Page 3"]) == (1, 3, 4)


def test_isolation_off_fails_the_whole_document(tmp_path: Path) -> None:
    pdf = _with_blank_page(tmp_path / "crash.pdf", 4, 2)
    settings = _settings(tmp_path, page_isolation=False)
    with (
        ParserPool(settings, target=f"{__name__}:faulty_parse") as pool,
        pytest.raises(ParseError) as err,
    ):
        pool.parse(pdf)
    assert err.value.category == Category.CRASHED


def test_page_batch_parses_long_pdfs_in_ranges_with_original_page_numbers(
    tmp_path: Path,
) -> None:
    pdf = write_pdf(tmp_path / "long.pdf", _pages(7, 0, ""))
    settings = _settings(tmp_path, page_batch=3, max_pages=10)
    with ParserPool(settings) as pool:
        doc = pool.parse(pdf)
        # the whole document's pre-checks still apply
        with pytest.raises(ParseError) as err:
            pool.parse(write_pdf(tmp_path / "too_long.pdf", _pages(12, 0, "")))
        assert err.value.category == Category.TOO_LARGE and "12 pages" in err.value.message
    assert doc.status == "success" and doc.missing_pages == () and doc.page_count == 7
    texts = doc.to_docling().texts
    assert [t.prov[0].page_no for t in texts if "line 1" in t.text] == list(range(1, 8))
    assert all(
        f"Page {p} line 2" in t.text
        for p, t in enumerate((t for t in texts if "line 2" in t.text), start=1)
    )
    assert sorted(doc.to_docling().pages) == list(range(1, 8))


def _headings(doc: ParsedDocument) -> list[tuple[str, int]]:
    from docling_core.types.doc import SectionHeaderItem

    return [(t.text, t.level) for t in doc.to_docling().texts if isinstance(t, SectionHeaderItem)]


def test_a_pdf_parsed_in_ranges_keeps_the_whole_documents_structure(tmp_path: Path) -> None:
    """Ranges of 3 pages of ``structured_pdf``: the middle range has neither the title
    nor a chapter (alone it would number its sections from level 1), a heading there is
    one only because the original's outline names it, and the boundaries split a
    paragraph (pages 3-4) and a bullet list (pages 6-7). Every range's headings are
    numbered as one document's, and the parse equals the whole document's."""
    from docling_core.types.doc import ListGroup

    from parsers.registry import parse_file
    from tests.helpers.pdfdraw import STRUCTURED_HEADINGS, structured_pdf

    pdf = structured_pdf(tmp_path / "handbook.pdf")
    settings = _settings(tmp_path, page_batch=3)
    whole = parse_file(pdf, settings)  # in this process: page_batch is the pool's
    with ParserPool(settings) as pool:
        ranged = pool.parse(pdf)
    assert _headings(whole) == STRUCTURED_HEADINGS
    assert _headings(ranged) == STRUCTURED_HEADINGS
    assert ranged.markdown == whole.markdown
    assert ranged.markdown.split() == whole.markdown.split()
    assert ranged.status == "success" and ranged.page_count == 9
    doc, reference = ranged.to_docling(), whole.to_docling()
    # The paragraph over the page break (a range boundary here) is two items in both, as
    # every paragraph over a page break is (parsers.pdf.blocks groups lines of one page).
    pieces = [
        (t.text, t.prov[0].page_no)
        for t in doc.texts
        if t.text.startswith("After venting") or t.text.startswith("pressure must settle")
    ]
    assert pieces == [
        ("After venting, open the suction valve slowly and watch the gauge; the", 3),
        ("pressure must settle before the motor is started again.", 4),
    ]
    assert pieces == [
        (t.text, t.prov[0].page_no)
        for t in reference.texts
        if t.text.startswith("After venting") or t.text.startswith("pressure must settle")
    ]
    # The list over the boundary is one list of five items, on pages 6 and 7.
    lists = [g for g in doc.groups if isinstance(g, ListGroup)]
    assert len(lists) == 1 and len(lists[0].children) == 5
    assert [c.resolve(doc).prov[0].page_no for c in lists[0].children] == [6, 6, 6, 7, 7]
    assert len(lists) == len([g for g in reference.groups if isinstance(g, ListGroup)])


def test_a_bad_page_through_a_real_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's parser pool runs the faulty target (its default target swapped): the
    crashing page is missing, every other page is indexed, the document is ``partial``
    in the ledger, the other document of the run is indexed, nothing is lost; ``forget``
    removes the page's repro bundle."""
    from common.settings import load_settings
    from corpusflow.api import forget
    from corpusflow.engine import InProcessExecutor, RefreshEngine
    from storage import Store
    from tests.helpers.invariants import assert_nothing_lost

    monkeypatch.setattr(ParserPool.__init__, "__defaults__", (f"{__name__}:faulty_parse", True))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _with_blank_page(corpus / "manual.pdf", 8, 3)
    (corpus / "notes.md").write_text("# Notes\n\nThe turbine inspection is due in March.\n")
    repro = tmp_path / "repro"
    settings = load_settings(
        None,
        {
            "storage": {"db": str(tmp_path / "db")},
            "run": {"progress": False},
            "parse": {
                "timeout_s": 20,
                "page_timeout_min_s": 4,
                "nice": 0,
                "ocr": False,
                "repro_dir": str(repro),
            },
        },
    )
    report = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert report.failed == 0 and report.partial == 1
    rows = assert_nothing_lost(settings, str(corpus))
    row = rows["manual.pdf"]
    assert (row["status"], row["error_category"]) == ("indexed", "partial")
    assert "pages not read: 3" in row["error_message"]
    assert rows["notes.md"]["status"] == "indexed"
    store = Store(str(tmp_path / "db"))
    table = next(n for n in store.table_names() if n.startswith(store.name("chunks") + "__"))
    pages = store.read_columns(table, ["page_numbers"], "path = 'manual.pdf'")
    assert {p for ps in pages.column("page_numbers").to_pylist() for p in ps} == {
        1,
        2,
        4,
        5,
        6,
        7,
        8,
    }
    assert len(list(repro.glob("*/page-00003.pdf"))) == 1
    receipt = forget(["manual.pdf"], settings)
    assert any("repro bundle" in note for note in receipt["notes"])
    assert not list(repro.glob("*/page-*"))


def _count_jobs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any] | None]:
    jobs: list[dict[str, Any] | None] = []
    real = ParserPool._job

    def counted(self: ParserPool, slot: Any, path: str, metadata: Any, task: Any = None,
                timeout_s: Any = None) -> Any:  # fmt: skip
        jobs.append(task)
        return real(self, slot, path, metadata, task, timeout_s)

    monkeypatch.setattr(ParserPool, "_job", counted)
    return jobs


def test_a_page_retry_splices_the_page_back_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parse with page 3 cut out (as page isolation leaves it) plus a retry of page 3
    is the whole document's parse: same Markdown, page 3 between 2 and 4, success."""
    from dataclasses import replace

    from parsers.registry import parse_file

    pages = [[(16, f"Section {p}"), *lines] for p, lines in enumerate(_pages(5, 0, ""), 1)]
    pdf = write_pdf(tmp_path / "five.pdf", pages)
    settings = _settings(tmp_path)
    whole = parse_file(pdf, settings, {})
    cut = whole.to_docling().filter(page_nrs={1, 2, 4, 5})
    previous = replace(
        whole,
        docling_json=cut.model_dump_json(),
        status="partial",
        missing_pages=(3,),
        warnings=(ParseWarning("page-isolation", "missing: every backend failed (...)", 3),),
    )
    jobs = _count_jobs(monkeypatch)
    with ParserPool(settings) as pool:
        doc = pool.parse_pages(pdf, previous)
    assert jobs == [{"kind": "range", "first": 3, "last": 3}]
    assert doc.markdown == whole.markdown
    assert (doc.status, doc.missing_pages, doc.warnings) == ("success", (), ())
    on_page = [t.prov[0].page_no for t in doc.to_docling().texts if "line 1" in t.text]
    assert on_page == [1, 2, 3, 4, 5]


def test_a_page_that_still_fails_stays_missing_with_its_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = _with_blank_page(tmp_path / "crash.pdf", 4, 3)
    settings = _settings(tmp_path)
    with ParserPool(settings, target=f"{__name__}:faulty_parse") as pool:
        first = pool.parse(pdf)
        assert first.missing_pages == (3,)
        for bundle in (tmp_path / "repro").glob("*/page-00003.*"):
            bundle.unlink()
        jobs = _count_jobs(monkeypatch)
        again = pool.parse_pages(pdf, first)
    # the page, its fallback and its bundle: no other page
    assert [j["kind"] for j in jobs if j] == ["range", "text", "extract"]
    assert all(j and j.get("page", j.get("first")) == 3 for j in jobs)
    assert (again.status, again.missing_pages) == ("partial", (3,))
    assert again.markdown == first.markdown
    missing = [w for w in again.warnings if w.page == 3 and w.message.startswith("missing:")]
    assert len(missing) == 1  # the retry's, not the first parse's as well
    assert len(list((tmp_path / "repro").glob("*/page-00003.*"))) == 2
