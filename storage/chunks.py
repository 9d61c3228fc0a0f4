"""The chunk and parent tables of each embedding model (``chunks__<model>``,
``parents__<model>``): a model change means new tables, never mixed vectors."""

from __future__ import annotations

from collections.abc import Sequence

from storage.records import ChunkRow, ParentRow, rows_to_table
from storage.schema import PARENT_SCHEMA, chunk_schema
from storage.tables import Tables, add_missing_columns, batches, sql_in


class ChunkTables:
    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def name(self, suffix: str) -> str:
        return self.tables.name("chunks", suffix)

    def parent_name(self, suffix: str) -> str:
        return self.tables.name("parents", suffix)

    def suffix_of(self, chunk_table: str) -> str:
        return chunk_table.removeprefix(self.tables.name("chunks") + "__")

    def names(self) -> list[str]:
        """Every chunk table of the collection, sorted."""
        return sorted(self.tables.table_names("chunks__"))

    def replace(
        self,
        suffix: str,
        dim: int,
        doc_ids: Sequence[str],
        chunk_rows: Sequence[ChunkRow],
        parent_rows: Sequence[ParentRow],
    ) -> int:
        """Replace the chunks (and parents) of ``doc_ids``.

        The chunks change in one merge_insert commit that also deletes the rows of
        these documents not in the new set, so a reader sees either the old or the new
        chunks of a document, never none or both. Parents are written around it: the
        new ones are added before (their ids hash their text, so old and new live side
        by side) and the old ones deleted only after, so whichever chunk version a
        reader holds, its parents are in any parent version it reads after it
        (corpusflow.api snapshots). Returns the chunk table version.

        When neither table holds a row of ``doc_ids`` (new documents, the bulk of a
        first ingest), the rows are appended instead: the same single commit per table,
        without the merge's join against every row already there, whose cost grows with
        the table (docs/benchmarks.md, "Storage writes as the tables grow"). The check
        reads ``doc_id`` only, through its index once ``tidy`` made one.
        """
        schema = chunk_schema(dim)
        parents = self.tables.open_or_create(self.parent_name(suffix), PARENT_SCHEMA)
        chunks = self.tables.open_or_create(self.name(suffix), schema)
        add_missing_columns(chunks, schema)
        scope = sql_in("doc_id", doc_ids)
        if doc_ids and not chunks.count_rows(scope) and not parents.count_rows(scope):
            if parent_rows:
                parents.add(rows_to_table(parent_rows, PARENT_SCHEMA))
            if chunk_rows:
                chunks.add(rows_to_table(chunk_rows, schema))
            return int(chunks.version)
        if parent_rows:
            (
                parents.merge_insert("parent_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(rows_to_table(parent_rows, PARENT_SCHEMA))
            )
        if chunk_rows:
            (
                chunks.merge_insert("chunk_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(scope)
                .execute(rows_to_table(chunk_rows, schema))
            )
        elif doc_ids:
            chunks.delete(scope)
        if doc_ids:
            keep = sorted({r.parent_id for r in parent_rows})
            stale = f"({scope}) AND NOT ({sql_in('parent_id', keep)})" if keep else scope
            if parents.count_rows(stale):
                parents.delete(stale)
        return int(chunks.version)

    def tidy(self, suffix: str, max_fragments: int) -> dict[str, str]:
        """Index ``doc_id`` and compact the chunk and parent tables of ``suffix`` once
        fragmented (``Tables.tidy``; no version is removed). What was done, by table."""
        done = {}
        for name in (self.name(suffix), self.parent_name(suffix)):
            if what := self.tables.tidy(name, max_fragments, key="doc_id"):
                done[name] = what
        return done

    def delete(self, suffix: str, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        for name in (self.name(suffix), self.parent_name(suffix)):
            table = self.tables.find(name)
            if table is not None:
                for part in batches(list(doc_ids)):
                    table.delete(sql_in("doc_id", part))

    def tag(self, suffix: str, tag: str) -> int | None:
        """Tag the chunk table's current version (an existing tag of that name is kept)."""
        name = self.name(suffix)
        table = self.tables.find(name)
        if table is None:
            return None
        version = int(table.version)
        try:
            table.tags.create(tag, version)
        except Exception:  # an existing tag of the same name: keep the first
            return version
        return version
