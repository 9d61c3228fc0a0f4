"""ZIP archives as folders of documents.

A ``.zip`` in a source is not one document: each member is listed as its own
``SourceFile`` with the path ``archive.zip/member`` (its own ledger row, doc id
and chunks), so a member added, changed or removed inside the archive is a
new, changed or deleted document on the next refresh. The archive's metadata
sidecar applies to every member. A ZIP inside a ZIP is expanded as a nested
folder (``outer.zip/inner.zip/member``).

Nothing in an archive stops a run: listing never raises. An archive that cannot
be expanded (over the bomb limits, unreadable, spanned over several volumes) is
listed as the archive itself with a ``refusal`` that fails it with the reason
and what to do; a nested archive that cannot be expanded is listed the same way
as its member; a member that cannot be read fails alone with its category.

Bomb guards (``common.zipguard``: member count, total inflated size, ratio)
are checked before anything is inflated, cumulatively over nesting: nested
archives spend the same member and size budget as the outer one, a nested
member's ratio is multiplied by its containers', and ``source.archive_max_depth``
bounds the nesting.

Members compressed with methods Python's zipfile cannot read (the legacy shrink,
reduce and implode, deflate64, PPMd, XZ, Zstandard) are decoded by 7-Zip (``7zz``,
``7z``, ``7za``) or Info-ZIP ``unzip`` where one is installed
(``scripts/system_deps.sh``), else fail ``unsupported`` saying so. Member names
without the UTF-8 flag are decoded from their bytes (UTF-8, GBK/GB18030,
Shift-JIS, Big5, EUC-KR or the ZIP default cp437), or with
``source.archive_name_encoding`` when set.

The change hint of a member is its size and CRC-32 from the archive's directory
(and its containers'), so an unchanged member is never re-read. ``ZipContainer`` is this
module behind the container interface (``sources.members``).
"""

from __future__ import annotations

import contextlib
import logging
import lzma
import mmap
import re
import shutil
import struct
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from common.encodings import guess_encoding
from common.errors import Category, DocumentError, is_storage_full
from common.settings import SourceSettings
from common.zipguard import ARCHIVE_EXTENSIONS, zip_problem
from sources.members import CHAIN_SEP, LEGACY_NAME_ENCODINGS, Listing, Member

log = logging.getLogger(__name__)

# Volumes of a spanned/split archive: x.z01, x.z02, ... beside x.zip.
_VOLUME = re.compile(r"\.z\d{2,}$", re.IGNORECASE)
_ZIPFILE_METHODS = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)
_METHOD_NAMES = {
    1: "shrink",
    2: "reduce",
    3: "reduce",
    4: "reduce",
    5: "reduce",
    6: "implode",
    9: "deflate64",
    10: "PKWARE DCL implode",
    93: "Zstandard",
    95: "XZ",
    96: "JPEG",
    97: "WavPack",
    98: "PPMd",
}
# External decoders, in order of preference, with the arguments that write the one
# member of an archive to stdout.
_DECODERS = (
    ("7zz", ("e", "-so", "-bd", "-y", "-p")),
    ("7z", ("e", "-so", "-bd", "-y", "-p")),
    ("7za", ("e", "-so", "-bd", "-y", "-p")),
    ("unzip", ("-p", "-qq")),
)
_UNICODE_PATH_EXTRA = 0x7075  # Info-ZIP Unicode Path extra field


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_EXTENSIONS)


def is_volume(name: str) -> bool:
    """A volume of a spanned/split ZIP (``x.z01``): part of an archive, not a document."""
    return bool(_VOLUME.search(name))


def decoder() -> str | None:
    """The external program that reads the compression methods zipfile cannot, if any."""
    for name, _ in _DECODERS:
        if shutil.which(name):
            return name
    return None


