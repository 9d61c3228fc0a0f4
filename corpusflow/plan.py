"""The refresh plan: the source listing compared with the ledger, streamed.

A nightly refresh of a large corpus is mostly documents that did not change, so
the plan must cost little per unchanged document and hold nothing per document
in Python. The ledger is read once as Arrow columns (only those the decision
needs); the listing is consumed in slices, each joined to the ledger in Arrow,
and the rows whose change hint holds and whose fingerprints match are counted
there and never become Python objects. Only documents that need work, a hash,
a touched ledger row or a deletion reach Python, so memory follows the number
of changes plus a few Arrow columns of the ledger, not the corpus.

Forgotten documents (``corpusflow forget``, storage.erasure) have a tombstone in the
ledger (status ``forgotten``): while their files are still in the source they are
skipped (``Plan.forgotten``, and a warning says how to re-admit them); once the file
is gone the tombstone is marked ``deleted`` like any vanished document, so a file
created again at that path later is new. A ledger that has no row for a document
(a table built after the erasure) honours the tombstones of the collection's other
ledgers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import (
    TERMINAL_CATEGORIES,
    Category,
    ConfigurationError,
    DocumentError,
    is_storage_full,
)
from common.settings import Settings
from corpusflow.fingerprints import pipeline_fingerprint
from corpusflow.holds import Accept, Hold
from sources import Source, SourceFile
from storage import Store
from storage.records import DocStatus, LedgerRow, PlanReason

if TYPE_CHECKING:
    from corpusflow.fingerprints import Fingerprints

# What the decision reads from the ledger (not titles, messages or metadata).
PLAN_COLUMNS = (
    "doc_id",
    "status",
    "content_sha256",
    "size",
    "mtime",
    "etag",
    "error_category",
    "attempts",
    "format",
    "parser_fingerprint",
    "chunker_fingerprint",
    "model_fingerprint",
    "hold_json",
)
LISTING_SLICE = 20_000
# How a partial document's ledger message starts when pages are missing
# (corpusflow.writes.ledger_row).
MISSING_PAGES = "pages not read: "

log = logging.getLogger(__name__)


class DeletionGuardError(ConfigurationError):
    """A run would delete too large a share of the index (the source probably vanished)."""


@dataclass(slots=True)
class WorkItem:
    file: SourceFile
    sha256: str
    reason: PlanReason
    attempts: int = 0
    # The share of the document's pages to parse: a page retry (PlanReason.PAGES) parses
    # only its missing pages; 1.0 otherwise. Only the estimate reads it.
    page_share: float = 1.0


@dataclass(slots=True)
class Plan:
    work: list[WorkItem] = field(default_factory=list)
    unchanged: int = 0
    touched: list[LedgerRow] = field(default_factory=list)  # unchanged, stat refreshed
    deleted: list[LedgerRow] = field(default_factory=list)
    listed: int = 0
    # Paths of forgotten documents still in the source: skipped, not re-added.
    forgotten: list[str] = field(default_factory=list)
    # Documents held by the retrieval check whose hold stands: skipped (corpusflow.holds).
    held: list[tuple[str, Hold]] = field(default_factory=list)
    # The deletion guard's refusal when it tripped and the caller asked to decide itself
    # (``plan_changes(defer_guard=True)``); the deletions are planned all the same.
    guard: str = ""

    def count(self, reason: PlanReason) -> int:
        return sum(1 for w in self.work if w.reason == reason)


def plan_changes(
    source: Source,
    store: Store,
    settings: Settings,
    fps: Fingerprints,
    force_delete: bool = False,
    only_failed: bool = False,
    check: str = "",
    accept: Accept | None = None,
    defer_guard: bool = False,
    pages: bool = False,
) -> Plan:
    """Compare the source listing with the ledger of ``fps.table_suffix``.

    ``check`` is the retrieval check's fingerprint (corpusflow.fingerprints.check_fingerprint,
    "" without a check): a held document stays held only under the one that held it.
    ``accept`` plans only held documents (``corpusflow accept-held``), whatever their
    hold. The deletion guard raises DeletionGuardError, or with ``defer_guard`` records its
    refusal in ``plan.guard`` and plans the deletions (the caller asks someone:
    corpusflow.approval). With ``only_failed``, ``pages`` also plans the indexed documents
    with pages missing (ledger ``pages not read``) whose bytes are unchanged, as page
    retries (``PlanReason.PAGES``: only those pages are parsed again)."""
    ledger = store.ledger.columns(fps.table_suffix, PLAN_COLUMNS)
    index = _LedgerIndex(ledger)
    plan = Plan()
    tombstones = store.ledger.tombstones()
    touched: dict[str, dict[str, Any]] = {}
    holds = _Holds(check, pipeline_fingerprint(fps), accept)
    restricted = only_failed or accept is not None
    files = iter(source.list())
    for part in iter(lambda: list(itertools.islice(files, LISTING_SLICE)), []):
        plan.listed += len(part)
        looks = _needing_a_look(part, index, settings, fps, restricted, plan, only_failed and pages)
        for f, row in looks:
            forgotten = row is not None and row["status"] == DocStatus.FORGOTTEN
            if forgotten or (row is None and f.doc_id in tombstones):
                plan.forgotten.append(f.rel_path)
                continue
            if row is not None and row["status"] == DocStatus.HELD:
                if only_failed or holds.settle(f, row, source, settings, plan, touched):
                    continue
            elif accept is not None:
                continue
            _decide(f, row, source, settings, fps, only_failed, plan, touched, pages)
    if only_failed and pages:
        _keep_missing_pages(plan, store, fps.table_suffix)
    if plan.forgotten:
        shown = ", ".join(plan.forgotten[:5]) + (" ..." if len(plan.forgotten) > 5 else "")
        log.warning(
            "%d forgotten document(s) are still in the source and stay excluded: %s "
            "(re-admit one with `corpusflow forget --undo PATH`, or remove the file)",
            len(plan.forgotten),
            shown,
        )
    if touched:
        full = store.ledger.rows(fps.table_suffix, list(touched))
        plan.touched = [replace(full[d], **stat) for d, stat in touched.items()]
    if accept is not None and ledger.num_rows:
        held_gone = holds.deletions(ledger, index, accept=True)
        full = store.ledger.rows(fps.table_suffix, list(held_gone))
        plan.deleted = [r for r in full.values() if accept.covers(r.path)]
    elif not only_failed and ledger.num_rows:
        gone = pc.and_(pa.array(~index.seen), pc.not_equal(ledger["status"], DocStatus.DELETED))
        # A deletion the retrieval check undid stays held (not deleted, not counted).
        held_gone = holds.deletions(ledger, index, accept=False)
        if held_gone:
            full = store.ledger.rows(fps.table_suffix, list(held_gone))
            plan.held.extend((full[d].path, hold) for d, hold in held_gone.items())
        gone_ids = [d for d in ledger.filter(gone)["doc_id"].to_pylist() if d not in held_gone]
        # A forgotten file that vanished only lifts its tombstone: no index rows to lose.
        erased = pc.and_(gone, pc.equal(ledger["status"], DocStatus.FORGOTTEN))
        losing = len(gone_ids) - int(pc.sum(erased).as_py() or 0)
        indexed = int(
            pc.sum(
                pc.is_in(ledger["status"], pa.array([DocStatus.INDEXED, DocStatus.HELD]))
            ).as_py()
            or 0
        )
        limit = max(1, int(settings.storage.max_delete_fraction * indexed))
        if losing > limit and not force_delete:
            refusal = (
                f"refusing to delete {losing} of {indexed} indexed documents "
                f"(more than storage.max_delete_fraction={settings.storage.max_delete_fraction:g}); "
                f"is the source {source.root} mounted?"
            )
            if not defer_guard:
                raise DeletionGuardError(f"{refusal} Re-run with --force-delete if intended.")
            plan.guard = refusal
        if gone_ids:
            full = store.ledger.rows(fps.table_suffix, gone_ids)
            plan.deleted = [full[d] for d in gone_ids]
    return plan


def _keep_missing_pages(plan: Plan, store: Store, suffix: str) -> None:
    """Drop the page retries of partial documents with no page missing (a page read by a
    fallback is degraded, not missing): their ledger message says which pages are. The
    others get the share of their pages that is missing (``WorkItem.page_share``)."""
    retries = [w.file.doc_id for w in plan.work if w.reason == PlanReason.PAGES]
    if not retries:
        return
    rows = store.ledger.rows(suffix, retries)
    kept = []
    for w in plan.work:
        if w.reason == PlanReason.PAGES:
            row = rows.get(w.file.doc_id)
            missing = missing_page_count(getattr(row, "error_message", "") or "")
            if not missing:
                continue
            pages = getattr(row, "page_count", None) or 0
            w.page_share = min(1.0, missing / pages) if pages else 1.0
        kept.append(w)
    plan.work = kept


def missing_page_count(message: str) -> int:
    """How many pages a partial document's ledger message lists as not read (0: none);
    a list cut short by the message's length limit counts what is left of it."""
    if MISSING_PAGES not in message:
        return 0
    listed = message.split(MISSING_PAGES, 1)[1].split(";", 1)[0]
    return sum(1 for p in listed.split(",") if p.strip().isdigit())


