"""One refresh as the executors see it (``Job``) and its progress bars: what the
engine hands to executors and to activation, kept apart from the engine so that neither
imports it."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.settings import Settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.kit import KitRecipe, StageKit
from corpusflow.parse_chunk import Processed
from corpusflow.writes import BatchWritten, write_batch
from embedding import Embedder, ModelSpec, OneThreadEmbedder
from embedding.query_encoder import load_document_embedder
from sources import Source
from storage import Store

if TYPE_CHECKING:
    from parsers import ParserPool


class Progress:
    """Rich progress bars on a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if enabled and sys.stdout.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                transient=False,
            )

    def __enter__(self) -> Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def add(self, name: str, total: float | None) -> None:
        if self.bar is not None:
            self.tasks[name] = self.bar.add_task(name, total=total)

    def advance(self, name: str, n: float = 1) -> None:
        if self.bar is not None and name in self.tasks:
            self.bar.advance(self.tasks[name], n)


@dataclass
class Job:
    """One refresh as the executors see it."""

    source: Source
    settings: Settings
    store: Store
    spec: ModelSpec
    fps: Fingerprints
    progress: Progress
    # A parser pool started before the plan (``RefreshEngine.prestart_parsers``).
    pool: ParserPool | None = None
    _embedder: Embedder | None = None
    _kit: StageKit | None = None

    @property
    def embedder(self) -> Embedder:
        """Built on first use: a refresh with nothing to embed never loads a model."""
        if self._embedder is None:
            self._embedder = OneThreadEmbedder(
                load_document_embedder(self.settings.embed, self.spec)
            )
        return self._embedder

    def local_kit(self, stack: ExitStack) -> StageKit:
        """The kit for processing documents in this process (the job's store, parser pool
        and embedder's tokenizer); built once per job."""
        if self._kit is None:
            from parsers import ParserPool

            self._kit = StageKit.build(
                self.settings,
                self.spec,
                store=self.store,
                pool=self.pool or stack.enter_context(ParserPool(self.settings.parse)),
                tokenizer=self.embedder.tokenizer(),
            )
        return self._kit

    def kit_for(self, executor: Any, stack: ExitStack) -> StageKit | KitRecipe:
        """This process's kit, or a recipe for executors that run documents elsewhere."""
        if getattr(executor, "parses_here", True):
            return self.local_kit(stack)
        return KitRecipe(self.settings.model_dump_json(), self.spec)

    def write(self, batch: list[Processed], embedder: Embedder | None = None) -> BatchWritten:
        """Embed (here, or with ``embedder``, e.g. on cluster workers) and commit."""
        return write_batch(
            batch,
            self.store,
            embedder or self.embedder,
            self.settings,
            self.fps,
            on_progress=lambda n: self.progress.advance("embed", n),
        )
