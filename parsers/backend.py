"""The backend contract: what every parser backend offers the registry.

Modelled on docling's ``AbstractDocumentBackend`` (``supported_formats()``,
``is_valid()``), with what corpusflow adds: ``parse`` returns one ``BackendResult``
shape for all formats, raising ``ParseError`` with a category, and ``fingerprint``
says which settings the backend reads, so what invalidates its cached parses is
part of the contract (``parsers.fingerprint`` combines it with the format's row).

A backend never branches on the format's name: what differs between the formats it
reads lives in their rows of ``parsers.formats.FORMATS`` (``FormatSpec.options``).
Adding a format is one row there, plus one backend module when no backend reads it.
Backends are found by the rows' ``"module:attribute"`` names and imported only when
a file of theirs is parsed, so a backend module keeps heavy imports inside functions.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import parsers.formats as formats
from parsers.formats import FormatSpec

if TYPE_CHECKING:
    from common.settings import ParseSettings
    from parsers.models import BackendResult


@runtime_checkable
class Backend(Protocol):
    """One way of reading files into a ``BackendResult``."""

    @property
    def name(self) -> str:
        """Its identity in parser fingerprints (``parsers.fingerprint``): changing it
        re-parses every document of its formats. The backends kept the name of the
        entry-point function each replaced, so caches written before stay valid."""
        ...

    def supported_formats(self) -> frozenset[str]:
        """The formats it reads: those whose row names it as backend or fallback."""
        ...

    def is_valid(self, path: Path, spec: FormatSpec) -> bool:
        """A cheap check, before parsing, that ``path`` is something this backend can
        read as ``spec``'s format (docling's ``is_valid``)."""
        ...

    def fingerprint(self, settings: ParseSettings) -> dict[str, object]:
        """The settings, and what is installed, that change its output for the same
        bytes (deterministic; ``{}`` when nothing does)."""
        ...

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        """Read ``path`` as ``spec``'s format; raises ``ParseError`` with a category.
        Text formats arrive decoded to UTF-8 (``FormatSpec.text``)."""
        ...


def load_backend(target: str) -> Backend:
    """The backend object a row names as ``module:attribute``."""
    module, _, attr = target.partition(":")
    backend = getattr(importlib.import_module(module), attr)
    if not isinstance(backend, Backend):
        raise TypeError(f"{target} is not a parsers.backend.Backend")
    return backend


def backends() -> dict[str, Backend]:
    """Every backend the format table names (as backend or fallback), by its target."""
    targets = dict.fromkeys(t for s in formats.FORMATS for t in (s.backend, s.fallback) if t)
    return {t: load_backend(t) for t in targets}


class TableBackend:
    """What backends share: formats from the table, the generic validity check.

    Subclasses set ``name`` and implement ``parse`` (and ``fingerprint`` when a
    setting changes their output)."""

    name: str = ""

    def supported_formats(self) -> frozenset[str]:
        return frozenset(
            s.fmt
            for s in formats.FORMATS
            if any(t and load_backend(t) is self for t in (s.backend, s.fallback))
        )

    def is_valid(self, path: Path, spec: FormatSpec) -> bool:
        """A text format: the (decoded) file is UTF-8 text. Any other: the bytes are
        detected as that format (``parsers.safety.sniff_format``)."""
        from parsers.errors import ParseError
        from parsers.safety import sniff_format

        try:
            if spec.text:
                path.read_bytes().decode("utf-8")
                return True
            with path.open("rb") as fh:
                head = fh.read(8192)
            return bool(head) and sniff_format(path, head) == spec.fmt
        except (OSError, UnicodeDecodeError, ParseError):
            return False

    def check_valid(self, path: Path, spec: FormatSpec) -> None:
        """Raise a ``corrupt`` ParseError when a binary format's bytes are not that
        format (LibreOffice would read any bytes as text, Pillow raise its own error).
        Files from ``parse_file`` passed the same sniff in the pre-checks already."""
        if spec.binary and not self.is_valid(path, spec):
            from parsers.errors import Category, ParseError

            raise ParseError(Category.CORRUPT, f"not {spec.description} data ({spec.fmt})")

    def fingerprint(self, settings: ParseSettings) -> dict[str, object]:
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