def safe_member_name(name: str) -> str | None:
    """The member's path inside the archive, or None for one that must not be expanded."""
    name = name.replace("\\", "/")  # DOS/Windows tools wrote backslashes
    if name.endswith("/") or name.startswith("/"):
        return None
    parts = PurePosixPath(name).parts
    if not parts or any(p in ("..", ".", "") for p in parts) or ":" in parts[0]:
        return None
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None  # hidden files and macOS resource forks are not documents
    return "/".join(parts)


@dataclass(slots=True)
class _Budget:
    members: int
    bytes: float
    max_ratio: float
    depth: int


def list_archive(path: Path, settings: SourceSettings) -> Listing:
    """The archive's expandable members (nested archives expanded); never raises."""
    budget = _Budget(
        settings.archive_max_members,
        settings.archive_max_uncompressed_mb * 1024 * 1024,
        settings.archive_max_ratio,
        settings.archive_max_depth,
    )
    listing = Listing()
    try:
        spanned = _spanned(path)
        if spanned:
            listing.refusal = (Category.UNSUPPORTED.value, spanned)
            return listing
        with zipfile.ZipFile(path) as zf:
            problem = _expand(zf, (), "", "", 1.0, 0, budget, settings, listing.members)
    except zipfile.BadZipFile as exc:
        problem = (Category.CORRUPT.value, f"not a readable ZIP archive: {exc}")
    except DocumentError as exc:
        problem = (exc.category.value, exc.message)
    except Exception as exc:  # one archive never stops a listing
        if is_storage_full(exc):
            raise
        problem = (Category.CORRUPT.value, f"ZIP archive cannot be listed: {exc}")
    if problem is not None:
        return Listing(refusal=problem)
    # A name written twice (an archive appended to) is one document: the last copy, as
    # zipfile reads it.
    listing.members = list({m.path: m for m in listing.members}.values())
    return listing


def _expand(
    zf: zipfile.ZipFile,
    chain: tuple[str, ...],
    prefix: str,
    hint: str,
    ratio: float,
    depth: int,
    budget: _Budget,
    settings: SourceSettings,
    out: list[Member],
) -> tuple[str, str] | None:
    """List ``zf``'s members into ``out``; the reason it must not be expanded, if any."""
    infos = zf.infolist()
    if any(i.volume for i in infos):
        return (Category.UNSUPPORTED.value, _SPANNED)
    problem = zip_problem(infos, budget.members, budget.bytes / 2**20, budget.max_ratio / ratio)
    if problem:
        return (
            Category.TOO_LARGE.value,
            f"{problem}{' (counted with the archives that hold it)' if chain else ''}; "
            "raise source.archive_max_members / archive_max_uncompressed_mb / "
            "archive_max_ratio to expand it",
        )
    budget.members -= len(infos)
    budget.bytes -= sum(i.file_size for i in infos)
    names = decoded_names(infos, settings.archive_name_encoding)
    for info in sorted(infos, key=lambda i: names[i.filename]):
        name = safe_member_name(names[info.filename])
        if name is None:
            if not info.is_dir():
                log.warning("archive member %r not listed: unsafe name", prefix + info.filename)
            continue
        path = prefix + name
        key = CHAIN_SEP.join((*chain, info.filename))
        member_hint = f"{hint}{info.CRC:08x}"
        member_ratio = ratio * info.file_size / info.compress_size if info.compress_size else ratio
        if is_archive(name):
            nested = _expand_nested(
                zf, info, (*chain, info.filename), path, member_hint, member_ratio, depth,
                budget, settings, out,
            )  # fmt: skip
            if nested is None:
                continue
            out.append(Member(path, key, info.file_size, member_hint, nested))
            continue
        out.append(Member(path, key, info.file_size, member_hint))
    return None


