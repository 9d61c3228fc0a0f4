"""The refresh flow: only new, changed, failed and deleted documents cost anything.

Thin by design: every step is a function of corpusflow.pipeline or a stage
package. The flow adds what Prefect is for: one task run per document named
after its path (failing with the document's error category, so the UI shows
what failed and why), batch tasks for embedding+commit, and artifacts.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from corpusflow.errors import (
    TRANSIENT_CATEGORIES,
    Category,
    DocumentError,
    StorageFullError,
    is_storage_full,
)
from corpusflow.pipeline import (
    Fingerprints,
    Processed,
    RunReport,
    StageTimer,
    ValidationFailedError,
    WorkItem,
    choose_model,
    chunk_parsed,
    make_contextualizer,
    parse_document,
    plan_changes,
    record_deletions,
    record_failures,
    reuse_active_chunks,
    write_batch,
)
from corpusflow.settings import Settings
from embedding import Embedder, load_embedder
from flows.scaleout import RemoteKit, StageKit, dask_task_runner
from parsers import ParserPool
from sources import Source, open_source
from storage import Store, collection_lease
from storage.maintenance import ensure_indexes

# (store, active pointer row, candidate chunk table, candidate's embedder) -> (switch?, summary)
Gate = Callable[[Store, dict[str, Any], str, Embedder], tuple[bool, str]]


class _Progress:
    """Rich progress bars on a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if enabled and sys.stdout.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=False,
            )

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def add(self, name: str, total: int | None) -> None:
        if self.bar is not None:
            self.tasks[name] = self.bar.add_task(name, total=total)

    def advance(self, name: str, n: int = 1) -> None:
        if self.bar is not None and name in self.tasks:
            self.bar.advance(self.tasks[name], n)


def _retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: only transient document errors and unexpected errors."""
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, DocumentError):
        return exc.category in TRANSIENT_CATEGORIES
    return isinstance(exc, OSError | TimeoutError)


@task(
    task_run_name="parse-{item.file.rel_path}",
    cache_policy=NO_CACHE,
    retry_condition_fn=_retry_transient,
)
def parse_and_chunk(
    item: WorkItem,
    source: Source,
    settings: Settings,
    fps: Fingerprints,
    kit: StageKit | RemoteKit,
) -> Processed:
    """Parse (isolated, or from the parse cache) and chunk one document."""
    k = kit.resolve()
    parsed, cached = parse_document(item, source, k.store, settings, fps, k.pool.parse)
    chunks = chunk_parsed(item, parsed, k.tokenizer, settings, fps, k.contextualizer)
    return Processed(item=item, parsed=parsed, chunks=chunks, from_cache=cached)


@task(
    task_run_name="embed-write-batch-{batch_no}",
    cache_policy=NO_CACHE,
    retry_condition_fn=_retry_transient,
)
def embed_and_write(
    batch_no: int | str,
    batch: list[Processed],
    store: Store,
    embedder: Embedder,
    settings: Settings,
    fps: Fingerprints,
    progress: _Progress,
) -> tuple[int, int]:
    return write_batch(
        batch, store, embedder, settings, fps, on_progress=lambda n: progress.advance("embed", n)
    )


def _publish(report: RunReport) -> None:
    """Keyed artifacts for the Prefect UI: failed documents and a run summary."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    key = "".join(c if c.isalnum() else "-" for c in report.collection.lower())
    create_table_artifact(
        key=f"failed-documents-{key}",
        table=report.failures or [{"path": "", "category": "", "message": "no failures"}],
        description=f"Documents that failed in run {report.run_id}",
    )
    stages = "\n".join(f"| {k} | {v:.2f} |" for k, v in report.stage_s.items())
    create_markdown_artifact(
        key=f"refresh-summary-{key}",
        markdown=(
            f"# Refresh {report.run_id}\n\n"
            "| new | changed | retried | rechunked | unchanged | deleted | failed | partial "
            "| chunks |\n|---|---|---|---|---|---|---|---|---|\n"
            f"| {report.new} | {report.changed} | {report.retried} | {report.rechunked} | "
            f"{report.unchanged} | {report.deleted} | {report.failed} | {report.partial} "
            f"| {report.chunks_written} |\n\n"
            f"Table `{report.chunk_table}` version {report.chunk_table_version}; model {report.model}; "
            f"{report.elapsed_s:.1f} s\n\n| stage | seconds |\n|---|---|\n{stages}\n"
        ),
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
) -> RunReport:
    """The refresh, under the collection's write lease. Called inside the flow.

    A full disk anywhere stops the run with StorageFullError; every commit made
    before it is whole, and the next run picks up from there.
    """
    try:
        return _refresh(source, settings, force_delete, only_failed, publish, activate, kind, gate)
    except Exception as exc:
        _stop_if_storage_full(exc, settings)
        raise


