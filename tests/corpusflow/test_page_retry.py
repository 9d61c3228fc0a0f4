"""``corpusflow retry-failed --pages``: a page that crashed the parser child is indexed
as missing; once the fault is gone, the retry parses that page alone, splices it into
the cached parse and embeds only the chunks it changes.

The fault is injected in the spawned parser children (``ParserPool(target=...)``, the
engine's default target swapped) and is on while the file named by ``FAULT_ENV``
exists: the structured parse of a PDF holding the marked page aborts, and so does the
text-layer fallback on that page (patched when this module is imported in a parser
child), so the page is missing with a repro bundle. Removing the file is the fix.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from common.settings import ParseSettings, load_settings
from parsers import ParsedDocument, ParserPool
from storage import Store
from tests.helpers.counting import count_embedders
from tests.helpers.invariants import assert_nothing_lost
from tests.helpers.pdfgen import write_pdf

FAULT_ENV = "CORPUSFLOW_TEST_PAGE_FAULT"
# What a marked page does while the fault is on, by its mark.
MARKS = {"crash": "CRASH-HERE", "hang": "HANG-HERE", "memory": "MEMORY-HOG"}
MARK = MARKS["crash"]
PAGES = 6
BAD = 3


def _fault_on() -> bool:
    flag = os.environ.get(FAULT_ENV, "")
    return bool(flag) and Path(flag).exists()


def _text(path: Path) -> str:
    import pypdfium2 as pdfium

    from parsers.pages import is_pdf

    if not is_pdf(path):
        return ""
    pdf = pdfium.PdfDocument(str(path))
    try:
        return "".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


def _misbehave(path: Path) -> None:
    """While the fault is on, on a PDF holding a marked page: abort, hang, or eat memory
    until the pool's cap kills the child."""
    if not _fault_on():
        return
    text = _text(Path(path))
    if MARKS["crash"] in text:
        os.abort()
    if MARKS["hang"] in text:
        time.sleep(3600)
    if MARKS["memory"] in text:
        hog = []
        for _ in range(64):  # up to 4 GiB, written so it is resident; the cap stops it
            hog.append(bytearray(b"x") * (64 << 20))
            time.sleep(0.02)
        time.sleep(3600)


def crashing_parse(path: Path, settings: ParseSettings, metadata: dict[str, Any]) -> ParsedDocument:
    """Misbehaves on a PDF holding a marked page while the fault is on; else the real parser."""
    _misbehave(Path(path))
    from parsers.registry import parse_file

    return parse_file(path, settings, metadata)


def _install_text_layer_fault() -> None:
    import parsers.pages as pages

    real = pages._text_layer

    def text_layer(page_pdf: Path) -> ParsedDocument:
        _misbehave(page_pdf)
        return real(page_pdf)

    pages._text_layer = text_layer


if mp.current_process().name == "corpusflow-parser":  # imported as a child's target
    _install_text_layer_fault()


def _manual(path: Path, mark: str = MARK) -> Path:
    pages = []
    for p in range(1, PAGES + 1):
        lines = [(16, f"Section {p}: pump station {p}")]
        lines += [(10, f"Page {p} line {k}: inspection record {p * 100 + k}.") for k in (1, 2)]
        if p == BAD:
            lines.append((10, f"{mark} valve seal torque 42 newton metres."))
        pages.append(lines)
    return write_pdf(path, pages)


def _chunks(store: Store) -> dict[str, dict[str, Any]]:
    active = store.pointer.active()
    assert active is not None
    cols = ["chunk_id", "text", "page_numbers"]
    rows = store.read_columns(active.chunk_table, cols, "path = 'manual.pdf'").to_pylist()
    return {r["chunk_id"]: r for r in rows}


