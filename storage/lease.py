"""One writer per collection: an exclusive lease held for the whole run.

Two Lance writers inserting the same new keys at once both succeed and duplicate
rows, so a refresh takes this lease before it writes. Locally it is an
``fcntl`` lock on a file beside the tables: the kernel releases it when the
holder dies, even by SIGKILL, so a crashed run never leaves a stale lease.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from corpusflow.errors import CorpusflowError
from corpusflow.settings import StorageSettings


class LeaseHeldError(CorpusflowError):
    """Another run holds the collection's write lease."""


def collection_lease(storage: StorageSettings) -> contextlib.AbstractContextManager[None]:
    """The write lease of the configured collection."""
    return write_lease(
        storage.db, storage.collection, storage.lease_wait_s, storage.storage_options
    )


@contextlib.contextmanager
def write_lease(
    db_uri: str,
    collection: str,
    wait_s: float = 0.0,
    storage_options: dict[str, str] | None = None,
) -> Iterator[None]:
    if "://" in db_uri and not db_uri.startswith("file://"):
        raise CorpusflowError(
            f"write leases for {db_uri.split('://')[0]}:// databases are not supported yet"
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
                    raise LeaseHeldError(
                        f"collection {collection!r} in {db_uri} is being written by another run"
                        f"{' (' + holder + ')' if holder else ''}; wait for it to finish or set "
                        "storage.lease_wait_s to wait"
                    ) from None
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