def _refresh(
    source: str,
    settings: Settings,
    force_delete: bool,
    only_failed: bool,
    publish: bool,
    activate: bool,
    kind: str,
    gate: Gate | None,
) -> RunReport:
    """The refresh proper (see run_refresh).

    With ``activate``, the table built for the configured model is validated and
    made active (a reindex); otherwise a new collection's first table becomes
    active and a table for a different model is built beside the active one.
    """
    logger = get_run_logger()
    started = time.time()
    timer = StageTimer()
    src = open_source(source, settings.source)
    src.check()
    store = Store.from_settings(settings.storage)
    spec = choose_model(settings, store)
    embedder = load_embedder(settings.embed, spec)
    fps = Fingerprints.of(settings, spec)
    report = RunReport(run_id=uuid.uuid4().hex[:12], collection=settings.storage.collection)
    report.model = f"{spec.model_id} ({spec.fingerprint})"
    report.chunk_table = store.chunk_table_name(spec.table_suffix)

    with ExitStack() as stack:
        stack.enter_context(collection_lease(settings.storage))
        with timer.time("plan"):
            plan = plan_changes(src, store, settings, fps, force_delete, only_failed)
        report.new = plan.count("new")
        report.changed = plan.count("changed")
        report.retried = plan.count("retry")
        report.rechunked = plan.count("rechunk")
        report.unchanged = len(plan.unchanged)
        logger.info(
            "plan: %d listed, %d to process, %d unchanged, %d deleted",
            plan.listed,
            len(plan.work),
            len(plan.unchanged),
            len(plan.deleted),
        )
        if plan.touched:
            store.upsert_ledger(fps.table_suffix, plan.touched)
        failures: list[tuple[WorkItem, DocumentError]] = []
        progress = stack.enter_context(_Progress(settings.run.progress))
        if plan.work:
            progress.add("parse", len(plan.work))
            progress.add("embed", None)
            retrying = {
                "retries": settings.run.task_retries,
                "retry_delay_seconds": settings.run.retry_delay_s,
            }
            parse_task = parse_and_chunk.with_options(**retrying)  # type: ignore[arg-type]
            if settings.run.task_runner == "dask":
                runner = stack.enter_context(dask_task_runner(settings.run))
                recipe = RemoteKit(settings.model_dump_json(), spec)

                def submit(w: WorkItem) -> Any:
                    return runner.submit(
                        parse_task,
                        parameters={
                            "item": w,
                            "source": src,
                            "settings": settings,
                            "fps": fps,
                            "kit": recipe,
                        },
                    )
            else:
                with timer.time("load_tokenizer"):
                    kit = StageKit(
                        store=store,
                        pool=stack.enter_context(ParserPool(settings.parse)),
                        tokenizer=embedder.tokenizer(),
                        contextualizer=make_contextualizer(settings, store),
                    )

                def submit(w: WorkItem) -> Any:
                    return parse_task.submit(w, src, settings, fps, kit)

            batch: list[Processed] = []
            batch_no = 0

            def add(done: Processed) -> None:
                nonlocal batch, batch_no
                batch.append(done)
                if done.parsed.status == "partial":
                    report.partial += 1
                if len(batch) >= settings.storage.write_batch_docs:
                    batch_no += 1
                    report.chunks_written += _write(
                        batch_no, batch, store, embedder, settings, fps, progress, failures, timer
                    )
                    batch = []

            parse_start = time.perf_counter()
            with timer.time("plan_reuse"):
                items, reused = reuse_active_chunks(plan.work, store, fps, settings)
            futures: list[Any] = [submit(w) for w in items]
            # A table built beside the active one first takes the active table's chunks of
            # documents cut the same way (same bytes, tokenizer and chunk settings).
            for got in reused:
                if isinstance(got, WorkItem):
                    items.append(got)
                    futures.append(submit(got))
                    continue
                progress.advance("parse")
                report.reused += 1
                add(got)
            for i, item in enumerate(items):
                result = futures[i].result(raise_on_failure=False)
                # Drop the future once consumed: it holds the parsed document and its
                # chunks, and a large run must not keep every document in memory.
                futures[i] = None
                progress.advance("parse")
                if isinstance(result, BaseException):
                    _stop_if_storage_full(result, settings)
                if isinstance(result, DocumentError):
                    failures.append((item, result))
                    continue
                if isinstance(result, BaseException):
                    failures.append(
                        (
                            item,
                            DocumentError(Category.INTERNAL, f"{type(result).__name__}: {result}"),
                        )
                    )
                    continue
                if result.from_cache:
                    report.parse_cache_hits += 1
                else:
                    report.parsed += 1
                add(result)
            if batch:
                batch_no += 1
                report.chunks_written += _write(
                    batch_no, batch, store, embedder, settings, fps, progress, failures, timer
                )
            # Parsing runs concurrently with embedding; this is the wall time not spent embedding.
            loop_s = time.perf_counter() - parse_start
            timer.add("parse_chunk", loop_s - timer.totals.get("embed_write", 0.0))
        with timer.time("ledger"):
            record_failures(failures, store, fps, settings.run.quarantine_after)
            record_deletions(plan.deleted, store, spec.table_suffix)
        report.deleted = len(plan.deleted)
        report.failed = len(failures)
        report.failures = [
            {
                "path": i.file.rel_path,
                "category": e.category.value,
                "message": e.message,
                "attempts": str(i.attempts + 1),
            }
            for i, e in failures
        ]
        active = store.active()
        target = report.chunk_table
        if store.exists(target):
            switching = active is None or (activate and active["chunk_table"] != target)
            if switching:
                problems = store.validate(spec.table_suffix, spec.dim)
                if problems:
                    raise ValidationFailedError(
                        f"{target} failed validation, the active table is unchanged: "
                        + "; ".join(problems)
                    )
                allowed = True
                if gate is not None and active is not None:
                    with timer.time("quality_gate"):
                        allowed, report.gate = gate(store, active, target, embedder)
                    logger.info("quality gate: %s", report.gate)
                if allowed:
                    store.set_active(spec.table_suffix, spec.to_dict())
                    report.activated = True
            elif active is not None and active["chunk_table"] != target:
                logger.warning(
                    "built %s beside the active %s; `corpusflow reindex` validates and switches",
                    target,
                    active["chunk_table"],
                )
            if report.chunks_written or report.deleted or switching:
                with timer.time("index"):
                    ensure_indexes(store, target, settings.storage)
            report.chunk_table_version = store.tag_version(
                spec.table_suffix, f"{kind}-{report.run_id}"
            )
        if plan.work:
            with timer.time("tidy_caches"):
                store.tidy_caches()
        store.checkpoint(spec.table_suffix, spec.dim).clear()
        report.elapsed_s = time.time() - started
        report.stage_s = {k: round(v, 3) for k, v in timer.totals.items()}
        store.record_run(
            {
                "run_id": report.run_id,
                "collection": report.collection,
                "kind": kind,
                "started_at": datetime.fromtimestamp(started, UTC),
                "finished_at": datetime.now(UTC),
                "status": "completed",
                "report_json": json.dumps(report.to_dict()),
                "chunk_table": report.chunk_table,
                "chunk_table_version": report.chunk_table_version,
            }
        )
    if publish:
        _publish(report)
    return report


