"""Erasure: remove documents from every table that holds their content, with a receipt.

``forget(store, paths, storage_settings)`` takes the collection's write lease, then for the
documents named by their source-relative paths:

1. reads what every version of every chunk, parent and ledger table still holds of
   them (chunk ids, texts, contexts, embedding keys, content hashes), so that rows an
   older version still carries (an earlier edit of the document) are found as well;
2. writes a tombstone into every ledger of the collection (status ``forgotten``: the
   planner skips the file while it is still in the source, ``corpusflow.plan``);
3. rewrites every table that holds a row of them without those rows: chunk and parent
   tables of every model (active, rollback target, tables being built), the parse
   cache (by content hash), the context cache (by context), the embedding caches (by
   embedding key), legacy staging tables (by chunk id), and the ledgers. A Lance
   ``delete`` only marks rows deleted and compaction skips a fragment with few
   deletions, so the table is rewritten (one overwrite commit, streamed) instead;
4. deletes the tags of those tables (a tag pins its version, and every earlier version
   holds the rows) and removes every version but the latest (cleanup with no age
   limit, unverified files included: the lease guarantees no writer is mid-commit).
   This ends time travel to before the erasure for the tables touched;
5. rebuilds the indexes an overwrite dropped (full-text and vector indexes of chunk
   tables, the key indexes of the caches);
6. records a receipt in ``<collection>__erasures`` and returns it.

The receipt never holds the text. For ``verify`` it keeps, per forgotten text (chunk,
parent section, context), the sha256 of the text and keyed hashes of a few 32-byte
windows of its UTF-8 bytes: a 32-bit linear prefilter and a keyed sha256 to confirm.
``scan_for_windows`` reads every file under the database directory once, computes the
prefilter of every 32-byte window with NumPy and confirms candidates with sha256.
Limits: it finds text stored as plain UTF-8 (how Lance writes strings; the tests check
a canary is found before erasure); it cannot see text that was compressed, JSON-escaped
(non-ASCII characters in the parse cache's JSON) or tokenised (full-text index), nor
texts shorter than 32 bytes; and anyone who guesses a window's exact bytes can confirm
the guess with the stored key (as with any verifiable hash).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from common.settings import StorageSettings
from storage.lease import collection_lease
from storage.records import DocStatus, LedgerRow
from storage.schema import embed_key
from storage.store import Store
from storage.tables import batches, sql_in

log = logging.getLogger(__name__)

WINDOW = 32  # bytes per hashed window
WINDOW_STEP = 128  # a window every this many bytes of a text
WINDOWS_PER_TEXT = 16


@dataclass
class Receipt:
    erasure_id: str
    collection: str
    started_at: datetime
    finished_at: datetime | None = None
    paths: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    still_in_source: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chunk_sha256: list[str] = field(default_factory=list)
    window_key: str = ""
    window_prefilter: list[int] = field(default_factory=list)
    window_confirm: list[str] = field(default_factory=list)

    @property
    def rows_removed(self) -> int:
        return sum(int(t.get("rows_removed", 0)) for t in self.tables.values())

    @property
    def versions_pruned(self) -> int:
        return sum(int(t.get("versions_pruned", 0)) for t in self.tables.values())

    @property
    def tags_removed(self) -> list[str]:
        return [f"{n}:{tag}" for n, t in sorted(self.tables.items()) for tag in t.get("tags", [])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "erasure_id": self.erasure_id,
            "collection": self.collection,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "paths": self.paths,
            "doc_ids": self.doc_ids,
            "rows_removed": self.rows_removed,
            "versions_pruned": self.versions_pruned,
            "tags_removed": self.tags_removed,
            "tables": self.tables,
            "still_in_source": self.still_in_source,
            "not_found": self.not_found,
            "notes": self.notes,
            "texts_hashed": len(self.chunk_sha256),
            "windows": len(self.window_prefilter),
        }

    def row(self) -> dict[str, Any]:
        return {
            "erasure_id": self.erasure_id,
            "collection": self.collection,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "paths": self.paths,
            "doc_ids": self.doc_ids,
            "rows_removed": self.rows_removed,
            "versions_pruned": self.versions_pruned,
            "tags_removed": self.tags_removed,
            "tables_json": json.dumps(self.tables, sort_keys=True),
            "chunk_sha256": self.chunk_sha256,
            "window_key": self.window_key,
            "window_prefilter": self.window_prefilter,
            "window_confirm": self.window_confirm,
            "notes": self.notes + [f"still in the source: {p}" for p in self.still_in_source],
        }


# -- window hashes ------------------------------------------------------------------
def _linear_keys(key: str) -> np.ndarray:
    words = np.frombuffer(hashlib.sha256(bytes.fromhex(key)).digest(), dtype="<u8")
    return (words | np.uint64(1)).astype(np.uint64)


def _prefilter(window: bytes, keys: np.ndarray) -> int:
    w = np.frombuffer(window, dtype="<u8").astype(np.uint64)
    with np.errstate(over="ignore"):
        h = np.sum(w * keys, dtype=np.uint64)
    return int(h >> np.uint64(32))


def _confirm(window: bytes, key: str) -> str:
    return hashlib.sha256(bytes.fromhex(key) + window).hexdigest()[:16]


def text_windows(text: str) -> list[bytes]:
    """The 32-byte windows of a text that the receipt hashes: one every WINDOW_STEP
    bytes and the last, at most WINDOWS_PER_TEXT."""
    data = text.encode()
    if len(data) < WINDOW:
        return []
    starts = list(range(0, len(data) - WINDOW + 1, WINDOW_STEP))[: WINDOWS_PER_TEXT - 1]
    starts.append(len(data) - WINDOW)
    return [data[s : s + WINDOW] for s in dict.fromkeys(starts)]


def window_hashes(texts: Iterable[str], key: str) -> tuple[list[int], list[str]]:
    keys = _linear_keys(key)
    pre: list[int] = []
    conf: list[str] = []
    seen: set[bytes] = set()
    for text in texts:
        for w in text_windows(text):
            if w not in seen:
                seen.add(w)
                pre.append(_prefilter(w, keys))
                conf.append(_confirm(w, key))
    return pre, conf


def _block_prefilters(block: bytes, keys: np.ndarray) -> np.ndarray:
    """The prefilter of every 32-byte window of ``block`` (len(block) - 31 values)."""
    size = len(block)
    n = size - WINDOW + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint32)
    words = np.empty(size - 7, dtype=np.uint64)  # the 8-byte word at every offset
    for r in range(8):
        count = (size - r) // 8
        words[r::8] = np.frombuffer(block, dtype="<u8", count=count, offset=r)
    with np.errstate(over="ignore"):
        h = words[0:n] * keys[0]
        for i in range(1, 4):
            h += words[8 * i : 8 * i + n] * keys[i]
    return (h >> np.uint64(32)).astype(np.uint32)


def scan_for_windows(
    root: Path, key: str, prefilter: Sequence[int], confirm: Sequence[str], block_mib: int = 16
) -> tuple[dict[str, int], int, int]:
    """Files under ``root`` holding any hashed window: {file: windows found}, files and
    bytes scanned. Every file is read once, in blocks that overlap by 31 bytes."""
    keys = _linear_keys(key)
    targets = np.unique(np.asarray(list(prefilter), dtype=np.uint32))
    wanted = set(confirm)
    found: dict[str, int] = {}
    files = scanned = 0
    block_size = block_mib * 2**20
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if not path.is_file() or path.is_symlink():
                continue
            files += 1
            tail = b""
            with path.open("rb") as fh:
                while chunk := fh.read(block_size):
                    scanned += len(chunk)
                    block = tail + chunk
                    pre = _block_prefilters(block, keys)
                    for i in np.flatnonzero(np.isin(pre, targets)).tolist():
                        if _confirm(block[i : i + WINDOW], key) in wanted:
                            rel = str(path.relative_to(root))
                            found[rel] = found.get(rel, 0) + 1
                    tail = block[-(WINDOW - 1) :]
    return found, files, scanned


def local_db_dir(uri: str) -> Path | None:
    """The database directory of a local URI (None for object stores)."""
    if uri.startswith("file://"):
        return Path(uri.removeprefix("file://"))
    if "://" in uri:
        return None
    return Path(uri)


# -- the erasure ---------------------------------------------------------------------
def _quiet_cleanup(table: Any) -> None:
    """Compact and remove every version but the latest (and unreferenced files)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "removes every version" warning: intended
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


