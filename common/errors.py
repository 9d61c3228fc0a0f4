"""Errors shared by every stage.

A document-level failure carries a category (what the operator triages by); the one
table ``RETRY`` says, per category, whether retrying can help now (the error is then a
``TransientError``), on the next run, or never (a ``TerminalError``). Stage packages raise
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


class Retry(StrEnum):
    """What retrying a failed document can do, by its category (``RETRY``)."""

    NOW = "now"  # the next attempt can succeed: retried within the run (corpusflow.retry)
    NEXT_RUN = "next_run"  # not within the run; the next refresh tries again (quarantine after N)
    NEVER = "never"  # the same bytes fail the same way: skipped until they, or the parser, change


# The one table of retry rules: every category has exactly one.
RETRY: dict[Category, Retry] = {
    Category.UNSUPPORTED: Retry.NEVER,
    Category.ENCRYPTED: Retry.NEVER,
    Category.CORRUPT: Retry.NEVER,
    Category.EMPTY: Retry.NEVER,
    Category.TOO_LARGE: Retry.NEVER,
    Category.CRASHED: Retry.NOW,
    Category.SOURCE_CHANGED: Retry.NOW,
    Category.TIMEOUT: Retry.NEXT_RUN,
    Category.OUT_OF_MEMORY: Retry.NEXT_RUN,
    Category.EMBEDDING: Retry.NEXT_RUN,
    Category.CONTEXT: Retry.NEXT_RUN,
    Category.INTERNAL: Retry.NEXT_RUN,
}

# Categories where a retry of the same bytes cannot succeed (the ledger's strings compare
# equal to these).
TERMINAL_CATEGORIES = frozenset(c for c, r in RETRY.items() if r is Retry.NEVER)


class CorpusflowError(Exception):
    """Base of all corpusflow errors."""


class TerminalError(CorpusflowError):
    """Retrying the same input cannot help (a document error of a ``Retry.NEVER``
    category is one: ``except TerminalError`` catches it)."""


class TransientError(CorpusflowError):
    """A failure the same call can get past when repeated (a 429 or 5xx reply, a busy
    device; a document error of a ``Retry.NOW`` category is one too)."""


_KIND: dict[Retry, type[CorpusflowError] | None] = {
    Retry.NEVER: TerminalError,
    Retry.NOW: TransientError,
    Retry.NEXT_RUN: None,
}


class DocumentError(CorpusflowError):
    """One document failed; the run goes on.

    Its category decides its kind: ``DocumentError(cat, msg)`` (or any subclass, e.g.
    ``ParseError``) is also a ``TerminalError`` or a ``TransientError`` when ``RETRY``
    says so. The typed class is the declared one plus that base (same name, made once
    per pair); it pickles as the declared class and is rebuilt typed on load.
    """

    declared: type[DocumentError]

    def __new__(cls, category: Category | str, *args: Any, **kwargs: Any) -> DocumentError:
        base = cls.__dict__.get("declared", cls)
        kind = _KIND[RETRY[Category(category)]]
        typed = _typed(base, kind) if kind is not None else base
        return super().__new__(typed)

    def __init__(self, category: Category | str, message: str) -> None:
        self.category = Category(category)
        self.message = message
        super().__init__(f"[{self.category.value}] {message}")

    @property
    def retry(self) -> Retry:
        return RETRY[self.category]

    @property
    def terminal(self) -> bool:
        return self.retry is Retry.NEVER

    def __reduce__(self) -> tuple[type[DocumentError], tuple[str, str]]:
        return (_declared(type(self)), (self.category.value, self.message))


_TYPED: dict[tuple[type[DocumentError], type[CorpusflowError]], type[DocumentError]] = {}


def _typed(base: type[DocumentError], kind: type[CorpusflowError]) -> type[DocumentError]:
    if issubclass(base, kind):
        return base
    key = (base, kind)
    if key not in _TYPED:
        _TYPED[key] = type(
            base.__name__,
            (base, kind),
            {"declared": base, "__module__": base.__module__, "__qualname__": base.__qualname__},
        )
    return _TYPED[key]


def _declared(cls: type[DocumentError]) -> type[DocumentError]:
    return cls.__dict__.get("declared", cls)


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
        return exc.retry is Retry.NOW
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
