"""The backend conformance suite: what every parser backend must do, in one place.

Haystack's ``haystack.testing.document_store`` idea: a base test class shipped with
the code, which each backend's tests subclass. A subclass sets ``backend_target``
(the ``module:attribute`` the format table names the backend by) and implements
``sample`` (a real file of a format). The suite then checks, for every format the
backend reads (``Backend.supported_formats()``, from the table):

- a real file parses to a ``BackendResult`` with non-empty Markdown, and
  ``is_valid`` accepts it;
- a broken file (bytes of no format) raises a categorised ``ParseError``, never
  another exception, and ``is_valid`` refuses it (binary formats; any bytes are
  some text, so a text backend may read them);
- ``fingerprint`` is deterministic, JSON-serialisable and separates the formats.

A format whose requirement is missing here (LibreOffice, pillow-heif), or for which
``sample`` has no file, is skipped with the reason.

    class TestDoclingBackend(BackendConformance):
        backend_target = "parsers.docling_backend:BACKEND"

        def sample(self, spec, tmp_path):
            return MY_FILES.get(spec.fmt)
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import ClassVar

import pytest

from common.errors import Category
from common.settings import ParseSettings
from parsers.backend import Backend, load_backend
from parsers.errors import ParseError
from parsers.fingerprint import format_fingerprint
from parsers.formats import BY_FORMAT, FormatSpec, spec_for
from parsers.models import BackendResult, ParseWarning
from parsers.registry import as_utf8

# Bytes no format reads: what a truncated download or a mislabelled blob looks like.
BROKEN_BYTES = b"\x00\x7fcorpusflow: not a document\x00" + bytes(range(256)) * 8


class BackendConformance:
    """Subclass once per backend; see the module docstring."""

    backend_target: ClassVar[str] = ""

    # -- what a subclass provides --------------------------------------------------
    def sample(self, spec: FormatSpec, tmp_path: Path) -> Path | None:
        """A real file of ``spec``'s format (text in any encoding), or None."""
        raise NotImplementedError

    def settings(self) -> ParseSettings:
        return ParseSettings()

    # -- the suite -------------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "fmt" in metafunc.fixturenames:
            formats = sorted(load_backend(self.backend_target).supported_formats())
            metafunc.parametrize("fmt", formats)

    @pytest.fixture()
    def backend(self) -> Backend:
        return load_backend(self.backend_target)

    def _readable(self, spec: FormatSpec) -> None:
        missing = spec.missing()
        if missing and load_backend(spec.backend) is load_backend(self.backend_target):
            pytest.skip(f"{spec.fmt}: {missing}")

    def test_is_a_backend_named_by_the_table(self, backend: Backend) -> None:
        assert isinstance(backend, Backend)
        assert isinstance(backend.name, str) and backend.name
        formats = backend.supported_formats()
        assert formats, f"no row of the format table names {self.backend_target}"
        assert formats <= set(BY_FORMAT)

    def test_parses_a_real_file_of_each_format(
        self, backend: Backend, fmt: str, tmp_path: Path
    ) -> None:
        spec = spec_for(fmt)
        self._readable(spec)
        sample = self.sample(spec, tmp_path)
        if sample is None:
            pytest.skip(f"no {fmt} sample here")
        # As the registry hands it over: a text file decoded to UTF-8.
        handed: AbstractContextManager[tuple[Path, list[ParseWarning]]] = (
            as_utf8(sample, spec) if spec.text else nullcontext((sample, []))
        )
        with handed as (path, _):
            assert backend.is_valid(path, spec), f"{sample.name} is not valid {fmt}"
            try:
                result = backend.parse(path, spec, self.settings())
            except ParseError as exc:
                if exc.category == Category.UNSUPPORTED:  # a tool this machine lacks (pandoc)
                    pytest.skip(f"{fmt}: {exc.message}")
                raise
        assert isinstance(result, BackendResult)
        markdown = result.doc.export_to_markdown(escape_underscores=False)
        assert markdown.strip(), f"{fmt}: no text from {path.name}"
        assert isinstance(result.parser, str) and result.parser
        assert all(isinstance(w, ParseWarning) for w in result.warnings)
        assert all(isinstance(p, int) and p >= 1 for p in result.missing_pages)

    def test_broken_file_is_a_categorised_error(
        self, backend: Backend, fmt: str, tmp_path: Path
    ) -> None:
        spec = spec_for(fmt)
        self._readable(spec)
        path = tmp_path / f"broken{spec.extensions[0]}"
        path.write_bytes(BROKEN_BYTES)
        if spec.binary:
            assert not backend.is_valid(path, spec), f"broken bytes taken for {fmt}"
        try:
            result = backend.parse(path, spec, self.settings())
        except ParseError as exc:
            assert isinstance(exc.category, Category)
            assert exc.message
            return
        # Only a text format may read arbitrary bytes (they are some text).
        assert not spec.binary, f"{fmt}: broken bytes parsed without an error"
        assert isinstance(result, BackendResult)

    def test_fingerprint_is_deterministic(self, backend: Backend, fmt: str) -> None:
        spec = spec_for(fmt)
        first = backend.fingerprint(self.settings())
        assert first == backend.fingerprint(self.settings())
        json.dumps(first, sort_keys=True)  # part of the fingerprint hash: plain values
        assert format_fingerprint(spec, self.settings()) == format_fingerprint(
            spec, self.settings()
        )
        others = {format_fingerprint(s, self.settings()) for s in BY_FORMAT.values() if s != spec}
        assert format_fingerprint(spec, self.settings()) not in others