def _not_in(column: str, values: Sequence[str]) -> str:
    return " AND ".join(f"NOT ({sql_in(column, part)})" for part in batches(list(values)))


def _count(table: Any, where: str) -> int:
    return int(table.count_rows(where))


def rewrite_without(store: Store, name: str, column: str, values: Sequence[str]) -> int:
    """Rewrite table ``name`` without the rows whose ``column`` is in ``values``, in one
    overwrite commit streamed from the current version; returns the rows removed (no
    commit when there are none)."""
    values = [v for v in dict.fromkeys(values) if v]
    table = store.find(name) if values else None
    if table is None:
        return 0
    if column not in table.schema.names:
        return 0
    matching = sum(_count(table, sql_in(column, part)) for part in batches(values))
    if matching == 0:
        return 0
    rewrite(store, name, _not_in(column, values))
    return matching


def rewrite(store: Store, name: str, keep: str | None = None) -> None:
    """Overwrite a table with its own (kept) rows: new data files, no deletion files."""
    table = store.db.open_table(name)
    schema = table.schema
    total = int(table.count_rows())
    query = table.search()
    if keep:
        query = query.where(keep)
    reader = query.limit(max(total, 1)).to_batches()

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield pa.Table.from_batches([batch]).select(schema.names).cast(schema).to_batches()[0]

    kept = list(batches()) if total <= 0 else None
    data: Any = (
        pa.Table.from_batches(kept, schema=schema)
        if kept is not None
        else pa.RecordBatchReader.from_batches(schema, batches())
    )
    table.add(data, mode="overwrite")


