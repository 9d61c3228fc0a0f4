"""The refresh engine: one runner for every way a refresh runs.

``RefreshEngine`` holds the write lease, plans, runs the loop and commits; the ledger,
the run record and, through ``corpusflow.activation.Activation``, what readers see
follow. It knows no orchestrator: documents are processed and batches written by the
executor it is given (``corpusflow.executors``: any concurrent.futures-style
``submit``), with the work built here (``ProcessDocument``, ``WriteBatch``) carrying the
one retry policy (``corpusflow.retry``).

Work in flight is bounded: at most ``run.max_in_flight`` documents are submitted or
parsed but not yet committed. Parsing waits while the engine embeds and commits a
batch (backpressure), so memory does not grow with the corpus and embedding is not
starved by parsers running ahead. Commits happen only here, in one thread, under
the collection's write lease.
"""

from __future__ import annotations

import json
import logging
import queue
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chunking import warm_up as warm_up_chunking
from common.errors import (
    Category,
    ConfigurationError,
    DocumentError,
    RetrievalCheckFailed,
    StorageFullError,
    is_storage_full,
)
from common.settings import Settings
from corpusflow.activation import Activation, Gate, load_check
from corpusflow.approval import (
    DELETED_SHOWN,
    Answer,
    ApprovalRequest,
    Approver,
    RunRejected,
)
from corpusflow.estimate import (
    WAIT,
    Budget,
    Estimate,
    Rates,
    RunRates,
    WorkEta,
    WorkProgress,
    describe_stop,
    estimate_plan,
    work_weights,
)
from corpusflow.executors import (
    Executor,
    InProcessExecutor,
    ProcessDocument,
    WriteBatch,
)
from corpusflow.fingerprints import Fingerprints, check_fingerprint, pipeline_fingerprint
from corpusflow.holds import Accept, record_holds
from corpusflow.job import Job, Progress
from corpusflow.model_choice import choose_model
from corpusflow.parse_chunk import Processed
from corpusflow.plan import Plan, WorkItem, plan_changes
from corpusflow.report import ApprovalRecord, Failure, RunReport, StageTimer
from corpusflow.runtime import release_free_memory
from corpusflow.writes import record_deletions, record_failures, reuse_active_chunks
from sources import open_source
from storage import Store, collection_lease
from storage.records import PlanReason, RunRecord

if TYPE_CHECKING:
    from parsers import ParserPool

Outcome = Processed | BaseException
TIDY_EVERY_COMMITS = 64

_log = logging.getLogger(__name__)
WORK_BAR = "work (est. s)"


def in_flight_limit(settings: Settings) -> int:
    """Documents submitted or parsed but not committed, at most: a batch being filled
    and a few per parser waiting, unless configured."""
    configured = settings.run.max_in_flight
    return configured or settings.storage.write_batch_docs + 2 * settings.parse.workers