class _Holds:
    """The planner's view of held documents (corpusflow.holds): whether a hold stands,
    and what a document whose hold is lifted becomes."""

    def __init__(self, check: str, pipeline: str, accept: Accept | None) -> None:
        self.check, self.pipeline, self.accept = check, pipeline, accept

    def settle(
        self,
        f: SourceFile,
        row: dict[str, Any],
        source: Source,
        settings: Settings,
        plan: Plan,
        touched: dict[str, dict[str, Any]],
    ) -> bool:
        """A listed file with a held ledger row: held (skipped), accepted (planned), or
        its hold is lifted. True when settled here; False leaves it to ``_decide`` as an
        indexed document (a lifted hold of a document with indexed bytes)."""
        hold = Hold.from_json(row["hold_json"])
        sha = ""
        if hold is not None and hold.sha256:
            hint = f.hint_matches(hold.size, hold.mtime, hold.etag)
            if settings.source.hash_shortcut and hint:
                sha = hold.sha256
            else:
                try:
                    sha = source.content_hash(f)
                except OSError:
                    sha = ""
        new = not row["content_sha256"]
        if self.accept is not None:
            if self.accept.covers(f.rel_path):
                reason = PlanReason.NEW if new else PlanReason.CHANGED
                plan.work.append(WorkItem(f, sha, reason))
            return True
        if (
            hold is not None
            and hold.kind != "deletion"
            and hold.stands(self.check, self.pipeline)
            and sha
            and sha == hold.sha256
        ):
            plan.held.append((f.rel_path, hold))
            return True
        # Lifted: other bytes (or the file is back), another question set, check or
        # pipeline. The document is decided afresh; if it turns out unchanged, its row
        # becomes indexed again (its chunks are those of its indexed bytes).
        if new:
            plan.work.append(WorkItem(f, sha, PlanReason.NEW))
            return True
        touched[f.doc_id] = {"status": DocStatus.INDEXED, "hold_json": None}
        return False

    def deletions(self, ledger: pa.Table, index: _LedgerIndex, accept: bool) -> dict[str, Hold]:
        """{doc_id: hold} of held deletions whose files are still gone: those whose hold
        stands, or (``accept``) every one."""
        gone = pc.and_(pa.array(~index.seen), pc.equal(ledger["status"], DocStatus.HELD))
        rows = ledger.filter(gone).select(["doc_id", "hold_json"]).to_pylist()
        out: dict[str, Hold] = {}
        for r in rows:
            hold = Hold.from_json(r["hold_json"])
            if hold is None or hold.kind != "deletion":
                continue  # a held change whose file then vanished: deleted as usual
            if accept or hold.stands(self.check, self.pipeline):
                out[r["doc_id"]] = hold
        return out


