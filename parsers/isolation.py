"""Parse untrusted files in killable child processes.

Each worker is a long-lived child process (spawned, so no parent state leaks in)
that parses one file at a time. The parent waits with a wall-clock deadline and
samples the child's resident memory; a child that runs past the deadline or
over the memory cap is killed and the document gets category ``timeout`` or
``out_of_memory``; a child that dies (segfault, abort, OOM killer) gives
``crashed``. A fresh worker replaces a killed one, so the next file still parses.

``ParserPool(settings, target="package.module:function")`` runs another parse
function in the children instead of ``parsers.registry.parse_file`` (same
signature: ``(path, settings, metadata) -> ParsedDocument``). It exists for
fault injection in tests (a target that aborts, hangs or leaks) and for
wrapping the parser; the function must be importable by name in a freshly
spawned interpreter. ``warm_up=False`` skips importing the parser libraries before
the first job, for a target that never calls the real parser.

Every child dies with the pool's process, even a SIGKILLed one, and so does what the
child starts (LibreOffice): see ``common.lifeline``. The memory cap counts the
child's whole process tree.

``keep_warm(seconds)`` lets a process that runs many refreshes one after another (the
test session; a long-lived process running flows in process) hand a closed pool's
children to its next pool with the same settings, target, environment and working
directory, instead of spawning new ones that import the parser libraries again (~6 s of
CPU each). Off by default: a closed pool stops its children.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import multiprocessing as mp
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

from common import lifeline
from common.settings import ParseSettings
from parsers.errors import Category, ParseError
from parsers.models import ParsedDocument, ParseWarning
from parsers.pages import (
    KILLED,
    SOURCE,
    PageOutcome,
    batch_ranges,
    bundle_folder,
    content_key,
    is_pdf,
    merge_parts,
    page_deadline,
    range_deadline,
    remove_page_bundles,
    splice_pages,
    split_range,
    write_bundle_json,
)
from parsers.pdf.headings import RangeHeadings

log = logging.getLogger(__name__)

_POLL_S = 0.05
_STARTUP_TIMEOUT_S = 180.0
DEFAULT_TARGET = "parsers.registry:parse_file"


def _resolve_target(target: str) -> Callable[..., ParsedDocument]:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"parse target must be 'module:function', got {target!r}")
    func = getattr(importlib.import_module(module_name), attr)
    if not callable(func):
        raise TypeError(f"parse target {target!r} is not callable")
    return cast(Callable[..., ParsedDocument], func)


def _child_main(
    conn: Connection,
    settings_json: str,
    target: str = DEFAULT_TARGET,
    tmpdir: str | None = None,
    parent_pid: int = 0,
    tags: str = "",
    warm: bool = True,
) -> None:
    """Worker loop: receive a path, send back ('ok', json) or ('err', category, message)."""
    if parent_pid:
        # Dies with the pool's process even when that one is SIGKILLed (an OOM killer):
        # while importing or parsing it would not notice its pipe's EOF for a long time.
        lifeline.die_with_parent(parent_pid)
        # What the parser starts and orphans (soffice's launcher forks soffice.bin) stays
        # in this tree, where the memory cap counts it and a kill finds it.
        lifeline.adopt_orphans()
    if tags:  # inherited by soffice & co., whom the reapers find by it once this is gone
        os.environ[lifeline.TAG_ENV] = tags
    # The parent owns Ctrl-C; the child dies with it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if tmpdir:  # the child's and its descendants' temp files: removed with the child
        os.environ["TMPDIR"] = tmpdir
        tempfile.tempdir = tmpdir
    parse_file = _resolve_target(target)
    settings = ParseSettings.model_validate_json(settings_json)
    try:
        if warm:
            from parsers.registry import warm_up

            warm_up(settings)
    except Exception as exc:  # a broken install shows up on the first job instead
        warm_error = f"warm-up failed: {exc}"
    else:
        warm_error = ""
    if settings.nice and hasattr(os, "nice"):
        # Parsing runs ahead of embedding within the in-flight bound; when both want
        # the CPU, the embedder in the flow process (the slower stage) goes first.
        # What the child starts (soffice, OCR threads) inherits it. Set after the
        # imports, which are start-up, not parsing: a nice-10 process weighs 110 to a
        # nice-0 one's 1024, so beside a dozen busy processes (a loaded CI runner) it
        # gets under 1% of a core, and children failed with "parser process did not
        # start within 180s" on a machine at load 20.
        os.nice(settings.nice)
    conn.send(("ready", warm_error))
    from parsers.decrypt import DecryptedCopies

    decrypted = DecryptedCopies()
    while True:
        try:
            job = conn.recv()
        except (EOFError, KeyboardInterrupt):
            job = None
        if job is None:
            # Nothing is left to flush (every result went back), and an orderly exit
            # runs the parser libraries' teardown (thread pools, model sessions) for
            # seconds, which the pool would wait out and then kill anyway.
            os._exit(0)
        path, metadata, *rest = job
        task = rest[0] if rest else None
        try:
            # A password the operator configured for this document (parse.passwords):
            # its jobs read a decrypted copy in this child's scratch folder.
            path = str(decrypted.path_for(Path(path), rest[1] if len(rest) > 1 else None))
            if task is None:
                # No name holds the document: it is freed once its JSON is made, before
                # that is pickled, and nothing of it stays while the next job parses
                # (~35 MiB for a 1,000-page PDF; docs/benchmarks.md, "A 1,000-page PDF").
                conn.send(("ok", parse_file(Path(path), settings, metadata).to_json()))
            else:  # a page job of page isolation (parsers.pages)
                from parsers.pages import run_task

                conn.send(("ok", *run_task(task, Path(path), settings, metadata, parse_file)))
        except ParseError as exc:
            conn.send(("err", exc.category.value, exc.message))
        except MemoryError:
            conn.send(("err", Category.OUT_OF_MEMORY.value, "parser ran out of memory"))
        except Exception as exc:
            conn.send(("err", Category.CORRUPT.value, f"{type(exc).__name__}: {exc}"[:2000]))


_SCRATCH = "corpusflow-parser-"


def _remove_orphans() -> int:
    """Remove the scratch folders of parser pools whose process is gone (a run killed
    with SIGKILL or by the OOM killer never runs its clean-up); returns how many."""
    import psutil

    removed = 0
    for path in Path(tempfile.gettempdir()).glob(f"{_SCRATCH}*-*"):
        owner = path.name.removeprefix(_SCRATCH).split("-", 1)[0]
        if not owner.isdigit() or psutil.pid_exists(int(owner)):
            continue  # a live run's, or not named by this version
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants (0 when it is gone):
    what the memory cap counts."""
    import psutil

    try:
        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return int(total)
    except psutil.Error:
        return 0