class RefreshEngine:
    """One refresh of one collection. ``prepare()`` takes the lease and plans; ``run()``
    does the rest with an executor. ``refresh()`` does both."""

    def __init__(
        self,
        source: str,
        settings: Settings,
        force_delete: bool = False,
        only_failed: bool = False,
        activate: bool = False,
        kind: str = "refresh",
        gate: Gate | None = None,
        accept: Accept | None = None,
        approve: Approver | None = None,
        pages: bool = False,
    ) -> None:
        self.source_uri = source
        self.settings = settings
        self.force_delete = force_delete
        self.only_failed = only_failed
        # With only_failed: also the missing pages of partial documents (a page retry).
        self.pages = pages
        self.activate = activate
        self.kind = kind
        self.gate = gate
        # ``corpusflow accept-held``: only held documents, indexed without the check.
        self.accept = accept
        # Asked before the first write when the deletion guard trips or the plan says a
        # budget would stop the run (corpusflow.approval); None: refuse / stop as configured.
        self.approve = approve
        self.timer = StageTimer()
        self.stack = ExitStack()
        self.plan: Plan | None = None
        self.failures: list[tuple[WorkItem, DocumentError]] = []
        # (file, hash of the bytes committed) of every document committed: held if undone.
        self.committed: list[tuple[Any, str]] = []
        self.commits = 0
        self.log: Callable[[str], None] = lambda message: None
        self.pool: ParserPool | None = None
        # The plan's cost (corpusflow.estimate), the budgets and what this run measures.
        self.estimate: Estimate | None = None
        self.budget: Budget | None = None
        self.rates: RunRates | None = None
        self.stopped_by = ""  # the budget that stopped starting documents
        self.halted = False  # a budget stopped the commits too
        self._contextualizer: Any = None  # the run's LLM context provider, if here
        # Each document's estimated seconds (estimate.work_weights): the progress bar's ETA.
        self.weights: dict[str, float] = {}
        # Called with the run's progress by work after each commit or failure, at the loop's
        # start and at its end (``WorkProgress.final``); throttling is the callee's.
        self.on_progress: Callable[[WorkProgress], None] | None = None
        self.eta: WorkEta | None = None
        self.waited_s = 0.0  # waiting for an approval (corpusflow.approval)

    # -- the two halves ---------------------------------------------------------
    def prepare(self) -> RefreshEngine:
        """Open everything, take the write lease and plan. Cheap when nothing changed:
        no model, parser or orchestrator is started."""
        try:
            self._prepare()
        except BaseException as exc:
            self.stack.close()
            self._stop_if_storage_full(exc)
            raise
        return self

    def run(self, executor: Executor) -> RunReport:
        """Process the plan with ``executor``, then ledger, activation, indexes, tag and
        run record. Releases the lease."""
        if self.plan is None:
            self.prepare()
        try:
            with self.stack:
                return self._run(executor)
        except Exception as exc:
            self._stop_if_storage_full(exc)
            raise

    def refresh(self, executor: Executor | None = None) -> RunReport:
        return self.prepare().run(executor or InProcessExecutor())

    @property
    def has_work(self) -> bool:
        return bool(self.plan and self.plan.work)

    @property
    def documents_to_process(self) -> int:
        return len(self.plan.work) if self.plan else 0

    def prestart_parsers(self) -> None:
        """Start one parser process before the plan, on a guess that there will be
        something to parse: its imports (~6 s of CPU) then overlap with opening the
        store and planning instead of following them. A plan with nothing to parse
        kills it unused (a second or two of CPU on another core). Off with
        ``run.prestart_parser = false``. Only for an executor that parses here."""
        run = self.settings.run
        if run.prestart_parser and self.plan is None and self.pool is None:
            from parsers import ParserPool

            self.pool = self.stack.enter_context(ParserPool(self.settings.parse))
            self.pool.start(1)

    def start_parsers(self) -> None:
        """Start the parser processes the plan needs now: they import their libraries
        (~6 s of CPU) in the background while this process does anything else. Only for
        an executor that parses here."""
        if self.has_work:
            kit = self.job.local_kit(self.stack)
            kit.pool.start(min(self.settings.parse.workers, self.documents_to_process))

    def warm_up(self) -> None:
        """Start the parser processes, load the tokenizer and the chunker, so that an
        orchestrator starting meanwhile overlaps with them. Only for an executor that
        parses here."""
        if self.has_work:
            self.start_parsers()
            warm_up_chunking()

    # -- internals ----------------------------------------------------------------
    def _prepare(self) -> None:
        settings = self.settings
        self.started = time.time()
        src = open_source(self.source_uri, settings.source)
        src.check()
        store = Store.from_settings(settings.storage)
        spec = choose_model(settings, store)
        fps = Fingerprints.of(settings, spec)
        report = RunReport(run_id=uuid.uuid4().hex[:12], collection=settings.storage.collection)
        report.model = f"{spec.model_id} ({spec.fingerprint})"
        report.chunk_table = store.chunks.name(spec.table_suffix)
        self.report = report
        check = load_check(settings)  # a bad question set fails before the lease
        self.stack.enter_context(collection_lease(settings.storage))
        recovered = store.pointer.recover_pin()
        if recovered is not None:
            self.log(
                f"run {recovered.run_id} ended before its retrieval check; readers never "
                "saw its writes, and its tables were restored to the versions they saw"
            )
        progress = self.stack.enter_context(Progress(settings.run.progress))
        self.job = Job(src, settings, store, spec, fps, progress, self.pool)
        self.check_key = check_fingerprint(check)
        self.activation = Activation(
            self.job,
            report,
            self.timer,
            self.kind,
            self.activate,
            self.gate,
            self.accept is not None,
            check,
            lambda message: self.log(message),
        )
        with self.timer.time("plan"):
            plan = plan_changes(
                src,
                store,
                settings,
                fps,
                self.force_delete,
                self.only_failed,
                check=self.check_key,
                accept=self.accept,
                defer_guard=self.approve is not None and "deletions" in settings.run.approval,
                pages=self.pages,
            )
        self.plan = plan
        if self.accept is not None:
            found = {w.file.rel_path for w in plan.work} | {r.path for r in plan.deleted}
            missing = sorted(self.accept.paths - found)
            if missing:
                raise ConfigurationError(
                    f"not held (see `corpusflow status`): {', '.join(missing[:10])}"
                    + (" ..." if len(missing) > 10 else "")
                )
            report.accepted = len(found)
        report.held_documents = [hold.row(path) for path, hold in plan.held]
        report.held = len(plan.held)
        if plan.held:
            shown = ", ".join(path for path, _ in plan.held[:5])
            self.log(
                f"{len(plan.held)} document(s) held by the retrieval check, skipped: {shown}"
                + (" ..." if len(plan.held) > 5 else "")
                + " (`corpusflow accept-held` indexes them anyway)"
            )
        report.new = plan.count(PlanReason.NEW)
        report.changed = plan.count(PlanReason.CHANGED)
        report.retried = plan.count(PlanReason.RETRY)
        report.rechunked = plan.count(PlanReason.RECHUNK)
        report.page_retries = plan.count(PlanReason.PAGES)
        report.unchanged = plan.unchanged
        report.forgotten = len(plan.forgotten)
        with self.timer.time("estimate"):
            rates = Rates.load(store)
            self.estimate = estimate_plan(
                plan, settings, rates, spec.fingerprint, spec.name, fps.max_tokens
            )
        report.estimate = self.estimate.to_dict()
        self.budget = Budget(
            settings, rates, spec.fingerprint, spec.name, fps.max_tokens, self.started
        )
        self.rates = RunRates(spec.fingerprint)
        self._ask_approval(plan, rates)  # before this run's first write
        self.log(
            f"plan: {plan.listed} listed, {len(plan.work)} to process, "
            f"{plan.unchanged} unchanged, {len(plan.deleted)} deleted"
        )
        self.activation.before_writes(plan)  # before this run's first write, the ledger's too
        if plan.touched:
            store.ledger.upsert(fps.table_suffix, plan.touched)

    def _run(self, executor: Executor) -> RunReport:
        assert self.plan is not None
        job, report, plan, timer = self.job, self.report, self.plan, self.timer
        store, spec, fps = job.store, job.spec, job.fps
        if self.estimate is not None:  # the run's first step: what it is about to spend
            for line in self.estimate.lines():
                self.log(line)
                _log.info(line)
        if plan.work:
            report.executor = getattr(executor, "name", type(executor).__name__)
            loop_start = time.perf_counter()
            self._process(executor, plan.work)
            # Parsing runs concurrently with embedding; this is the wall time not spent embedding.
            loop_s = time.perf_counter() - loop_start
            timer.add("parse_chunk", loop_s - timer.totals.get("embed_write", 0.0))
        with timer.time("ledger"):
            record_failures(self.failures, store, fps, self.settings.run.quarantine_after)
            record_deletions(plan.deleted, store, spec.table_suffix)
        report.deleted = len(plan.deleted)
        report.failed = len(self.failures)
        report.failures = [
            Failure(i.file.rel_path, e.category.value, e.message, str(i.attempts + 1))
            for i, e in self.failures
        ]
        self.activation.activate_and_index()
        if plan.work:
            with timer.time("tidy"):
                store.caches.tidy()
            store.drop(store.name("staging", spec.table_suffix))  # pre-cache checkpoint
        check = report.check
        undone = check is not None and check.undone
        if check is not None and check.undone:
            with timer.time("ledger"):
                newly = record_holds(
                    store,
                    spec.table_suffix,
                    report.run_id,
                    self.committed,
                    plan.deleted,
                    check,
                    self.check_key,
                    pipeline_fingerprint(fps),
                    plan.touched,
                )
            report.held_documents += newly
            report.held = len(report.held_documents)
            check = report.check = replace(
                check,
                summary=f"{check.summary}; {len(newly)} document(s) held until their bytes, "
                "the question set or the pipeline change (`corpusflow accept-held` indexes "
                "them anyway)",
            )
        report.elapsed_s = time.time() - self.started
        report.stage_s = {k: round(v, 3) for k, v in timer.totals.items()}
        self._finish_rates()
        store.runs.record(
            RunRecord(
                run_id=report.run_id,
                collection=report.collection,
                kind=self.kind,
                started_at=datetime.fromtimestamp(self.started, UTC),
                finished_at=datetime.now(UTC),
                status="failed" if undone else "completed",
                report_json=json.dumps(report.to_dict()),
                chunk_table=report.chunk_table,
                chunk_table_version=report.chunk_table_version,
            )
        )
        if check is not None and check.undone:
            raise RetrievalCheckFailed(
                f"run {report.run_id} was undone: {check.summary}", report.to_dict()
            )
        return report

    def _process(self, executor: Executor, work: list[WorkItem]) -> None:
        """Submit as capacity frees, commit in batches, never more than the in-flight
        limit of documents between submission and commit."""
        job, report, timer = self.job, self.report, self.timer
        settings = self.settings
        limit = in_flight_limit(settings)
        batch_size = min(settings.storage.write_batch_docs, limit)
        job.progress.add("parse", len(work))
        job.progress.add("embed", None)
        if self.budget is not None and (
            job.progress.bar is not None or self.on_progress is not None
        ):
            # The ETA by work, not by document count: each document advances the bar by
            # its estimated seconds (corpusflow.estimate.work_weights) once committed or failed.
            b = self.budget
            weights = work_weights(work, settings, b.rates, b.model, b.model_name, b.max_tokens)
            self.weights = {w.file.doc_id: x for w, x in zip(work, weights, strict=True)}
            job.progress.add(WORK_BAR, sum(weights))
            self.eta = WorkEta(report.run_id, len(work), sum(weights), time.monotonic())
            self._progress()
        with timer.time("load_tokenizer"):
            start = getattr(executor, "start", None)
            if start is not None:
                start(job, self.stack)
            kit = job.kit_for(executor, self.stack)
        flush: Callable[[], None] = getattr(executor, "flush", lambda: None)
        batch: list[Processed] = []
        batch_no = 0

        self._contextualizer = getattr(kit, "contextualizer", None)

        def add(done: Processed) -> None:
            nonlocal batch, batch_no
            if self.halted:  # a budget stopped the commits: left for the next run
                return
            batch.append(done)
            if done.parsed.status == "partial":
                report.partial += 1
            if len(batch) >= batch_size:
                batch_no += 1
                self._commit_within_budget(executor, str(batch_no), batch)
                batch = []

        with timer.time("plan_reuse"):
            items, reused = reuse_active_chunks(work, job.store, job.fps, settings)
        # A table built beside the active one first takes the active table's chunks of
        # documents cut the same way (same bytes, tokenizer and chunk settings).
        todo: Iterator[WorkItem] = iter(items)
        extra: list[WorkItem] = []
        for got in reused:
            if isinstance(got, WorkItem):
                extra.append(got)
                continue
            job.progress.advance("parse")
            report.reused += 1
            add(got)
        if extra:
            todo = iter([*items, *extra])
        finished: queue.SimpleQueue[tuple[WorkItem, Outcome]] = queue.SimpleQueue()

        def submit(item: WorkItem) -> None:
            future = executor.submit(ProcessDocument(item, job.source, settings, job.fps, kit))
            future.add_done_callback(lambda f: finished.put((item, _outcome(f))))

        pending = finished_n = 0
        exhausted = False
        while True:
            while not exhausted and not self.stopped_by and pending + len(batch) < limit:
                if self.budget is not None and self.budget.active:
                    stop = self.budget.may_start(
                        time.time(), self._llm_tokens(), finished_n, pending
                    )
                    if stop == WAIT:
                        break
                    if stop:
                        self._stop(stop, halt=False)
                        break
                nxt = next(todo, None)
                if nxt is None:
                    exhausted = True
                    break
                submit(nxt)
                pending += 1
            if not pending:
                break
            flush()
            item, outcome = finished.get()
            pending -= 1
            finished_n += 1
            job.progress.advance("parse")
            if isinstance(outcome, BaseException):
                self._stop_if_storage_full(outcome)
                self.failures.append((item, _as_document_error(outcome, Category.INTERNAL)))
                self._advance_work([item])
                continue
            if outcome.from_cache:
                report.parse_cache_hits += 1
            else:
                report.parsed += 1
            if self.rates is not None:
                self.rates.document(outcome)
            add(outcome)
        flush()
        if batch and not self.halted:
            batch_no += 1
            self._commit_within_budget(executor, str(batch_no), batch)
        self._progress(final=True)
        left = len(work) - len(self.committed) - len(self.failures)
        if self.stopped_by and left > 0:  # a budget met after the last document: finished
            report.stopped_by = f"run.{self.stopped_by}"
            report.left = left
            report.stop_reason = describe_stop(self.stopped_by, settings, report.left)
            self.log(report.stop_reason)
            _log.warning(report.stop_reason)

    # -- approval ---------------------------------------------------------------------
    def _approval_request(self, plan: Plan) -> ApprovalRequest | None:
        """What to ask, when the guard tripped or the plan says a budget would stop the
        run (and ``run.approval`` names that reason); None: nothing to ask."""
        assert self.estimate is not None
        asks = self.settings.run.approval
        stop = self.estimate.to_dict().get("budget_stop") if "budgets" in asks else None
        if not plan.guard and not stop:
            return None
        reasons = tuple(r for r in (plan.guard, stop["summary"] if stop else "") if r)
        by_status: dict[str, int] = {}
        for row in plan.deleted:
            by_status[str(row.status)] = by_status.get(str(row.status), 0) + 1
        return ApprovalRequest(
            run_id=self.report.run_id,
            collection=self.report.collection,
            source=self.source_uri,
            reasons=reasons,
            guard=bool(plan.guard),
            budgets=tuple(stop.get("exceeded") or [stop["budget"]]) if stop else (),
            estimate_lines=tuple(self.estimate.lines()),
            to_process=len(plan.work),
            deleted=len(plan.deleted),
            deleted_by_status=by_status,
            deleted_paths=tuple(sorted(r.path for r in plan.deleted)[:DELETED_SHOWN]),
        )

    def _ask_approval(self, plan: Plan, rates: Rates) -> None:
        """Ask ``self.approve`` and apply its answer (corpusflow.approval): approve lifts
        the budgets the plan would pass, trim drops the deletions, reject ends the run
        before any write. The answer goes into the run report (``approval``). The time
        spent waiting for it counts neither against run.max_wall nor as the run's
        overhead in its rates."""
        if self.approve is None:
            return
        request = self._approval_request(plan)
        if request is None:
            return
        self.log("approval needed: " + "; ".join(request.reasons))
        asked = time.time()
        decision = self.approve(request)
        self.waited_s = time.time() - asked
        self.report.approval = ApprovalRecord(
            reasons=list(request.reasons),
            answer=decision.answer.value,
            by=decision.by,
            note=decision.note,
            waited_s=round(self.waited_s, 3),
        )
        if decision.answer == Answer.REJECT:
            raise RunRejected(
                f"run {request.run_id} was not approved ({decision.by or 'rejected'}"
                f"{': ' + decision.note if decision.note else ''}): nothing changed"
            )
        if decision.answer == Answer.TRIM:
            plan.deleted = []
        elif request.budgets and self.budget is not None:
            lifted = {b.removeprefix("run.") for b in request.budgets}
            run = self.settings.run.model_copy(update=dict.fromkeys(lifted, 0))
            b = self.budget
            self.budget = Budget(
                self.settings.model_copy(update={"run": run}),
                b.rates,
                b.model,
                b.model_name,
                b.max_tokens,
                b.started,
            )
        if self.budget is not None:
            self.budget.started += self.waited_s  # max_wall counts from the answer
        spec, fps = self.job.spec, self.job.fps
        # The estimate the run goes on with (the deletions trimmed, the budgets lifted).
        self.estimate = estimate_plan(
            plan,
            self.budget.settings if self.budget else self.settings,
            rates,
            spec.fingerprint,
            spec.name,
            fps.max_tokens,
        )
        self.report.estimate = self.estimate.to_dict()
        done = "approved" if decision.answer == Answer.APPROVE else "trimmed (no deletions)"
        self.log(f"run {done} by {decision.by or 'the operator'}")

    # -- budgets ----------------------------------------------------------------------
    def _advance_work(self, items: list[WorkItem]) -> None:
        if self.weights:
            done = sum(self.weights.get(i.file.doc_id, 0.0) for i in items)
            self.job.progress.advance(WORK_BAR, done)
            if self.eta is not None:
                self.eta.advance(done, len(items))
                self._progress()

    def _progress(self, final: bool = False) -> None:
        if self.on_progress is not None and self.eta is not None:
            self.on_progress(self.eta.snapshot(time.monotonic(), final))

    def _llm_tokens(self) -> int:
        return int(getattr(self._contextualizer, "tokens", 0) or 0)

    def _stop(self, budget: str, halt: bool) -> None:
        """A budget stops the run: no document is started any more, and with ``halt``
        nothing more is committed (documents in flight are left for the next run)."""
        self.stopped_by = self.stopped_by or budget
        self.halted = self.halted or halt

    def _commit_within_budget(self, executor: Executor, label: str, batch: list[Processed]) -> None:
        """Commit ``batch``, or as many of its documents (in order) as the budgets allow;
        a batch cut short stops the run."""
        budget, rates = self.budget, self.rates
        if budget is None or rates is None or not budget.active:
            self._commit(executor, label, batch)
            return
        spent_cpu = rates.cpu_s + rates.write["write_s"]
        fits = ""
        take = len(batch)
        while take:
            chunks = sum(len(p.chunks.children) for p in batch[:take])
            fits = budget.fits(
                time.time(),
                self.report.embedded,
                chunks,
                spent_cpu,
                rates.embed["embed_s"],
                self._llm_tokens(),
            )
            if not fits:
                break
            take -= 1
        if take:
            self._commit(executor, label, batch[:take])
        if take < len(batch):
            self._stop(fits or "max_embedded", halt=True)

    def _finish_rates(self) -> None:
        """The run's measurements into its report, for the plans after it."""
        if self.rates is None:
            return
        rates = self.rates
        rates.llm["tokens"] = float(self._llm_tokens())
        rates.llm["requests"] = float(getattr(self._contextualizer, "calls", 0) or 0)
        self.report.llm_tokens = self._llm_tokens()
        out = rates.to_dict()
        totals = self.timer.totals
        if self.report.parsed or self.report.embedded:
            parse_s = sum(f.get("parse_s", 0.0) for f in rates.formats.values())
            chunk_s = sum(f.get("chunk_s", 0.0) for f in rates.formats.values())
            busy = (
                parse_s / max(1, self.settings.parse.workers)
                + chunk_s
                + totals.get("embed_write", 0.0)
            )
            run_s = self.report.elapsed_s - self.waited_s  # not the wait for an approval
            out["overhead_s"] = round(max(0.0, run_s - busy), 3)
        self.report.rates = out

    def _commit(self, executor: Executor, label: str, batch: list[Processed]) -> None:
        """Embed and commit a batch; a batch that fails is split so only the documents
        that fail alone are recorded as failed."""
        start = time.perf_counter()
        result = _outcome(executor.submit(WriteBatch(label, batch, self.job)))
        self.timer.add("embed_write", time.perf_counter() - start)
        if not isinstance(result, BaseException):
            if self.rates is not None:
                tokens = sum(c.n_tokens for p in batch for c in p.chunks.children)
                by_reason: dict[str, int] = {}
                for p in batch:
                    by_reason[p.item.reason] = by_reason.get(p.item.reason, 0) + len(
                        p.chunks.children
                    )
                self.rates.batch(
                    result.chunks,
                    tokens,
                    result.embedded,
                    result.embed_s,
                    max(0.0, time.perf_counter() - start - result.embed_s - result.load_s),
                    by_reason,
                )
            self.committed.extend((p.item.file, p.item.sha256) for p in batch)
            self._advance_work([p.item for p in batch])
            self.report.chunks_written += result.chunks
            self.report.embedded += result.embedded
            self.report.embed_cache_hits += result.cache_hits
            # Parts of embed_write: loading the model (once), and cache reads + encoding.
            if result.load_s:
                self.timer.add("load_model", result.load_s)
            self.timer.add("embed", result.embed_s)
            self.commits += 1
            with self.timer.time("release_memory"):
                release_free_memory()
            if self.commits % TIDY_EVERY_COMMITS == 0:
                # Each commit adds a fragment to the caches and to the run's chunk, parent
                # and ledger tables; unindexed fragments are scanned by every lookup and
                # merge, so a long run indexes and compacts them as it goes.
                with self.timer.time("tidy"):
                    store = self.job.store
                    store.caches.tidy()
                    store.chunks.tidy(self.job.spec.table_suffix, TIDY_EVERY_COMMITS)
                    store.ledger.tidy(self.job.fps.table_suffix, TIDY_EVERY_COMMITS)
            return
        self._stop_if_storage_full(result)
        if len(batch) > 1:
            for i, p in enumerate(batch, 1):
                self._commit(executor, f"{label}.{i}", [p])
            return
        self.failures.append((batch[0].item, _as_document_error(result, Category.EMBEDDING)))
        self._advance_work([batch[0].item])

    def _stop_if_storage_full(self, exc: BaseException) -> None:
        """A full disk is not the document's fault: stop the run instead of failing documents."""
        if is_storage_full(exc) and not isinstance(exc, StorageFullError):
            raise StorageFullError(
                f"the database at {self.settings.storage.db} is out of space ({exc}); batches "
                "committed so far are intact; free space and re-run to continue"
            ) from exc


def _outcome(future: Future[Any]) -> Any:
    """A finished (or, waited for here, finishing) future's result, or its error."""
    error = future.exception()
    return error if error is not None else future.result()


def _as_document_error(exc: BaseException, category: Category) -> DocumentError:
    if isinstance(exc, DocumentError):
        return exc
    return DocumentError(category, f"{type(exc).__name__}: {exc}")
