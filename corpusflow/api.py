"""Read side: search a collection's tables (what a RAG service calls) and report status.

Modes:
- ``dense``: cosine similarity of the query embedding (LanceDB vector search);
- ``keyword``: LanceDB full-text search (BM25) on the contextualised chunk text; the
  index segments Chinese, Japanese and Korean with ICU's dictionaries and keeps English
  stemming and stop words (storage.maintenance.FTS_SETTINGS), and Lance tokenises the
  query with the index's own tokenizer, so a Chinese query matches Chinese words in a
  mixed-language table;
- ``sparse``: BGE-M3 lexical weights, dot product of query and chunk token weights;
- ``hybrid``: weighted reciprocal rank fusion of dense with sparse (when the model has a
  sparse head) or keyword, ``score = sum w / (rrf_k + rank)``; the weights depend on the
  query's script (``search.*`` settings): the keyword leg, strong on Chinese, Japanese
  and Korean through the ICU index, weighs more for a query in those scripts; rrf_k and
  the dense weight, when unset, are the table's model's (embedding.presets.fusion_defaults);
  the fused list keeps one chunk per parent section ahead of the rest
  (``search.distinct_parents``, ``one_per_parent``).

Every query reads one snapshot: the pointer once (so a reindex swap or rollback is seen
whole or not at all), the chunk table at one version for all of its legs, and the parent
table at a version taken after it. Writers insert a batch's new parents before they
switch its chunks and delete its old parents only after, so the parents of any chunk
version a reader holds are there when it looks; a reader that still misses one (a
refresh ran two commits between its two version reads) takes a new snapshot. Each hit
carries the versions it was read at (``chunk_table``, ``table_version``,
``parent_version``).

Filters are applied inside LanceDB before ranking (prefilter), so a chunk a user
may not read is never a candidate. Access fails closed: ``groups`` keeps chunks
whose ACL names one of the caller's groups, or that have no ACL; a caller who names
no group sees unrestricted chunks only, and seeing everything takes the explicit,
logged ``all_groups=True``. ``lang`` keeps chunks detected as one of the given
languages (chunking.language).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from chunking.language import cjk_runs, detect_language, has_cjk
from common.errors import ConfigurationError
from common.settings import SearchSettings, Settings
from embedding import Embedder, ModelSpec
from embedding.presets import fusion_defaults
from embedding.query_encoder import load_query_embedder
from storage import Store
from storage.records import ChunkRow, DocStatus, LedgerRow, Pin, Pointer
from storage.tables import read_table, sql_in

_log = logging.getLogger("corpusflow.access")

Mode = Literal["dense", "sparse", "keyword", "hybrid"]
MODES: tuple[str, ...] = ("dense", "sparse", "keyword", "hybrid")
_COLUMNS = list(ChunkRow.HIT_COLUMNS)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Filters:
    path_prefix: str | None = None
    format: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # exact values of metadata fields
    # The caller's groups: chunks with an ACL naming none of them are never candidates.
    # No groups = unrestricted chunks only; ``all_groups`` (an audited override) = all.
    groups: Sequence[str] | None = ()
    all_groups: bool = False
    lang: Sequence[str] | None = None  # ISO 639-1 codes of chunk languages to keep

    def where(self) -> str | None:
        clauses = []
        if self.path_prefix:
            escaped = self.path_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            clauses.append(f"path LIKE {_quote(escaped + '%')}")
        if self.format:
            clauses.append(f"format = {_quote(self.format)}")
        if not self.all_groups:
            groups = ", ".join(_quote(g) for g in self.groups or ())
            clauses.append(
                f"(acl_groups IS NULL OR array_has_any(acl_groups, [{groups}]))"
                if groups
                else "acl_groups IS NULL"
            )
        if self.lang:
            clauses.append(f"lang IN ({', '.join(_quote(x.lower()) for x in self.lang)})")
        return " AND ".join(clauses) or None

    def accepts(self, row: dict[str, Any]) -> bool:
        if not self.metadata:
            return True
        meta = json.loads(row.get("metadata_json") or "{}")
        return all(meta.get(k) == v for k, v in self.metadata.items())


def active_spec(store: Store) -> tuple[Pointer, ModelSpec]:
    active = store.pointer.active()
    if active is None:
        raise ConfigurationError(
            f"collection {store.collection!r} in {store.uri} has no active table; "
            "run `corpusflow ingest` first"
        )
    return active, spec_from_json(active.model_json)


def spec_from_json(model_json: str) -> ModelSpec:
    fields = json.loads(model_json)
    fields.pop("fingerprint", None)
    return ModelSpec(**fields)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one query reads: a chunk table and its parent table, each at one version."""

    chunk_table: str
    parent_table: str
    chunks: Any  # the chunk table, checked out at ``chunk_version``
    parents: Any  # the parent table at ``parent_version`` (None when there is none)
    chunk_version: int
    parent_version: int | None


