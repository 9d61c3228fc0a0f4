"""The source conformance suite: what every document ``Source`` must do, in one place.

A base test class shipped with the code (Haystack's ``haystack.testing`` idea), which
each source's tests subclass. A subclass implements ``make`` (a source holding the
given documents, with a metadata sidecar for one of them) and ``change`` (new bytes
for one document). The suite checks, on the same documents for every source:

- ``list`` is complete (every document, nothing else: no sidecar, no hidden or
  temporary file) and stable (two listings give the same files in the same order);
- ``content_hash`` is the SHA-256 of the bytes (combined with a sidecar's), is the
  same on every call and changes when the bytes change; the listed change hint
  (size, mtime, etag) changes with it;
- ``fetch`` gives a local path holding exactly the document's bytes;
- ``metadata`` is the sidecar's object, and empty without one.

    class TestMySource(SourceConformance):
        def make(self, tmp_path, files, metadata): ...
        def change(self, source, name, data): ...
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

from sources.base import Source
from sources.local import SIDECAR_SUFFIX, SourceFile

# Documents every source under test holds: a nested path, non-ASCII names and bytes.
DOCUMENTS: dict[str, bytes] = {
    "handbook.md": b"# Handbook\n\nWear a helmet on the turbine deck.\n",
    "sites/aalborg.csv": b"turbine,hours\nT-07,412\n",
    "sites/deep/esbjerg notes.txt": "Blattlager geprüft. 叶片检查完毕。\n".encode(),
    "data.json": b'{"site": "Aalborg", "turbines": 12}',
}
# The document that gets a metadata sidecar, and that sidecar.
WITH_METADATA = "handbook.md"
METADATA: dict[str, Any] = {"owner": "ops", "acl": ["engineering"]}
# What every source skips.
NOT_DOCUMENTS: dict[str, bytes] = {".hidden.md": b"# hidden\n", "~$draft.txt": b"lock\n"}


def sidecar_name(name: str) -> str:
    return name + SIDECAR_SUFFIX


class SourceConformance:
    """Subclass once per source kind; see the module docstring."""

    # True where a sidecar describes more than one document (an archive's sidecar is
    # every member's metadata).
    metadata_is_shared: ClassVar[bool] = False
    # Metadata keys a document takes from its container besides its sidecar's (an e-mail
    # attachment's "attached_to"); they are hashed with it, as a sidecar is.
    inherited_keys: ClassVar[frozenset[str]] = frozenset()
    # What the source lists beyond the documents given to ``make`` (a message's body).
    also_listed: ClassVar[frozenset[str]] = frozenset()

    # -- what a subclass provides --------------------------------------------------
    def make(self, tmp_path: Path, files: dict[str, bytes]) -> Source:
        """A source holding ``files`` (relative name -> bytes; a ``*.meta.json`` name is
        a sidecar, placed where this source kind reads one)."""
        raise NotImplementedError

    def change(self, source: Source, name: str, data: bytes) -> None:
        """Give document ``name`` new bytes."""
        raise NotImplementedError

    def listed_as(self, name: str) -> str:
        """The ``rel_path`` the source lists document ``name`` under."""
        return name

    # -- helpers -------------------------------------------------------------------
    def _source(self, tmp_path: Path) -> Source:
        import json

        files = {**DOCUMENTS, **NOT_DOCUMENTS}
        files[sidecar_name(WITH_METADATA)] = json.dumps(METADATA).encode()
        return self.make(tmp_path, files)

    def _listing(self, source: Source) -> dict[str, SourceFile]:
        files = list(source.list())
        by_path = {f.rel_path: f for f in files}
        assert len(by_path) == len(files), "a document was listed twice"
        return by_path

    def _own(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """The metadata without what the document inherits from its container."""
        return {k: v for k, v in metadata.items() if k not in self.inherited_keys}

    def _file(self, source: Source, name: str) -> SourceFile:
        return self._listing(source)[self.listed_as(name)]

    # -- the suite -------------------------------------------------------------------
    def test_list_is_complete_and_stable(self, tmp_path: Path) -> None:
        source = self._source(tmp_path)
        source.check()
        first = [(f.rel_path, f.size, f.etag) for f in source.list()]
        assert {p for p, _, _ in first} == {self.listed_as(n) for n in DOCUMENTS} | set(
            self.also_listed
        )
        assert first == [(f.rel_path, f.size, f.etag) for f in source.list()]
        for f in source.list():
            assert f.doc_id and len(f.doc_id) == 32

    def test_content_hash_is_the_bytes_and_follows_them(self, tmp_path: Path) -> None:
        source = self._source(tmp_path)
        name = "sites/aalborg.csv"
        before = self._file(source, name)
        new = b"turbine,hours\nT-07,413\n"  # same size: only the bytes tell
        digest = source.content_hash(before)
        assert source.content_hash(before) == digest
        bytes_only = not self.metadata_is_shared and not self.inherited_keys
        if bytes_only:  # else combined with the shared sidecar's or the inherited metadata
            assert digest == hashlib.sha256(DOCUMENTS[name]).hexdigest()
        self.change(source, name, new)
        after = self._file(source, name)
        assert source.content_hash(after) != digest
        if bytes_only:
            assert source.content_hash(after) == hashlib.sha256(new).hexdigest()
        hint = (before.size, before.mtime, before.etag)
        assert (after.size, after.mtime, after.etag) != hint, "the change hint missed the edit"

    def test_fetch_gives_the_bytes(self, tmp_path: Path) -> None:
        source = self._source(tmp_path)
        listing = self._listing(source)
        for name, data in DOCUMENTS.items():
            with source.fetch(listing[self.listed_as(name)]) as local:
                assert Path(local).read_bytes() == data, name

    def test_metadata_is_the_sidecar(self, tmp_path: Path) -> None:
        source = self._source(tmp_path)
        listing = self._listing(source)
        assert self._own(source.metadata(listing[self.listed_as(WITH_METADATA)])) == METADATA
        other = self._own(source.metadata(listing[self.listed_as("data.json")]))
        assert other == (METADATA if self.metadata_is_shared else {})
        # the sidecar is part of the document's hash
        with_side = listing[self.listed_as(WITH_METADATA)]
        plain = hashlib.sha256(DOCUMENTS[WITH_METADATA]).hexdigest()
        assert source.content_hash(with_side) != plain