class _Worker:
    def __init__(self, ctx: Any, settings_json: str, target: str, warm: bool = True) -> None:
        self.conn, child_conn = ctx.Pipe()
        # Everything the child and what it starts write to the temp directory (docling's
        # LibreOffice profile and converted copy, rendered pages) goes in one folder that
        # is removed with the child: a conversion killed at its deadline never runs its own
        # clean-up, and a night of killed legacy files would otherwise fill /tmp.
        # The folder is named after this process, so a run killed before it could remove
        # its children's folders has them removed by the next pool (``_remove_orphans``).
        self.tmpdir = tempfile.mkdtemp(prefix=f"{_SCRATCH}{os.getpid()}-")
        # This worker's own tag, beside the run's: its descendants that outlive it (an
        # soffice whose parser child was killed) are found by it (``kill``).
        self.tag = f"w{os.getpid()}-{id(self):x}-{time.monotonic_ns():x}"
        self.proc = ctx.Process(
            target=_child_main,
            args=(
                child_conn,
                settings_json,
                target,
                self.tmpdir,
                os.getpid(),
                lifeline.child_tags(self.tag),
                warm,
            ),
            daemon=True,
            name="corpusflow-parser",
        )
        # Forked by the long-lived spawn thread: the child's parent-death signal is tied
        # to the thread that started it, and the caller may be a short-lived task thread.
        lifeline.spawn(self.proc.start)
        child_conn.close()
        self.ready = False
        self.key: tuple[Any, ...] = ()  # what it was spawned with (``ParserPool._key``)
        # Jobs it has answered: a child that has parsed files holds what they left
        # (models loaded on first use, allocator arenas), which counts against the cap.
        self.jobs = 0

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the child has imported its parsers (not counted in a job's deadline)."""
        if self.ready:
            return
        if not self.conn.poll(timeout_s):
            self.kill()
            raise ParseError(
                Category.CRASHED, f"parser process did not start within {timeout_s:g}s"
            )
        try:
            self.conn.recv()
        except (EOFError, OSError) as exc:
            self.kill()
            raise ParseError(Category.CRASHED, "parser process died while starting") from exc
        self.ready = True

    def alive(self) -> bool:
        return bool(self.proc.is_alive())

    def rss_bytes(self) -> int:
        return tree_rss(self.proc.pid)

    def kill(self) -> None:
        """Kill the child and everything it started (a LibreOffice ``soffice`` that
        docling runs in its own session would otherwise outlive it)."""
        import psutil

        descendants: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error, ValueError):
            descendants = psutil.Process(self.proc.pid).children(recursive=True)
        with contextlib.suppress(Exception):
            self.proc.kill()
        for proc in descendants:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        self.proc.join(timeout=5)
        # Those it left behind when it died first (killed from outside, crashed): they
        # were reparented to init, out of reach of ``children``, but carry its tag.
        lifeline.kill_tagged(self.tag)
        with contextlib.suppress(Exception):
            self.conn.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def stop(self) -> None:
        if not self.ready:
            self.kill()  # never given a job: nothing to finish, no teardown to wait for
            return
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


