"""Where a refresh's work runs: the contract, the in-process executor, and the choice.

The engine hands an executor two kinds of work, each a picklable callable that takes
no arguments and applies the one retry policy itself (corpusflow.retry):

- ``ProcessDocument``: parse and chunk one document (``kind = "document"``);
- ``WriteBatch``: embed and commit a batch (``kind = "batch"``); the engine waits for it.

An executor is anything with a concurrent.futures-style ``submit(work) -> Future``
(a ``ThreadPoolExecutor`` is one); it may also have ``start(job, stack)`` to set itself
up for a run, ``flush()`` (called before the engine waits, for executors that buffer
work) and ``parses_here`` (False when documents run in other processes, which then build
their own kit from a ``KitRecipe``). ``corpusflow.testing.executors`` is the conformance
suite every executor passes. This module is the only one outside ``flows/`` that knows
which orchestrators exist (``choose``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from common.settings import Settings
from corpusflow import retry
from corpusflow.fingerprints import Fingerprints
from corpusflow.kit import KitRecipe, StageKit, process_document
from corpusflow.parse_chunk import Processed
from corpusflow.plan import WorkItem
from corpusflow.writes import BatchWritten
from embedding import Embedder
from sources import Source

if TYPE_CHECKING:
    from corpusflow.job import Job


@dataclass(slots=True)
class ProcessDocument:
    """Parse (isolated, or from the parse cache) and chunk one document."""

    kind: ClassVar[str] = "document"
    item: WorkItem
    source: Source
    settings: Settings
    fps: Fingerprints
    kit: StageKit | KitRecipe

    @property
    def name(self) -> str:
        return f"parse-{self.item.file.rel_path}"

    def __call__(self) -> Processed:
        return retry.call(
            self.settings.run,
            process_document,
            self.item,
            self.source,
            self.settings,
            self.fps,
            self.kit.resolve(),
        )

    def outcome(self) -> Processed | Exception:
        """The document, or the error that stopped it (never raises)."""
        try:
            return self()
        except Exception as exc:
            return exc


@dataclass(slots=True)
class WriteBatch:
    """Embed (with the job's embedder, or ``embedder``) and commit a batch."""

    kind: ClassVar[str] = "batch"
    label: str
    batch: list[Processed]
    job: Job
    embedder: Embedder | None = None

    @property
    def name(self) -> str:
        return f"embed-write-batch-{self.label}"

    def __call__(self) -> BatchWritten:
        return retry.call(self.job.settings.run, self.job.write, self.batch, self.embedder)


Work = ProcessDocument | WriteBatch


class Executor(Protocol):
    """Runs work; see the module's docstring for the optional ``start``, ``flush`` and
    ``parses_here``."""

    def submit(self, fn: Callable[[], Any], /) -> Future[Any]: ...


class InProcessExecutor:
    """Documents on this process's threads (one per parser child), batches in the
    calling thread; no orchestrator."""

    name = "in-process"
    parses_here = True

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None

    def start(self, job: Job, stack: ExitStack) -> None:
        workers = job.settings.parse.workers
        self.pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers))

    def submit(self, fn: Callable[[], Any], /) -> Future[Any]:
        if getattr(fn, "kind", "") == "batch" or self.pool is None:
            done: Future[Any] = Future()
            try:
                done.set_result(fn())
            except Exception as exc:
                done.set_exception(exc)
            return done
        return self.pool.submit(fn)


def parses_here(settings: Settings) -> bool:
    """Whether a run with these settings parses in this process (not on a cluster)."""
    return settings.run.task_runner != "dask"
