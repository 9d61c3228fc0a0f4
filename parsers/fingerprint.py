"""The parser fingerprint: what invalidates cached parses, taken in this one place.

Per format (``ParsedDocument.format``), a hash of the common ``PARSER_VERSION``, the
format's row (name, ``FormatSpec.version``) and its backends (``Backend.name`` of the
backend and the fallback, and the settings they read: ``Backend.fingerprint``). A
change to one backend, or to settings only it reads, re-parses only its formats.
The refresh planner, the parse cache and ``corpusflow verify`` all call
``parser_fingerprints``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import parsers.formats as formats
from parsers.backend import load_backend
from parsers.formats import FormatSpec
from parsers.models import PARSER_VERSION, ParserFingerprints

if TYPE_CHECKING:
    from common.settings import ParseSettings


def format_fingerprint(spec: FormatSpec, settings: ParseSettings) -> str:
    """The fingerprint of documents of ``spec``'s format under ``settings``."""
    backend = load_backend(spec.backend)
    fallback = load_backend(spec.fallback) if spec.fallback else None
    relevant: dict[str, object] = {
        "version": PARSER_VERSION,
        "format": spec.fmt,
        "format_version": spec.version,
        "backend": backend.name,
        "fallback": fallback.name if fallback else None,
        # the fallback's settings too (a fallback reads the same files)
        **(fallback.fingerprint(settings) if fallback else {}),
        **backend.fingerprint(settings),
    }
    blob = json.dumps(relevant, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def parser_fingerprints(settings: ParseSettings) -> ParserFingerprints:
    """Each format's fingerprint (``format_fingerprint``): with ``pdf_pipeline='auto'``
    the PDF one names the path that will actually run, so models arriving on, or
    leaving, the machine switch PDFs between the layout and the model-free path."""
    # the table is read at each call (tests replace a row)
    rows = formats.FORMATS
    return ParserFingerprints({spec.fmt: format_fingerprint(spec, settings) for spec in rows})


def format_reads() -> dict[str, str]:
    """Each format's ``FormatSpec.reads``: what it reads that it failed before. Part of
    the failure judge (a bump retries failed documents without re-parsing indexed ones)."""
    return {spec.fmt: spec.reads for spec in formats.FORMATS}
