"""ZIP archives as folders of documents.

A ``.zip`` in a source is not one document: each member is listed as its own
``SourceFile`` with the path ``archive.zip/member`` (its own ledger row, doc id
and chunks), so a member added, changed or removed inside the archive is a
new, changed or deleted document on the next refresh. The archive's metadata
sidecar applies to every member. Members are checked like any ZIP before
anything is inflated (``corpusflow.zipguard``: member count, total size,
ratio); an archive over the limits, or one that cannot be read, is listed as
the archive itself so the parser fails it with the reason instead of the
documents vanishing. Member names that would leave the archive (absolute,
``..``), directories, editor droppings and nested archives' contents are not
expanded (a nested ``.zip`` is listed, and refused by name when parsed).
The change hint of a member is its size and CRC-32 from the archive's
directory, so an unchanged member is never re-read.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from corpusflow.errors import Category, DocumentError
from corpusflow.settings import SourceSettings
from corpusflow.zipguard import ARCHIVE_EXTENSIONS, zip_problem


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_EXTENSIONS)


def safe_member_name(name: str) -> str | None:
    """The member's path inside the archive, or None for one that must not be expanded."""
    if name.endswith("/") or "\\" in name or name.startswith("/"):
        return None
    parts = PurePosixPath(name).parts
    if not parts or any(p in ("..", ".", "") for p in parts) or ":" in parts[0]:
        return None
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None  # hidden files and macOS resource forks are not documents
    return "/".join(parts)


def list_members(path: Path, settings: SourceSettings) -> list[zipfile.ZipInfo] | None:
    """The archive's expandable members, or None when it must not be expanded."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    if zip_problem(
        infos,
        settings.archive_max_members,
        settings.archive_max_uncompressed_mb,
        settings.archive_max_ratio,
    ):
        return None
    return [i for i in infos if safe_member_name(i.filename) is not None]


def member_hint(info: zipfile.ZipInfo, sidecar_mtime: float | None) -> str:
    """The change hint of a member: its CRC-32 (and the sidecar's mtime)."""
    side = "" if sidecar_mtime is None else f":{sidecar_mtime!r}"
    return f"zip-crc32:{info.CRC:08x}{side}"


@contextlib.contextmanager
def _open_member(archive: str, member: str) -> Iterator[IO[bytes]]:
    try:
        with zipfile.ZipFile(archive) as zf, zf.open(member) as fh:
            yield fh
    except KeyError as exc:
        raise DocumentError(
            Category.SOURCE_CHANGED, f"member {member} is no longer in the archive"
        ) from exc
    except RuntimeError as exc:  # zipfile: "File ... is encrypted, password required"
        if "encrypted" in str(exc):
            raise DocumentError(
                Category.ENCRYPTED, f"archive member {member} is encrypted"
            ) from exc
        raise DocumentError(Category.CORRUPT, f"archive member {member}: {exc}") from exc
    except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as exc:
        raise DocumentError(
            Category.CORRUPT, f"archive member {member} cannot be read: {exc}"
        ) from exc


def member_sha256(archive: str, member: str) -> str:
    h = hashlib.sha256()
    with _open_member(archive, member) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def extracted(archive: str, member: str) -> Iterator[str]:
    """A temporary file holding the member's bytes (same name, so its suffix tells the
    parser what it is), removed when the block ends."""
    tmp = tempfile.mkdtemp(prefix="corpusflow-zip-")
    try:
        target = Path(tmp) / PurePosixPath(member).name
        with _open_member(archive, member) as fh, target.open("wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
        yield str(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