def _history_rows(
    store: Store, name: str, doc_ids: Sequence[str], columns: Sequence[str]
) -> tuple[list[dict[str, Any]], int]:
    """Rows of ``doc_ids`` in every version of table ``name`` (selected columns present
    in each version), and how many versions have any."""
    handle = store.find(name)
    if handle is None:
        return [], 0
    out: list[dict[str, Any]] = []
    with_rows = 0
    try:
        for info in sorted(handle.list_versions(), key=lambda v: int(v["version"])):
            handle.checkout(int(info["version"]))
            present = [c for c in columns if c in handle.schema.names]
            if "doc_id" not in handle.schema.names:
                continue
            rows: list[dict[str, Any]] = []
            for part in batches(list(doc_ids)):
                n = max(int(handle.count_rows(sql_in("doc_id", part))), 0)
                if n:
                    got = handle.search().where(sql_in("doc_id", part)).select(present)
                    rows.extend(got.limit(n).to_arrow().to_pylist())
            with_rows += bool(rows)
            out.extend(rows)
    finally:
        handle.checkout_latest()
    return out, with_rows


def resolve_paths(
    store: Store, paths: Sequence[str], source: str | None = None
) -> tuple[dict[str, str], list[str], list[str]]:
    """{doc_id: relative path} of the documents named, the paths not found in any
    ledger, and those still present in the source (local sources only)."""
    from sources import doc_id_for

    known: dict[str, str] = {}
    for name in store.table_names():
        if name.startswith(store.name("documents") + "__"):
            for p in store.read_columns(name, ["path"]).column("path").to_pylist():
                known[p] = doc_id_for(p)
    root = Path(source).resolve() if source and "://" not in source else None
    found: dict[str, str] = {}
    missing: list[str] = []
    present: list[str] = []
    for raw in paths:
        rel = raw.replace("\\", "/").removeprefix("./")
        absolute = Path(raw).expanduser()
        if absolute.is_absolute():
            resolved = absolute.resolve()
            if root is not None and resolved.is_relative_to(root):
                rel = resolved.relative_to(root).as_posix()
            else:  # the longest ledger path the absolute path ends with
                ends = [p for p in known if resolved.as_posix().endswith("/" + p)]
                rel = max(ends, key=len) if ends else rel
            if rel in known and resolved.is_file():
                present.append(rel)
        if rel not in known:
            missing.append(raw)
            continue
        found[known[rel]] = rel
        if root is not None and (root / rel).is_file() and rel not in present:
            present.append(rel)
    return found, missing, present


