"""Object storage as a document source: ``s3://`` through boto3, other protocols through fsspec.

A source URL names a bucket and a prefix (``s3://corpus/docs``); every object below the
prefix is a candidate document and its key relative to the prefix (``a/b.pdf``) is its
identity, exactly as a local source's relative path is. The same rules as a local folder
apply: include/exclude globs on the relative key, hidden and temporary names skipped in
any segment, and ``X.meta.json`` beside ``X`` is X's metadata sidecar, hashed with it.

Change hint: ``size`` plus the object's entity tag (``etag``); ``mtime`` is the object's
LastModified, which every PUT renews, and serves where a store has no entity tag.

The listing is streamed: S3 pages through ``list_objects_v2`` (1000 keys a page), other
stores walk one directory at a time. Both yield keys in code-point order, which lets a
document wait only until its sidecar's key has gone by (documents whose key continues
with a character sorting before ``.``, such as ``a`` and ``a-1``, wait together; nothing
else is held).

Credentials come only from the provider's own environment and configuration (for S3:
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, instance roles). The
endpoint comes from ``source.storage_options`` or ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import posixpath
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from common.errors import Category, ConfigurationError, CorpusflowError, DocumentError
from common.settings import SourceSettings
from sources.local import (
    SIDECAR_SUFFIX,
    SourceFile,
    combine_digests,
    parse_sidecar,
    skipped_name,
    wanted,
)

_CHUNK = 1 << 20
# (object location -> (etag, sha256)) pairs remembered per source, so the re-hash after a
# parse is a conditional GET answered "304 Not Modified" instead of a second download.
_HASH_CACHE_SIZE = 4096

# source.storage_options an S3 source understands (credentials deliberately not among them).
_S3_OPTIONS = {
    "endpoint_url": "endpoint_url",
    "endpoint": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "profile": "profile_name",
    "addressing_style": "addressing_style",
}
_CREDENTIAL_WORDS = ("secret", "access_key", "session_token", "password", "token")


class SourceListingError(CorpusflowError):
    """Listing the source failed part-way; the run stops rather than mistake the rest for
    deletions."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One object as listed: key relative to the source root and its change hint."""

    key: str
    size: int
    mtime: float  # seconds since the epoch; NaN when the store reports none
    etag: str | None


class Body(Protocol):
    etag: str | None

    def chunks(self) -> Iterator[bytes]: ...


class Backend(Protocol):
    """The few operations an object store must offer a source."""

    def check(self) -> None: ...

    def entries(self) -> Iterator[Entry]:
        """Every object below the root, keys in code-point order."""

    def open(
        self, key: str, if_none_match: str | None
    ) -> contextlib.AbstractContextManager[Body | None]:
        """The object's bytes; ``None`` when its entity tag still equals ``if_none_match``."""