_spares_lock = threading.Lock()
_spares: list[tuple[tuple[Any, ...], float, _Worker]] = []  # (key, expiry, worker)
_keep_warm_s = 0.0
_volatile_env: frozenset[str] = frozenset()
_MAX_SPARES = 2  # each holds docling's imports (~0.3-0.7 GiB)


def keep_warm(seconds: float, ignore_env: Iterable[str] | None = None) -> float:
    """Keep the children of a closed pool for ``seconds`` (0: off, the default) for the
    next pool of this process whose settings, target, environment and working directory
    are the same; at most two are kept, the oldest stopped first. Spares are stopped when
    switched off, when found expired (at a pool's start or close) and at exit. Returns
    the previous value.

    ``ignore_env``: environment variables that change between pools but not what a child
    does (pytest sets ``PYTEST_CURRENT_TEST`` per test: counted, it made every test's pool
    spawn a new child); ``None`` keeps the names given before."""
    global _keep_warm_s, _volatile_env
    with _spares_lock:
        previous, _keep_warm_s = _keep_warm_s, max(0.0, float(seconds))
        if ignore_env is not None:
            _volatile_env = frozenset(ignore_env)
        stale = _drop_spares(lambda key, expiry: _keep_warm_s == 0 or expiry < time.monotonic())
    for worker in stale:
        worker.stop()
    return previous


def _drop_spares(drop: Callable[[tuple[Any, ...], float], bool]) -> list[_Worker]:
    """Remove (under ``_spares_lock``) and return the spares ``drop`` selects."""
    dropped = [w for key, expiry, w in _spares if drop(key, expiry)]
    _spares[:] = [entry for entry in _spares if entry[2] not in dropped]
    return dropped


def _take_spare(key: tuple[Any, ...]) -> _Worker | None:
    now = time.monotonic()
    found: _Worker | None = None
    with _spares_lock:
        stale = _drop_spares(lambda k, expiry: expiry < now)
        for i, (k, _expiry, _worker) in enumerate(_spares):
            if k == key:
                found = _spares.pop(i)[2]
                break
    for worker in stale:
        worker.stop()
    if found is not None and not found.alive():
        found.kill()
        return None
    return found


def _park(worker: _Worker) -> bool:
    """Keep ``worker`` as a spare; False when keeping is off, or it is dead or unkeyed."""
    if _keep_warm_s <= 0 or not worker.key or not worker.alive():
        return False
    now = time.monotonic()
    with _spares_lock:
        _spares.append((worker.key, now + _keep_warm_s, worker))
        stale = _drop_spares(lambda key, expiry: expiry < now)
        while len(_spares) > _MAX_SPARES:
            stale.append(_spares.pop(0)[2])
    for old in stale:
        old.stop()
    return True