class _LedgerIndex:
    """The ledger's doc ids sorted once as fixed-width bytes (32 MiB for a million
    ids): a listing slice finds its rows with a binary search in NumPy, with no hash
    table per slice and no Python object per ledger row. ``seen`` marks the rows the
    listing named; the rest are deletions."""

    def __init__(self, ledger: pa.Table) -> None:
        self.ledger = ledger
        ids = ledger["doc_id"].to_numpy(zero_copy_only=False).astype(np.bytes_)
        self.order = np.argsort(ids, kind="stable")
        self.keys = ids[self.order]
        self.seen = np.zeros(ledger.num_rows, dtype=bool)

    def rows_of(self, doc_ids: list[str]) -> np.ndarray:
        """Ledger row number of each id, -1 where the ledger has none."""
        if not len(self.keys):
            return np.full(len(doc_ids), -1, dtype=np.int64)
        wanted = np.array(doc_ids, dtype=np.bytes_)
        pos = np.searchsorted(self.keys, wanted).clip(max=len(self.keys) - 1)
        rows = np.where(self.keys[pos] == wanted, self.order[pos], -1)
        self.seen[rows[rows >= 0]] = True
        return rows


def _needing_a_look(
    part: list[SourceFile],
    index: _LedgerIndex,
    settings: Settings,
    fps: Fingerprints,
    only_failed: bool,
    plan: Plan,
    partial: bool = False,
) -> Iterator[tuple[SourceFile, dict[str, Any] | None]]:
    """The files of one listing slice that the Arrow fast path cannot settle, with their
    ledger rows (None: not in the ledger). Settled files are counted as unchanged.
    ``partial``: indexed documents with content missing are never settled (a page retry)."""
    rows = index.rows_of([f.doc_id for f in part])
    known = rows >= 0
    looks: dict[int, dict[str, Any] | None] = {}
    if not only_failed:  # unknown files are new; a retry of failures looks only at failures
        looks = dict.fromkeys(np.flatnonzero(~known).tolist())
    where = np.flatnonzero(known)
    if len(where):
        joined = index.ledger.take(pa.array(rows[where]))
        for name, values, kind in (
            ("l_size", [part[i].size for i in where], pa.int64()),
            ("l_mtime", [part[i].mtime for i in where], pa.float64()),
            ("l_etag", [part[i].etag for i in where], pa.string()),
        ):
            joined = joined.append_column(name, pa.array(values, kind))
        settled_rows = pc.fill_null(_settled(joined, settings, fps), False)
        if partial:
            is_partial = pc.fill_null(pc.equal(joined["error_category"], "partial"), False)
            settled_rows = pc.and_(settled_rows, pc.invert(is_partial))
        settled = settled_rows.to_numpy(zero_copy_only=False)
        if not only_failed:  # a retry of failures counts nothing as unchanged
            plan.unchanged += int(settled.sum())
        rest = np.flatnonzero(~settled)
        for n, row in zip(rest.tolist(), joined.take(pa.array(rest)).to_pylist(), strict=True):
            looks[int(where[n])] = row
    for i in sorted(looks):  # listing order
        yield part[i], looks[i]