class ObjectStoreSource:
    """A bucket prefix (or any fsspec URL) as a document source."""

    def __init__(self, uri: str, settings: SourceSettings) -> None:
        scheme, sep, rest = uri.partition("://")
        scheme = scheme.lower()
        if not sep or not rest.strip("/"):
            raise ConfigurationError(
                f"not an object-store URL: {uri!r} (expected scheme://bucket/prefix)"
            )
        self.root = f"{scheme}://{rest.rstrip('/')}"
        self.settings = settings
        self.backend: Backend
        if scheme == "s3":
            bucket, _, prefix = rest.partition("/")
            self.backend = S3Backend(bucket, prefix.strip("/"), settings.storage_options)
        else:
            self.backend = FsspecBackend(self.root, settings.storage_options)
        self._hashes: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    # A source travels to Dask workers: drop what cannot be pickled.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_hashes"] = OrderedDict()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ObjectStoreSource({self.root!r})"

    def check(self) -> None:
        self.backend.check()

    # -- listing ------------------------------------------------------------------
    def list(self) -> Iterator[SourceFile]:
        """Stream the wanted objects in key order, each with its sidecar when it has one."""
        self.check()
        pending: OrderedDict[str, Entry] = OrderedDict()  # documents whose sidecar may follow
        sidecars: dict[str, Entry] = {}
        for entry in self.backend.entries():
            # Keys arrive sorted: once past "X.meta.json", X's sidecar cannot appear any more.
            while pending:
                head = next(iter(pending))
                if head + SIDECAR_SUFFIX >= entry.key:
                    break
                yield self._file(pending.pop(head), sidecars.pop(head, None))
            if any(skipped_name(part) for part in entry.key.split("/")):
                continue
            if entry.key.endswith(SIDECAR_SUFFIX):
                doc = entry.key.removesuffix(SIDECAR_SUFFIX)
                if doc in pending:
                    sidecars[doc] = entry
                continue
            if wanted(entry.key, self.settings):
                pending[entry.key] = entry
        for key, entry in pending.items():
            yield self._file(entry, sidecars.pop(key, None))

    def _location(self, key: str) -> str:
        return f"{self.root}/{key}"

    def _key(self, location: str) -> str:
        return location.removeprefix(self.root + "/")

    def _file(self, doc: Entry, side: Entry | None) -> SourceFile:
        if side is None:
            return SourceFile(doc.key, doc.size, doc.mtime, self._location(doc.key), None, doc.etag)
        mtime = (
            math.nan
            if math.isnan(doc.mtime) or math.isnan(side.mtime)
            else max(doc.mtime, side.mtime)
        )
        etag = f"{doc.etag}+{side.etag}" if doc.etag and side.etag else None
        return SourceFile(
            doc.key,
            doc.size + side.size,
            mtime,
            self._location(doc.key),
            self._location(side.key),
            etag,
        )

    # -- bytes ----------------------------------------------------------------------
    def content_hash(self, f: SourceFile) -> str:
        """SHA-256 of the object's bytes (streamed), combined with its sidecar's like a
        local source's, so a metadata change re-indexes the document."""
        sidecar = None if f.sidecar is None else self._digest(f.sidecar)
        return combine_digests(self._digest(f.location), sidecar)

    def _digest(self, location: str) -> str:
        with self._lock:
            known = self._hashes.get(location)
        with self.backend.open(self._key(location), known[0] if known else None) as body:
            if body is None:  # not modified since we hashed it
                assert known is not None
                return known[1]
            h = hashlib.sha256()
            for block in body.chunks():
                h.update(block)
            etag = body.etag
        digest = h.hexdigest()
        self._remember(location, etag, digest)
        return digest

    def _remember(self, location: str, etag: str | None, digest: str) -> None:
        if not etag:
            return
        with self._lock:
            self._hashes[location] = (etag, digest)
            self._hashes.move_to_end(location)
            while len(self._hashes) > _HASH_CACHE_SIZE:
                self._hashes.popitem(last=False)

    @contextlib.contextmanager
    def fetch(self, f: SourceFile) -> Iterator[str]:
        """Download the object to a private temporary file, removed when the block ends."""
        name = posixpath.basename(f.rel_path) or "document"
        if len(name.encode()) > 200:  # keep the extension, stay under NAME_MAX
            name = "document" + posixpath.splitext(name)[1][-32:]
        with tempfile.TemporaryDirectory(prefix="corpusflow-fetch-") as tmp:
            path = os.path.join(tmp, name)
            h = hashlib.sha256()
            with self.backend.open(self._key(f.location), None) as body, open(path, "wb") as out:
                assert body is not None
                for block in body.chunks():
                    out.write(block)
                    h.update(block)
                etag = body.etag
            self._remember(f.location, etag, h.hexdigest())
            yield path

    def metadata(self, f: SourceFile) -> dict[str, Any]:
        """The sidecar's metadata (empty without one); a malformed sidecar is the document's
        error, a vanished one means the source changed under the run."""
        if f.sidecar is None:
            return {}
        try:
            with self.backend.open(self._key(f.sidecar), None) as body:
                assert body is not None
                raw = b"".join(body.chunks())
        except FileNotFoundError as exc:
            raise DocumentError(Category.SOURCE_CHANGED, "metadata sidecar vanished") from exc
        return parse_sidecar(raw)