def _stop_if_storage_full(exc: BaseException, settings: Settings) -> None:
    """A full disk is not the document's fault: stop the run instead of failing documents."""
    if is_storage_full(exc) and not isinstance(exc, StorageFullError):
        raise StorageFullError(
            f"the database at {settings.storage.db} is out of space ({exc}); batches "
            "committed so far are intact; free space and re-run to continue"
        ) from exc


def _write(
    batch_no: int | str,
    batch: list[Processed],
    store: Store,
    embedder: Embedder,
    settings: Settings,
    fps: Fingerprints,
    progress: _Progress,
    failures: list[tuple[WorkItem, DocumentError]],
    timer: StageTimer,
) -> int:
    start = time.perf_counter()
    write_task = embed_and_write.with_options(
        retries=settings.run.task_retries, retry_delay_seconds=settings.run.retry_delay_s
    )
    fut = write_task.submit(batch_no, batch, store, embedder, settings, fps, progress)
    result = fut.result(raise_on_failure=False)
    timer.add("embed_write", time.perf_counter() - start)
    if isinstance(result, BaseException):
        _stop_if_storage_full(result, settings)
        if len(batch) > 1:
            # Isolate a persistent failure: each document alone, so only the ones
            # that fail again are recorded as failed.
            return sum(
                _write(
                    f"{batch_no}.{i}",
                    [p],
                    store,
                    embedder,
                    settings,
                    fps,
                    progress,
                    failures,
                    timer,
                )
                for i, p in enumerate(batch, 1)
            )
        err = (
            result
            if isinstance(result, DocumentError)
            else DocumentError(Category.EMBEDDING, f"{type(result).__name__}: {result}")
        )
        failures.extend((p.item, err) for p in batch)
        return 0
    return int(result[0])


@flow(name="corpusflow-refresh", log_prints=False)
def refresh_flow(
    source: str,
    settings_json: str = "{}",
    force_delete: bool = False,
    only_failed: bool = False,
) -> dict[str, Any]:
    """Incremental refresh of one collection from ``source``."""
    settings = Settings.model_validate_json(settings_json)
    kind = "retry-failed" if only_failed else "refresh"
    return run_refresh(source, settings, force_delete, only_failed, kind=kind).to_dict()
