"""The executor conformance suite: what every executor of a refresh must do.

An executor (corpusflow.executors) passes when, driven by the real engine on a small
real corpus with a real LanceDB in a temporary directory:

- every document submitted is done once, and nothing is lost: each document is submitted
  exactly once and ends indexed (its chunks in the table, as many as its ledger row
  says) or failed with its category in the ledger;
- results arrive in completion order: a document that finishes last is committed last,
  after the documents submitted behind it;
- a batch write is tried exactly ``run.task_retries + 1`` times on a transient failure
  (the one policy, corpusflow.retry; nothing under it retries again), then split so only
  the documents that fail alone are failed, with category ``embedding``;
- a document failing transiently is tried ``run.task_retries + 1`` times, one failing
  terminally once; both are failed with a category.

Use it like Haystack's document-store suite: subclass ``ExecutorConformance`` in a test
module, implement ``make_executor`` (and ``run`` when the executor needs a context, such
as a flow run), and set ``documents_in_this_process = False`` when documents run in other
processes (fault injection into a document's work then cannot reach them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from common.errors import Category
from common.settings import Settings, load_settings
from corpusflow.engine import RefreshEngine
from corpusflow.job import Job
from storage import Store

GOOD = [f"a_{i}.md" for i in range(5)]
BROKEN = "z_broken.docx"  # sorted last: never the document held back
RETRIES = 2


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(GOOD):
        (folder / name).write_text(
            f"# Turbine note {i}\n\nInspection {i} of turbine T-{i:03d}: the blade pitch "
            f"bearing {i} was greased and the yaw brake pads measured {10 + i} mm.\n",
            encoding="utf-8",
        )
    (folder / BROKEN).write_bytes(b"PK\x03\x04 this is not a zip archive at all")
    return folder


class Recorder:
    """Wraps an executor: records what is submitted, and can hold one document's result
    back until every other document's has arrived."""

    def __init__(self, inner: Any, hold_first: bool = False, documents: int = 0) -> None:
        self.inner = inner
        self.hold_first, self.documents = hold_first, documents
        self.lock = threading.Lock()
        self.submitted: list[str] = []
        self.batches: list[list[str]] = []
        self.held: tuple[Future[Any], Future[Any]] | None = None
        self.others_done = 0

    def __getattr__(self, name: str) -> Any:  # start, flush, parses_here, name
        return getattr(self.inner, name)

    def submit(self, fn: Callable[[], Any], /) -> Future[Any]:
        kind = getattr(fn, "kind", "")
        if kind == "batch":
            self.batches.append([p.item.file.rel_path for p in fn.batch])  # type: ignore[attr-defined]
            inner: Future[Any] = self.inner.submit(fn)
            return inner
        with self.lock:
            self.submitted.append(fn.item.file.rel_path)  # type: ignore[attr-defined]
            first = len(self.submitted) == 1
        inner = self.inner.submit(fn)
        if not self.hold_first:
            return inner
        outer: Future[Any] = Future()
        if first:
            self.held = (inner, outer)
            inner.add_done_callback(lambda _: self._release())
        else:

            def other_done(f: Future[Any]) -> None:
                _settle(outer, f)
                with self.lock:
                    self.others_done += 1
                self._release()

            inner.add_done_callback(other_done)
        return outer

    def _release(self) -> None:
        with self.lock:
            held = self.held
            ready = (
                held is not None
                and held[0].done()
                and not held[1].done()
                and self.others_done == self.documents - 1
            )
        if ready and held is not None:
            _settle(held[1], held[0])


def _settle(outer: Future[Any], inner: Future[Any]) -> None:
    error = inner.exception()
    if error is not None:
        outer.set_exception(error)
    else:
        outer.set_result(inner.result())