# -- S3 (boto3) -------------------------------------------------------------------------
class _S3Body:
    def __init__(self, response: dict[str, Any]) -> None:
        self.etag: str | None = response.get("ETag")
        self._stream = response["Body"]

    def chunks(self) -> Iterator[bytes]:
        yield from self._stream.iter_chunks(_CHUNK)

    def close(self) -> None:
        self._stream.close()


class S3Backend:
    """An S3 (or S3-compatible) bucket prefix through boto3."""

    def __init__(self, bucket: str, prefix: str, options: dict[str, str]) -> None:
        if not bucket:
            raise ConfigurationError("an s3:// source needs a bucket: s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.options = _s3_client_options(options)
        self._client: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def client(self) -> Any:
        """One boto3 client per source (clients are thread-safe; sessions are not)."""
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                opts = dict(self.options)
                session = boto3.session.Session(profile_name=opts.pop("profile_name", None))
                style = opts.pop("addressing_style", None)
                config = Config(
                    retries={"mode": "standard", "max_attempts": 5},
                    connect_timeout=10,
                    read_timeout=60,
                    s3={"addressing_style": style} if style else None,
                )
                self._client = session.client("s3", config=config, **opts)
            return self._client

    def _endpoint(self) -> str:
        try:
            return str(self.client.meta.endpoint_url)
        except Exception:  # the client could not be built: name what was configured
            return self.options.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL", "AWS")

    def check(self) -> None:
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except Exception as exc:
            raise _configuration_error(exc, self.url, self._endpoint()) from exc

    def entries(self) -> Iterator[Entry]:
        from botocore.exceptions import BotoCoreError, ClientError

        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=self.prefix, PaginationConfig={"PageSize": 1000}
        )
        listed = 0
        try:
            for page in pages:
                for obj in page.get("Contents", ()):
                    key = obj["Key"]
                    listed += 1
                    if key.endswith("/"):  # a "folder" marker, not a document
                        continue
                    yield Entry(
                        key[len(self.prefix) :],
                        int(obj["Size"]),
                        obj["LastModified"].timestamp(),
                        obj.get("ETag"),
                    )
        except (BotoCoreError, ClientError) as exc:
            raise SourceListingError(
                f"listing {self.url} failed after {listed} objects: {exc}"
            ) from exc

    @contextlib.contextmanager
    def open(self, key: str, if_none_match: str | None) -> Iterator[_S3Body | None]:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key}
        if if_none_match:
            kwargs["IfNoneMatch"] = if_none_match
        url = f"s3://{self.bucket}/{self.prefix}{key}"
        response: dict[str, Any] | None = None
        try:
            response = self.client.get_object(**kwargs)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code", "")
            if status == 404 or code in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"{url} not found") from exc
            if not (status == 304 or code in ("304", "NotModified")):
                raise OSError(f"reading {url} failed: {exc}") from exc
        except BotoCoreError as exc:  # connection and transport errors (after retries)
            raise OSError(f"reading {url} failed: {exc}") from exc
        if response is None:  # 304: unchanged since the ETag we know
            yield None
            return
        body = _S3Body(response)
        try:
            yield body
        finally:
            body.close()


def _s3_client_options(options: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in options.items():
        if name in _S3_OPTIONS:
            out[_S3_OPTIONS[name]] = value
        elif any(word in name.lower() for word in _CREDENTIAL_WORDS):
            raise ConfigurationError(
                f"source.storage_options[{name!r}]: credentials are not read from the settings; "
                "use the provider's environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "AWS_PROFILE) or an instance role"
            )
        else:
            raise ConfigurationError(
                f"source.storage_options[{name!r}] is not an S3 source option; supported: "
                + ", ".join(sorted(_S3_OPTIONS))
            )
    return out


