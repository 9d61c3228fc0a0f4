"""A local directory as a document source."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from common.errors import Category, ConfigurationError, DocumentError
from common.settings import SourceSettings
from sources.archive import is_volume, volume_refusal
from sources.containers import container_for, container_of
from sources.members import Container, Member, extracted, member_sha256

log = logging.getLogger(__name__)

# Editor/OS droppings that are never documents.
_SKIP_NAMES = re.compile(
    r"^(?:~\$.*|\.~lock\..*|\.DS_Store|Thumbs\.db|desktop\.ini|.*~|.*\.tmp|.*\.swp)$"
)


# A file ``X.meta.json`` (or, in local folders, ``X.meta.yaml`` / ``X.meta.yml``) beside
# ``X`` holds X's metadata (an object: title, tags, department, effective date, ...; the key
# "acl" lists the groups allowed to read it). It is part of X's version, not a document.
SIDECAR_SUFFIX = ".meta.json"
SIDECAR_SUFFIXES = (SIDECAR_SUFFIX, ".meta.yaml", ".meta.yml")


@dataclass(frozen=True, slots=True)
class SourceFile:
    rel_path: str  # posix, relative to the source root: the document's identity
    size: int  # of the document plus its sidecar
    mtime: float  # the later of the two
    location: str  # what a parser opens (an absolute local path, or an object URL)
    sidecar: str | None = None  # metadata sidecar location
    # Object stores only: the entity tag(s) of the object (and its sidecar). With the
    # size it is the change hint; local files have none and use size + mtime.
    etag: str | None = None
    # A member of the container (sources.members: a ZIP archive, an e-mail message) at
    # ``location``: the key that opens it there (for a member of a nested container, the
    # keys from the outermost inward joined by sources.members.CHAIN_SEP).
    member: str | None = None
    # Why this file fails without being parsed, as (category, message): an archive or a
    # message (or a nested one) that cannot be expanded, a volume of a spanned archive.
    refusal: tuple[str, str] | None = None

    @property
    def doc_id(self) -> str:
        return doc_id_for(self.rel_path)

    def hint_matches(self, size: int | None, mtime: float | None, etag: str | None) -> bool:
        """Whether a recorded change hint still holds: size + entity tag where both sides
        have a tag (object stores: a new tag whenever the bytes change), else size + mtime."""
        if self.etag is not None and etag is not None:
            return size == self.size and etag == self.etag
        return size == self.size and mtime == self.mtime


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


def skipped_name(name: str) -> bool:
    """Hidden files and directories and editor/OS droppings: never documents."""
    return name.startswith(".") or bool(_SKIP_NAMES.match(name))


def wanted(rel_path: str, settings: SourceSettings) -> bool:
    """Whether the include/exclude globs select a relative path."""
    if not any(glob_match(rel_path, p) for p in settings.include):
        return False
    return not any(glob_match(rel_path, p) for p in settings.exclude)


def combine_digests(document: str, sidecar: str | None) -> str:
    """A document's hash: its bytes' SHA-256, combined with its sidecar's when it has one."""
    if sidecar is None:
        return document
    return hashlib.sha256(f"{document}:{sidecar}".encode()).hexdigest()


