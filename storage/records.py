"""Typed rows: what crosses the storage boundary.

``Store`` reads and writes these, never bare dicts: a ledger row is a ``LedgerRow``
with a ``DocStatus``, the active pointer a ``Pointer`` (its pin a ``Pin``), a finished run a ``RunRecord``, a chunk a ``ChunkRow``, a parent section a
``ParentRow``. Each mirrors its Arrow schema in ``storage.schema`` field for field (a
test checks it); rows of tables written before a column existed read it as its default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

import numpy as np
import pyarrow as pa


class DocStatus(StrEnum):
    """Where a document stands in one chunk table's ledger."""

    INDEXED = "indexed"  # its chunks are committed; content_sha256 names the bytes
    FAILED = "failed"  # retried next run (unless the failure is terminal)
    QUARANTINED = "quarantined"  # failed run.quarantine_after times: waits for new bytes
    DELETED = "deleted"  # its file vanished; its chunks were removed
    FORGOTTEN = "forgotten"  # erased by `corpusflow forget`: a tombstone
    # Its last change (or deletion) was undone by the retrieval check: it keeps the chunks
    # of its previous indexed bytes (content_sha256, chunk_count; none for a new document)
    # and is skipped until its bytes, the question set or the pipeline change, or
    # `corpusflow accept-held` (hold_json: what was held and why, corpusflow.holds).
    HELD = "held"


class PlanReason(StrEnum):
    """Why the plan processes a document."""

    NEW = "new"  # no live ledger row
    CHANGED = "changed"  # other bytes than the ledger's hash
    RETRY = "retry"  # failed last time
    RECHUNK = "rechunk"  # same bytes, other parser/chunker/model fingerprint
    PAGES = "pages"  # indexed with pages missing: only those are parsed again


_R = TypeVar("_R", bound="_Record")


class _Record:
    """Conversion between a dataclass row and the dict Arrow reads and writes."""

    @classmethod
    def from_row(cls: type[_R], row: Mapping[str, Any]) -> _R:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in row.items() if k in known and v is not None})

    def to_row(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]


def rows_to_table(rows: Sequence[_Record], schema: pa.Schema) -> pa.Table:
    """Typed rows as an Arrow table of ``schema``, column by column (no per-row dicts).

    A fixed-size list column whose values are NumPy vectors is built from one stacked
    array instead of a Python list per row.
    """
    columns: dict[str, pa.Array] = {}
    for f in schema:
        values = [getattr(r, f.name) for r in rows]
        if (
            pa.types.is_fixed_size_list(f.type)
            and values
            and all(isinstance(v, np.ndarray) for v in values)
        ):
            flat = np.stack(values).astype(np.float32, copy=False).reshape(-1)
            columns[f.name] = pa.FixedSizeListArray.from_arrays(
                pa.array(flat, type=f.type.value_type), f.type.list_size
            )
        else:
            columns[f.name] = pa.array(values, type=f.type)
    return pa.Table.from_pydict(columns, schema=schema)


@dataclass(slots=True)
class LedgerRow(_Record):
    doc_id: str
    path: str
    content_sha256: str | None = None  # written only once the chunks are committed
    size: int | None = None
    mtime: float | None = None
    etag: str | None = None
    status: DocStatus = DocStatus.INDEXED
    error_category: str | None = None
    error_message: str | None = None
    attempts: int = 0
    format: str | None = None
    title: str | None = None
    page_count: int | None = None
    parser: str | None = None
    # Indexed: the parse's fingerprint (its format's). A terminal failure: what judged it
    # (corpusflow.fingerprints.failure_judge), so that a new judge tries it again.
    parser_fingerprint: str | None = None
    chunker_fingerprint: str | None = None
    model_fingerprint: str | None = None
    chunk_count: int = 0
    metadata_json: str = "{}"
    hold_json: str | None = None  # status held: corpusflow.holds.Hold as JSON
    updated_at: datetime | None = None

    def __post_init__(self) -> None:
        self.status = DocStatus(self.status)

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(json.loads(self.metadata_json or "{}"))


