"""The refresh flow: only new, changed, failed and deleted documents cost anything.

Thin by design: the refresh is ``corpusflow.engine.RefreshEngine``; this module adds
what Prefect is for. ``PrefectExecutor`` (an executor, see corpusflow.executors) runs
each document as a task run named after its path (failing with the document's error
category, so the UI shows what failed and why) and each embed+commit batch as a task
run, on the flow's threads or on a Dask cluster; the work itself applies the one retry
policy (corpusflow.retry), so Prefect does not retry task runs. The flow publishes
keyed artifacts (failed documents, held documents, run summary) and, while documents
are committed, the run's progress and ETA (flows.approval.ProgressArtifacts). A run that
the deletion guard would refuse, or that a budget would stop, pauses for an operator's
answer first (``run.approval``, flows.approval.ask_in_ui); a rejected one ends Cancelled.
``run_planned`` runs an engine the caller already planned in a flow run (the CLI: it
never asks).
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Cancelled, State

from common.errors import DocumentError, RetrievalCheckFailed
from common.settings import Settings
from corpusflow.approval import RunRejected
from corpusflow.engine import Gate, RefreshEngine
from corpusflow.executors import ProcessDocument, WriteBatch
from corpusflow.job import Job
from corpusflow.parse_chunk import Processed
from corpusflow.plan import WorkItem
from corpusflow.report import RunReport
from corpusflow.writes import BatchWritten
from embedding import Embedder
from flows.approval import ProgressArtifacts, artifact_key, ask_in_ui
from flows.scaleout import ClusterEmbedder, dask_task_runner

__all__ = [
    "Gate",
    "PrefectExecutor",
    "planned_refresh_flow",
    "refresh_flow",
    "run_planned",
    "run_refresh",
]


@task(task_run_name="{work.name}", cache_policy=NO_CACHE)
def parse_and_chunk(work: ProcessDocument) -> Processed:
    """Parse (isolated, or from the parse cache) and chunk one document, under the one
    retry policy (corpusflow.retry; Prefect does not retry the task run)."""
    return work()


@task(task_run_name="parse-{n}-documents-from-{first}", cache_policy=NO_CACHE)
def parse_group(works: list[ProcessDocument], first: str, n: int) -> list[Processed | Exception]:
    """Several documents in one task run (``run.documents_per_task``), each under the
    retry policy on its own; a failure is returned, not raised, and gets its own task run."""
    return [work.outcome() for work in works]


@task(task_run_name="parse-{item.file.rel_path}", cache_policy=NO_CACHE)
def failed_document(item: WorkItem, category: str, message: str) -> None:
    """The failed document of a grouped parse task, as a failed task run named by its
    path (the UI's view of a failure is the same as with one task per document)."""
    raise DocumentError(category, message)


@task(task_run_name="{work.name}", cache_policy=NO_CACHE)
def embed_and_write(work: WriteBatch) -> BatchWritten:
    """Embed and commit a batch under the one retry policy (corpusflow.retry)."""
    return work()


class PrefectExecutor:
    """Documents and batches as Prefect task runs, inside a flow run: documents on the
    flow's threads (sharing the engine's parser pool) or, with ``run.task_runner =
    "dask"``, on a Dask cluster (each worker builds its own kit once, from a recipe);
    batches in the flow's process, which holds the write lease."""

    name = "prefect"

    def __init__(self) -> None:
        self.parses_here = True

    def start(self, job: Job, stack: ExitStack) -> None:
        run = job.settings.run
        self.job = job
        self.group_size = run.documents_per_task
        self.buffer: list[tuple[ProcessDocument, Future[Any]]] = []
        self.running = 0  # group task runs submitted and not finished
        self.lock = threading.Lock()
        self.failed: queue.SimpleQueue[tuple[WorkItem, DocumentError]] = queue.SimpleQueue()
        self.failure_runs: list[Any] = []
        # Settle the failure task runs before the flow ends (they fail by design).
        stack.callback(lambda: [f.wait() for f in self.failure_runs])
        self.runner: Any = None
        self.embedder: Embedder | None = None  # None: the job's own, in this process
        if run.task_runner == "dask":
            self.name = "prefect+dask"
            self.parses_here = False
            self.runner = stack.enter_context(dask_task_runner(run))
            if run.dask_embed_resources:
                self.embedder = ClusterEmbedder(
                    self.runner.client, job.settings, job.spec, run.dask_embed_resources
                )

    def submit(self, fn: Callable[[], Any], /) -> Future[Any]:
        result: Future[Any] = Future()
        if isinstance(fn, WriteBatch):
            if self.embedder is not None and fn.embedder is None:
                fn = replace(fn, embedder=self.embedder)
            self._on_done(embed_and_write.submit(fn), result)
        elif not isinstance(fn, ProcessDocument):
            raise TypeError(f"PrefectExecutor runs ProcessDocument and WriteBatch, not {fn!r}")
        elif self.group_size > 1:
            self.buffer.append((fn, result))
            if len(self.buffer) >= self.group_size:
                self._submit_group()
        else:
            self._on_done(self._submit(parse_and_chunk, {"work": fn}), result)
        return result

    def flush(self) -> None:
        """Give each failure of finished groups its task run; submit a partly filled group
        only when no group is running (otherwise the engine's wait ends when one finishes,
        and the group can still fill)."""
        while not self.failed.empty():
            item, err = self.failed.get()
            self.failure_runs.append(failed_document.submit(item, err.category.value, err.message))
        if self.buffer and (len(self.buffer) >= self.group_size or not self.running):
            self._submit_group()

    def _submit_group(self) -> None:
        group, self.buffer = self.buffer, []
        with self.lock:
            self.running += 1
        works = [w for w, _ in group]
        first = works[0].item.file.rel_path
        future = self._submit(parse_group, {"works": works, "first": first, "n": len(works)})
        outcomes: Future[Any] = Future()

        def finished(f: Future[Any]) -> None:
            with self.lock:
                self.running -= 1
            error = f.exception()
            outs = [error] * len(group) if error is not None else f.result()
            for (work, result), out in zip(group, outs, strict=True):
                if isinstance(out, DocumentError):
                    self.failed.put((work.item, out))
                if isinstance(out, BaseException):
                    result.set_exception(out)
                else:
                    result.set_result(out)

        outcomes.add_done_callback(finished)
        self._on_done(future, outcomes)

    def _submit(self, task_: Any, args: dict[str, Any]) -> Any:
        if self.runner is not None:
            import dask

            resources = self.job.settings.run.dask_parse_resources
            # dask.annotate refuses resources=None: annotate only when resources are asked.
            with dask.annotate(resources=resources) if resources else contextlib.nullcontext():
                return self.runner.submit(task_, parameters=args)
        return task_.submit(**args)

    @staticmethod
    def _on_done(future: Any, result: Future[Any]) -> None:
        """Settle ``result`` with the Prefect future's result or error, once."""
        once = threading.Lock()

        def finished(f: Any) -> None:
            if not once.acquire(blocking=False):
                return
            try:
                out: Any = f.result(raise_on_failure=False)
            except BaseException as exc:
                out = exc
            if isinstance(out, BaseException):
                result.set_exception(out)
            else:
                result.set_result(out)

        future.add_done_callback(finished)


def _check_markdown(report: RunReport) -> str:
    """The retrieval check as Markdown: figures before and after, changed questions."""
    check = report.check
    assert check is not None
    lines = [f"# Retrieval check of run {report.run_id}", "", check.summary]
    if check.before:
        lines += ["", "| figure | before | after |", "|---|---|---|"]
        lines += [
            f"| {key} | {check.before[key]:.3f} | {check.after[key]:.3f} |" for key in check.before
        ]
    if check.changed:
        lines += ["", "| question | path | rank before | rank after |", "|---|---|---|---|"]
        for c in check.changed:
            question = str(c["question"]).replace("|", "\\|")
            before = "-" if c["before"] is None else c["before"]
            after = "-" if c["after"] is None else c["after"]
            lines.append(f"| {question} | {c['path']} | {before} | {after} |")
    for kind, v in (check.versions or {}).items():
        restored = f", restored as version {v['restored']}" if "restored" in v else ""
        lines.append(
            f"\n`{kind}`: version {v['before']} before the run, {v['after']} after{restored}"
        )
    return "\n".join(lines) + "\n"


def _held_row(hold: dict[str, Any]) -> dict[str, str]:
    """One held document (corpusflow.holds.Hold.row) as an artifact table row."""
    figures = ", ".join(
        f"{key} {hold['before'][key]:.3f} -> {hold['after'][key]:.3f}"
        for key in ("hit_rate_at_5", "mrr_at_10")
        if key in hold["before"] and key in hold["after"]
    )
    questions = "; ".join(
        f"{q['question']} (rank {q['before']} -> {q['after'] if q['after'] is not None else '-'})"
        for q in hold["questions"]
    )
    return {
        "path": hold["path"],
        "kind": hold["kind"],
        "held by run": f"{hold['run_id']} ({hold['held_at']})",
        "why": f"{hold['questions_worse']} question(s) worse: {questions}; {figures}",
    }


def _estimate_lines(report: RunReport) -> list[str]:
    from corpusflow.estimate import Estimate

    return Estimate(report.estimate).lines() if report.estimate else []


def _publish(report: RunReport, settings: Settings) -> None:
    """Keyed artifacts for the Prefect UI: failed documents, documents held by the
    retrieval check, a run summary and, when a question set is configured, the check."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from corpusflow.api import failed_documents

    key = artifact_key(report.collection)
    # Every document of the collection failed now (this run's, with their attempts, and
    # earlier runs' that are still failed), also before its first table exists.
    this_run: dict[str, dict[str, Any]] = {f.path: f.to_dict() for f in report.failures}
    ledger: list[dict[str, Any]]
    try:
        ledger = failed_documents(settings)
    except Exception:  # the ledger unreadable now: this run's failures still show
        ledger = []
    failed: list[dict[str, Any]] = []
    for f in ledger:
        mine = this_run.pop(str(f["path"]), None)
        failed.append(
            mine or {**{k: f[k] for k in ("path", "category", "message")}, "attempts": ""}
        )
    failed += this_run.values()
    create_table_artifact(
        key=f"failed-documents-{key}",
        table=failed or [{"path": "", "category": "", "message": "no failures"}],
        description=f"Documents of the collection failed after run {report.run_id}",
    )
    create_table_artifact(
        key=f"held-documents-{key}",
        table=[_held_row(h) for h in report.held_documents]
        or [{"path": "", "kind": "", "held by run": "", "why": "no held documents"}],
        description=(
            f"Documents held by the retrieval check after run {report.run_id}: skipped until "
            "their bytes, the question set or the pipeline change; `corpusflow accept-held` "
            "indexes them anyway"
        ),
    )
    stages = "\n".join(f"| {k} | {v:.2f} |" for k, v in report.stage_s.items())
    # What the run expected to spend (corpusflow.estimate), and the budget that stopped it.
    plan = "".join(f"- {line}\n" for line in _estimate_lines(report))
    stopped = f"**{report.stop_reason}**\n\n" if report.stopped_by else ""
    if report.approval is not None:  # the answer this run was given (flows.approval)
        a = report.approval
        note = f": {a.note}" if a.note else ""
        stopped = f"**{a.answer} by {a.by}{note}** ({'; '.join(a.reasons)})\n\n" + stopped
    create_markdown_artifact(
        key=f"refresh-summary-{key}",
        markdown=(
            f"# Refresh {report.run_id}\n\n{stopped}"
            "| new | changed | retried | rechunked | unchanged | deleted | failed | partial "
            "| held | chunks | embedded | embedding-cache hits |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            f"| {report.new} | {report.changed} | {report.retried} | {report.rechunked} | "
            f"{report.unchanged} | {report.deleted} | {report.failed} | {report.partial} "
            f"| {report.held} "
            f"| {report.chunks_written} | {report.embedded} | {report.embed_cache_hits} |\n\n"
            f"Table `{report.chunk_table}` version {report.chunk_table_version}; model {report.model}; "
            f"{report.elapsed_s:.1f} s\n\n| stage | seconds |\n|---|---|\n{stages}\n"
            + (f"\n## Plan and estimate\n\n{plan}" if plan else "")
        ),
    )
    if report.check is not None:
        create_markdown_artifact(
            key=f"retrieval-check-{key}",
            markdown=_check_markdown(report),
            description=f"Retrieval check of run {report.run_id}",
        )


def run_refresh(
    source: str,
    settings: Settings,
    force_delete: bool = False,
    only_failed: bool = False,
    publish: bool = True,
    activate: bool = False,
    kind: str = "refresh",
    gate: Gate | None = None,
    pages: bool = False,
) -> RunReport:
    """The refresh with Prefect task runs, under the collection's write lease. Called
    inside a flow. A full disk anywhere stops the run with StorageFullError; every
    commit made before it is whole, and the next run picks up from there. With
    ``run.approval``, a run the deletion guard would refuse or a budget would stop
    pauses for an answer in the UI (flows.approval); not approved: RunRejected. ``pages``
    (with ``only_failed``): also the missing pages of partial documents."""
    approve = ask_in_ui(settings) if settings.run.approval else None
    engine = RefreshEngine(
        source,
        settings,
        force_delete,
        only_failed,
        activate,
        kind,
        gate,
        approve=approve,
        pages=pages,
    )
    return _run_engine(engine, PrefectExecutor(), publish)


def ended_unapproved(exc: RunRejected) -> State[Any]:
    """The final state of a flow run whose refresh was not approved: Cancelled, nothing
    changed (a run whose pause timed out is failed by Prefect instead)."""
    get_run_logger().warning(str(exc))
    return Cancelled(message=str(exc))


def _run_engine(engine: RefreshEngine, executor: Any, publish: bool) -> RunReport:
    """``engine.run(executor)`` logging to the flow run, with the UI's artifacts."""
    engine.log = get_run_logger().info
    if publish:  # the run's progress and ETA in the UI while documents are committed
        engine.on_progress = ProgressArtifacts(engine.settings.storage.collection)
    try:
        report = engine.run(executor)
    except RetrievalCheckFailed:
        if publish:  # the undone run's figures, for the UI
            _publish(engine.report, engine.settings)
        raise
    if publish:
        _publish(report, engine.settings)
    return report


# The planned run the calling context hands to ``planned_refresh_flow``: set only for the
# duration of ``run_planned``'s call, in its own context (not a registry of engines). The
# flow is a module-level function, so a Dask cluster can import it by name; a closure over
# the engine cannot be sent to workers.
_PLANNED: contextvars.ContextVar[tuple[RefreshEngine, Any, bool]] = contextvars.ContextVar(
    "corpusflow_planned_refresh"
)


def _planned() -> tuple[RefreshEngine, Any, bool]:
    """The planned run of this call. (A function, so that the flow's code refers to the
    context variable by module, and Prefect can pickle the flow for Dask workers.)"""
    try:
        return _PLANNED.get()
    except LookupError:
        raise RuntimeError("planned_refresh_flow runs only through run_planned") from None


@flow(name="corpusflow-refresh", log_prints=False)
def planned_refresh_flow(source: str, run_id: str) -> dict[str, Any]:
    """The flow run of a refresh planned by the caller (see ``run_planned``)."""
    engine, executor, publish = _planned()
    if engine.report.run_id != run_id:
        raise RuntimeError(f"planned run {engine.report.run_id} is not {run_id}")
    return _run_engine(engine, executor, publish).to_dict()


def run_planned(engine: RefreshEngine, executor: Any, publish: bool = True) -> dict[str, Any]:
    """Run an engine already planned in this process (the CLI plans first, so a refresh
    with nothing to do starts no orchestrator) in a flow run named like ``refresh_flow``'s,
    with ``executor``; the flow run's parameters record the source and the run's id."""
    token = _PLANNED.set((engine, executor, publish))
    try:
        result: dict[str, Any] = planned_refresh_flow(engine.source_uri, engine.report.run_id)
    finally:
        _PLANNED.reset(token)
    return result


@flow(name="corpusflow-refresh", log_prints=False)
def refresh_flow(
    source: str,
    settings_json: str = "{}",
    force_delete: bool = False,
    only_failed: bool = False,
    pages: bool = False,
) -> dict[str, Any] | State[Any]:
    """Incremental refresh of one collection from ``source``; ``only_failed``: only the
    failed documents, and with ``pages`` the missing pages of partial documents."""
    settings = Settings.model_validate_json(settings_json)
    kind = "retry-failed" if only_failed else "refresh"
    try:
        report = run_refresh(source, settings, force_delete, only_failed, kind=kind, pages=pages)
    except RunRejected as exc:
        return ended_unapproved(exc)
    return report.to_dict()
