"""The interface every document source offers the pipeline."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from corpusflow.settings import SourceSettings
from sources.local import LocalSource, SourceFile


class Source(Protocol):
    """Lists documents and hands their bytes to the parser.

    ``SourceFile.rel_path`` (relative to the source root) is the document's identity;
    ``size`` and ``mtime`` are its change hint.
    """

    @property
    def root(self) -> Any: ...

    def check(self) -> None:
        """Raise ConfigurationError when the source is missing or unreachable."""

    def list(self) -> Iterator[SourceFile]:
        """Stream the wanted files (no full listing held in memory)."""

    def content_hash(self, f: SourceFile) -> str:
        """SHA-256 of the document's bytes (and of its metadata sidecar, if any)."""

    def metadata(self, f: SourceFile) -> dict[str, Any]:
        """The document's sidecar metadata, empty without one."""

    def fetch(self, f: SourceFile) -> contextlib.AbstractContextManager[str]:
        """A local file path with the document's bytes, valid inside the ``with`` block."""


def open_source(uri: str, settings: SourceSettings) -> Source:
    """The source behind a path or URL."""
    return LocalSource(uri, settings)