class ExecutorConformance:
    """Subclass in a test module and implement ``make_executor``."""

    documents_in_this_process = True

    def make_executor(self) -> Any:
        raise NotImplementedError

    def run(self, engine: RefreshEngine, executor: Any) -> dict[str, Any]:
        """Run a refresh with ``executor`` (override to give it a context)."""
        return engine.refresh(executor).to_dict()

    def settings(self, tmp_path: Path, batch: int = 1, **run: Any) -> Settings:
        overrides: dict[str, Any] = {
            "storage": {"db": str(tmp_path / "db"), "write_batch_docs": batch},
            "parse": {"workers": 2},
            "run": {
                "progress": False,
                "task_retries": RETRIES,
                "retry_delay_s": 0,
                "max_in_flight": 20,
                **run,
            },
        }
        return load_settings(None, overrides)

    # -- the contract -------------------------------------------------------------
    def test_every_document_is_done_once_and_nothing_is_lost(self, tmp_path: Path) -> None:
        corpus = write_corpus(tmp_path / "corpus")
        settings = self.settings(tmp_path)
        executor = Recorder(self.make_executor())
        report = self.run(RefreshEngine(str(corpus), settings), executor)
        assert sorted(executor.submitted) == sorted([*GOOD, BROKEN])  # each once
        assert (report["new"], report["failed"]) == (len(GOOD) + 1, 1)
        committed = [path for batch in executor.batches for path in batch]
        assert sorted(committed) == GOOD  # each good document committed once
        chunks, ledger = _tables(settings)
        assert set(chunks) == set(GOOD)
        for path in GOOD:
            assert ledger[path]["status"] == "indexed"
            assert ledger[path]["chunk_count"] == chunks[path] > 0
        assert ledger[BROKEN]["status"] == "failed"
        assert ledger[BROKEN]["error_category"] in {c.value for c in Category}
        assert ledger[BROKEN]["error_category"] not in ("internal", "embedding")

    def test_results_arrive_in_completion_order(self, tmp_path: Path) -> None:
        corpus = write_corpus(tmp_path / "corpus")
        settings = self.settings(tmp_path)
        executor = Recorder(self.make_executor(), hold_first=True, documents=len(GOOD) + 1)
        report = self.run(RefreshEngine(str(corpus), settings), executor)
        assert report["failed"] == 1
        first = executor.submitted[0]
        assert first in GOOD
        # Held back until every other document had finished: committed last.
        assert executor.batches[-1] == [first]
        assert sorted(p for b in executor.batches[:-1] for p in b) == sorted(set(GOOD) - {first})

    def test_a_batch_write_is_retried_per_the_one_policy(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        corpus = write_corpus(tmp_path / "corpus")
        settings = self.settings(tmp_path)
        real = Job.write
        calls: list[tuple[str, ...]] = []

        def flaky(job: Job, batch: list[Any], embedder: Any = None) -> Any:
            paths = tuple(p.item.file.rel_path for p in batch)
            calls.append(paths)
            if paths == (GOOD[1],) or calls.count(paths) <= RETRIES:
                raise TimeoutError("the device timed out")  # transient
            return real(job, batch, embedder)

        monkeypatch.setattr(Job, "write", flaky)
        report = self.run(RefreshEngine(str(corpus), settings), self.make_executor())
        # Every batch failed twice and then succeeded on the third and last attempt,
        # except GOOD[1]'s, which failed all three: exactly task_retries + 1 attempts each.
        for path in GOOD:
            assert calls.count((path,)) == RETRIES + 1, calls
        assert len(calls) == len(GOOD) * (RETRIES + 1)
        assert report["failed"] == 2
        _, ledger = _tables(settings)
        assert ledger[GOOD[1]]["status"] == "failed"
        assert ledger[GOOD[1]]["error_category"] == "embedding"
        assert "TimeoutError" in ledger[GOOD[1]]["error_message"]
        assert all(ledger[p]["status"] == "indexed" for p in GOOD if p != GOOD[1])

    def test_a_failed_batch_is_split_and_each_part_retried_once_per_policy(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        corpus = write_corpus(tmp_path / "corpus")
        settings = self.settings(tmp_path, batch=len(GOOD) + 1)  # one batch: every good one
        calls: list[int] = []

        def down(job: Job, batch: list[Any], embedder: Any = None) -> Any:
            calls.append(len(batch))
            raise TimeoutError("the device timed out")

        monkeypatch.setattr(Job, "write", down)
        report = self.run(RefreshEngine(str(corpus), settings), self.make_executor())
        # The batch: 3 attempts; then each document alone: 3 attempts each. No more.
        assert calls == [len(GOOD)] * (RETRIES + 1) + [1] * (len(GOOD) * (RETRIES + 1))
        assert report["failed"] == len(GOOD) + 1
        _, ledger = _tables(settings)
        assert {ledger[p]["error_category"] for p in GOOD} == {"embedding"}

    def test_a_transient_document_failure_is_retried_per_the_one_policy(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if not self.documents_in_this_process:
            pytest.skip("documents run in other processes: no fault injection there")
        import corpusflow.kit

        corpus = write_corpus(tmp_path / "corpus")
        settings = self.settings(tmp_path)
        real = corpusflow.kit.parse_document
        calls: list[str] = []

        def flaky(item: Any, *args: Any) -> Any:
            calls.append(item.file.rel_path)
            if item.file.rel_path == GOOD[2]:
                raise ConnectionResetError("the source went away")  # transient
            return real(item, *args)

        monkeypatch.setattr(corpusflow.kit, "parse_document", flaky)
        report = self.run(RefreshEngine(str(corpus), settings), self.make_executor())
        assert calls.count(GOOD[2]) == RETRIES + 1
        assert calls.count(BROKEN) == 1  # a terminal failure is not retried
        assert all(calls.count(p) == 1 for p in GOOD if p != GOOD[2])
        assert report["failed"] == 2
        _, ledger = _tables(settings)
        assert ledger[GOOD[2]]["status"] == "failed"
        assert ledger[GOOD[2]]["error_category"] == Category.INTERNAL.value
        assert "ConnectionResetError" in ledger[GOOD[2]]["error_message"]


def _tables(settings: Settings) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """(chunk rows per path in the active table, ledger row per path)."""
    from embedding import resolve_model

    store = Store.from_settings(settings.storage)
    suffix = resolve_model(settings.embed).table_suffix
    chunks: dict[str, int] = {}
    table = store.chunks.name(suffix)
    if store.exists(table):  # nothing committed: no table
        rows = store.read_columns(table, ["chunk_id", "path"]).to_pylist()
        assert len({r["chunk_id"] for r in rows}) == len(rows)  # no chunk twice
        for r in rows:
            chunks[r["path"]] = chunks.get(r["path"], 0) + 1
    columns = ["path", "status", "error_category", "error_message", "chunk_count"]
    ledger = {r["path"]: r for r in store.ledger.columns(suffix, columns).to_pylist()}
    return chunks, ledger