def _expand_nested(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    chain: tuple[str, ...],
    path: str,
    hint: str,
    ratio: float,
    depth: int,
    budget: _Budget,
    settings: SourceSettings,
    out: list[Member],
) -> tuple[str, str] | None:
    """Expand a nested archive into ``out`` as the folder ``path/``; the reason it is
    listed as itself instead (its members listed so far are dropped), if any."""
    if depth + 1 > budget.depth:
        return (
            Category.TOO_LARGE.value,
            f"nested archive deeper than source.archive_max_depth={budget.depth}; "
            "raise it to expand this one",
        )
    start = len(out)
    before = (budget.members, budget.bytes)
    try:
        with _spooled(zf, info) as inner_path, zipfile.ZipFile(inner_path) as inner:
            problem = _expand(
                inner, chain, path + "/", hint + ":", ratio, depth + 1, budget, settings, out
            )
    except zipfile.BadZipFile as exc:
        problem = (Category.CORRUPT.value, f"nested archive is not a readable ZIP: {exc}")
    except DocumentError as exc:
        problem = (exc.category.value, exc.message)
    except Exception as exc:  # the nested archive fails alone
        if is_storage_full(exc):
            raise
        problem = (Category.CORRUPT.value, f"nested archive cannot be read: {exc}")
    if problem is not None:
        del out[start:]
        budget.members, budget.bytes = before
    return problem


_SPANNED = (
    "spanned/multi-volume archive (its members are spread over several files such as "
    "x.z01, x.z02, x.zip): join the volumes into one archive (`zip -s 0 x.zip --out "
    "joined.zip`, or extract them with 7-Zip) and ingest that"
)


def _spanned(path: Path) -> str | None:
    """Why the archive is one volume of a spanned/split set, or None."""
    with path.open("rb") as fh:
        if fh.read(4) == b"PK\x07\x08":  # split-archive marker at the start of volume 1
            return _SPANNED
        fh.seek(0, 2)
        end = fh.tell()
        fh.seek(max(0, end - 65_557))
        tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at >= 0 and len(tail) >= at + 8:
        disk, cd_disk = struct.unpack("<HH", tail[at + 4 : at + 8])
        if disk or cd_disk:
            return _SPANNED
    return None


def volume_refusal(name: str) -> tuple[str, str]:
    return (
        Category.UNSUPPORTED.value,
        f"volume {name} of a {_SPANNED}",
    )


def decoded_names(infos: Sequence[zipfile.ZipInfo], forced: str = "auto") -> dict[str, str]:
    """Each member's name as its author wrote it, by zipfile's name for it.

    Names with the UTF-8 flag (bit 11) are already right. Others zipfile decodes as
    cp437; their bytes are decoded again: by the Info-ZIP Unicode Path field where one
    matches, else with one encoding for the whole archive (it was made on one machine),
    chosen from the bytes of all its names: UTF-8 where they all decode, else the
    legacy encoding they read best in (GB18030/GBK, Shift-JIS, Big5, EUC-KR, cp437),
    or ``forced`` when not "auto".
    """
    out = {i.filename: i.filename for i in infos}
    legacy: dict[str, bytes] = {}
    for info in infos:
        if info.flag_bits & 0x800:
            continue
        raw = info.orig_filename.encode("cp437")
        unicode_path = _unicode_path(info, raw)
        if unicode_path is not None:
            out[info.filename] = unicode_path
        elif not raw.isascii():
            legacy[info.filename] = raw
    if not legacy:
        return out
    encoding = (
        forced if forced != "auto" else guess_encoding(list(legacy.values()), LEGACY_NAME_ENCODINGS)
    )
    for name, raw in legacy.items():
        text = raw.decode(encoding, errors="replace").rstrip("\0")
        out[name] = text.replace("\\", "/") if "\\" in text else text
    return out


def _unicode_path(info: zipfile.ZipInfo, raw: bytes) -> str | None:
    extra = info.extra
    while len(extra) >= 4:
        tag, size = struct.unpack("<HH", extra[:4])
        body = extra[4 : 4 + size]
        if tag == _UNICODE_PATH_EXTRA and size >= 5 and body[0] == 1:
            (crc,) = struct.unpack("<L", body[1:5])
            if crc == zlib.crc32(raw):
                try:
                    return body[5:].decode("utf-8")
                except UnicodeDecodeError:
                    return None
        extra = extra[4 + size :]
    return None


