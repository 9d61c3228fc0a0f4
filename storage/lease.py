"""One writer per collection: an exclusive lease held for the whole run.

Two Lance writers inserting the same new keys at once both succeed and duplicate
rows, so a refresh takes this lease before it writes.

- Local databases (a path or ``file://``): an ``fcntl`` lock on a file beside the
  tables; the kernel releases it when the holder dies, even by SIGKILL, so a crashed
  run never leaves a stale lease.
- ``s3://`` databases: a lease object ``<db>/.<collection>.lease`` created with a
  conditional PUT (``If-None-Match: *``), so exactly one writer creates it. It records
  the holder, pid, host and expiry, is renewed by a heartbeat thread (a PUT conditional
  on the ETag the holder last wrote) and deleted on exit (conditional on that ETag too).
  A holder that dies stops renewing: once the object is older than its ``ttl_s`` (by the
  store's own clock: the response ``Date`` against the object's ``LastModified``, so
  clock skew between hosts does not matter) another run takes it over with a PUT
  conditional on the ETag it read, so of several runs racing for a stale lease exactly
  one wins. A holder whose renewal fails that way has lost the lease; its run ends with
  LeaseLostError.
- Other schemes (gs://, az://, ...): refused with a clear error.
"""

from __future__ import annotations

import contextlib
import email.utils
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common.errors import ConfigurationError, CorpusflowError
from common.settings import StorageSettings

log = logging.getLogger(__name__)

# An S3 lease that has not been renewed for this long belongs to a dead run.
LEASE_TTL_S = 60.0


class LeaseHeldError(CorpusflowError):
    """Another run holds the collection's write lease."""


class LeaseLostError(CorpusflowError):
    """The run's S3 lease was taken over while it ran (it could not renew it in time)."""


def collection_lease(storage: StorageSettings) -> contextlib.AbstractContextManager[None]:
    """The write lease of the configured collection."""
    return write_lease(
        storage.db, storage.collection, storage.lease_wait_s, storage.storage_options
    )


def _held_message(collection: str, db_uri: str, holder: str) -> str:
    return (
        f"collection {collection!r} in {db_uri} is being written by another run"
        f"{' (' + holder + ')' if holder else ''}; wait for it to finish or set "
        "storage.lease_wait_s to wait"
    )


@contextlib.contextmanager
def write_lease(
    db_uri: str,
    collection: str,
    wait_s: float = 0.0,
    storage_options: dict[str, str] | None = None,
    ttl_s: float = LEASE_TTL_S,
) -> Iterator[None]:
    """Hold the collection's write lease for the ``with`` block, waiting up to ``wait_s``
    for another run's; raises LeaseHeldError when it is still held then."""
    scheme = db_uri.split("://", 1)[0].lower() if "://" in db_uri else ""
    if scheme == "s3":
        with _S3Lease(db_uri, collection, storage_options or {}, ttl_s).hold(wait_s):
            yield
        return
    if scheme not in ("", "file"):
        raise CorpusflowError(
            f"write leases for {scheme}:// databases are not supported; supported: local "
            "paths and file:// (fcntl lock) and s3:// (conditional-write lease object)"
        )
    root = Path(db_uri.removeprefix("file://"))
    root.mkdir(parents=True, exist_ok=True)
    path = root / f".{collection}.lease"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = ""
                    with contextlib.suppress(OSError, ValueError):
                        holder = json.loads(path.read_text() or "{}").get("holder", "")
                    raise LeaseHeldError(_held_message(collection, db_uri, holder)) from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"holder": f"pid {os.getpid()} on {socket.gethostname()}", "since": time.time()}
            ).encode(),
        )
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# Lance storage_options (object_store key names and aliases) -> boto3 client arguments, so
# the lease talks to the same endpoint, region and credentials as the database.
_LANCE_TO_BOTO3 = {
    "aws_endpoint": "endpoint_url",
    "aws_endpoint_url": "endpoint_url",
    "endpoint": "endpoint_url",
    "endpoint_url": "endpoint_url",
    "aws_region": "region_name",
    "aws_default_region": "region_name",
    "region": "region_name",
    "aws_access_key_id": "aws_access_key_id",
    "access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "session_token": "aws_session_token",
    "token": "aws_session_token",
}


def _s3_client(options: dict[str, str]) -> Any:
    import boto3
    from botocore.config import Config

    kwargs = {
        _LANCE_TO_BOTO3[k.lower()]: v for k, v in options.items() if k.lower() in _LANCE_TO_BOTO3
    }
    virtual = next(
        (
            v
            for k, v in options.items()
            if k.lower() in ("aws_virtual_hosted_style_request", "virtual_hosted_style_request")
        ),
        None,
    )
    # Like Lance: path-style requests to a configured endpoint unless told otherwise.
    if virtual is not None:
        style: str | None = "virtual" if str(virtual).lower() == "true" else "path"
    else:
        style = "path" if "endpoint_url" in kwargs else None
    config = Config(
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=10,
        read_timeout=30,
        s3={"addressing_style": style} if style else None,
    )
    return boto3.session.Session().client("s3", config=config, **kwargs)


def _code(exc: Exception) -> tuple[str, int | None]:
    response = getattr(exc, "response", None) or {}
    return (
        str(response.get("Error", {}).get("Code", "")),
        response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
    )


def _precondition_failed(exc: Exception) -> bool:
    code, status = _code(exc)
    return code == "PreconditionFailed" or status == 412


def _missing(exc: Exception) -> bool:
    code, status = _code(exc)
    return code in ("NoSuchKey", "404") or status == 404


