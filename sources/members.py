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
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

from common.settings import SourceSettings

log = logging.getLogger(__name__)

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


class ListingCache:
    """Listings remembered by the container file's identity and stat (path, size, mtime,
    ctime, inode) in one SQLite file, so a container that must be read whole to be listed
    (an e-mail message) is not read again while it is unchanged. Best effort: a cache that
    cannot be opened or written is skipped; entries unused for ``keep_days`` are dropped."""

    _VERSION = 1

    def __init__(self, path: Path, keep_days: float = 30.0) -> None:
        import sqlite3
        import threading

        self._lock = threading.Lock()
        self._db: Any = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # losing an entry costs one read
            db.execute(
                "CREATE TABLE IF NOT EXISTS listings (key TEXT PRIMARY KEY, value TEXT, used REAL)"
            )
            db.execute("DELETE FROM listings WHERE used < ?", (time.time() - keep_days * 86400,))
            db.commit()
            self._db = db
        except Exception as exc:  # sqlite3.Error, OSError: list without a cache
            log.warning("listing cache %s not used: %s", path, exc)

    @classmethod
    def key(cls, path: Path, settings: tuple[Any, ...]) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        ident = [cls._VERSION, str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        return hashlib.sha256(json.dumps([*ident, st.st_ino, *settings]).encode()).hexdigest()

    def get(self, key: str) -> Listing | None:
        if self._db is None:
            return None
        with self._lock, contextlib.suppress(Exception):
            row = self._db.execute("SELECT value FROM listings WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            now = time.time()  # marked used at most once a day: a nightly run writes little
            marked = self._db.execute(
                "UPDATE listings SET used = ? WHERE key = ? AND used < ?", (now, key, now - 86400)
            )
            if marked.rowcount:
                self._db.commit()
            data = json.loads(row[0])
            members = [Member(p, k, s, h, _pair(r)) for p, k, s, h, r in data["members"]]
            return Listing(members, _pair(data["refusal"]))
        return None

    def put(self, key: str, listing: Listing) -> None:
        if self._db is None:
            return
        members = [[m.path, m.key, m.size, m.hint, m.refusal] for m in listing.members]
        value = json.dumps({"members": members, "refusal": listing.refusal})
        with self._lock, contextlib.suppress(Exception):
            self._db.execute(
                "INSERT OR REPLACE INTO listings VALUES (?, ?, ?)", (key, value, time.time())
            )
            self._db.commit()


def _pair(value: list[str] | None) -> tuple[str, str] | None:
    return (value[0], value[1]) if value else None


@functools.lru_cache(maxsize=8)
def listing_cache(path: str) -> ListingCache:
    """The process's one handle on the listing cache at ``path``."""
    return ListingCache(Path(path))


def listing_cache_path(setting: str) -> Path | None:
    """Where ``source.listing_cache`` says the listing cache is: "off" none, "" the user's
    cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``corpusflow/listings.sqlite``)."""
    if setting == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "corpusflow" / "listings.sqlite"
