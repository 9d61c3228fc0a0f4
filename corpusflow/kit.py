"""What processing one document needs besides the document, built in one place.

``StageKit.build`` is the only constructor: the engine builds one for this process
(sharing its parser pool and its embedder's tokenizer), each process an executor runs
documents in elsewhere builds one from a ``KitRecipe`` (once, kept for the life of the
process), and ``corpusflow chunks`` builds one to show a file's chunks.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Any

from chunking.models import Contextualizer
from common.settings import Settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.parse_chunk import (
    Processed,
    chunk_parsed,
    make_contextualizer,
    parse_document,
    retry_pages,
)
from corpusflow.passwords import check_password_rules, password_for
from corpusflow.plan import WorkItem
from embedding import ModelSpec
from sources import Source
from storage import Store
from storage.records import PlanReason


@dataclass(slots=True)
class StageKit:
    """A store handle, a parser pool, the chunker's tokenizer and the context provider."""

    store: Store
    pool: Any  # parsers.ParserPool
    tokenizer: Any
    contextualizer: Contextualizer | None

    @classmethod
    def build(
        cls,
        settings: Settings,
        spec: ModelSpec,
        store: Store | None = None,
        pool: Any = None,
        tokenizer: Any = None,
    ) -> StageKit:
        """The kit; what is not given is made here: the store from ``storage.*``, a parser
        pool from ``parse.*`` (its children exit with this process), the model's tokenizer."""
        from embedding import load_embedder
        from parsers import ParserPool

        check_password_rules(settings.parse)
        store = store or Store.from_settings(settings.storage)
        return cls(
            store=store,
            pool=pool if pool is not None else ParserPool(settings.parse),
            tokenizer=tokenizer
            if tokenizer is not None
            else load_embedder(settings.embed, spec).tokenizer(),
            contextualizer=make_contextualizer(settings, store),
        )

    def resolve(self) -> StageKit:
        return self


_KITS: dict[str, StageKit] = {}  # per process: the kits recipes built here
_KITS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class KitRecipe:
    """A picklable recipe for a StageKit, built once in each process that resolves it
    (e.g. a cluster worker)."""

    settings_json: str
    spec: ModelSpec

    def resolve(self) -> StageKit:
        key = f"{self.settings_json}|{self.spec.fingerprint}"
        with _KITS_LOCK:
            kit = _KITS.get(key)
            if kit is None:
                kit = StageKit.build(Settings.model_validate_json(self.settings_json), self.spec)
                _KITS[key] = kit
            return kit


def process_document(
    item: WorkItem, source: Source, settings: Settings, fps: Fingerprints, kit: StageKit
) -> Processed:
    """Parse (isolated, or from the parse cache; a page retry parses only the cached
    parse's missing pages) and chunk one document."""
    start = time.perf_counter()
    parse, parse_pages = kit.pool.parse, kit.pool.parse_pages
    if password := password_for(item.file.rel_path, settings.parse):
        parse = functools.partial(parse, password=password)
        parse_pages = functools.partial(parse_pages, password=password)
    if item.reason == PlanReason.PAGES:
        parsed, cached = retry_pages(item, source, kit.store, settings, fps, parse_pages, parse)
    else:
        parsed, cached = parse_document(item, source, kit.store, settings, fps, parse)
    parsed_at = time.perf_counter()
    chunks = chunk_parsed(item, parsed, kit.tokenizer, settings, fps, kit.contextualizer)
    return Processed(
        item=item,
        parsed=parsed,
        chunks=chunks,
        from_cache=cached,
        parse_s=0.0 if cached else parsed_at - start,
        chunk_s=time.perf_counter() - parsed_at,
    )
