"""Documents held by the retrieval check.

A refresh that the retrieval check undoes (``check.margin``, corpusflow.engine) would
otherwise leave its documents changed, so every later refresh would redo and undo them
again. Instead, after the undo, each document the run committed or deleted is marked
``held`` in the ledger (storage.records.DocStatus.HELD) with a ``Hold``: which bytes
(hash and change hint) or which deletion was refused, by which run, under which
question set and settings, and which questions got worse with the figures before and
after. The row keeps the previous indexed bytes' hash, chunk count and fingerprints, and
the chunk table keeps their chunks (nothing is lost; a new document held has none).

The planner (corpusflow.plan) skips a held document, touching nothing, while the hold
stands: the same bytes (a deleted file: still gone), the same question set and check
settings (``fingerprints.check_fingerprint``) and the same pipeline (``pipeline_fingerprint``:
parsers, chunker, model). When any of them changes, the document is processed (and
checked) again like any change. ``corpusflow accept-held`` indexes held documents anyway
(``Accept``), with the retrieval check skipped for that run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from storage.records import DocStatus, LedgerRow

if TYPE_CHECKING:
    from corpusflow.report import CheckResult
    from sources import SourceFile
    from storage import Store

# At most this many of the questions that got worse are kept in each hold (all of them
# are in the undone run's record, ``runs.report_json``).
MAX_QUESTIONS = 20

HoldKind = Literal["change", "new", "deletion"]


@dataclass(slots=True)
class Hold:
    """Why a document is held: ``ledger.hold_json``."""

    kind: HoldKind  # a change of an indexed document, a new document, or a deletion
    run_id: str  # the undone run
    held_at: str  # ISO time of the undo
    check: str  # check_fingerprint when it was held
    pipeline: str  # pipeline_fingerprint when it was held
    # The refused bytes (not for a deletion): their hash and change hint.
    sha256: str | None = None
    size: int | None = None
    mtime: float | None = None
    etag: str | None = None
    summary: str = ""  # the check's one-line summary
    before: dict[str, float] = field(default_factory=dict)  # HitRate@5, MRR@10 before the run
    after: dict[str, float] = field(default_factory=dict)  # ... and after it (undone)
    questions_worse: int = 0
    questions: list[dict[str, Any]] = field(default_factory=list)  # question, path, ranks

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Hold | None:
        if not text:
            return None
        data = json.loads(text)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def stands(self, check: str, pipeline: str) -> bool:
        """Whether what judged it is unchanged (the bytes are compared by the caller)."""
        return self.check == check and self.pipeline == pipeline

    def describe(self) -> str:
        what = {"change": "change", "new": "new document", "deletion": "deletion"}[self.kind]
        figures = ", ".join(
            f"{key} {self.before[key]:.3f} -> {self.after[key]:.3f}"
            for key in ("hit_rate_at_5", "mrr_at_10")
            if key in self.before and key in self.after
        )
        return (
            f"{what} held by the retrieval check of run {self.run_id} ({self.held_at}): "
            f"{self.questions_worse} question(s) worse; {figures}"
        )

    def row(self, path: str) -> dict[str, Any]:
        """A flat row for tables (the Prefect artifact, ``corpusflow status --json``)."""
        return {
            "path": path,
            "kind": self.kind,
            "run_id": self.run_id,
            "held_at": self.held_at,
            "questions_worse": self.questions_worse,
            "questions": self.questions,
            "before": self.before,
            "after": self.after,
        }


@dataclass(frozen=True, slots=True)
class Accept:
    """Held documents to index anyway (``corpusflow accept-held``): these source-relative
    paths, or every held document when ``paths`` is empty."""

    paths: frozenset[str] = frozenset()

    def covers(self, path: str) -> bool:
        return not self.paths or path in self.paths


def worse_questions(changed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The changed questions whose rank got worse (lower, or lost)."""
    return [
        c
        for c in changed
        if c["before"] is not None and (c["after"] is None or c["after"] > c["before"])
    ]


def record_holds(
    store: Store,
    suffix: str,
    run_id: str,
    committed: list[tuple[SourceFile, str]],
    deleted: list[LedgerRow],
    check_result: CheckResult,
    check: str,
    pipeline: str,
    touched: Sequence[LedgerRow] = (),
) -> list[dict[str, Any]]:
    """After an undo (the ledger is back at its pre-run version): mark the run's
    committed documents (file, hash of the bytes committed) and deletions held, in one
    ledger commit, with the ``touched`` rows the run wrote before its check (unchanged
    documents: refreshed stats, lifted holds), which the undo reverted. Returns the
    ``Hold.row``s."""
    worse = worse_questions(check_result.changed)
    common = {
        "run_id": run_id,
        "held_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "check": check,
        "pipeline": pipeline,
        "summary": check_result.summary,
        "before": dict(check_result.before),
        "after": dict(check_result.after),
        "questions_worse": len(worse),
        "questions": worse[:MAX_QUESTIONS],
    }
    ids = [f.doc_id for f, _ in committed] + [r.doc_id for r in deleted]
    previous = store.ledger.rows(suffix, ids)
    rows: list[LedgerRow] = []
    out: list[dict[str, Any]] = []
    for f, sha in committed:
        row = previous.get(f.doc_id)
        # Chunks of earlier bytes to keep: an indexed document, or one held with some.
        indexed = (
            row is not None
            and row.status in (DocStatus.INDEXED, DocStatus.HELD)
            and bool(row.content_sha256)
        )
        hold = Hold(
            kind="change" if indexed else "new",
            sha256=sha or None,
            size=f.size,
            mtime=f.mtime,
            etag=f.etag,
            **common,  # type: ignore[arg-type]
        )
        if row is None or not indexed:
            # New (or failed, or deleted) before the run: no chunks of its own to keep.
            row = LedgerRow(doc_id=f.doc_id, path=f.rel_path, chunk_count=0)
        row.status, row.hold_json = DocStatus.HELD, hold.to_json()
        rows.append(row)
        out.append(hold.row(f.rel_path))
    for gone in deleted:
        row = previous.get(gone.doc_id, gone)
        if row.status not in (DocStatus.INDEXED, DocStatus.HELD) or not row.chunk_count:
            # No chunks: its deletion cannot have changed retrieval; recorded as deleted.
            rows.append(
                replace(
                    row,
                    status=DocStatus.DELETED,
                    content_sha256=None,
                    chunk_count=0,
                    hold_json=None,
                )
            )
            continue
        hold = Hold(kind="deletion", **common)  # type: ignore[arg-type]
        row.status, row.hold_json = DocStatus.HELD, hold.to_json()
        rows.append(row)
        out.append(hold.row(row.path))
    held = {r.doc_id for r in rows}
    rows.extend(r for r in touched if r.doc_id not in held)
    store.ledger.upsert(suffix, rows)
    return out