@atexit.register
def _stop_spares() -> None:
    with _spares_lock:
        spares = _drop_spares(lambda key, expiry: True)
    for worker in spares:
        worker.stop()


class ParserPool:
    """A fixed number of isolated parser processes, safe to call from many threads."""

    def __init__(
        self, settings: ParseSettings, target: str = DEFAULT_TARGET, warm_up: bool = True
    ) -> None:
        _module, sep, attr = target.partition(":")
        if not sep or not attr:
            raise ValueError(f"parse target must be 'module:function', got {target!r}")
        self.target = target
        self.warm_up = warm_up
        self.settings = settings
        self._settings_json = settings.model_dump_json()
        self._ctx = mp.get_context("spawn")
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        # The password of the document the calling thread parses (``parse``'s and
        # ``parse_pages``' ``password``): every job of that call carries it to the child.
        self._password = threading.local()
        for _ in range(settings.workers):
            self._idle.put(None)  # started lazily on first use
        if removed := _remove_orphans():
            log.info("removed %d parser scratch folders left by killed runs", removed)

    def __enter__(self) -> ParserPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if worker is not None and not _park(worker):
                worker.stop()

    def _key(self) -> tuple[Any, ...]:
        """What a spare child must share with this pool to serve it: the parse settings,
        the target, and what the child inherited when it was spawned."""
        return (
            self._settings_json,
            self.target,
            self.warm_up,
            os.getcwd(),
            tempfile.gettempdir(),
            tuple(sorted((k, v) for k, v in os.environ.items() if k not in _volatile_env)),
        )

    def _new_worker(self) -> _Worker:
        """A kept spare that serves this pool, else a fresh child."""
        if _keep_warm_s > 0 and (spare := _take_spare(self._key())) is not None:
            return spare
        return self._fresh_worker()

    def _fresh_worker(self) -> _Worker:
        """A child that has parsed nothing yet (never a kept spare, which may have)."""
        worker = _Worker(self._ctx, self._settings_json, self.target, self.warm_up)
        if _keep_warm_s > 0:
            worker.key = self._key()
        return worker

    def start(self, n: int) -> None:
        """Start up to ``n`` parser processes now, without waiting for them: they import
        their libraries while the caller does other work (starting an orchestrator).
        The others still start on first use."""
        started: list[_Worker | None] = []
        with self._lock:
            if self._closed:
                return
            while len(started) < n:
                try:
                    worker = self._idle.get_nowait()
                except queue.Empty:
                    break
                if worker is None:
                    worker = self._new_worker()
                started.append(worker)
        for worker in started:
            self._idle.put(worker)

    def parse(
        self,
        path: str | Path,
        metadata: dict[str, Any] | None = None,
        *,
        password: str | None = None,
    ) -> ParsedDocument:
        """Parse one file in a child process; raises ParseError on any failure.

        A PDF whose parse crashed, timed out or ran out of memory is parsed again in page
        ranges (``parse.page_isolation``, ``parsers.pages``): it fails only when no page
        could be read. ``password`` opens an encrypted PDF or Office file
        (``parsers.decrypt``)."""
        if self._closed:
            raise RuntimeError("ParserPool is closed")
        slot: list[_Worker | None] = [self._idle.get()]
        self._password.value = password
        try:
            settings = self.settings
            batched = settings.page_batch > 0 and is_pdf(Path(path))
            if not batched:
                try:
                    return self._job(slot, str(path), metadata or {})
                except ParseError as exc:
                    if not (
                        settings.page_isolation and exc.category in KILLED and is_pdf(Path(path))
                    ):
                        raise
                    first_error: ParseError | None = exc
            else:
                first_error = None
            return self._isolate(slot, Path(path), metadata or {}, first_error)
        finally:
            self._password.value = None
            self._idle.put(slot[0])

    def parse_pages(
        self,
        path: str | Path,
        previous: ParsedDocument,
        metadata: dict[str, Any] | None = None,
        *,
        password: str | None = None,
    ) -> ParsedDocument:
        """Parse again only the pages ``previous`` (a parse of the same PDF, with pages
        missing) lists as missing, and splice what is read into it (a page retry,
        ``parsers.pages.splice_pages``): each page is a job in the child with a page's
        deadline, then, where it fails, the same fallback chain as page isolation (text
        layer, OCR); a page nothing reads stays missing, with a fresh repro bundle, and
        the bundles of pages read now are removed. No other page is parsed. Raises
        ParseError only when the file is not a PDF."""
        path = Path(path)
        retried = sorted(set(previous.missing_pages))
        if not retried:
            return previous
        if not is_pdf(path):
            raise ParseError(Category.UNSUPPORTED, "not a PDF: no pages to parse again")
        if self._closed:
            raise RuntimeError("ParserPool is closed")
        metadata = metadata or {}
        settings = self.settings
        count = previous.page_count
        slot: list[_Worker | None] = [self._idle.get()]
        self._password.value = password
        try:
            outcome = PageOutcome()
            bad: list[int] = []
            for page in retried:
                task = {"kind": "range", "first": page, "last": page}
                try:
                    parsed, _found = self._job(
                        slot, str(path), metadata, task, range_deadline(settings, 1, count)
                    )
                except ParseError as exc:
                    if exc.category == Category.EMPTY:  # nothing on it: read, not lost
                        outcome.blank.append(page)
                        continue
                    outcome.errors.setdefault(page, []).append(_error("structured", exc))
                    bad.append(page)
                    continue
                outcome.parts.append((page, parsed))
            for page in bad:
                self._rescue(slot, path, metadata, page, count, outcome)
            if outcome.missing and settings.repro_dir:
                self._bundles(slot, path, metadata, count, outcome)
        finally:
            self._password.value = None
            self._idle.put(slot[0])
        read = [p for p in retried if p not in outcome.missing]
        log.info("%s: page retry read %s, still missing %s", path.name, read, outcome.missing)
        if read and settings.repro_dir:
            remove_page_bundles(settings.repro_dir, content_key(path), read)
        from parsers.registry import _title

        return splice_pages(
            path, previous, outcome, retried, metadata, _title, settings.join_continued_tables
        )

    def _job(
        self,
        slot: list[_Worker | None],
        path: str,
        metadata: dict[str, Any],
        task: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One job on the worker held in ``slot`` (started, or replaced when dead)."""
        worker = slot[0]
        if worker is None or not worker.alive():
            worker = slot[0] = self._new_worker()
        used = worker.jobs > 0
        try:
            result, slot[0] = self._run(worker, path, metadata, task, timeout_s)
        except ParseError as exc:
            if exc.category != Category.OUT_OF_MEMORY or not used:
                raise
            # Over the cap in a child that had parsed other files: part of what it held
            # was theirs (OCR and layout models loaded once, freed memory not returned),
            # so the file is tried once more in a fresh child before it is called
            # out_of_memory (a 76 KB RTF was killed at 1582 MiB after ~340 files and
            # parsed in 0.58 GiB on its own). The killed child is replaced either way.
            log.info("%s: %s; trying again in a fresh parser process", path, exc.message)
            worker = slot[0] = self._fresh_worker()
            try:
                result, slot[0] = self._run(worker, path, metadata, task, timeout_s)
            except ParseError as again:
                if again.category != Category.OUT_OF_MEMORY:
                    raise
                raise ParseError(
                    again.category, f"{again.message} (also in a fresh parser process)"
                ) from exc
        return result

    def _isolate(
        self,
        slot: list[_Worker | None],
        path: Path,
        metadata: dict[str, Any],
        first_error: ParseError | None,
    ) -> ParsedDocument:
        """Parse a PDF in page ranges; see ``parsers.pages``. ``first_error``: why the
        whole-document parse failed (None: it was split by ``parse.page_batch``)."""
        settings = self.settings
        floor = page_deadline(settings)
        try:
            count = int(self._job(slot, str(path), metadata, {"kind": "count"}, floor))
        except ParseError as exc:
            if first_error is None:
                raise
            raise ParseError(
                first_error.category, f"{first_error.message}; page count failed: {exc.message}"
            ) from exc
        outcome = PageOutcome()
        if first_error is None:
            todo = batch_ranges(count, settings.page_batch)
            if len(todo) == 1:  # not over the batch size: a whole-document parse after all
                try:
                    return self._job(slot, str(path), metadata)
                except ParseError as exc:
                    if not (settings.page_isolation and exc.category in KILLED):
                        raise
                    first_error = exc
                    todo = split_range(1, count)
        else:
            todo = split_range(1, count)
        if first_error is not None:
            outcome.warnings.append(
                ParseWarning(
                    SOURCE,
                    f"whole-document parse failed ({first_error.category.value}: "
                    f"{first_error.message}); parsed again in page ranges",
                )
            )
            if count <= 1:
                todo = []
                outcome.errors[1] = [_error("structured", first_error)]
                bad = [1]
            else:
                bad = []
        else:
            bad = []
        log.info("%s: parsing %d pages in ranges %s", path.name, count, todo)
        # What the first range read as the body style, given to the later ones, so that
        # they judge headings against the same running text (parsers.pdf.headings).
        known = RangeHeadings()
        while todo:
            first, last = todo.pop(0)
            task = {"kind": "range", "first": first, "last": last, "headings": known.to_dict()}
            try:
                parsed, found = self._job(
                    slot,
                    str(path),
                    metadata,
                    task,
                    range_deadline(settings, last - first + 1, count),
                )
            except ParseError as exc:
                if exc.category == Category.EMPTY:  # nothing on these pages: read, not lost
                    outcome.blank += list(range(first, last + 1))
                    continue
                if first == last:
                    outcome.errors.setdefault(first, []).append(_error("structured", exc))
                    bad.append(first)
                    continue
                log.info("%s: pages %d-%d failed (%s)", path.name, first, last, exc)
                todo[:0] = split_range(first, last)
                continue
            outcome.parts.append((first, parsed))
            if found is not None:
                outcome.headings[first] = found
                if known.body is None:
                    known = RangeHeadings(body=found.body)
        for page in sorted(bad):
            self._rescue(slot, path, metadata, page, count, outcome)
        if outcome.missing and settings.repro_dir:
            self._bundles(slot, path, metadata, count, outcome)
        if not outcome.parts:
            category = first_error.category if first_error else Category.CORRUPT
            detail = first_error.message if first_error else "no page range could be parsed"
            raise ParseError(
                category, f"{detail}; page isolation read no page (missing {outcome.missing})"
            )
        from parsers.registry import _title

        return merge_parts(path, outcome, count, metadata, _title, settings.join_continued_tables)

    def _rescue(
        self,
        slot: list[_Worker | None],
        path: Path,
        metadata: dict[str, Any],
        page: int,
        count: int,
        outcome: PageOutcome,
    ) -> None:
        """Read one page the structured parser failed on: raw text layer, then OCR."""
        floor = page_deadline(self.settings)
        chain = ["text", "ocr"] if self.settings.ocr else ["text"]
        for kind in chain:
            try:
                parsed = self._job(slot, str(path), metadata, {"kind": kind, "page": page}, floor)
            except ParseError as exc:
                outcome.errors.setdefault(page, []).append(_error(kind, exc))
                continue
            backend = "pypdfium2 text layer" if kind == "text" else "OCR"
            first = outcome.errors.get(page, [{}])[0]
            structured = f"{first.get('category', '')}: {first.get('error', '')}"
            outcome.parts.append((page, parsed))
            outcome.degraded[page] = backend
            outcome.warnings.append(
                ParseWarning(
                    SOURCE,
                    f"degraded: the structured parser failed on this page ({structured}); "
                    f"read by the {backend} (plain text, no headings or tables)",
                    page,
                )
            )
            return
        outcome.missing.append(page)
        tried = "; ".join(f"{e['backend']}: {e['error']}" for e in outcome.errors.get(page, []))
        outcome.warnings.append(
            ParseWarning(SOURCE, f"missing: every backend failed ({tried})", page)
        )

    def _bundles(
        self,
        slot: list[_Worker | None],
        path: Path,
        metadata: dict[str, Any],
        count: int,
        outcome: PageOutcome,
    ) -> None:
        """A repro bundle per missing page under ``parse.repro_dir``: the page as a
        one-page PDF (extracted in the child) and a JSON of every backend's error."""
        folder = bundle_folder(self.settings.repro_dir, content_key(path))
        for page in outcome.missing:
            page_pdf = folder / f"page-{page:05d}.pdf"
            errors = list(outcome.errors.get(page, []))
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._job(
                    slot,
                    str(path),
                    metadata,
                    {"kind": "extract", "page": page, "out": str(page_pdf)},
                    page_deadline(self.settings),
                )
                saved = page_pdf.name
            except (ParseError, OSError) as exc:
                errors.append({"backend": "extract", "category": "", "error": str(exc)})
                saved = ""
            try:
                where = write_bundle_json(
                    folder, page, path, count, errors, self.settings, saved, metadata
                )
            except OSError as exc:
                log.warning("repro bundle for page %d of %s not written: %s", page, path, exc)
                continue
            outcome.warnings.append(ParseWarning(SOURCE, f"repro bundle: {where}", page))

    def _run(
        self,
        worker: _Worker,
        path: str,
        metadata: dict[str, Any],
        task: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[Any, _Worker | None]:
        limit = self.settings.memory_limit_mb * 1024 * 1024
        password = getattr(self._password, "value", None)
        job: tuple[Any, ...] = (path, metadata) if task is None else (path, metadata, task)
        if password:
            job = (path, metadata, task, password)
        try:
            worker.wait_ready(_STARTUP_TIMEOUT_S)
            worker.conn.send(job)
        except (BrokenPipeError, OSError):
            worker.kill()
            worker = _Worker(self._ctx, self._settings_json, self.target, self.warm_up)
            worker.wait_ready(_STARTUP_TIMEOUT_S)
            worker.conn.send(job)
        # The deadline starts once the job is handed over: worker start-up
        # (imports) is not charged to the document.
        timeout = self.settings.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        next_mem_check = 0.0
        while True:
            if worker.conn.poll(_POLL_S):
                try:
                    reply = worker.conn.recv()
                except (EOFError, OSError):
                    return self._crashed(worker)
                worker.jobs += 1
                if reply[0] == "ok":
                    if task is not None and task["kind"] in ("count", "extract"):
                        return reply[1], worker
                    parsed = ParsedDocument.from_json(reply[1])
                    if task is not None and task["kind"] == "range":
                        found = reply[2] if len(reply) > 2 and reply[2] else None
                        headings = RangeHeadings.from_dict(found) if found else None
                        return (parsed, headings), worker
                    return parsed, worker
                raise ParseError(reply[1], reply[2])
            if not worker.alive():
                return self._crashed(worker)
            now = time.monotonic()
            if now > deadline:
                worker.kill()
                raise ParseError(
                    Category.TIMEOUT,
                    f"parser exceeded {timeout:g}s wall-clock limit and was killed",
                )
            if now >= next_mem_check:
                next_mem_check = now + 0.2
                rss = worker.rss_bytes()
                if rss > limit:
                    worker.kill()
                    raise ParseError(
                        Category.OUT_OF_MEMORY,
                        f"parser used {rss / 2**20:.0f} MiB (limit "
                        f"{self.settings.memory_limit_mb} MiB) and was killed",
                    )

    def _crashed(self, worker: _Worker) -> tuple[Any, _Worker | None]:
        worker.proc.join(timeout=5)
        code = worker.proc.exitcode
        worker.kill()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            detail = f"parser process died from signal {name}"
        else:
            detail = f"parser process exited unexpectedly (exit code {code})"
        if code == -signal.SIGKILL:
            detail += " (the kernel's OOM killer sends SIGKILL)"
        raise ParseError(Category.CRASHED, detail)


def _error(backend: str, exc: ParseError) -> dict[str, str]:
    return {"backend": backend, "category": exc.category.value, "error": exc.message}