def parse_sidecar(raw: bytes | str, name: str = SIDECAR_SUFFIX) -> dict[str, Any]:
    """A sidecar's metadata (JSON, or YAML for ``.yaml``/``.yml``); a malformed one is the
    document's (terminal) error."""
    try:
        if name.endswith((".yaml", ".yml")):
            import yaml

            # Values YAML types itself (dates) are kept as their ISO text.
            data = json.loads(json.dumps(yaml.safe_load(raw), default=str))
        else:
            data = json.loads(raw)
    except ValueError as exc:
        raise DocumentError(Category.CORRUPT, f"unreadable metadata sidecar: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError
        raise DocumentError(Category.CORRUPT, f"unreadable metadata sidecar: {exc}") from exc
    if not isinstance(data, dict):
        raise DocumentError(Category.CORRUPT, "metadata sidecar is not an object")
    acl = data.get("acl")
    if acl is not None and (not isinstance(acl, list) or not all(isinstance(g, str) for g in acl)):
        raise DocumentError(
            Category.CORRUPT, 'metadata sidecar "acl" must be a list of group names'
        )
    return data


class LocalSource:
    def __init__(self, root: str | Path, settings: SourceSettings) -> None:
        self.root = Path(root).expanduser().resolve()
        self.settings = settings

    def check(self) -> None:
        if not self.root.is_dir():
            raise ConfigurationError(f"source directory not found: {self.root}")

    def _wanted(self, rel: str) -> bool:
        return wanted(rel, self.settings)

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
            if skipped_name(name) or name.endswith(SIDECAR_SUFFIXES):
                continue
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    if not self.settings.follow_symlinks:
                        continue
                    target = path.resolve()
                    if not target.is_relative_to(self.root):
                        continue  # never leave the source root
            except (OSError, RuntimeError) as exc:  # a symlink loop
                log.warning("not listed: %s (%s)", path, exc)
                continue
            try:
                if entry.is_dir(follow_symlinks=self.settings.follow_symlinks):
                    yield from self._walk(path)
                    continue
                if not entry.is_file(follow_symlinks=self.settings.follow_symlinks):
                    continue
                st = entry.stat(follow_symlinks=self.settings.follow_symlinks)
            except OSError:
                continue
            rel = _printable(path.relative_to(self.root).as_posix())
            if not self._wanted(rel):
                continue
            size, mtime, sidecar = st.st_size, st.st_mtime, None
            for suffix in SIDECAR_SUFFIXES:
                side = path.with_name(name + suffix)
                try:
                    side_st = side.stat()
                except OSError:
                    continue
                size, mtime, sidecar = (
                    size + side_st.st_size,
                    max(mtime, side_st.st_mtime),
                    str(side),
                )
                break
            refusal = None
            container = container_for(name, self.settings)
            if container is not None:
                listing = container.list(path, self.settings)
                if listing.refusal is None:
                    yield from self._members(
                        container, path, rel, st.st_mtime, sidecar, listing.members
                    )
                    continue
                refusal = listing.refusal
            elif self.settings.expand_archives and is_volume(name):
                refusal = volume_refusal(name)
            yield SourceFile(rel, size, mtime, str(path), sidecar, refusal=refusal)

    def _members(
        self,
        container: Container,
        path: Path,
        rel: str,
        mtime: float,
        sidecar: str | None,
        members: Sequence[Member],
    ) -> Iterator[SourceFile]:
        side_size, side_mtime = 0, None
        if sidecar is not None:
            with contextlib.suppress(OSError):
                side_st = Path(sidecar).stat()
                side_size, side_mtime = side_st.st_size, side_st.st_mtime
        side = "" if side_mtime is None else f":{side_mtime!r}"
        for m in members:
            if m.path and skipped_name(PurePosixPath(m.path).name):
                continue
            member_rel = f"{rel}/{m.path}" if m.path else rel  # "": the container's own
            if not self._wanted(member_rel):
                continue
            yield SourceFile(
                member_rel,
                m.size + side_size,
                max(mtime, side_mtime or 0.0),
                str(path),
                sidecar,
                etag=f"{container.label}:{m.hint}{side}",
                member=m.key,
                refusal=m.refusal,
            )

    @contextlib.contextmanager
    def fetch(self, f: SourceFile) -> Iterator[str]:
        """A local path holding the document's bytes for as long as the block runs."""
        if f.refusal is not None:
            raise DocumentError(*f.refusal)
        if f.member is not None:
            container = container_of(f.location)
            with extracted(container, f.location, f.member, PurePosixPath(f.rel_path).name) as path:
                yield path
            return
        yield f.location

    @staticmethod
    def content_hash(f: SourceFile) -> str:
        """SHA-256 of the document's bytes, combined with its sidecar's when there is one
        (and, for a container's member, with the metadata it takes from its container)."""
        sidecar = None if f.sidecar is None else _sha256_file(f.sidecar)
        if f.member is not None:
            container = container_of(f.location)
            digest = combine_digests(member_sha256(container, f.location, f.member), sidecar)
            inherited = container.member_metadata(f.location, f.member, f.rel_path)
            if not inherited:
                return digest
            return combine_digests(digest, _sha256_bytes(json.dumps(inherited, sort_keys=True)))
        return combine_digests(_sha256_file(f.location), sidecar)

    @staticmethod
    def metadata(f: SourceFile) -> dict[str, Any]:
        """The sidecar's metadata (empty without one), and for a container's member what it
        takes from its container; a broken sidecar is the document's error."""
        out: dict[str, Any] = {}
        if f.sidecar is not None:
            try:
                raw = Path(f.sidecar).read_bytes()
            except OSError as exc:
                raise DocumentError(
                    Category.CORRUPT, f"unreadable metadata sidecar: {exc}"
                ) from exc
            out = parse_sidecar(raw, f.sidecar)
        if f.member is not None:
            out.update(container_of(f.location).member_metadata(f.location, f.member, f.rel_path))
        return out


def _printable(rel: str) -> str:
    """A path whose name bytes are not UTF-8 (Python keeps them as surrogates, which
    no ledger can store) with those bytes written as ``\\xNN``: a stable identity that
    can be stored and shown; the file is still opened by its real name."""
    try:
        rel.encode()
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")
    return rel


def _sha256_bytes(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256_file(location: str) -> str:
    h = hashlib.sha256()
    with open(location, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