def forget(
    store: Store,
    paths: Sequence[str],
    settings: StorageSettings,
    source: str | None = None,
    erase_files: Callable[[Sequence[str]], int] | None = None,
) -> Receipt:
    """Erase the documents at ``paths`` (source-relative, as in the ledger; absolute
    paths under ``source`` too) from every table of the collection. Raises LookupError
    when none of them is known.

    ``erase_files`` is given the content SHA-256s the documents were indexed under and
    removes what outside the tables was kept by them (the parser's repro bundles);
    it returns how many it removed (a note on the receipt)."""
    with collection_lease(settings):
        # A dead checked refresh's pinned, unchecked writes are undone first: erasure
        # prunes old versions, which would remove the versions readers are pinned to.
        store.pointer.recover_pin()
        return _forget(store, paths, settings, source, erase_files)


def _forget(
    store: Store,
    paths: Sequence[str],
    settings: StorageSettings,
    source: str | None,
    erase_files: Callable[[Sequence[str]], int] | None = None,
) -> Receipt:
    from storage.maintenance import ensure_indexes

    receipt = Receipt(uuid.uuid4().hex[:12], store.collection, datetime.now(UTC))
    docs, receipt.not_found, receipt.still_in_source = resolve_paths(store, paths, source)
    if not docs:
        raise LookupError(
            f"no document of collection {store.collection!r} has the path(s) "
            f"{', '.join(map(repr, paths))} (paths are source-relative, as `corpusflow status` "
            "and search results show them)"
        )
    ids = sorted(docs)
    receipt.doc_ids = ids
    receipt.paths = [docs[d] for d in ids]
    names = store.table_names()

    def kind(prefix: str) -> list[str]:
        return sorted(n for n in names if n.startswith(store.name(prefix) + "__"))

    # 1. What every version holds of the documents.
    texts: dict[str, None] = {}
    contexts: set[str] = set()
    keys: set[str] = set()
    chunk_ids: set[str] = set()
    shas: set[str] = set()
    touched: dict[str, int] = {}  # table -> versions holding rows of the documents
    for name in kind("chunks"):
        rows, n = _history_rows(
            store, name, ids, ["chunk_id", "text", "context", "embed_text", "embed_key"]
        )
        touched[name] = n
        for r in rows:
            chunk_ids.add(r["chunk_id"])
            texts.update(dict.fromkeys(t for t in (r.get("text"), r.get("context")) if t))
            if r.get("context"):
                contexts.add(r["context"])
            key = r.get("embed_key") or (embed_key(r["embed_text"]) if r.get("embed_text") else "")
            if key:
                keys.add(key)
    for name in kind("parents"):
        rows, n = _history_rows(store, name, ids, ["text"])
        touched[name] = n
        texts.update(dict.fromkeys(r["text"] for r in rows if r.get("text")))
    for name in kind("documents"):
        rows, n = _history_rows(store, name, ids, ["content_sha256"])
        shas.update(r["content_sha256"] for r in rows if r.get("content_sha256"))

    if erase_files is not None and shas and (removed_files := erase_files(sorted(shas))):
        receipt.notes.append(f"{removed_files} repro bundle folder(s) of the documents removed")

    # 2. Tombstones in every ledger (also those that never saw the documents: a table
    # being built must not add them either).
    stamp = receipt.started_at.isoformat(timespec="seconds")
    for name in kind("documents"):
        suffix = name.removeprefix(store.name("documents") + "__")
        current = store.ledger.rows(suffix, ids)
        tombs = [
            LedgerRow(
                doc_id=d,
                path=docs[d],
                size=current[d].size if d in current else None,
                mtime=current[d].mtime if d in current else None,
                etag=current[d].etag if d in current else None,
                status=DocStatus.FORGOTTEN,
                error_category=DocStatus.FORGOTTEN,
                error_message=f"erased by `corpusflow forget` ({receipt.erasure_id}, {stamp})",
            )
            for d in ids
        ]
        store.ledger.upsert(suffix, tombs)
        rewrite(store, name)  # the old row versions go with the old data files
        receipt.tables[name] = {"rows_removed": 0, "tombstones": len(tombs)}

    # 3. Rewrite every table holding rows of the documents without them.
    removals: list[tuple[str, str, Sequence[str]]] = []
    removals += [(n, "doc_id", ids) for n in kind("chunks") + kind("parents")]
    removals.append((store.name("parse_cache"), "content_sha256", sorted(shas)))
    removals.append((store.name("context_cache"), "context", sorted(contexts)))
    removals += [(n, "embed_key", sorted(keys)) for n in kind("embed_cache")]
    removals += [(n, "chunk_id", sorted(chunk_ids)) for n in kind("staging")]
    had_fts: set[str] = set()
    for name, column, values in removals:
        table = store.find(name)
        if table is None:
            continue
        indexed = bool(table.list_indices())
        removed = rewrite_without(store, name, column, values)
        if removed and indexed and name.startswith(store.name("chunks") + "__"):
            had_fts.add(name)
        if removed or touched.get(name):
            receipt.tables.setdefault(name, {})["rows_removed"] = removed

    # 4. Tags and old versions of every table touched.
    for name, info in receipt.tables.items():
        table = store.db.open_table(name)
        before = len(table.list_versions())
        tags = table.tags.list()
        info["tags"] = [f"{t}@{int(v['version'])}" for t, v in sorted(tags.items())]
        for tag in tags:
            table.tags.delete(tag)
        _quiet_cleanup(table)
        info["versions_before"] = before
        info["versions_after"] = len(table.list_versions())
        info["versions_pruned"] = before - info["versions_after"]

    # 5. Indexes the overwrite dropped.
    for name in sorted(had_fts):
        table = store.find(name)
        if table is not None and int(table.count_rows()):
            receipt.tables[name]["indexes"] = ensure_indexes(store, name, settings)
    store.caches.tidy()  # the caches' key indexes

    # 6. The receipt.
    receipt.chunk_sha256 = sorted(hashlib.sha256(t.encode()).hexdigest() for t in texts)
    receipt.window_key = store.runs.erasure_key() or secrets.token_hex(32)
    receipt.window_prefilter, receipt.window_confirm = window_hashes(texts, receipt.window_key)
    pruned_tables = sorted(n for n, t in receipt.tables.items() if t.get("versions_pruned"))
    if pruned_tables:
        receipt.notes.append(
            "time travel to versions before this erasure is no longer possible for: "
            + ", ".join(pruned_tables)
        )
    if receipt.tags_removed:
        receipt.notes.append(
            f"{len(receipt.tags_removed)} tag(s) that pinned versions holding the documents "
            "were deleted"
        )
    receipt.finished_at = datetime.now(UTC)
    store.runs.record_erasure(receipt.row())
    log.info("erasure %s: %s", receipt.erasure_id, receipt.to_dict())
    return receipt