# Snapshots a query takes at most when a refresh keeps committing between its reads.
_SNAPSHOT_TRIES = 5


class Searcher:
    """Searches a collection's chunk table with the model that built it."""

    def __init__(
        self,
        store: Store,
        chunk_table: str,
        parent_table: str,
        embedder: Embedder,
        pinned: Pin | None = None,
        fusion: SearchSettings | None = None,
        follow: Settings | None = None,
    ):
        """``pinned``: the versions of the chunk and parent tables to read instead of the
        latest (the pointer's pin while a checked refresh runs). ``follow``: re-read the
        collection's active pointer at each query (``for_active``), so a reindex swap or a
        rollback takes effect for the next query, whole."""
        self.store = store
        self.chunk_table = chunk_table
        self.parent_table = parent_table
        self.embedder = embedder
        self.pinned = pinned
        self.fusion = fusion or SearchSettings()
        self._follow = follow
        self._use_table(store.db.open_table(chunk_table))
        self._override_logged = False

    def _use_table(self, table: Any) -> None:
        # A table written before a column existed (``lang``, ``cjk_text``) is read
        # without it.
        self.table = table
        names = set(table.schema.names)
        self.columns = [c for c in _COLUMNS if c in names]
        self.has_bigrams = "cjk_text" in names

    @classmethod
    def for_active(cls, settings: Settings) -> Searcher:
        """The active table, queried with the model that built it. A dense-only BERT model
        embeds queries through embedding.query_encoder (NumPy, no torch / transformers
        imports: a cold ``corpusflow search`` costs about the lancedb import, ~3.4 s
        against ~20 s on a shared 2-core VM; docs/benchmarks.md); any other model, or one
        that encoder does not reproduce exactly, through its own backend."""
        store = Store.from_settings(settings.storage)
        active, spec = active_spec(store)
        return cls(
            store,
            active.chunk_table,
            active.parent_table,
            load_query_embedder(settings.embed, spec),
            active.pinned,
            settings.search,
            follow=settings,
        )

    # -- snapshots -----------------------------------------------------------------------
    def _current(self) -> None:
        """Follow the active pointer (one read): table names, pin and, when a swap
        changed the model, the query embedder."""
        if self._follow is None:
            return
        active, spec = active_spec(self.store)
        if active.chunk_table != self.chunk_table:
            if spec.fingerprint != self.embedder.spec.fingerprint:
                self.embedder = load_query_embedder(self._follow.embed, spec)
            self.chunk_table, self.parent_table = active.chunk_table, active.parent_table
            self._use_table(self.store.db.open_table(active.chunk_table))
        self.pinned = active.pinned

    def snapshot(self) -> Snapshot:
        """The chunk table at one version (pinned or latest), then the parent table at a
        version read after it."""
        self._current()
        pinned = self.pinned
        chunks = self.store.db.open_table(self.chunk_table)
        if pinned is not None and pinned.chunks is not None:
            chunks.checkout(int(pinned.chunks))
        else:
            chunks.checkout(int(chunks.version))
        parents = self.store.find(self.parent_table)
        parent_version = None
        if parents is not None:
            if pinned is not None and pinned.parents is not None:
                parents.checkout(int(pinned.parents))
            else:
                parents.checkout(int(parents.version))
            parent_version = int(parents.version)
        return Snapshot(
            self.chunk_table,
            self.parent_table,
            chunks,
            parents,
            int(chunks.version),
            parent_version,
        )

    def search(
        self,
        query: str,
        k: int = 5,
        mode: Mode = "hybrid",
        filters: Filters | None = None,
        rrf_k: int | None = None,
    ) -> list[dict[str, Any]]:
        filters = filters or Filters()
        if filters.all_groups:
            # Audited once per searcher (an evaluation runs hundreds of queries), each
            # query at debug level.
            if not self._override_logged:
                _log.warning(
                    "ACL override: searching %s across all groups (all_groups=True)",
                    self.chunk_table,
                )
                self._override_logged = True
            _log.debug("all-groups query on %s: %r", self.chunk_table, query[:200])
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; one of {', '.join(MODES)}")
        for _ in range(_SNAPSHOT_TRIES):
            snap = self.snapshot()
            hits = self._search(snap, query, k, mode, filters, rrf_k)
            if hits is not None:
                return hits
        # A writer committed between every pair of version reads: answer from the last
        # snapshot, with the parents it could find.
        return self._search(snap, query, k, mode, filters, rrf_k, partial=True) or []

    def _search(
        self,
        snap: Snapshot,
        query: str,
        k: int,
        mode: Mode,
        filters: Filters,
        rrf_k: int | None,
        partial: bool = False,
    ) -> list[dict[str, Any]] | None:
        if filters.lang and "lang" not in self.columns:
            raise ConfigurationError(
                f"table {snap.chunk_table} was built before chunk languages were recorded; "
                "run `corpusflow ingest` again to re-chunk it, then filter by language"
            )
        table = snap.chunks
        fetch = k * 10 if filters.metadata else k
        if mode == "dense":
            ranked = self._dense(query, fetch, filters, table)
        elif mode == "keyword":
            ranked = self._keyword(query, fetch, filters, table)
        elif mode == "sparse":
            ranked = self._sparse(query, fetch, filters, table)
        else:
            depth = max(fetch * 4, 50)
            cjk = has_cjk(query)
            lexical = (
                self._sparse(query, depth, filters, table)
                if self.embedder.has_sparse
                else self._keyword(query, depth, filters, table)
            )
            # Unset fusion settings take the model's defaults (embedding.presets).
            model_k, model_dense = fusion_defaults(self.embedder.spec)
            if rrf_k is None:
                rrf_k = model_k if self.fusion.rrf_k is None else self.fusion.rrf_k
            dense = self._dense(query, depth, filters, table)
            legs = [dense, lexical]
            weights = [
                model_dense if self.fusion.dense_weight is None else self.fusion.dense_weight,
                self.fusion.keyword_weight,
            ]
            if cjk:
                lexical_weight, bigram_weight = self._cjk_weights(query, dense)
                weights[1] = lexical_weight
                if bigram_weight > 0 and self.has_bigrams:
                    legs.append(self._bigrams(query, depth, filters, table))
                    weights.append(bigram_weight)
            ranked = rrf(legs, rrf_k, weights=weights)
        ranked = [(row, score) for row, score in ranked if filters.accepts(row)]
        if mode == "hybrid" and self.fusion.distinct_parents:
            ranked = one_per_parent(ranked)
        return self._finish(snap, ranked[:k], partial)

    # -- retrievers: each returns [(row, score)] best first ------------------------------
    def _dense(
        self, query: str, limit: int, filters: Filters, table: Any = None
    ) -> list[tuple[dict[str, Any], float]]:
        vector = self.embedder.embed([query], batch_size=1).dense[0]
        q = (
            (table or self.table)
            .search(vector.tolist(), vector_column_name="vector")
            .distance_type("cosine")
            .select([*self.columns, "_distance"])
        )
        where = filters.where()
        if where:
            q = q.where(where, prefilter=True)
        return [(r, 1.0 - float(r["_distance"])) for r in q.limit(limit).to_list()]

    def _keyword(
        self, query: str, limit: int, filters: Filters, table: Any = None
    ) -> list[tuple[dict[str, Any], float]]:
        return self._full_text(query, "embed_text", limit, filters, table)

    def _bigrams(
        self, query: str, limit: int, filters: Filters, table: Any = None
    ) -> list[tuple[dict[str, Any], float]]:
        terms = cjk_runs(query)
        return self._full_text(terms, "cjk_text", limit, filters, table) if terms else []

    def _full_text(
        self, query: str, column: str, limit: int, filters: Filters, table: Any = None
    ) -> list[tuple[dict[str, Any], float]]:
        q = (
            (table or self.table)
            .search(query, query_type="fts", fts_columns=column)
            .select([*self.columns, "_score"])
        )
        where = filters.where()
        if where:
            q = q.where(where, prefilter=True)
        try:
            rows = q.limit(limit).to_list()
        except Exception as exc:  # no FTS index yet (empty table) or an unparsable query
            if "index" in str(exc).lower():
                return []
            raise
        return [(r, float(r["_score"])) for r in rows]

    def _cjk_weights(
        self, query: str, dense: list[tuple[dict[str, Any], float]]
    ) -> tuple[float, float]:
        """The keyword (or sparse) and CJK bigram legs' weights for a CJK query, by the
        share of the dense leg's top 10 written in the query's language. Both lexical
        indexes find text in the query's own language: a Chinese question whose dense
        neighbours are English (its answer likely is too) gets Chinese chunks from them
        whatever those say. So the bigram leg weighs ``search.cjk_bigram_weight`` x share,
        the keyword leg ``search.keyword_weight_cjk`` x (floor + (1 - floor) x share) with
        ``search.keyword_language_floor`` (it also matches Latin terms such as "AWS" in any
        language). docs/benchmarks.md, "The CJK bigram leg, weighted by the query's
        language"."""
        top = dense[:10]
        lang = detect_language(query)
        share = sum(1 for row, _ in top if row.get("lang") == lang) / len(top) if top else 1.0
        floor = self.fusion.keyword_language_floor
        return (
            self.fusion.keyword_weight_cjk * (floor + (1 - floor) * share),
            self.fusion.cjk_bigram_weight * share,
        )

    def _sparse(
        self, query: str, limit: int, filters: Filters, table: Any = None
    ) -> list[tuple[dict[str, Any], float]]:
        if not self.embedder.has_sparse:
            raise ConfigurationError(
                f"sparse search needs a model with a sparse head (bge-m3); "
                f"{self.embedder.spec.model_id} is dense only: use --mode keyword or hybrid"
            )
        table = table or self.table
        weights = self.embedder.embed([query], batch_size=1).sparse
        assert weights is not None
        qw = weights[0]
        cols = read_table(table, ["chunk_id", "sparse_ids", "sparse_weights"], filters.where())
        scores: list[tuple[str, float]] = []
        for cid, ids, ws in zip(
            cols.column("chunk_id").to_pylist(),
            cols.column("sparse_ids").to_pylist(),
            cols.column("sparse_weights").to_pylist(),
            strict=True,
        ):
            if not ids:
                continue
            score = sum(qw.get(t, 0.0) * w for t, w in zip(ids, ws, strict=True))
            if score > 0:
                scores.append((cid, score))
        scores.sort(key=lambda cs: cs[1], reverse=True)
        top = scores[:limit]
        if not top:
            return []
        rows = read_table(table, self.columns, sql_in("chunk_id", [c for c, _ in top]))
        by_id = {r["chunk_id"]: r for r in rows.to_pylist()}
        return [(by_id[c], s) for c, s in top if c in by_id]

    def _finish(
        self, snap: Snapshot, ranked: list[tuple[dict[str, Any], float]], partial: bool
    ) -> list[dict[str, Any]] | None:
        """The hits with their parents' text; None when a parent the chunks name is not
        in the snapshot's parent version (take a new snapshot), unless ``partial``."""
        parents: dict[str, str] = {}
        parent_ids = sorted({r["parent_id"] for r, _ in ranked if r.get("parent_id")})
        if parent_ids and snap.parents is not None:
            rows = read_table(snap.parents, ["parent_id", "text"], sql_in("parent_id", parent_ids))
            parents = {r["parent_id"]: r["text"] for r in rows.to_pylist()}
            missing = len(parents) < len(parent_ids)
            if missing and not partial and not (self.pinned and self.pinned.parents):
                return None
        return [
            {
                "rank": i + 1,
                "score": round(score, 6),
                "path": r["path"],
                "title": r["title"],
                "heading_path": list(r["heading_path"] or []),
                "page_numbers": list(r["page_numbers"] or []),
                "text": r["text"],
                "context": r["context"],
                "parent_text": parents.get(r["parent_id"], ""),
                "format": r["format"],
                "lang": r.get("lang"),
                "metadata": json.loads(r["metadata_json"] or "{}"),
                "chunk_id": r["chunk_id"],
                "doc_id": r["doc_id"],
                "chunk_table": snap.chunk_table,
                "table_version": snap.chunk_version,
                "parent_version": snap.parent_version,
            }
            for i, (r, score) in enumerate(ranked)
        ]


