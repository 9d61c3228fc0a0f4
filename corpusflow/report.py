"""What one run reports (``RunReport``: counts, tables, timings, the retrieval check's
result ``CheckResult``, holds, approval) and the wall time it spent per stage
(``StageTimer``)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What the retrieval check found (``RunReport.check``): the question set's figures
    before and after a change, the questions whose rank changed, whether the change is
    worse than the margin (``worse``), refused and undone, and a one-line ``summary``;
    or, when the check was skipped, only why (``skipped``, ``summary``).

    ``to_dict`` is its JSON in the run's report (``runs.report_json``, ``--json``, the
    Prefect artifacts), key for key as ``from_dict`` reads it back."""

    questions: int = 0
    source: str = ""
    mode: str = ""
    k: int = 0
    margin: float | None = None  # None: report only, never refuse or undo
    before: dict[str, float] = field(default_factory=dict)  # HitRate@5, MRR@10, HitRate@k
    after: dict[str, float] = field(default_factory=dict)
    changed: list[dict[str, Any]] = field(default_factory=list)  # question, path, ranks
    comparison: str = ""  # ``gate``'s figure-by-figure comparison
    worse: bool = False
    refused: bool = False
    undone: bool = False
    summary: str = ""
    # Seconds the question set took before and after the change, and (a refresh writing
    # in place) each table's version before and after the run, and as restored.
    seconds: dict[str, float] | None = None
    versions: dict[str, dict[str, int | None]] | None = None
    skipped: bool = False  # only ``summary`` says anything

    @classmethod
    def skip(cls, summary: str) -> CheckResult:
        return cls(summary=summary, skipped=True)

    def to_dict(self) -> dict[str, Any]:
        if self.skipped:
            return {"summary": self.summary}
        out = asdict(self)
        del out["skipped"]
        for key in ("seconds", "versions"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult | None:
        """The result in a run's report; None for ``{}`` (no check configured)."""
        if not data:
            return None
        if set(data) == {"summary"}:
            return cls.skip(data["summary"])
        known = set(cls.__dataclass_fields__) - {"skipped"}
        return cls(**{k: v for k, v in data.items() if k in known})


class _Row:
    """A flat record of the run's report: ``to_dict`` is its JSON there, field for field."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Failure(_Row):
    """A document this run failed (``RunReport.failures``): its source-relative path, the
    error's category and message, and which attempt this was (``"1"`` the first; a string,
    as in the artifact's table)."""

    path: str
    category: str
    message: str
    attempts: str


@dataclass(frozen=True, slots=True)
class ApprovalRecord(_Row):
    """The answer a run was given when it asked for approval (``RunReport.approval``,
    corpusflow.approval): why it asked, the answer (``approve``, ``trim``, ``reject``),
    who gave it with their note, and the seconds the run waited for it."""

    reasons: list[str]
    answer: str
    by: str
    note: str
    waited_s: float


@dataclass(slots=True)
class RunReport:
    run_id: str
    collection: str
    new: int = 0
    changed: int = 0
    retried: int = 0
    rechunked: int = 0
    page_retries: int = 0  # partial documents whose missing pages were parsed again
    unchanged: int = 0
    deleted: int = 0
    forgotten: int = 0  # erased documents still in the source, skipped (``corpusflow forget``)
    # Held by the retrieval check (corpusflow.holds): skipped, or held by this undone run.
    held: int = 0
    accepted: int = 0  # held documents indexed anyway (``corpusflow accept-held``)
    failed: int = 0
    partial: int = 0  # indexed with content missing (ledger error_category "partial")
    reused: int = 0  # chunks taken from the active table (same bytes, same chunker)
    parsed: int = 0  # documents actually parsed (not served by the parse cache)
    parse_cache_hits: int = 0
    chunks_written: int = 0
    embedded: int = 0  # distinct texts sent to the embedding model
    embed_cache_hits: int = 0  # distinct texts whose vectors came from the embedding cache
    chunk_table: str = ""
    chunk_table_version: int | None = None
    activated: bool = False
    gate: str = ""  # the quality gate's comparison, when one ran
    model: str = ""
    executor: str = ""  # the name of the executor that processed the documents
    elapsed_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)
    # What this run measured, per format and per model, for later plans
    # (corpusflow.estimate.Rates.to_dict); read back from the runs table.
    rates: dict[str, Any] = field(default_factory=dict)
    # The plan's estimate made before the run started (corpusflow.estimate.Estimate.to_dict).
    estimate: dict[str, Any] = field(default_factory=dict)
    # The budget (run.max_*) that stopped the run early, "" when it finished, and what
    # it left for the next run: documents still new/changed, and why.
    stopped_by: str = ""
    stop_reason: str = ""
    left: int = 0
    llm_tokens: int = 0  # LLM tokens spent on contextual prefixes (chunk.contextual='llm')
    failures: list[Failure] = field(default_factory=list)
    # The retrieval check (before/after figures, changed questions, whether it undid
    # the run); None when no question set is configured ({} in ``to_dict``).
    check: CheckResult | None = None
    held_documents: list[dict[str, Any]] = field(default_factory=list)  # Hold.row of each
    # The approval this run asked for (corpusflow.approval); None when it asked nothing
    # ({} in ``to_dict``).
    approval: ApprovalRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["check"] = self.check.to_dict() if self.check is not None else {}
        out["approval"] = self.approval.to_dict() if self.approval is not None else {}
        return out


class StageTimer:
    """Accumulates wall time per stage name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds

    def time(self, stage: str) -> _Timed:
        return _Timed(self, stage)


class _Timed:
    def __init__(self, timer: StageTimer, stage: str) -> None:
        self.timer, self.stage = timer, stage

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timer.add(self.stage, time.perf_counter() - self.start)
