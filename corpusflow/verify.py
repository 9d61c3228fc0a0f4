"""The "nothing lost" check: the index agrees with its source and with itself.

Used by every reliability test and by operators as ``corpusflow verify``:

- every source file is in the active ledger exactly once, either ``indexed`` with
  its current content hash and a chunk count matching its rows, or ``failed`` /
  ``quarantined`` with an error category and no rows;
- no ledger entry or chunk row belongs to a document that is not in the source;
- in every chunk table of the collection: no duplicate chunk ids, row counts
  match the table's ledger, one embedding model (every row's manifest names the
  model the table is named after, and the vector dimension is that model's);
- after ``corpusflow forget`` (storage.erasure): no table holds a row of a forgotten
  document, and no file under the database directory holds a hashed 32-byte window of
  its text (the receipts' window hashes; a local database only). A forgotten file still
  in the source is reported as excluded, not as a loss;
- a document held by the retrieval check (corpusflow.holds) keeps the chunks of its
  previous indexed bytes (none when it is new): listed as held, not a loss, while the
  source holds the bytes that were held (or the indexed ones), or its file stays gone for
  a held deletion.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from common.errors import DocumentError
from common.settings import Settings
from corpusflow.holds import Hold
from sources import SourceFile, doc_id_for, open_source
from storage import Store
from storage.records import DocStatus, LedgerRow
from storage.tables import sql_in

if TYPE_CHECKING:
    from parsers import ParserFingerprints

_LIVE = (DocStatus.INDEXED, DocStatus.FAILED, DocStatus.QUARANTINED, DocStatus.HELD)


@dataclass
class VerifyReport:
    collection: str
    source: str | None
    checked_files: int = 0
    tables: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # Source changes newer than the last run: not losses, the next refresh handles them.
    pending: list[str] = field(default_factory=list)
    # Forgotten documents still in the source: excluded by their tombstone, not lost.
    forgotten: list[str] = field(default_factory=list)
    # Held by the retrieval check: their previous chunks kept, not lost.
    held: list[str] = field(default_factory=list)
    # The post-erasure check (None: the collection has no erasure receipt).
    erasure: dict[str, Any] | None = None
    # Documents failed or quarantined with their reason ("path: [category] message"):
    # not losses, but shown, also before the collection has a table.
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "source": self.source,
            "checked_files": self.checked_files,
            "tables": self.tables,
            "ok": self.ok,
            "violations": self.violations,
            "pending": self.pending,
            "forgotten": self.forgotten,
            "held": self.held,
            "erasure": self.erasure,
            "failed": self.failed,
        }


def nothing_lost(
    settings: Settings,
    source: str | None = None,
    rehash: bool = True,
    erasure_scan: bool = True,
) -> VerifyReport:
    """Check the collection's tables (and, given ``source``, the ledger against it).

    ``rehash`` hashes every indexed file to prove the index holds its current bytes;
    without it, files whose size and mtime match the ledger are taken as current.
    ``erasure_scan`` reads every file of the database directory for forgotten text
    when the collection has erasure receipts.
    """
    store = Store.from_settings(settings.storage)
    report = VerifyReport(settings.storage.collection, source)
    _check_erasures(store, settings, erasure_scan, report)
    active = store.pointer.active()
    ledger = store.ledger.current(store.chunks.suffix_of(active.chunk_table) if active else None)
    report.failed = [
        f"{r.path}: [{r.error_category}] {r.error_message}"
        for r in sorted(ledger.values(), key=lambda r: r.path)
        if r.status in (DocStatus.FAILED, DocStatus.QUARANTINED)
    ]
    if active is None:
        # No table yet: nothing indexed so far. Every source file must still be in the
        # ledger, failed with a reason (a folder where nothing could be indexed).
        if source is not None and not ledger:
            if any(True for _ in open_source(source, settings.source).list()):
                report.violations.append(
                    "the source has files but the collection has no active table"
                )
        elif source is not None:
            _check_source(store, ledger, source, settings, rehash, report)
            if any(r.status == DocStatus.INDEXED for r in ledger.values()):
                report.violations.append("documents are indexed but the collection has no table")
        return report
    for info in store.model_tables():
        report.tables.append(info["table"])
        _check_table(store, info["table"], report)
    if source is not None:
        _check_source(store, ledger, source, settings, rehash, report)
    return report


def _check_table(store: Store, table: str, report: VerifyReport) -> None:
    suffix = store.chunks.suffix_of(table)
    manifests = store.read_columns(table, ["manifest_json"]).column("manifest_json").to_pylist()
    models: dict[str, int] = {}
    for m in set(manifests):
        model = json.loads(m or "{}").get("model", {})
        models[f"{model.get('fingerprint')}"] = int(model.get("dim") or 0)
    foreign = [fp for fp in models if not suffix.endswith(f"_{fp}")]
    if foreign:
        report.violations.append(f"{table}: rows embedded by other models {sorted(foreign)}")
    dims = set(models.values())
    if len(dims) > 1:
        report.violations.append(f"{table}: rows of several vector dimensions {sorted(dims)}")
    dim = dims.pop() if dims else None
    if dim is None:
        field_type = store.db.open_table(table).schema.field("vector").type
        dim = int(getattr(field_type, "list_size", 0))
    report.violations.extend(f"{table}: {p}" for p in store.validate(suffix, dim))


def _parsed_text(store: Store, src: Any, f: SourceFile, fps: ParserFingerprints) -> bool:
    """Whether the parse cache holds a parse of the file's current bytes that has text."""
    try:
        cached = fps.cached(store.caches.get_parsed(src.content_hash(f), fps.by_format.values()))
    except (OSError, DocumentError):
        return False
    return cached is not None and bool(cached.markdown.strip())