def rrf(
    lists: Sequence[Sequence[tuple[dict[str, Any], float]]],
    rrf_k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[dict[str, Any], float]]:
    """Weighted reciprocal rank fusion: list i contributes weights[i] / (rrf_k + rank)
    per chunk (every weight 1 when none are given)."""
    scores: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    for i, ranked in enumerate(lists):
        weight = 1.0 if weights is None else float(weights[i])
        if weight <= 0:
            continue
        for rank, (row, _score) in enumerate(ranked, start=1):
            cid = row["chunk_id"]
            scores[cid] = scores.get(cid, 0.0) + weight / (rrf_k + rank)
            rows.setdefault(cid, row)
    order = sorted(scores, key=lambda c: (-scores[c], c))
    return [(rows[c], scores[c]) for c in order]


def one_per_parent(
    ranked: Sequence[tuple[dict[str, Any], float]],
) -> list[tuple[dict[str, Any], float]]:
    """The first chunk of each parent section in ``ranked``'s order, then the others (a
    chunk without a parent is its own section), so the top k are k sections while there
    are that many."""
    seen: set[str] = set()
    first: list[tuple[dict[str, Any], float]] = []
    later: list[tuple[dict[str, Any], float]] = []
    for row, score in ranked:
        key = row.get("parent_id") or row["chunk_id"]
        (later if key in seen else first).append((row, score))
        seen.add(key)
    return first + later


