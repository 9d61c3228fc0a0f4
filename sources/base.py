"""The interface every document source offers the pipeline."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from common.errors import ConfigurationError
from common.settings import SourceSettings
from sources.local import LocalSource, SourceFile


class Source(Protocol):
    """Lists documents and hands their bytes to the parser.

    ``SourceFile.rel_path`` (relative to the source root) is the document's identity;
    ``size`` and ``mtime`` are its change hint, with ``etag`` in place of ``mtime`` where
    an object store provides one.
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


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_source(uri: str, settings: SourceSettings) -> Source:
    """The source behind a path or URL: a local path or ``file://`` URL is a local folder;
    ``s3://bucket/prefix`` is read with boto3; any other scheme through its fsspec
    filesystem (``gs://`` with gcsfs, ``az://`` with adlfs, ``memory://``)."""
    match = _SCHEME.match(uri)
    if match is None:
        return LocalSource(uri, settings)
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"file:// source URLs name an absolute path (file:///data/docs), not {uri!r}"
            )
        return LocalSource(unquote(parts.path), settings)
    from sources.objectstore import ObjectStoreSource  # boto3/fsspec only when needed

    return ObjectStoreSource(uri, settings)
