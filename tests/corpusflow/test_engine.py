"""The refresh engine outside Prefect: bounded work in flight, the same tables as the
flow, no orchestrator for a refresh with nothing to do, nothing left after a kill."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from common.settings import Settings, load_settings
from corpusflow.engine import InProcessExecutor, RefreshEngine
from flows.refresh import refresh_flow
from storage import Store
from tests.helpers.invariants import assert_nothing_lost
from tests.helpers.scripts import heavy_imports

_BESIDE = Path(sys.executable).parent / "corpusflow"


def _settings(db: Path, **over: Any) -> Settings:
    base: dict[str, Any] = {"storage": {"db": str(db)}, "run": {"progress": False}}
    for section, values in over.items():
        base.setdefault(section, {}).update(values)
    return load_settings(None, base)


def _bump(monkeypatch: pytest.MonkeyPatch, fmt: str, field: str) -> None:
    """A release that moves one format's ``FormatSpec`` field (``version``, ``reads``)."""
    import dataclasses

    import parsers.formats as formats

    bumped = tuple(
        dataclasses.replace(spec, **{field: getattr(spec, field) + "-next"})
        if spec.fmt == fmt
        else spec
        for spec in formats.FORMATS
    )
    monkeypatch.setattr(formats, "FORMATS", bumped)