def undo(store: Store, paths: Sequence[str], settings: StorageSettings) -> list[str]:
    """Lift the tombstones of ``paths``: the next refresh adds the files again (as new
    documents: their content was erased and is parsed and embedded again)."""
    from sources import doc_id_for

    with collection_lease(settings):
        lifted: list[str] = []
        tomb = store.ledger.tombstones()
        for raw in paths:
            rel = raw.replace("\\", "/").removeprefix("./")
            if doc_id_for(rel) not in tomb:
                ends = [p for p in tomb.values() if raw.endswith("/" + p)]
                rel = max(ends, key=len) if ends else rel
            if doc_id_for(rel) in tomb:
                lifted.append(rel)
        if not lifted:
            raise LookupError(f"no forgotten document has the path(s) {', '.join(paths)}")
        ids = [doc_id_for(p) for p in lifted]
        for name in store.table_names():
            if not name.startswith(store.name("documents") + "__"):
                continue
            suffix = name.removeprefix(store.name("documents") + "__")
            rows = store.ledger.rows(suffix, ids)
            store.ledger.upsert(
                suffix,
                [
                    replace(r, status=DocStatus.DELETED, error_category=None, error_message=None)
                    for r in rows.values()
                    if r.status == DocStatus.FORGOTTEN
                ],
            )
        return lifted
