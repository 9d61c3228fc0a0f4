"""After the writes: validation, activation, indexes, tag, and the retrieval check.

``Activation`` is the part of a refresh that decides what readers see. Before the run's
first write (``before_writes``) it records the pre-run versions of the tables and runs
the question set (``check.*``) on the active table, pinning readers there when an undo
is possible; after the writes (``activate_and_index``) it validates a table built beside
the active one and switches readers to it (through the quality gate or the question set),
builds indexes, runs the question set again and restores the pre-run versions when the
run made retrieval worse, then tags the chunk table's version.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.errors import ConfigurationError, CorpusflowError
from common.settings import Settings
from corpusflow.evaluate import RetrievalCheck
from corpusflow.plan import Plan
from corpusflow.report import CheckResult, RunReport, StageTimer
from embedding import Embedder, load_embedder
from storage import Store
from storage.records import Pin, Pointer

if TYPE_CHECKING:
    from corpusflow.job import Job

# (store, active pointer row, candidate chunk table, candidate's embedder) -> (switch?, summary)
Gate = Callable[[Store, Pointer, str, Embedder], tuple[bool, str]]


class ValidationFailedError(CorpusflowError):
    """A rebuilt table did not validate; the active pointer was left alone."""


class Activation:
    """What readers see after one run (see the module's docstring)."""

    def __init__(
        self,
        job: Job,
        report: RunReport,
        timer: StageTimer,
        kind: str,
        activate: bool,
        gate: Gate | None,
        accepting: bool,
        check: RetrievalCheck | None,
        log: Callable[[str], None],
    ) -> None:
        self.job, self.report, self.timer = job, report, timer
        self.settings: Settings = job.settings
        self.kind, self.activate, self.gate = kind, activate, gate
        self.accepting = accepting  # ``corpusflow accept-held``: the check is skipped
        self.log = log
        self.check = check
        # The question set's result on the table before the run, and the pre-run
        # versions of the tables an undo restores.
        self.check_before: dict[str, Any] | None = None
        self.check_before_s = 0.0
        self.pre_versions: dict[str, tuple[str, int | None]] = {}

    def activate_and_index(self) -> None:
        job, report, timer = self.job, self.report, self.timer
        store, spec = job.store, job.spec
        active = store.pointer.active()
        target = report.chunk_table
        if not store.exists(target):
            return
        from storage.maintenance import ensure_indexes

        switching = active is None or (self.activate and active.chunk_table != target)
        indexed = False
        if switching:
            problems = store.validate(spec.table_suffix, spec.dim)
            if problems:
                raise ValidationFailedError(
                    f"{target} failed validation, the active table is unchanged: "
                    + "; ".join(problems)
                )
            # Indexed before the gate: a keyword or hybrid question set needs the FTS
            # index of the candidate, and indexing a table readers do not use is harmless.
            with timer.time("index"):
                ensure_indexes(store, target, self.settings.storage)
            indexed = True
            allowed = True
            if self.gate is not None and active is not None:
                with timer.time("quality_gate"):
                    allowed, report.gate = self.gate(store, active, target, job.embedder)
                self.log(f"quality gate: {report.gate}")
            elif self.check is not None and active is not None:
                allowed = self._beside(active, target)
            if allowed:
                store.pointer.set_active(spec.table_suffix, spec.to_dict())
                report.activated = True
        elif active is not None and active.chunk_table != target:
            self.log(
                f"built {target} beside the active {active.chunk_table}; "
                "`corpusflow reindex` validates and switches"
            )
        if (report.chunks_written or report.deleted) and not indexed:
            with timer.time("index"):
                ensure_indexes(store, target, self.settings.storage)
        if self.check_before is not None and self._after():
            return  # undone: the restored version is the run's version, and it is not tagged
        report.chunk_table_version = store.chunks.tag(
            spec.table_suffix, f"{self.kind}-{report.run_id}"
        )

    def before_writes(self, plan: Plan) -> None:
        """A refresh writing in place into the active table: record the pre-run versions
        of the chunk, parent and ledger tables (tagging the chunk table's when an undo is
        possible) and run the question set on the table as it is."""
        check, report = self.check, self.report
        if check is None:
            return
        if self.accepting:
            report.check = CheckResult.skip(
                "retrieval check: skipped, accepting "
                f"{len(plan.work) + len(plan.deleted)} held document(s)"
            )
            return
        store, spec = self.job.store, self.job.spec
        active = store.pointer.active()
        target = report.chunk_table
        if active is None:
            report.check = CheckResult.skip("retrieval check: skipped, no active table yet")
            return
        if active.chunk_table != target:
            if not self.activate:
                report.check = CheckResult.skip(
                    f"retrieval check: skipped, {target} is built beside the active "
                    "table (checked by `corpusflow reindex` before it is switched in)"
                )
            return  # a reindex: checked against the active table before switching
        if not (plan.work or plan.deleted):
            return  # nothing will change the table
        for kind, name in (
            ("chunks", target),
            ("parents", active.parent_table),
            ("ledger", store.ledger.name(spec.table_suffix)),
        ):
            self.pre_versions[kind] = (name, store.version_of(name))
        if check.margin is not None:
            store.chunks.tag(spec.table_suffix, f"pre-{self.kind}-{report.run_id}")
            # Readers stay on these versions until the check has passed: the run's batches,
            # and a result the check refuses, are never what a search reads.
            ledger_table, ledger_version = self.pre_versions["ledger"]
            store.pointer.pin(
                Pin(
                    chunks=self.pre_versions["chunks"][1],
                    ledger=ledger_version,
                    ledger_table=ledger_table,
                    parents=self.pre_versions["parents"][1],
                    run_id=report.run_id,
                )
            )
        start = time.perf_counter()
        with self.timer.time("retrieval_check"):
            self.check_before = check.run(store, target, active.parent_table, self.job.embedder)
        self.check_before_s = time.perf_counter() - start

    def _after(self) -> bool:
        """Run the question set again after the run's writes and indexes; when it is worse
        than the margin, restore the three tables to their pre-run versions. Whether the
        run was undone."""
        check, report, before = self.check, self.report, self.check_before
        assert check is not None and before is not None
        store = self.job.store
        chunks, _ = self.pre_versions["chunks"]
        parents, _ = self.pre_versions["parents"]
        start = time.perf_counter()
        with self.timer.time("retrieval_check"):
            after = check.run(store, chunks, parents, self.job.embedder)
        after_s = time.perf_counter() - start
        versions: dict[str, dict[str, int | None]] = {}
        for kind, (name, version) in self.pre_versions.items():
            versions[kind] = {"before": version, "after": store.version_of(name)}
        result = replace(
            check.compare(before, after),
            seconds={"before": round(self.check_before_s, 3), "after": round(after_s, 3)},
            versions=versions,
        )
        if result.refused:
            with self.timer.time("undo"):
                for kind, (name, version) in self.pre_versions.items():
                    versions[kind]["restored"] = store.restore_version(name, version)
            chunk_v = versions["chunks"]
            result = replace(
                result,
                undone=True,
                summary=result.summary
                + (
                    f"; undone: {chunks} restored to version {chunk_v['before']} "
                    f"(as version {chunk_v['restored']}), parents and ledger too"
                ),
            )
            report.chunk_table_version = chunk_v["restored"]
        if check.margin is not None:
            store.pointer.unpin()  # passed: readers move to the new version; undone: to the restored one
        report.check = result
        self.log(result.summary)
        return result.undone

    def _beside(self, active: Pointer, target: str) -> bool:
        """A table built beside the active one (reindex): the question set on the active
        table (with its own model) and on the candidate; whether it may be switched in."""
        from corpusflow.api import spec_from_json

        check, report, store = self.check, self.report, self.job.store
        assert check is not None
        start = time.perf_counter()
        with self.timer.time("retrieval_check"):
            old_embedder = load_embedder(self.settings.embed, spec_from_json(active.model_json))
            before = check.run(store, active.chunk_table, active.parent_table, old_embedder)
            mid = time.perf_counter()
            after = check.run(
                store,
                target,
                store.chunks.parent_name(store.chunks.suffix_of(target)),
                self.job.embedder,
            )
        result = replace(
            check.compare(before, after),
            seconds={"before": round(mid - start, 3), "after": round(time.perf_counter() - mid, 3)},
        )
        if result.refused:
            result = replace(result, summary=f"{result.summary}; {target} was not activated")
        report.check = result
        report.gate = result.comparison
        self.log(result.summary)
        return not result.refused


def load_check(settings: Settings) -> RetrievalCheck | None:
    cfg = settings.check
    if not cfg.questions:
        return None
    try:
        return RetrievalCheck.load(cfg.questions, cfg.margin, cfg.mode, cfg.k)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"check.questions: {exc}") from exc