def search(
    query: str,
    settings: Settings,
    k: int = 5,
    mode: Mode = "hybrid",
    filters: Filters | None = None,
) -> list[dict[str, Any]]:
    """Top-k child chunks of the active table, each with its parent section text."""
    return Searcher.for_active(settings).search(query, k=k, mode=mode, filters=filters)


def status(settings: Settings) -> dict[str, Any]:
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    # Without a table yet (nothing indexed so far), the failures are still shown.
    ledger = store.ledger.current(store.chunks.suffix_of(active.chunk_table) if active else None)
    by_status: dict[str, int] = {}
    for row in ledger.values():
        by_status[row.status] = by_status.get(row.status, 0) + 1
    out: dict[str, Any] = {
        "db": settings.storage.db,
        "collection": settings.storage.collection,
        "documents": by_status,
        "active_table": None,
        "previous_table": None,
        "model": None,
        "table_version": None,
        "rows": None,
        "pinned": None,
        "last_run": None,
    }
    if active is not None:
        table = store.db.open_table(active.chunk_table)
        model = active.model
        pin = store.pointer.pinned()
        out.update(
            active_table=active.chunk_table,
            previous_table=active.previous_chunk_table,
            model={k: model.get(k) for k in ("model_id", "fingerprint", "dim", "max_length")},
            table_version=int(table.version),
            rows=int(table.count_rows()),
            pinned=pin.to_dict() if pin is not None else None,
        )
    out["tables"] = store.model_tables()
    run = store.runs.last()
    if run is not None:
        report = run.report
        out["last_run"] = {
            "run_id": run.run_id,
            "kind": run.kind,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "status": run.status,
            **{
                k: report.get(k)
                for k in (
                    "new",
                    "changed",
                    "unchanged",
                    "deleted",
                    "failed",
                    "held",
                    "chunks_written",
                    "elapsed_s",
                )
            },
        }
    out["failed_documents"] = _failed_rows(ledger.values())
    out["held_documents"] = _held_rows(ledger.values())
    return out


