"""A local directory as a document source."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from corpusflow.errors import Category, ConfigurationError, DocumentError
from corpusflow.settings import SourceSettings

# Editor/OS droppings that are never documents.
_SKIP_NAMES = re.compile(
    r"^(?:~\$.*|\.~lock\..*|\.DS_Store|Thumbs\.db|desktop\.ini|.*~|.*\.tmp|.*\.swp)$"
)


# A file ``X.meta.json`` beside ``X`` holds X's metadata (any JSON object; the key
# "acl" lists the groups allowed to read it). It is part of X's version, not a document.
SIDECAR_SUFFIX = ".meta.json"


@dataclass(frozen=True, slots=True)
class SourceFile:
    rel_path: str  # posix, relative to the source root: the document's identity
    size: int  # of the document plus its sidecar
    mtime: float  # the later of the two
    location: str  # what a parser opens (an absolute local path)
    sidecar: str | None = None  # metadata sidecar location

    @property
    def doc_id(self) -> str:
        return doc_id_for(self.rel_path)


def doc_id_for(rel_path: str) -> str:
    return hashlib.sha256(rel_path.encode()).hexdigest()[:32]


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def glob_match(rel_path: str, pattern: str) -> bool:
    """Glob match on a relative posix path; ``**`` spans directories."""
    return bool(_glob_regex(pattern).match(rel_path))


class LocalSource:
    def __init__(self, root: str | Path, settings: SourceSettings) -> None:
        self.root = Path(root).expanduser().resolve()
        self.settings = settings

    def check(self) -> None:
        if not self.root.is_dir():
            raise ConfigurationError(f"source directory not found: {self.root}")

    def _wanted(self, rel: str) -> bool:
        s = self.settings
        if not any(glob_match(rel, p) for p in s.include):
            return False
        return not any(glob_match(rel, p) for p in s.exclude)

    def list(self) -> Iterator[SourceFile]:
        """Stream the source's files in a stable order (hidden and temporary files skipped)."""
        self.check()
        yield from self._walk(self.root)

    def _walk(self, directory: Path) -> Iterator[SourceFile]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.startswith(".") or _SKIP_NAMES.match(name) or name.endswith(SIDECAR_SUFFIX):
                continue
            path = Path(entry.path)
            if entry.is_symlink():
                if not self.settings.follow_symlinks:
                    continue
                target = path.resolve()
                if not target.is_relative_to(self.root):
                    continue  # never leave the source root
            try:
                if entry.is_dir(follow_symlinks=self.settings.follow_symlinks):
                    yield from self._walk(path)
                    continue
                if not entry.is_file(follow_symlinks=self.settings.follow_symlinks):
                    continue
                st = entry.stat(follow_symlinks=self.settings.follow_symlinks)
            except OSError:
                continue
            rel = path.relative_to(self.root).as_posix()
            if not self._wanted(rel):
                continue
            size, mtime, sidecar = st.st_size, st.st_mtime, None
            side = path.with_name(name + SIDECAR_SUFFIX)
            try:
                side_st = side.stat()
            except OSError:
                pass
            else:
                size, mtime, sidecar = (
                    size + side_st.st_size,
                    max(mtime, side_st.st_mtime),
                    str(side),
                )
            yield SourceFile(rel, size, mtime, str(path), sidecar)

    @contextlib.contextmanager
    def fetch(self, f: SourceFile) -> Iterator[str]:
        """A local path holding the document's bytes for as long as the block runs."""
        yield f.location

    @staticmethod
    def content_hash(f: SourceFile) -> str:
        """SHA-256 of the document's bytes, combined with its sidecar's when there is one."""
        digest = _sha256_file(f.location)
        if f.sidecar is None:
            return digest
        return hashlib.sha256(f"{digest}:{_sha256_file(f.sidecar)}".encode()).hexdigest()

    @staticmethod
    def metadata(f: SourceFile) -> dict[str, Any]:
        """The sidecar's metadata (empty without one); a broken sidecar is the document's error."""
        if f.sidecar is None:
            return {}
        try:
            data = json.loads(Path(f.sidecar).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DocumentError(Category.CORRUPT, f"unreadable metadata sidecar: {exc}") from exc
        if not isinstance(data, dict):
            raise DocumentError(Category.CORRUPT, "metadata sidecar is not a JSON object")
        acl = data.get("acl")
        if acl is not None and (
            not isinstance(acl, list) or not all(isinstance(g, str) for g in acl)
        ):
            raise DocumentError(
                Category.CORRUPT, 'metadata sidecar "acl" must be a list of group names'
            )
        return data


def _sha256_file(location: str) -> str:
    h = hashlib.sha256()
    with open(location, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