def _configuration_error(exc: Exception, url: str, endpoint: str) -> ConfigurationError:
    """A clear, categorised message for why an S3 prefix cannot be listed."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ConfigurationError(
            f"no AWS credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_PROFILE), or run where an instance role provides them"
        )
    if isinstance(exc, ProfileNotFound):
        return ConfigurationError(f"{url}: {exc}")
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return ConfigurationError(
            f"cannot reach the S3 endpoint {endpoint} for {url}: {exc} "
            "(check source.storage_options.endpoint_url or AWS_ENDPOINT_URL)"
        )
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            return ConfigurationError(f"bucket {url.split('/')[2]!r} does not exist at {endpoint}")
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
            return ConfigurationError(
                f"access to {url} denied ({code}): the credentials are wrong or lack "
                "s3:ListBucket on this prefix"
            )
        return ConfigurationError(f"cannot list {url} at {endpoint}: {exc}")
    return ConfigurationError(f"cannot list {url} at {endpoint}: {type(exc).__name__}: {exc}")


# -- any other fsspec protocol ------------------------------------------------------------
_MTIME_KEYS = (
    "mtime",
    "LastModified",
    "last_modified",
    "updated",
    "modified",
    "created",
    "creation_time",
)
_ETAG_KEYS = ("ETag", "etag", "md5Hash", "generation", "version_id", "VersionId")


class _FileBody:
    etag: str | None = None

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def chunks(self) -> Iterator[bytes]:
        yield from iter(lambda: self._handle.read(_CHUNK), b"")


class FsspecBackend:
    """Any fsspec filesystem (gcsfs, adlfs, memory, ...), walked one directory at a time."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        import fsspec.core

        self.url = url
        protocol = url.split("://", 1)[0]
        try:
            self.fs, root = fsspec.core.url_to_fs(url, **options)
        except ImportError as exc:
            raise ConfigurationError(
                f"{protocol}:// sources need the filesystem's fsspec package: {exc}"
            ) from exc
        except ValueError as exc:
            raise ConfigurationError(
                f"unsupported source URL {url!r}: {exc}; supported: local paths, file://, s3://, "
                "and protocols of installed fsspec filesystems (gs:// with gcsfs, az:// with adlfs)"
            ) from exc
        except TypeError as exc:
            raise ConfigurationError(f"source.storage_options for {protocol}://: {exc}") from exc
        self.root = root.rstrip("/")

    def check(self) -> None:
        try:
            ok = self.fs.isdir(self.root)
        except Exception as exc:
            raise ConfigurationError(
                f"cannot reach source {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        if not ok:
            raise ConfigurationError(f"source not found: {self.url}")

    def entries(self) -> Iterator[Entry]:
        yield from self._walk(self.root)

    def _walk(self, directory: str) -> Iterator[Entry]:
        try:
            listing = self.fs.ls(directory, detail=True)
        except FileNotFoundError:
            return  # removed while walked
        except Exception as exc:
            raise SourceListingError(f"listing {directory} failed: {exc}") from exc
        items = []
        for info in listing:
            name = self.fs._strip_protocol(info["name"]).rstrip("/")
            if name == directory or not name.startswith(self.root + "/"):
                continue
            is_dir = info.get("type") == "directory"
            # A directory's keys all start with "name/": sort it there to keep code-point order.
            items.append((name + "/" if is_dir else name, name, is_dir, info))
        for _, name, is_dir, info in sorted(items, key=lambda item: item[0]):
            if is_dir:
                if not skipped_name(posixpath.basename(name)):  # hidden folders: not entered
                    yield from self._walk(name)
            else:
                yield Entry(
                    name[len(self.root) + 1 :],
                    int(info.get("size") or 0),
                    _mtime(info),
                    _etag(info),
                )

    @contextlib.contextmanager
    def open(self, key: str, if_none_match: str | None) -> Iterator[_FileBody]:
        with self.fs.open(f"{self.root}/{key}", "rb") as handle:
            yield _FileBody(handle)


def _mtime(info: dict[str, Any]) -> float:
    for key in _MTIME_KEYS:
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value).timestamp()
    return math.nan  # no change hint: such objects are always hashed


def _etag(info: dict[str, Any]) -> str | None:
    for key in _ETAG_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return str(value)
    return None
