"""Errors shared by every stage.

A document-level failure carries a category (what the operator triages by) and
whether retrying can help (transient) or not (terminal). Stage packages raise
subclasses; the flow records the category in the ledger and in the Prefect UI.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from typing import Any


class Category(StrEnum):
    UNSUPPORTED = "unsupported"
    ENCRYPTED = "encrypted"
    CORRUPT = "corrupt"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    CRASHED = "crashed"
    EMPTY = "empty"
    TOO_LARGE = "too_large"
    SOURCE_CHANGED = "source_changed"
    EMBEDDING = "embedding"
    CONTEXT = "context"
    INTERNAL = "internal"


# Categories where a retry of the same bytes cannot succeed.
TERMINAL_CATEGORIES = frozenset(
    {
        Category.UNSUPPORTED,
        Category.ENCRYPTED,
        Category.CORRUPT,
        Category.EMPTY,
        Category.TOO_LARGE,
    }
)


# Categories worth an automatic retry within the same run: the next attempt can succeed.
TRANSIENT_CATEGORIES = frozenset({Category.CRASHED, Category.SOURCE_CHANGED})


class CorpusflowError(Exception):
    """Base of all corpusflow errors."""


class DocumentError(CorpusflowError):
    """One document failed; the run goes on."""

    def __init__(self, category: Category | str, message: str) -> None:
        self.category = Category(category)
        self.message = message
        super().__init__(f"[{self.category.value}] {message}")

    @property
    def terminal(self) -> bool:
        return self.category in TERMINAL_CATEGORIES

    def __reduce__(self) -> tuple[type[DocumentError], tuple[str, str]]:
        return (type(self), (self.category.value, self.message))


class StorageFullError(CorpusflowError):
    """The database's disk is full: the run stops; committed batches stay consistent."""


def is_storage_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc)


class ConfigurationError(CorpusflowError):
    """The run cannot start: a setting is wrong or a resource is unreachable."""


class RetrievalCheckFailed(CorpusflowError):
    """A refresh made retrieval on the configured question set worse than the margin
    allows: it was undone (tables restored to their pre-run versions) and the run fails
    (exit code 1). ``report`` is the run report, with the check in ``report["check"]``."""

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        self.message = message
        self.report = dict(report or {})
        super().__init__(message)

    def __reduce__(self) -> tuple[type[RetrievalCheckFailed], tuple[str, dict[str, Any]]]:
        return (type(self), (self.message, self.report))


class TransientError(CorpusflowError):
    """A failure the same call can get past when repeated (a 429 or 5xx reply, a busy device)."""


def is_oom(exc: BaseException) -> bool:
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError | MemoryError) and "out of memory" in str(exc).lower()


def is_transient(exc: BaseException) -> bool:
    """The one definition of "worth retrying": a document's task, an embedding batch and
    an LLM request are all retried on exactly these.

    Out-of-memory is not (the encoder halves its batch instead), nor a full disk (the
    run stops), nor a terminal document error (the same bytes fail the same way).
    """
    if isinstance(exc, DocumentError):
        return exc.category in TRANSIENT_CATEGORIES
    if is_oom(exc) or is_storage_full(exc):
        return False
    if isinstance(exc, TransientError | OSError):  # OSError: timeouts, resets, refused
        return True
    # httpx's transport errors and timeouts (no httpx import here: it is optional).
    mro = type(exc).__mro__
    if any(c.__name__ == "TransportError" and c.__module__.startswith("httpx") for c in mro):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(
        s in text for s in ("cuda error: unspecified launch failure", "nccl", "temporarily")
    )