def _failed_rows(rows: Iterable[LedgerRow]) -> list[dict[str, Any]]:
    failed = [
        {
            "path": r.path,
            "status": str(r.status),
            "category": r.error_category,
            "message": r.error_message,
        }
        for r in rows
        if r.status in (DocStatus.FAILED, DocStatus.QUARANTINED)
    ]
    return sorted(failed, key=lambda r: r["path"])


def _held_rows(rows: Iterable[LedgerRow]) -> list[dict[str, Any]]:
    from corpusflow.holds import Hold

    held = []
    for r in rows:
        hold = Hold.from_json(r.hold_json) if r.status == DocStatus.HELD else None
        if hold is not None:
            held.append({**hold.row(r.path), "message": hold.describe()})
    return sorted(held, key=lambda r: r["path"])


def failed_documents(settings: Settings) -> list[dict[str, Any]]:
    """The collection's failed and quarantined documents now (path, status, category,
    message), from the active table's ledger or, before the first table, from every
    ledger the collection has."""
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    suffix = store.chunks.suffix_of(active.chunk_table) if active else None
    return _failed_rows(store.ledger.current(suffix).values())


def forget(paths: Sequence[str], settings: Settings, source: str | None = None) -> dict[str, Any]:
    """Erase documents from every table of the collection (storage.erasure.forget) and
    return the receipt (also stored in ``<collection>__erasures``). ``paths`` are
    source-relative, as the ledger and search results show them; give ``source`` to
    accept absolute paths under it and to learn which files are still there (a
    tombstone keeps those out of later refreshes)."""
    from parsers.pages import remove_bundles
    from storage.erasure import forget as do_forget

    def erase_bundles(shas: Sequence[str]) -> int:
        return sum(remove_bundles(settings.parse.repro_dir, sha) for sha in shas)

    store = Store.from_settings(settings.storage)
    return do_forget(store, paths, settings.storage, source, erase_bundles).to_dict()


def unforget(paths: Sequence[str], settings: Settings) -> list[str]:
    """Lift the tombstones of forgotten documents: the next refresh adds them again."""
    from storage.erasure import undo

    return undo(Store.from_settings(settings.storage), paths, settings.storage)