def _refuse_member(info: zipfile.ZipInfo, member: str) -> None:
    if info.flag_bits & 0x1 or info.compress_type == 99:
        raise DocumentError(
            Category.ENCRYPTED,
            f"archive member {member} is encrypted: extract it with its password and ingest "
            "the file, or exclude the archive (source.exclude)",
        )


@contextlib.contextmanager
def _member_stream(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    """The member's bytes: from zipfile, or decoded by 7-Zip/unzip for the methods
    zipfile cannot read."""
    _refuse_member(info, info.filename)
    if info.compress_type in _ZIPFILE_METHODS:
        try:
            opened: IO[bytes] | None = zf.open(info)
        except zipfile.BadZipFile as exc:
            if not _MISPLACED.search(str(exc)):
                raise
            opened = None  # the directory's offsets are wrong: find the member's header
        if opened is not None:
            with opened as fh:
                yield fh
            return
        with tempfile.TemporaryDirectory(prefix="corpusflow-zip-") as tmp:
            single = Path(tmp) / "member.zip"
            _write_single(zf, info, single)
            with zipfile.ZipFile(single) as one, one.open("m") as fh:
                yield fh
        return
    with _decoded_by_tool(zf, info) as fh:
        yield fh


# zipfile's complaints when a member's local header is not where the central directory
# says (writers that left data descriptors out of the directory's offsets).
_MISPLACED = re.compile(r"Bad magic number for file header|File name in directory .* differ")


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    if info.flag_bits & 0x800:
        return info.orig_filename.encode("utf-8")
    return info.orig_filename.encode("cp437")


def _data_offset(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where the member's compressed bytes start: after its local header, found where
    the central directory says or, where that is wrong, by its signature and name."""
    fp = zf.fp
    assert fp is not None
    raw = _raw_name(info)
    fp.seek(info.header_offset)
    header = fp.read(30 + len(raw))
    if header[:4] == b"PK\x03\x04" and header[30:] == raw:
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_len + extra_len
    fp.seek(0)
    with mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ) as view:
        at = view.find(b"PK\x03\x04")
        while at >= 0:
            name_len, extra_len = struct.unpack("<HH", view[at + 26 : at + 30])
            if view[at + 30 : at + 30 + name_len] == raw:
                return at + 30 + name_len + extra_len
            at = view.find(b"PK\x03\x04", at + 4)
    raise DocumentError(
        Category.CORRUPT,
        f"archive member {info.filename}: its local header is missing; the archive is damaged",
    )


@contextlib.contextmanager
def _spooled(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[str]:
    """A temporary file holding a member's bytes (its own name kept), removed after."""
    tmp = tempfile.mkdtemp(prefix="corpusflow-zip-")
    try:
        target = Path(tmp) / (PurePosixPath(info.filename.replace("\\", "/")).name or "member")
        with _member_stream(zf, info) as fh, target.open("wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
        yield str(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _decoded_by_tool(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    """Decode a member zipfile cannot read: its compressed bytes are copied, unchanged,
    into a one-member archive (plain name, no data descriptor) that the external
    decoder writes to a temporary file, checked against the member's CRC-32."""
    method = _METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
    tool = decoder()
    if tool is None:
        raise DocumentError(
            Category.UNSUPPORTED,
            f"archive member {info.filename} is compressed with {method}, which Python's "
            "zipfile cannot read: install 7-Zip (Debian/Ubuntu: apt-get install 7zip; "
            "scripts/system_deps.sh does it) to index it, or re-pack the archive with Deflate",
        )
    if info.compress_size >= 0xFFFFFFFF or info.file_size >= 0xFFFFFFFF:
        raise DocumentError(
            Category.UNSUPPORTED,
            f"archive member {info.filename} is compressed with {method} and over 4 GiB",
        )
    args = dict(_DECODERS)[tool]
    with tempfile.TemporaryDirectory(prefix="corpusflow-zip-") as tmp:
        single = Path(tmp) / "member.zip"
        _write_single(zf, info, single)
        decoded = Path(tmp) / "decoded"
        with decoded.open("wb") as out:
            done = subprocess.run(
                [tool, *args, str(single)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE,
                timeout=600,
                check=False,
            )
        crc = 0
        with decoded.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                crc = zlib.crc32(block, crc)
        if done.returncode != 0 or crc != info.CRC or decoded.stat().st_size != info.file_size:
            why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["CRC"]
            raise DocumentError(
                Category.CORRUPT,
                f"archive member {info.filename} ({method}) cannot be decoded by {tool}: {why[0]}",
            )
        with decoded.open("rb") as fh:
            yield fh


def _write_single(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> None:
    fp = zf.fp
    assert fp is not None
    fp.seek(_data_offset(zf, info))
    name = b"m"
    flags = info.flag_bits & 0x0006  # method options (implode: dictionary size, trees)
    fields = (20, flags, info.compress_type, 0, 0x21, info.CRC, info.compress_size, info.file_size)
    with target.open("wb") as out:
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", *fields, len(name), 0) + name)
        left = info.compress_size
        while left:
            block = fp.read(min(left, 1 << 20))
            if not block:
                raise DocumentError(
                    Category.CORRUPT, f"archive member {info.filename} is truncated"
                )
            out.write(block)
            left -= len(block)
        cd_offset = out.tell()
        central = struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", 20, *fields, len(name), 0, 0, 0, 0, 0, 0
        )
        out.write(central + name)
        cd_size = len(central) + len(name)
        out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, cd_size, cd_offset, 0))


@contextlib.contextmanager
def open_member(archive: str, key: str) -> Iterator[IO[bytes]]:
    """A member's bytes (``key``: zipfile names from the outermost archive inward, joined
    by CHAIN_SEP); every failure is a DocumentError with its category."""
    names = key.split(CHAIN_SEP)
    shown = "/".join(names)
    try:
        with contextlib.ExitStack() as stack:
            zf = stack.enter_context(zipfile.ZipFile(archive))
            for name in names[:-1]:
                inner = stack.enter_context(_spooled(zf, zf.getinfo(name)))
                zf = stack.enter_context(zipfile.ZipFile(inner))
            yield stack.enter_context(_member_stream(zf, zf.getinfo(names[-1])))
    except DocumentError:
        raise
    except FileNotFoundError as exc:
        raise DocumentError(Category.SOURCE_CHANGED, f"archive vanished: {exc}") from exc
    except KeyError as exc:
        raise DocumentError(
            Category.SOURCE_CHANGED, f"member {shown} is no longer in the archive"
        ) from exc
    except RuntimeError as exc:  # zipfile: "File ... is encrypted, password required"
        if "encrypted" in str(exc):
            raise DocumentError(
                Category.ENCRYPTED,
                f"archive member {shown} is encrypted: extract it with its password and "
                "ingest the file, or exclude the archive (source.exclude)",
            ) from exc
        raise DocumentError(Category.CORRUPT, f"archive member {shown}: {exc}") from exc
    except NotImplementedError as exc:
        raise DocumentError(Category.UNSUPPORTED, f"archive member {shown}: {exc}") from exc
    except (
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        OSError,
        EOFError,
        ValueError,
        struct.error,
        subprocess.SubprocessError,
    ) as exc:
        if is_storage_full(exc):
            raise
        raise DocumentError(
            Category.CORRUPT,
            f"archive member {shown} cannot be read: {exc}; the archive may be damaged "
            "(test it with `7zz t` or `unzip -t`)",
        ) from exc


class ZipContainer:
    """ZIP archives behind the container interface (``sources.members.Container``): the
    archive itself is no document, its members are."""

    label = "zip-crc32"
    claims = staticmethod(is_archive)
    list = staticmethod(list_archive)
    open_member = staticmethod(open_member)

    def enabled(self, settings: SourceSettings) -> bool:
        return settings.expand_archives

    def member_metadata(self, location: str, key: str, rel_path: str) -> dict[str, Any]:
        return {}