@dataclass(slots=True)
class Pointer(_Record):
    """The one row of ``C__pointer``: which tables readers use."""

    collection: str
    chunk_table: str
    parent_table: str
    model_json: str
    model_fingerprint: str | None = None
    previous_chunk_table: str | None = None  # the rollback target
    previous_parent_table: str | None = None
    previous_model_json: str | None = None
    # Set while a checked refresh runs: the versions readers stay on (storage.pointer.PointerTable.pin).
    pinned_json: str | None = None
    updated_at: datetime | None = None

    @property
    def model(self) -> dict[str, Any]:
        return dict(json.loads(self.model_json))

    @property
    def pinned(self) -> Pin | None:
        return Pin.from_dict(json.loads(self.pinned_json)) if self.pinned_json else None


@dataclass(frozen=True, slots=True)
class Pin:
    """The versions readers stay on while a checked refresh runs (``Pointer.pinned_json``,
    storage.pointer.PointerTable.pin): the active chunk and parent tables' and the
    ledger's, and the run that pinned them. The fields are in the order of the keys of
    the stored JSON (sorted), which ``corpusflow status --json`` shows as they are."""

    chunks: int | None
    ledger: int | None
    ledger_table: str | None
    parents: int | None
    run_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pin:
        return cls(
            chunks=data.get("chunks"),
            ledger=data.get("ledger"),
            ledger_table=data.get("ledger_table"),
            parents=data.get("parents"),
            run_id=str(data.get("run_id", "")),
        )


@dataclass(slots=True)
class RunRecord(_Record):
    """One finished (or undone) run in ``C__runs``."""

    run_id: str
    collection: str
    kind: str
    status: str  # completed | failed
    report_json: str = "{}"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    chunk_table: str | None = None
    chunk_table_version: int | None = None

    @property
    def report(self) -> dict[str, Any]:
        return dict(json.loads(self.report_json or "{}"))


@dataclass(slots=True)
class ChunkRow(_Record):
    """One child chunk in ``C__chunks__<model>`` (``storage.schema.chunk_schema``)."""

    chunk_id: str
    doc_id: str
    parent_id: str | None = None
    position: int = 0
    text: str = ""  # the chunk as in the document
    context: str = ""  # contextual-retrieval prefix
    embed_text: str = ""  # context + text: what is embedded and FTS-indexed
    embed_key: str | None = None  # storage.schema.embed_key(embed_text)
    cjk_text: str = ""  # chunking.language.cjk_runs(embed_text): the CJK bigram index's text
    heading_path: list[str] = field(default_factory=list)
    page_numbers: list[int] = field(default_factory=list)
    path: str = ""  # source-relative path
    title: str | None = None
    format: str | None = None
    metadata_json: str = "{}"
    acl_groups: list[str] | None = None  # None = readable by everyone
    n_tokens: int = 0
    lang: str | None = None  # ISO 639-1 ("und" = unknown)
    vector: Sequence[float] | np.ndarray = ()  # the dense vector (NumPy or a list)
    sparse_ids: list[int] | None = None  # None for dense-only models
    sparse_weights: list[float] | None = None
    manifest_json: str = "{}"  # parser/chunker/embedder versions

    # What a search hit reads of a chunk (never the vectors, the embedded text or the
    # manifest): corpusflow.api selects these.
    HIT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "chunk_id",
        "doc_id",
        "parent_id",
        "text",
        "context",
        "heading_path",
        "page_numbers",
        "path",
        "title",
        "format",
        "metadata_json",
        "acl_groups",
        "lang",
    )


@dataclass(slots=True)
class ParentRow(_Record):
    """One parent section in ``C__parents__<model>`` (``storage.schema.PARENT_SCHEMA``)."""

    parent_id: str
    doc_id: str
    text: str = ""
    heading_path: list[str] = field(default_factory=list)
    page_numbers: list[int] = field(default_factory=list)