class CountingExecutor(InProcessExecutor):
    """The in-process executor, counting documents between submission and commit."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.submitted = self.committed = self.peak = 0

    def submit(self, fn: Any, /) -> Any:
        if fn.kind == "document":
            with self.lock:
                self.submitted += 1
                self.peak = max(self.peak, self.submitted - self.committed)
            return super().submit(fn)
        result = super().submit(fn)  # a batch: written in this thread
        with self.lock:
            self.committed += len(fn.batch)
        return result


def _tables(db: Path) -> tuple[dict[str, tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    rows = store.read_columns(active.chunk_table, ["chunk_id", "doc_id", "embed_text"])
    chunks = {r["chunk_id"]: (r["doc_id"], r["embed_text"]) for r in rows.to_pylist()}
    suffix = store.chunks.suffix_of(active.chunk_table)
    ledger = store.ledger.columns(suffix, ["doc_id", "status", "content_sha256", "chunk_count"])
    return chunks, {r["doc_id"]: tuple(r.values()) for r in ledger.to_pylist()}


@pytest.mark.usefixtures("prefect_server")
def test_work_in_flight_is_bounded_and_tables_match_the_flow(corpus: Path, tmp_path: Path) -> None:
    for i in range(14):  # more documents than the limit, several batches
        (corpus / f"note_{i:02d}.md").write_text(
            f"# Note {i}\n\nMaintenance note number {i} for turbine T-{i:03d}.\n"
        )
    bounded = _settings(
        tmp_path / "bounded", run={"max_in_flight": 3}, storage={"write_batch_docs": 2}
    )
    executor = CountingExecutor()
    report = RefreshEngine(str(corpus), bounded).refresh(executor)
    assert (report.new, report.failed) == (21, 0)
    # Never more than three documents between submission and commit, and it did reach 3.
    assert executor.peak == 3
    assert executor.submitted == executor.committed == 21
    assert "release_memory" in report.stage_s  # freed memory handed back after commits
    assert_nothing_lost(bounded, str(corpus))

    by_flow = refresh_flow(str(corpus), _settings(tmp_path / "flow").model_dump_json())
    assert by_flow["chunks_written"] == report.chunks_written
    assert _tables(tmp_path / "flow") == _tables(tmp_path / "bounded")


def _cli_env(home: Path, prefect_from: int | None = None) -> dict[str, str]:
    """The CLI's environment with no Prefect server; ``prefect_from``: the smallest
    number of documents that starts the ephemeral API (default: the setting's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(home)
    if prefect_from is not None:
        env["CORPUSFLOW_RUN__EPHEMERAL_API_MIN_DOCUMENTS"] = str(prefect_from)
    return env


def _flow_runs(home: Path) -> int:
    with sqlite3.connect(home / "prefect.db") as db:
        return int(db.execute("select count(*) from flow_run").fetchone()[0])


@pytest.mark.slow
def test_refresh_with_nothing_to_do_starts_no_flow(corpus: Path, tmp_path: Path) -> None:
    """A no-op starts no flow run; a run with fewer documents than
    ``run.ephemeral_api_min_documents`` runs in-process; one with more is a Prefect run."""
    home, db = tmp_path / "prefect", tmp_path / "db"
    cmd = [str(_BESIDE), "ingest", str(corpus), "--db", str(db), "--json"]

    def ingest(prefect_from: int | None = None) -> dict[str, Any]:
        env = _cli_env(home, prefect_from)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        return report

    first = ingest(prefect_from=7)  # 7 documents: just enough for the ephemeral API
    assert (first["new"], first["executor"]) == (7, "prefect")
    assert _flow_runs(home) == 1
    second = ingest()
    assert (second["unchanged"], second["executor"]) == (7, "")
    assert _flow_runs(home) == 1  # no flow run, no ephemeral API for a no-op
    runs = Store(str(db)).runs.last()
    assert runs is not None and runs.status == "completed"  # the run is still recorded
    (corpus / "release_notes.md").write_text("# Release notes\n\nOne changed line.\n")
    third = ingest()  # one document, below the default of 50: in this process
    assert (third["changed"], third["executor"]) == (1, "in-process")
    assert third["chunks_written"] >= 1
    assert _flow_runs(home) == 1
    last = Store(str(db)).runs.last()
    assert last is not None and last.run_id == third["run_id"] and last.status == "completed"


@pytest.mark.usefixtures("prefect_server")
def test_grouped_parse_tasks_keep_each_failure_visible(corpus: Path, tmp_path: Path) -> None:
    """documents_per_task > 1: one task run per group of documents, and the failed
    document still has its own failed task run named after its path."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\ntruncated")
    grouped = _settings(tmp_path / "db", run={"documents_per_task": 4, "max_in_flight": 8})
    report = refresh_flow(str(corpus), grouped.model_dump_json())
    assert (report["new"], report["failed"]) == (8, 1)
    assert report["failures"][0]["path"] == "broken.pdf"
    assert_nothing_lost(grouped, str(corpus))
    with get_client(sync_client=True) as client:
        run = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
        )
    names = {t.name: t for t in tasks}
    groups = [n for n in names if "-documents-from-" in n]
    assert len(groups) == 2, sorted(names)  # 8 documents, groups of 4: full groups only
    assert "parse-travel_policy.docx" not in names  # successes are grouped
    failed = names["parse-broken.pdf"]
    assert failed.state is not None and failed.state.type.value == "FAILED"
    assert "corrupt" in (failed.state.message or "")
    assert run.state is not None and run.state.type.value == "COMPLETED"


_CHURN = """
import sys, threading, psutil
from corpusflow.runtime import release_free_memory
keep = []
def churn():
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(100_000)]
    keep.extend(blocks[::200])  # a few survivors, as a long run's caches leave
    del blocks