def _conflict(exc: Exception) -> bool:
    """S3 answers 409 when another conditional write on the key is in flight: retry."""
    code, status = _code(exc)
    return code == "ConditionalRequestConflict" or status == 409


class _S3Lease:
    """The lease object ``<db>/.<collection>.lease`` of an s3:// database."""

    def __init__(self, db_uri: str, collection: str, options: dict[str, str], ttl_s: float) -> None:
        bucket, _, prefix = db_uri.split("://", 1)[1].partition("/")
        if not bucket:
            raise ConfigurationError(f"storage.db {db_uri!r}: an s3:// database needs a bucket")
        prefix = prefix.strip("/")
        self.db_uri = db_uri
        self.collection = collection
        self.bucket = bucket
        self.key = f"{prefix}/.{collection}.lease" if prefix else f".{collection}.lease"
        self.url = f"s3://{bucket}/{self.key}"
        self.ttl_s = ttl_s
        self.token = uuid.uuid4().hex
        self.holder = f"pid {os.getpid()} on {socket.gethostname()}"
        self.etag: str | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self.client = _s3_client(options)

    @contextlib.contextmanager
    def hold(self, wait_s: float) -> Iterator[None]:
        self._acquire(wait_s)
        beat = threading.Thread(
            target=self._heartbeat, name=f"lease-heartbeat-{self.collection}", daemon=True
        )
        beat.start()
        try:
            yield
        finally:
            self._stop.set()
            beat.join()
            self._release()
        if self.lost:
            raise LeaseLostError(
                f"the write lease of collection {self.collection!r} in {self.db_uri} was lost "
                f"while the run held it ({self.lost}); another run may have written at the same "
                "time: run `corpusflow verify` before trusting the tables"
            )

    # -- the lease object -------------------------------------------------------
    def _put(self, **condition: str) -> None:
        now = time.time()
        body = {
            "holder": self.holder,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "token": self.token,
            "ttl_s": self.ttl_s,
            "renewed_at": now,
            "expires_at": now + self.ttl_s,
        }
        response = self.client.put_object(
            Bucket=self.bucket,
            Key=self.key,
            Body=json.dumps(body).encode(),
            ContentType="application/json",
            **condition,
        )
        self.etag = response["ETag"]

    def _read(self) -> tuple[str, dict[str, Any], float] | None:
        """(ETag, content, seconds since last renewal by the store's clock); None if absent."""
        from botocore.exceptions import ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        raw = response["Body"].read()
        try:
            info = json.loads(raw)
        except ValueError:
            info = {}
        if not isinstance(info, dict):
            info = {}
        date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        server_now = email.utils.parsedate_to_datetime(date).timestamp() if date else time.time()
        return response["ETag"], info, server_now - response["LastModified"].timestamp()

    def _acquire(self, wait_s: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    self._put(IfNoneMatch="*")
                    return
                except ClientError as exc:
                    if not (_precondition_failed(exc) or _conflict(exc)):
                        raise
                current = self._read()
                if current is None:
                    continue  # released in between: try again at once
                etag, info, age = current
                holder = str(info.get("holder") or "unknown holder")
                ttl = float(info.get("ttl_s") or LEASE_TTL_S)
                if age > ttl:
                    # The holder stopped renewing: take over, conditional on the version we
                    # read, so of several runs doing this at once exactly one succeeds.
                    try:
                        self._put(IfMatch=etag)
                    except ClientError as exc:
                        if not (_precondition_failed(exc) or _missing(exc) or _conflict(exc)):
                            raise
                        continue
                    log.warning(
                        "took over the stale write lease %s of %s (not renewed for %.0f s)",
                        self.url,
                        holder,
                        age,
                    )
                    return
                if time.monotonic() >= deadline:
                    raise LeaseHeldError(
                        _held_message(
                            self.collection, self.db_uri, f"{holder}, renewed {age:.0f} s ago"
                        )
                    )
                time.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
        except (BotoCoreError, ClientError) as exc:
            raise ConfigurationError(
                f"cannot take the write lease {self.url}: {type(exc).__name__}: {exc} "
                "(check storage.storage_options, AWS_ENDPOINT_URL and the AWS credentials)"
            ) from exc

    def _heartbeat(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        interval = max(self.ttl_s / 4, 0.05)
        while not self._stop.wait(interval):
            try:
                self._put(IfMatch=self.etag or "")
            except ClientError as exc:
                if _precondition_failed(exc) or _missing(exc):
                    self.lost = "another run took it over after it was not renewed in time"
                    log.error("write lease %s lost: %s", self.url, self.lost)
                    return
                log.warning("renewing the write lease %s failed (retrying): %s", self.url, exc)
            except BotoCoreError as exc:
                log.warning("renewing the write lease %s failed (retrying): %s", self.url, exc)

    def _release(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        if self.lost or self.etag is None:
            return
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)
        except ClientError as exc:
            if _precondition_failed(exc) or _missing(exc):
                self.lost = "it had been taken over when the run released it"
                return
            code, _ = _code(exc)
            if code in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
                # A store without conditional deletes: delete only what is still ours (a
                # takeover in between the read and the delete is the remaining window).
                with contextlib.suppress(BotoCoreError, ClientError):
                    current = self._read()
                    if current is not None and current[1].get("token") == self.token:
                        self.client.delete_object(Bucket=self.bucket, Key=self.key)
                return
            log.warning(
                "could not delete the write lease %s (%s); it expires after %.0f s",
                self.url,
                exc,
                self.ttl_s,
            )
        except BotoCoreError as exc:
            log.warning(
                "could not delete the write lease %s (%s); it expires after %.0f s",
                self.url,
                exc,
                self.ttl_s,
            )