def _settled(joined: pa.Table, settings: Settings, fps: Fingerprints) -> pa.ChunkedArray:
    """Indexed rows with matching fingerprints whose change hint holds (the hash is not
    read when ``source.hash_shortcut`` is on): unchanged without a look in Python."""
    if not settings.source.hash_shortcut:
        return pa.chunked_array([pa.array([False] * joined.num_rows, pa.bool_())])
    same_size = pc.equal(joined["l_size"], joined["size"])
    # The stat and tag exactly as recorded: no hash to read and no ledger row to refresh.
    exact = pc.and_(
        pc.and_(same_size, pc.equal(joined["l_mtime"], joined["mtime"])),
        pc.or_kleene(
            pc.and_(pc.is_null(joined["l_etag"]), pc.is_null(joined["etag"])),
            pc.equal(joined["l_etag"], joined["etag"]),
        ),
    )
    return pc.and_(
        pc.and_(
            pc.and_(
                pc.equal(joined["status"], DocStatus.INDEXED), pc.is_valid(joined["content_sha256"])
            ),
            exact,
        ),
        pc.and_(
            pc.and_(
                pc.equal(joined["parser_fingerprint"], _expected_parser(joined["format"], fps)),
                pc.equal(joined["chunker_fingerprint"], fps.chunker),
            ),
            pc.equal(joined["model_fingerprint"], fps.model),
        ),
    )


def _expected_parser(formats: pa.ChunkedArray, fps: Fingerprints) -> pa.ChunkedArray:
    """Each row's current parser fingerprint, from the format its parse recorded (null
    for a format no backend reads any more: never settled)."""
    known = pa.array(list(fps.parsers.by_format))
    values = pa.array(list(fps.parsers.by_format.values()))
    return pc.take(values, pc.index_in(formats, value_set=known))