threads = [threading.Thread(target=churn) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
before = psutil.Process().memory_info().rss
if sys.argv[1] == "release":
    release_free_memory()
print(before, psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_memory_freed_on_worker_threads_goes_back_to_the_os() -> None:
    """What threads free stays in their glibc arenas (a long run grew ~1.6 MB a document
    that way); the engine hands it back after each commit."""

    def rss(mode: str) -> tuple[int, int]:
        out = subprocess.run(
            [sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True
        )
        before, after = out.stdout.split()
        return int(before), int(after)

    kept_before, kept_after = rss("keep")
    freed_before, freed_after = rss("release")
    assert kept_after > kept_before - 50 * 2**20  # nothing returns on its own
    assert freed_after < freed_before - 200 * 2**20  # ~400 MB freed, most of it returned


_POOL = """
from corpusflow.runtime import configure_environment
configure_environment()
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
"""


def test_arrow_on_the_system_allocator_unless_the_user_chose() -> None:
    """Arrow's jemalloc pool kept what a long run freed (with the system pool the flow
    process grew ~80 KiB a document instead of ~150); a user's own choice wins, and child
    processes inherit the setting through the environment."""

    def backend(**env: str) -> str:
        clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
        out = subprocess.run(
            [sys.executable, "-c", _POOL],
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    assert backend() == "system"
    assert backend(ARROW_DEFAULT_MEMORY_POOL="jemalloc") == "jemalloc"


def test_a_small_refresh_imports_neither_torch_nor_transformers(
    corpus: Path, tmp_path: Path
) -> None:
    """Parsing happens in the parser processes; chunking counts tokens with `tokenizers`
    and a few chunks embed with the NumPy encoder, so this process never pays torch."""
    source = f"""
from corpusflow.engine import InProcessExecutor, RefreshEngine
from common.settings import load_settings

def main():
    settings = load_settings(None, {{"storage": {{"db": {str(tmp_path / "db")!r}}},
                                     "run": {{"progress": False}}}})
    report = RefreshEngine({str(corpus)!r}, settings).refresh(InProcessExecutor())
    assert report.new == 7 and report.failed == 0 and report.chunks_written > 0, report
"""
    assert heavy_imports(source, tmp_path) == []


@pytest.mark.usefixtures("cold_parsers")
def test_a_parser_started_before_the_plan_is_used_or_killed(corpus: Path, tmp_path: Path) -> None:
    """``prestart_parsers`` overlaps a parser's imports with planning: a plan with
    work parses with that pool; a plan with nothing to do kills it at once, unused."""
    settings = _settings(tmp_path / "db", parse={"workers": 1})

    # Children this test starts: not the suite's servers nor multiprocessing's tracker.
    earlier = {p.pid for p in psutil.Process().children()}

    def parsers() -> list[psutil.Process]:
        kids = [p for p in psutil.Process().children() if p.pid not in earlier]
        return [p for p in kids if "resource_tracker" not in " ".join(p.cmdline())]

    first = RefreshEngine(str(corpus), settings)
    first.prestart_parsers()
    started = parsers()
    assert len(started) == 1  # spawned before the store is even opened
    first.prepare()
    assert first.job.local_kit(first.stack).pool is first.pool
    report = first.run(InProcessExecutor())
    assert (report.new, report.failed) == (7, 0)
    assert not any(p.is_running() and p.status() != "zombie" for p in started)

    second = RefreshEngine(str(corpus), settings)
    second.prestart_parsers()
    spare = parsers()
    assert len(spare) == 1
    second.prepare()
    assert not second.has_work
    report = second.run(InProcessExecutor())
    assert report.unchanged == 7
    assert not any(p.is_running() and p.status() != "zombie" for p in spare)


def test_a_new_parser_version_of_one_format_reparses_only_that_format(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parser fingerprints are per format: bumping the HTML backend's version parses the
    HTML page again and leaves the PDFs, the deck, the workbook and the rest alone."""

    settings = _settings(tmp_path / "db")
    first = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert (first.new, first.failed, first.parsed) == (7, 0, 7)
    _bump(monkeypatch, "html", "version")
    again = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert (again.rechunked, again.unchanged, again.parsed, again.parse_cache_hits) == (1, 6, 1, 0)
    store = Store(str(tmp_path / "db"))
    active = store.pointer.active()
    assert active is not None
    ledger = store.ledger.columns(
        store.chunks.suffix_of(active.chunk_table), ["path", "format", "parser_fingerprint"]
    ).to_pylist()
    by_format = {r["format"]: r["parser_fingerprint"] for r in ledger}
    from parsers import parser_fingerprints

    assert by_format == {
        f: parser_fingerprints(settings.parse).of(f) for f in by_format
    }  # each document carries its own format's fingerprint
    # A third run with nothing changed does nothing: the vectorised plan agrees.
    third = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert (third.rechunked, third.unchanged, third.parsed) == (0, 7, 0)


def test_verify_flags_a_document_failed_as_empty_whose_parse_has_text(
    corpus: Path, tmp_path: Path
) -> None:
    """The parse cache is read under the document's own format's fingerprint: a
    document recorded as `empty` whose cached parse has text is a violation."""
    from dataclasses import replace

    from corpusflow.verify import nothing_lost
    from storage.records import DocStatus

    settings = _settings(tmp_path / "db")
    RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert nothing_lost(settings, str(corpus)).ok
    store = Store(str(tmp_path / "db"))
    active = store.pointer.active()
    assert active is not None
    suffix = store.chunks.suffix_of(active.chunk_table)
    row = next(r for r in store.ledger.all(suffix).values() if r.path == "release_notes.md")
    store.ledger.upsert(
        suffix, [replace(row, status=DocStatus.FAILED, error_category="empty", chunk_count=0)]
    )
    report = nothing_lost(settings, str(corpus))
    assert "release_notes.md: failed as empty although its parse produced text" in report.violations


def test_a_terminal_failure_is_tried_again_once_when_its_judge_changes(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused files stay refused while nothing that refused them changed, and are tried
    once more when it does: a raised size limit indexes the file it refused; a release
    that changes a parser retries an unreadable file once, then leaves it alone again."""

    (corpus / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8)
    limit = 50_000 / 2**20  # the 73 kB scan is too large, every other sample is smaller
    settings = _settings(tmp_path / "db", source={"max_file_size_mb": limit})
    first = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert (first.new, first.failed) == (8, 2)  # the scan: too large; the blob: unsupported
    again = RefreshEngine(str(corpus), settings).refresh(InProcessExecutor())
    assert (again.retried, again.failed, again.parsed, again.unchanged) == (0, 0, 0, 8)

    raised = _settings(tmp_path / "db", source={"max_file_size_mb": 100})
    more = RefreshEngine(str(corpus), raised).refresh(InProcessExecutor())
    # the scan refused for its size is indexed; the blob is tried once more, refused again
    assert (more.retried, more.failed, more.unchanged) == (2, 1, 6)
    store = Store(str(tmp_path / "db"))
    suffix = store.chunks.suffix_of(store.pointer.active().chunk_table)  # type: ignore[union-attr]
    status = {
        r["path"]: r["status"] for r in store.ledger.columns(suffix, ["path", "status"]).to_pylist()
    }
    assert status["scanned_incident_report.pdf"] == "indexed"
    assert status["blob.bin"] == "failed"
    assert RefreshEngine(str(corpus), raised).refresh(InProcessExecutor()).retried == 0

    _bump(monkeypatch, "md", "version")
    release = RefreshEngine(str(corpus), raised).refresh(InProcessExecutor())
    assert (release.retried, release.failed, release.rechunked) == (1, 1, 1)
    assert RefreshEngine(str(corpus), raised).refresh(InProcessExecutor()).retried == 0

    # A release that reads more files of a format (FormatSpec.reads) retries the
    # failures once and parses no indexed document again.
    _bump(monkeypatch, "docx", "reads")
    wider = RefreshEngine(str(corpus), raised).refresh(InProcessExecutor())
    assert (wider.retried, wider.failed, wider.rechunked, wider.unchanged) == (1, 1, 0, 7)
    assert RefreshEngine(str(corpus), raised).refresh(InProcessExecutor()).retried == 0


def test_a_quarantined_document_waits_for_new_bytes_or_retry_failed(tmp_path: Path) -> None:
    """run.quarantine_after failures in a row quarantine a document: the nightly refresh
    leaves it alone while its bytes stay the same; ``retry-failed`` (the operator's "I
    fixed it") takes it again."""
    from embedding import resolve_model
    from storage.records import DocStatus

    src = tmp_path / "src"
    src.mkdir()
    (src / "note.md").write_text("# Note\n\nA document that parses.\n", encoding="utf-8")
    (src / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip archive")
    settings = _settings(tmp_path / "db", run={"quarantine_after": 1})

    def status() -> str:
        suffix = resolve_model(settings.embed).table_suffix
        rows = Store(str(tmp_path / "db")).ledger.all(suffix).values()
        return next(r.status for r in rows if r.path == "broken.docx")

    first = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    assert (first.new, first.failed) == (2, 1)
    assert status() == DocStatus.QUARANTINED

    nightly = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    assert (nightly.retried, nightly.failed, nightly.new, nightly.changed) == (0, 0, 0, 0)

    retry = RefreshEngine(str(src), settings, only_failed=True, kind="retry-failed").refresh(
        InProcessExecutor()
    )
    assert (retry.retried, retry.failed) == (1, 1)  # taken again, still broken
    assert status() == DocStatus.QUARANTINED
