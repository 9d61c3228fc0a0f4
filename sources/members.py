"""Files that are folders of documents: the interface every kind of container offers.

A container (a ZIP archive, an e-mail message) is one file in a source whose parts are
listed as documents of their own, each with the path ``container/part`` (its own ledger
row, doc id and chunks). A ``Container`` lists its members with a change hint taken from
the container itself (so an unchanged member is never hashed or parsed again), opens one
member's bytes, and may give a member metadata of its own. Implementations:
``sources.archive.ZipContainer`` and ``sources.mail.MailContainer``; which one reads a
file is chosen by ``sources.containers.container_for``. Hashing and extracting a member
are the same for every kind, here.

Listing never raises: a container that cannot be expanded is listed as itself with a
``refusal`` (category, message) that fails it with the reason and what to do, and a
member that cannot be read fails alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

from common.settings import SourceSettings

# Joins the keys of a nested member, outermost first (zipfile cuts names at NUL, and a
# message's part keys hold none, so no key holds one).
CHAIN_SEP = "\0"
# A name longer than this (in UTF-8 bytes) is shortened, extension kept, when a member is
# written out for the parser: most file systems stop at 255.
_MAX_NAME_BYTES = 200
# Legacy name encodings told apart by their bytes; cp437 is the ZIP default.
LEGACY_NAME_ENCODINGS = ("gb18030", "cp932", "cp950", "cp949", "cp437")


@dataclass(frozen=True, slots=True)
class Member:
    """One member to list: its path inside the container ("" for the container's own
    document, such as a message's body), the key that opens it, its size, its change
    hint, and the reason it fails without being parsed, if any."""

    path: str
    key: str
    size: int
    hint: str
    refusal: tuple[str, str] | None = None


@dataclass(slots=True)
class Listing:
    """A container's members, or why it is listed (and failed) as itself."""

    members: list[Member] = field(default_factory=list)
    refusal: tuple[str, str] | None = None


class Container(Protocol):
    """A kind of file whose parts are documents."""

    # Written before a member's hint in its ``SourceFile.etag`` ("zip-crc32").
    label: str

    def claims(self, name: str) -> bool:
        """Whether a file of this name is this kind of container."""

    def enabled(self, settings: SourceSettings) -> bool:
        """Whether the settings expand this kind of container."""

    def list(self, path: Path, settings: SourceSettings) -> Listing:
        """The members of the container at ``path``; never raises."""

    def open_member(self, location: str, key: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A member's bytes; every failure is a DocumentError with its category."""

    def member_metadata(self, location: str, key: str, rel_path: str) -> dict[str, Any]:
        """Metadata the member (listed as ``rel_path``) takes from its container, or {};
        like a sidecar's, it is part of the member's hash."""


def member_sha256(container: Container, location: str, key: str) -> str:
    h = hashlib.sha256()
    with container.open_member(location, key) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def short_name(name: str) -> str:
    """``name`` cut to a length every file system takes, its extension kept."""
    if len(name.encode()) <= _MAX_NAME_BYTES:
        return name
    pure = PurePosixPath(name)
    suffix = pure.suffix if len(pure.suffix.encode()) < 20 else ""
    stem = name[: len(name) - len(suffix)]
    while len((stem + suffix).encode()) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    return stem + suffix


@contextlib.contextmanager
def extracted(container: Container, location: str, key: str, name: str) -> Iterator[str]:
    """A temporary file named ``name`` (so its suffix tells the parser what it is) holding
    the member's bytes, removed when the block ends."""
    tmp = tempfile.mkdtemp(prefix="corpusflow-member-")
    try:
        target = Path(tmp) / (short_name(name) or "member")
        with container.open_member(location, key) as fh, target.open("wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
        yield str(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def guess_encoding(raws: list[bytes], candidates: tuple[str, ...] = LEGACY_NAME_ENCODINGS) -> str:
    """The encoding names written without one were most likely written in: UTF-8 where
    they all decode, else the legacy encoding they read best in."""
    try:
        for raw in raws:
            raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    import charset_normalizer

    best = charset_normalizer.from_bytes(b"\n".join(raws), cp_isolation=list(candidates)).best()
    return best.encoding if best is not None else candidates[-1]