def _decide(
    f: SourceFile,
    row: dict[str, Any] | None,
    source: Source,
    settings: Settings,
    fps: Fingerprints,
    only_failed: bool,
    plan: Plan,
    touched: dict[str, dict[str, Any]],
    pages: bool = False,
) -> None:
    """One file the fast path did not settle: new, changed, retried, re-chunked, touched
    (unchanged, its stat in ``touched`` to refresh the ledger row) or unchanged after
    hashing; with ``only_failed`` and ``pages``, a partial document's page retry."""
    live = row is not None and row["status"] != DocStatus.DELETED
    if (
        only_failed
        and pages
        and row is not None
        and row["status"] == DocStatus.INDEXED
        and row["error_category"] == "partial"
    ):
        _page_retry(f, row, source, plan)
        return
    # retry-failed takes quarantined documents too: it is the operator's "I fixed it".
    if only_failed and not (
        live and row and row["status"] in (DocStatus.FAILED, DocStatus.QUARANTINED)
    ):
        return
    if not live or row is None:
        plan.work.append(WorkItem(f, "", PlanReason.NEW))
        return
    etag = row["etag"]
    same_stat = f.hint_matches(row["size"], row["mtime"], etag)
    failed = row["status"] in (DocStatus.FAILED, DocStatus.QUARANTINED)
    # A terminal failure or a quarantined file is skipped until its bytes change, or
    # what judged it does (a release that reads its format, a raised limit).
    stuck = (
        failed
        and not only_failed
        and (row["status"] == DocStatus.QUARANTINED or row["error_category"] in TERMINAL_CATEGORIES)
        and row["parser_fingerprint"] == fps.failures
    )
    too_large = row["error_category"] == Category.TOO_LARGE
    if stuck and too_large and not row["content_sha256"] and same_stat:
        # Refused by its size before it was read (source.max_file_size_mb): no hash to
        # compare, and the size decides, so it is not read every night. Refusals that
        # read the bytes (page count, chunking time) have a hash and take the path below.
        plan.unchanged += 1
        return
    if settings.source.hash_shortcut and same_stat and row["content_sha256"]:
        sha = row["content_sha256"]
    else:
        try:
            sha = source.content_hash(f)
        except DocumentError as exc:
            # Its bytes cannot be read (an archive member in a method nothing here
            # decodes, an encrypted member): the same failure on an unchanged change
            # hint is unchanged; anything else is worked on, and fails there alone.
            if stuck and same_stat and exc.category == row["error_category"]:
                plan.unchanged += 1
                return
            sha = ""
        except Exception as exc:  # one file never stops the plan
            if is_storage_full(exc):
                raise
            sha = ""
    if failed:
        if stuck and row["content_sha256"] and sha == row["content_sha256"]:
            plan.unchanged += 1
        else:
            plan.work.append(WorkItem(f, sha, PlanReason.RETRY, attempts=row["attempts"] or 0))
    elif not row["content_sha256"] or sha != row["content_sha256"]:
        touched.pop(f.doc_id, None)  # a lifted hold: processing writes the row
        plan.work.append(WorkItem(f, sha, PlanReason.CHANGED))
    elif (row["parser_fingerprint"], row["chunker_fingerprint"], row["model_fingerprint"]) != (
        fps.parsers.of(row["format"]),
        fps.chunker,
        fps.model,
    ):
        touched.pop(f.doc_id, None)
        plan.work.append(WorkItem(f, sha, PlanReason.RECHUNK))
    else:
        plan.unchanged += 1
        if (row["size"], row["mtime"], etag) != (f.size, f.mtime, f.etag):
            stat = {"size": f.size, "mtime": f.mtime, "etag": f.etag}
            touched.setdefault(f.doc_id, {}).update(stat)


def _page_retry(f: SourceFile, row: dict[str, Any], source: Source, plan: Plan) -> None:
    """Plan a page retry of a partial document whose bytes are those indexed; other bytes
    are the next refresh's (a change, parsed whole)."""
    try:
        sha = source.content_hash(f)
    except Exception as exc:  # one file never stops the plan
        if is_storage_full(exc):
            raise
        return
    if sha and sha == row["content_sha256"]:
        plan.work.append(WorkItem(f, sha, PlanReason.PAGES))