def test_retry_failed_pages_fills_in_the_missing_page_and_touches_no_other_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corpusflow.cli import app
    from corpusflow.engine import InProcessExecutor, RefreshEngine

    monkeypatch.setattr(ParserPool.__init__, "__defaults__", (f"{__name__}:crashing_parse", True))
    flag = tmp_path / "fault-on"
    flag.touch()
    monkeypatch.setenv(FAULT_ENV, str(flag))
    jobs: list[dict[str, Any] | None] = []
    real_job = ParserPool._job

    def counted(self: ParserPool, slot: Any, path: str, metadata: Any, task: Any = None,
                timeout_s: Any = None) -> Any:  # fmt: skip
        jobs.append(task)
        return real_job(self, slot, path, metadata, task, timeout_s)

    monkeypatch.setattr(ParserPool, "_job", counted)
    embedders = count_embedders(monkeypatch)

    corpus, db, repro = tmp_path / "corpus", tmp_path / "db", tmp_path / "repro"
    corpus.mkdir()
    _manual(corpus / "manual.pdf")
    (corpus / "notes.md").write_text("# Notes\n\nThe turbine inspection is due in March.\n")
    config = tmp_path / "corpusflow.toml"
    config.write_text(
        f'[storage]\ndb = "{db}"\n[run]\nprogress = false\n[chunk]\nmax_tokens = 64\n'
        "[parse]\ntimeout_s = 20\npage_timeout_min_s = 4\nnice = 0\nocr = false\n"
        f'repro_dir = "{repro}"\n'
    )
    settings = load_settings(config)

    # The fault is on: the page is missing, with its bundle; the rest is indexed.
    report = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert report.failed == 0 and report.partial == 1
    rows = assert_nothing_lost(settings, str(corpus))
    assert (rows["manual.pdf"]["status"], rows["manual.pdf"]["error_category"]) == (
        "indexed",
        "partial",
    )
    assert f"pages not read: {BAD}" in rows["manual.pdf"]["error_message"]
    assert rows["notes.md"]["status"] == "indexed"
    assert len(list(repro.glob(f"*/page-{BAD:05d}.*"))) == 2
    store = Store(str(db))
    before = _chunks(store)
    assert {p for r in before.values() for p in r["page_numbers"]} == set(range(1, PAGES + 1)) - {
        BAD
    }
    assert not any(MARK in r["text"] for r in before.values())

    # A plain retry-failed leaves a partial document alone.
    jobs.clear()
    plain = RefreshEngine(str(corpus), settings, only_failed=True, kind="retry-failed").refresh(
        InProcessExecutor()
    )
    assert (plain.page_retries, plain.chunks_written, jobs) == (0, 0, [])

    # The fix; then only the missing page is parsed, and only its chunks are embedded.
    flag.unlink()
    jobs.clear()
    for e in embedders:
        e.texts.clear()
    start = time.monotonic()
    result = CliRunner().invoke(
        app, ["retry-failed", str(corpus), "--config", str(config), "--pages"]
    )
    took = time.monotonic() - start
    assert result.exit_code == 0, result.output
    assert "missing pages" in result.output
    assert jobs == [{"kind": "range", "first": BAD, "last": BAD}]  # no other page parsed

    rows = assert_nothing_lost(settings, str(corpus))
    assert (rows["manual.pdf"]["status"], rows["manual.pdf"]["error_category"]) == (
        "indexed",
        None,
    )
    after = _chunks(Store(str(db)))
    assert any(MARK in r["text"] and BAD in r["page_numbers"] for r in after.values())
    assert {p for r in after.values() for p in r["page_numbers"]} == set(range(1, PAGES + 1))
    new = set(after) - set(before)
    gone = set(before) - set(after)
    # Every chunk without the retried page is kept as it was (same id, same text).
    assert all(BAD in after[c]["page_numbers"] for c in new)
    assert all(after[c]["text"] == before[c]["text"] for c in set(before) & set(after))
    encoded = sum(len(e.texts) for e in embedders)
    assert 0 < encoded <= len(new), (encoded, len(new))
    assert not list(repro.glob(f"*/page-{BAD:05d}.*"))  # the bundle went with the fault
    row = rows["manual.pdf"]
    hit = Store(str(db)).caches.get_parsed(row["content_sha256"], [row["parser_fingerprint"]])
    assert hit is not None and ParsedDocument.from_json(hit[1]).missing_pages == ()  # replaced
    print(
        f"page retry: {len(jobs)} page job(s), {encoded} of {len(after)} chunks embedded "
        f"({len(new)} new, {len(gone)} replaced), {took:.1f}s"
    )

    # Nothing is missing any more: a second page retry has nothing to do.
    again = RefreshEngine(
        str(corpus), settings, only_failed=True, kind="retry-failed", pages=True
    ).refresh(InProcessExecutor())
    assert (again.page_retries, again.chunks_written) == (0, 0)


@pytest.mark.parametrize("fault", ["hang", "memory"])
def test_a_page_that_hung_or_blew_the_memory_cap_is_filled_in_by_a_page_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The same at the parser level for the other two faults: the page (and its text
    layer) hangs past its deadline or goes over the memory cap, is missing with its
    bundle; after the fix, ``parse_pages`` reads it alone and the document is whole."""
    flag = tmp_path / "fault-on"
    flag.touch()
    monkeypatch.setenv(FAULT_ENV, str(flag))
    pdf = _manual(tmp_path / f"{fault}.pdf", MARKS[fault])
    repro = tmp_path / "repro"
    limits: dict[str, Any] = (
        {"timeout_s": 8, "page_timeout_min_s": 3} if fault == "hang" else {"memory_limit_mb": 1200}
    )
    settings = ParseSettings(
        **{"timeout_s": 20, "page_timeout_min_s": 4, **limits},
        nice=0,
        ocr=False,
        pdf_pipeline="offline",
        repro_dir=str(repro),
    )
    with ParserPool(settings, target=f"{__name__}:crashing_parse") as pool:
        first = pool.parse(pdf)
        assert (first.status, first.missing_pages) == ("partial", (BAD,))
        assert all(f"Page {p} line 1" in first.markdown for p in range(1, PAGES + 1) if p != BAD)
        assert len(list(repro.glob(f"*/page-{BAD:05d}.*"))) == 2
        flag.unlink()
        jobs: list[Any] = []
        real_job = ParserPool._job

        def counted(self: ParserPool, slot: Any, path: str, metadata: Any, task: Any = None,
                    timeout_s: Any = None) -> Any:  # fmt: skip
            jobs.append(task)
            return real_job(self, slot, path, metadata, task, timeout_s)

        monkeypatch.setattr(ParserPool, "_job", counted)
        doc = pool.parse_pages(pdf, first)
    assert jobs == [{"kind": "range", "first": BAD, "last": BAD}]
    assert (doc.status, doc.missing_pages) == ("success", ())
    assert f"{MARKS[fault]} valve seal" in doc.markdown
    lines = [t.prov[0].page_no for t in doc.to_docling().texts if "line 1" in t.text]
    assert lines == list(range(1, PAGES + 1))
    assert not list(repro.glob(f"*/page-{BAD:05d}.*"))