def _check_source(
    store: Store,
    ledger: dict[str, LedgerRow],
    uri: str,
    settings: Settings,
    rehash: bool,
    report: VerifyReport,
) -> None:
    from parsers import parser_fingerprints

    src = open_source(uri, settings.source)
    parsers = parser_fingerprints(settings.parse)
    last = store.runs.last()
    seen_by_run = last.started_at.timestamp() if last and last.started_at else 0.0

    def source_problem(f: SourceFile, message: str) -> None:
        # A file last modified before the last run started should have been handled by it.
        if f.mtime < seen_by_run:
            report.violations.append(f"{f.rel_path}: {message}")
        else:
            report.pending.append(f"{f.rel_path}: {message} (changed after the last run)")

    listed: set[str] = set()
    for f in src.list():
        report.checked_files += 1
        listed.add(f.doc_id)
        row = ledger.get(f.doc_id)
        if row is not None and row.status == DocStatus.FORGOTTEN:
            report.forgotten.append(
                f"{f.rel_path}: forgotten ({row.error_message}); excluded while the file "
                "stays in the source (`corpusflow forget --undo` re-admits it)"
            )
            continue
        if row is None or row.status not in _LIVE:
            state = "missing" if row is None else row.status
            source_problem(f, f"in the source but {state} in the ledger")
            continue
        if row.path != f.rel_path or doc_id_for(row.path) != f.doc_id:
            report.violations.append(f"{f.rel_path}: ledger path {row.path!r} does not match")
        if row.status == DocStatus.HELD:
            _check_held(src, f, row, report, source_problem)
            continue
        if row.status != DocStatus.INDEXED:
            if not row.error_category:
                report.violations.append(f"{f.rel_path}: {row.status} without a reason")
            elif row.error_category == "empty" and _parsed_text(store, src, f, parsers):
                report.violations.append(
                    f"{f.rel_path}: failed as empty although its parse produced text"
                )
            continue
        same_stat = f.hint_matches(row.size, row.mtime, row.etag)
        if rehash or not same_stat:
            try:
                current = src.content_hash(f)
            except OSError as exc:
                report.violations.append(f"{f.rel_path}: unreadable ({exc})")
                continue
            if current != row.content_sha256:
                source_problem(f, "the index holds other bytes than the source")
    for doc_id, row in ledger.items():
        hold = Hold.from_json(row.hold_json) if row.status == DocStatus.HELD else None
        if hold is not None and hold.kind == "deletion" and doc_id not in listed:
            report.held.append(f"{row.path}: {hold.describe()}; its chunks are kept")
            continue
        if row.status in _LIVE and doc_id not in listed:
            report.pending.append(
                f"{row.path}: {row.status} in the ledger but gone from the source "
                "(the next refresh deletes it)"
            )


def _check_held(
    src: Any,
    f: SourceFile,
    row: LedgerRow,
    report: VerifyReport,
    source_problem: Callable[[SourceFile, str], None],
) -> None:
    """A held document: listed; the source must hold the bytes that were held or the
    indexed ones (the chunk count is checked with the table, ``Store.validate``)."""
    hold = Hold.from_json(row.hold_json)
    if hold is None:
        report.violations.append(f"{f.rel_path}: held without a reason")
        return
    report.held.append(f"{f.rel_path}: {hold.describe()}")
    try:
        current = src.content_hash(f)
    except OSError as exc:
        report.violations.append(f"{f.rel_path}: unreadable ({exc})")
        return
    if current not in (hold.sha256, row.content_sha256):
        source_problem(f, "held, and its bytes changed since (the next refresh tries them)")


def _check_erasures(store: Store, settings: Settings, scan: bool, report: VerifyReport) -> None:
    """No row of a forgotten document in any table; no hashed window of its text in any
    file under the database directory (receipts of re-admitted documents are skipped:
    their text is legitimately back)."""
    from storage.erasure import local_db_dir, scan_for_windows

    receipts = store.runs.erasures()
    if not receipts:
        return
    tombstones = store.ledger.tombstones()
    check: dict[str, Any] = {"receipts": len(receipts), "checked": [], "skipped": []}
    report.erasure = check
    windows: dict[str, tuple[list[int], list[str], list[str]]] = {}
    forgotten: set[str] = set()
    for r in receipts:
        ids = set(r["doc_ids"] or [])
        if not ids <= set(tombstones):
            check["skipped"].append(f"{r['erasure_id']} (a document was re-admitted)")
            continue
        check["checked"].append(r["erasure_id"])
        forgotten |= ids
        pre, conf, owners = windows.setdefault(r["window_key"], ([], [], []))
        pre.extend(r["window_prefilter"] or [])
        conf.extend(r["window_confirm"] or [])
        owners.append(r["erasure_id"])
    kinds = (store.name("chunks") + "__", store.name("parents") + "__")
    for name in store.table_names():
        if forgotten and name.startswith(kinds):
            table = store.db.open_table(name)
            left = int(table.count_rows(sql_in("doc_id", sorted(forgotten))))
            if left:
                report.violations.append(f"{name}: {left} row(s) of forgotten documents")
    root = local_db_dir(settings.storage.db)
    if not scan or root is None:
        check["scan"] = "skipped" if not scan else "not a local database"
        return
    files = scanned = found_total = 0
    for key, (pre, conf, owners) in windows.items():
        if not pre:
            continue
        found, files, n = scan_for_windows(root, key, pre, conf)
        scanned += n
        for path, count in sorted(found.items()):
            found_total += count
            report.violations.append(
                f"erasure {', '.join(owners)}: {count} window(s) of forgotten text in {path}"
            )
    check.update(
        scan="done",
        files_scanned=files,
        bytes_scanned=scanned,
        windows=sum(len(w[0]) for w in windows.values()),
        windows_found=found_total,
    )
