"""Object storage end to end: an S3 source and an S3 LanceDB database on a real moto server
on loopback, the S3 write lease, and the generic fsspec path (memory://)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from common.errors import ConfigurationError, CorpusflowError
from common.settings import Settings, SourceSettings, load_settings
from corpusflow.fingerprints import Fingerprints
from corpusflow.plan import plan_changes
from parsers import ParserFingerprints
from sources import LocalSource, open_source
from sources.objectstore import ObjectStoreSource
from storage import LeaseHeldError, Store, write_lease
from storage.records import LedgerRow
from tests.helpers.invariants import assert_nothing_lost
from tests.helpers.servers import fake_aws_credentials

BUCKET = "corpus"
# Three sample documents and a small Markdown note with an ACL sidecar.
NOTE = b"# Field notes\n\nThe east ridge turbines were inspected in March.\n"
NOTE_META = {"acl": ["engineering"], "owner": "ops"}


class _RequestLog:
    """WSGI middleware in front of moto: every request answered, as (method, path, status)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        query = environ.get("QUERY_STRING", "")
        path = environ.get("PATH_INFO", "") + (f"?{query}" if query else "")

        def record(status: str, headers: Any, *exc_info: Any) -> Any:
            with self._lock:
                self.requests.append((environ["REQUEST_METHOD"], path, int(status.split()[0])))
            return start_response(status, headers, *exc_info)

        return self.app(environ, record)

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> list[tuple[str, str, int]]:
        with self._lock:
            return list(self.requests[mark:])


@dataclass
class S3:
    endpoint: str
    client: Any
    log: _RequestLog
    lance_options: dict[str, str] = field(default_factory=dict)

    def upload(self, prefix: str, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            self.client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)

    def keys(self, prefix: str) -> set[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix + "/"
        )
        return {o["Key"] for p in pages for o in p.get("Contents", ())}

    def exists(self, key: str) -> bool:
        return key in self.keys(key.rsplit("/", 1)[0])

    def gets(self, mark: int, prefix: str) -> list[tuple[str, int]]:
        """GetObject requests on document keys below ``prefix`` since ``mark``."""
        requests = self.log.since(mark)
        return [
            (path, status)
            for method, path, status in requests
            if method == "GET" and path.startswith(f"/{BUCKET}/{prefix}/")
        ]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    """moto's S3 on loopback (its own WSGI app and request handler, as ThreadedMotoServer
    serves them), behind a request log."""
    import boto3
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    with pytest.MonkeyPatch.context() as mp:
        fake_aws_credentials(mp)
        mp.setattr(logging.getLogger("werkzeug"), "level", logging.WARNING)
        log = _RequestLog(DomainDispatcherApplication(create_backend_app))
        server = make_server("127.0.0.1", 0, log, threaded=True, request_handler=MotoRequestHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            endpoint = f"http://127.0.0.1:{server.server_port}"
            client = boto3.client("s3", endpoint_url=endpoint)
            client.create_bucket(Bucket=BUCKET)
            yield S3(
                endpoint,
                client,
                log,
                {"endpoint": endpoint, "allow_http": "true", "region": "us-east-1"},
            )
        finally:
            server.shutdown()
            thread.join()


def _corpus(samples_dir: Path) -> dict[str, bytes]:
    files = {
        name: (samples_dir / name).read_bytes()
        for name in ("release_notes.md", "onboarding.html", "travel_policy.docx")
    }
    files["notes.md"] = NOTE
    files["notes.md.meta.json"] = json.dumps(NOTE_META).encode()
    return files


def _settings(
    db: str, model: Path, source_options: dict[str, str] | None = None, **storage: Any
) -> Settings:
    return load_settings(
        None,
        {
            "storage": {"db": db, **storage},
            "source": {"storage_options": source_options or {}},
            "embed": {"model": str(model)},
            "run": {"progress": False},
        },
    )


def _run(source: str, settings: Settings) -> dict[str, Any]:
    from flows.refresh import refresh_flow

    return refresh_flow(source, settings.model_dump_json())


def _acl_of(settings: Settings, path: str) -> list[list[str] | None]:
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    rows = store.read_columns(active.chunk_table, ["path", "acl_groups"]).to_pylist()
    return [r["acl_groups"] for r in rows if r["path"] == path]


def _scenario(s3: S3, prefix: str, settings: Settings, samples_dir: Path) -> None:
    """Ingest, refresh with no change (nothing hashed), then change/delete/add/re-upload."""
    files = _corpus(samples_dir)
    s3.upload(prefix, files)
    source = f"s3://{BUCKET}/{prefix}"
    docs = {n for n in files if not n.endswith(".meta.json")}

    first = _run(source, settings)
    assert (first["new"], first["failed"], first["unchanged"]) == (4, 0, 0)
    live = assert_nothing_lost(settings, source)
    assert set(live) == docs
    assert {r["status"] for r in live.values()} == {"indexed"}
    assert _acl_of(settings, "notes.md") and all(
        acl == ["engineering"] for acl in _acl_of(settings, "notes.md")
    )

    # No change: nothing is downloaded, not even to hash (the listing's size + ETag or
    # LastModified say so), nothing is parsed or written.
    mark = s3.log.mark()
    second = _run(source, settings)
    assert (second["new"], second["changed"], second["unchanged"], second["chunks_written"]) == (
        0,
        0,
        4,
        0,
    )
    assert second["chunk_table_version"] == first["chunk_table_version"]
    assert s3.gets(mark, prefix) == []
    # (the log did see the run: it listed the prefix)
    assert any(p.startswith(f"/{BUCKET}?") and prefix in p for _, p, _ in s3.log.since(mark))

    # Change one, delete one, add one (broken), re-upload one unchanged, change a sidecar.
    s3.upload(prefix, {"release_notes.md": b"# Release Notes\n\n## Version 3.0\n\nBlade pitch.\n"})
    s3.client.delete_object(Bucket=BUCKET, Key=f"{prefix}/onboarding.html")
    s3.upload(prefix, {"broken.pdf": b"%PDF-1.7\nnot really a pdf"})
    s3.upload(prefix, {"travel_policy.docx": files["travel_policy.docx"]})
    s3.upload(prefix, {"notes.md.meta.json": json.dumps({"acl": ["finance"]}).encode()})
    mark = s3.log.mark()
    third = _run(source, settings)
    assert (
        third["new"],
        third["changed"],
        third["deleted"],
        third["failed"],
        third["unchanged"],
    ) == (1, 2, 1, 1, 1)
    assert third["failures"][0]["path"] == "broken.pdf"
    assert third["failures"][0]["category"] == "corrupt"
    # The re-uploaded identical object keeps its ETag: it is not even hashed.
    assert not [p for p, _ in s3.gets(mark, prefix) if p.endswith("travel_policy.docx")]
    live = assert_nothing_lost(settings, source)
    assert set(live) == (docs - {"onboarding.html"}) | {"broken.pdf"}
    assert {p: r["status"] for p, r in live.items()} == {
        "release_notes.md": "indexed",
        "travel_policy.docx": "indexed",
        "notes.md": "indexed",
        "broken.pdf": "failed",
    }
    # The sidecar's change re-indexed notes.md with its new ACL.
    assert _acl_of(settings, "notes.md") and all(
        acl == ["finance"] for acl in _acl_of(settings, "notes.md")
    )
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    rows = store.read_columns(active.chunk_table, ["path", "text"]).to_pylist()
    assert any("Blade pitch" in r["text"] for r in rows if r["path"] == "release_notes.md")
    assert not [r for r in rows if r["path"] == "onboarding.html"]


@pytest.mark.usefixtures("prefect_server")
def test_s3_source_into_local_db(
    s3: S3, samples_dir: Path, tiny_bgem3: Path, tmp_path: Path
) -> None:
    settings = _settings(str(tmp_path / "db"), tiny_bgem3, {"endpoint_url": s3.endpoint})
    _scenario(s3, "docs", settings, samples_dir)


@pytest.mark.usefixtures("prefect_server")
def test_s3_source_into_s3_db(
    s3: S3, samples_dir: Path, tiny_bgem3: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The source finds the endpoint in AWS_ENDPOINT_URL; the database in its storage_options.
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    settings = _settings(f"s3://{BUCKET}/db", tiny_bgem3, storage_options=s3.lance_options)
    mark = s3.log.mark()
    _scenario(s3, "docs-b", settings, samples_dir)
    assert any(k.startswith("db/default__chunks__") for k in s3.keys("db"))
    # Each of the three runs created the lease object and deleted it at the end ...
    lease = [(m, st) for m, p, st in s3.log.since(mark) if p == "/corpus/db/.default.lease"]
    assert lease[0] == ("PUT", 200) and all(st < 400 for _, st in lease)
    assert sum(1 for x in lease if x == ("DELETE", 204)) == 3
    assert not s3.exists("db/.default.lease")
    # ... and while another writer holds it, a refresh is refused before writing anything.
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    version = int(store.db.open_table(active.chunk_table).version)
    s3.upload("docs-b", {"extra.md": b"# Extra\n\nOne more page.\n"})
    with (
        write_lease(settings.storage.db, "default", storage_options=s3.lance_options),
        pytest.raises(LeaseHeldError, match="another run"),
    ):
        _run(f"s3://{BUCKET}/docs-b", settings)
    assert int(store.db.open_table(active.chunk_table).version) == version


def _lease_body(s3: S3, key: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(s3.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    return body


def test_s3_lease_refuses_renews_releases_and_takes_over_stale(s3: S3) -> None:
    db, opts = f"s3://{BUCKET}/lease-db", s3.lance_options
    with write_lease(db, "one", storage_options=opts):
        body = _lease_body(s3, "lease-db/.one.lease")
        assert body["pid"] == os.getpid() and body["expires_at"] > time.time()
        with (
            pytest.raises(LeaseHeldError, match=r"another run \(pid \d+ on "),
            write_lease(db, "one", storage_options=opts),
        ):
            pass
    assert not s3.exists("lease-db/.one.lease")

    # A dead holder's lease (not renewed for longer than its ttl) ...
    s3.client.put_object(
        Bucket=BUCKET,
        Key="lease-db/.stale.lease",
        Body=json.dumps({"holder": "pid 1 on gone-host", "ttl_s": 1}).encode(),
    )
    dead_etag = s3.client.head_object(Bucket=BUCKET, Key="lease-db/.stale.lease")["ETag"]
    # ... while a live holder with the same short ttl keeps renewing its own.
    with write_lease(db, "live", storage_options=opts, ttl_s=1.0):
        etag = s3.client.head_object(Bucket=BUCKET, Key="lease-db/.live.lease")["ETag"]
        time.sleep(2.2)
        assert s3.client.head_object(Bucket=BUCKET, Key="lease-db/.live.lease")["ETag"] != etag
        with (
            pytest.raises(LeaseHeldError, match="another run"),
            write_lease(db, "live", storage_options=opts),
        ):
            pass
        with write_lease(db, "stale", storage_options=opts):
            assert _lease_body(s3, "lease-db/.stale.lease")["pid"] == os.getpid()
            # The dead holder, waking up, cannot renew: its conditional write fails.
            from botocore.exceptions import ClientError

            with pytest.raises(ClientError, match="PreconditionFailed"):
                s3.client.put_object(
                    Bucket=BUCKET, Key="lease-db/.stale.lease", Body=b"{}", IfMatch=dead_etag
                )
    assert not s3.exists("lease-db/.live.lease")
    assert not s3.exists("lease-db/.stale.lease")

    # A waiting writer gets the lease once the holder releases it.
    held = threading.Event()

    def hold() -> None:
        with write_lease(db, "wait", storage_options=opts):
            held.set()
            time.sleep(1.0)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    started = time.monotonic()
    with write_lease(db, "wait", 10.0, storage_options=opts):
        assert time.monotonic() - started >= 0.3
    holder.join()

    with (
        pytest.raises(CorpusflowError, match=r"gs:// databases are not supported; supported"),
        write_lease("gs://bucket/db", "c"),
    ):
        pass


def test_s3_listing_rules_and_conditional_rehash(s3: S3) -> None:
    s3.upload(
        "rules",
        {
            "a": b"A",
            "a-1": b"A1",
            "a.meta.json": b'{"acl": ["x"]}',
            "a/b.md": b"# B",
            ".hidden": b"h",
            "sub~/x.md": b"x",
            "tmp/~$lock.docx": b"l",
            "skip/c.md": b"c",
            "z.md": b"z",
            "orphan.meta.json": b"{}",
        },
    )
    s3.client.put_object(Bucket=BUCKET, Key="rules/folder/", Body=b"")  # a folder marker
    s3.upload("rules-sibling", {"not-mine.md": b"n"})  # shares the prefix's spelling
    settings = SourceSettings(exclude=["skip/**"], storage_options={"endpoint_url": s3.endpoint})
    source = open_source(f"s3://{BUCKET}/rules/", settings)
    assert isinstance(source, ObjectStoreSource)
    files = list(source.list())
    assert [f.rel_path for f in files] == ["a", "a-1", "a/b.md", "z.md"]
    a = files[0]
    assert a.sidecar == f"s3://{BUCKET}/rules/a.meta.json" and a.size == 1 + 14
    assert a.etag and "+" in a.etag
    assert source.metadata(a) == {"acl": ["x"]}

    mark = s3.log.mark()
    digest = source.content_hash(a)
    with source.fetch(a) as path:
        assert Path(path).read_bytes() == b"A" and Path(path).name == "a"
    assert not Path(path).exists()
    assert source.content_hash(a) == digest
    # After a download the re-hash is a conditional GET answered "304 Not Modified".
    assert [s for p, s in s3.gets(mark, "rules") if p == "/corpus/rules/a"] == [200, 200, 304]


def test_s3_source_hash_matches_local_and_etag_hint(s3: S3, tmp_path: Path) -> None:
    """The same bytes and sidecar hash the same locally and on S3; size + ETag is the hint."""
    local = tmp_path / "local"
    local.mkdir()
    (local / "notes.md").write_bytes(NOTE)
    (local / "notes.md.meta.json").write_text(json.dumps(NOTE_META))
    s3.upload("same", {"notes.md": NOTE, "notes.md.meta.json": json.dumps(NOTE_META).encode()})
    settings = load_settings(
        None,
        {
            "storage": {"db": str(tmp_path / "db")},
            "source": {"storage_options": {"endpoint_url": s3.endpoint}},
        },
    )
    remote = open_source(f"s3://{BUCKET}/same", settings.source)
    [rf] = remote.list()
    [lf] = LocalSource(local, settings.source).list()
    assert rf.doc_id == lf.doc_id
    assert remote.content_hash(rf) == LocalSource.content_hash(lf)

    fps = Fingerprints(ParserFingerprints({"md": "p"}), "c", "m", 64, "hint")
    store = Store.from_settings(settings.storage)
    indexed = LedgerRow(
        doc_id=rf.doc_id,
        path=rf.rel_path,
        format="md",
        parser_fingerprint="p",
        chunker_fingerprint="c",
        model_fingerprint="m",
        chunk_count=1,
    )
    # Same size and ETag, other LastModified (a re-upload of the same bytes): unchanged
    # without hashing (the stored hash is not even compared), and the ledger is refreshed.
    store.ledger.upsert(
        "hint",
        [replace(indexed, content_sha256="x" * 64, size=rf.size, mtime=1.0, etag=rf.etag)],
    )
    plan = plan_changes(remote, store, settings, fps)
    assert plan.unchanged == 1 and not plan.work
    assert plan.touched[0].mtime == rf.mtime
    # Same size and LastModified but another ETag: hashed, and found changed.
    store.ledger.upsert(
        "hint",
        [replace(indexed, content_sha256="x" * 64, size=rf.size, mtime=rf.mtime, etag='"0"')],
    )
    plan = plan_changes(remote, store, settings, fps)
    assert [(w.file.rel_path, w.reason) for w in plan.work] == [("notes.md", "changed")]
    assert plan.work[0].sha256 == LocalSource.content_hash(lf)
    # A ledger row without an ETag (written by a local-style row): size + mtime decide, and
    # the ETag is recorded for the next run.
    store.ledger.upsert(
        "hint",
        [replace(indexed, content_sha256="x" * 64, size=rf.size, mtime=rf.mtime, etag=None)],
    )
    plan = plan_changes(remote, store, settings, fps)
    assert not plan.work and plan.touched[0].etag == rf.etag


def test_s3_source_check_errors(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = {"endpoint_url": s3.endpoint}
    with pytest.raises(ConfigurationError, match="bucket 'no-such-bucket' does not exist"):
        open_source("s3://no-such-bucket/docs", SourceSettings(storage_options=opts)).check()
    with pytest.raises(ConfigurationError, match="credentials are not read from the settings"):
        open_source(
            "s3://corpus/docs",
            SourceSettings(storage_options={**opts, "aws_secret_access_key": "x"}),
        )
    with pytest.raises(ConfigurationError, match="not an S3 source option"):
        open_source("s3://corpus/docs", SourceSettings(storage_options={"colour": "red"}))
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    with pytest.raises(ConfigurationError, match="no AWS credentials for s3://corpus/docs/"):
        open_source("s3://corpus/docs", SourceSettings(storage_options=opts)).check()


def test_ledger_without_etag_column_gains_it(tmp_path: Path) -> None:
    """A ledger written before the etag column existed is migrated on its next upsert."""
    import lancedb
    import pyarrow as pa

    from storage.schema import LEDGER_SCHEMA

    old_schema = pa.schema([f for f in LEDGER_SCHEMA if f.name != "etag"])
    db = lancedb.connect(str(tmp_path / "db"))
    db.create_table("default__documents__m", schema=old_schema).add(
        pa.Table.from_pylist([{"doc_id": "a", "path": "a.md", "status": "indexed"}], old_schema)
    )
    store = Store(str(tmp_path / "db"))
    assert store.ledger.all("m")["a"].etag is None
    store.ledger.upsert("m", [LedgerRow(doc_id="b", path="b.md", etag='"1"')])
    ledger = store.ledger.all("m")
    assert ledger["a"].etag is None and ledger["b"].etag == '"1"'


def test_fsspec_memory_source_and_dispatch(tmp_path: Path) -> None:
    import fsspec

    memory = fsspec.filesystem("memory")
    root = f"/cf-{os.getpid()}-{time.monotonic_ns()}"
    for name, data in {
        "docs/a.md": b"# A",
        "docs/a.md.meta.json": b'{"acl": ["g"]}',
        "docs/d/b.md": b"# B",
        "docs/.git/config": b"x",
        "docs/c.tmp": b"t",
    }.items():
        memory.pipe(f"{root}/{name}", data)
    source = open_source(f"memory://{root}/docs", SourceSettings())
    files = list(source.list())
    assert [f.rel_path for f in files] == ["a.md", "d/b.md"]
    assert files[0].sidecar and source.metadata(files[0]) == {"acl": ["g"]}
    with source.fetch(files[1]) as path:
        assert Path(path).read_bytes() == b"# B"
    # Hashed exactly like a local folder holding the same files.
    local = tmp_path / "docs"
    local.mkdir()
    (local / "a.md").write_bytes(b"# A")
    (local / "a.md.meta.json").write_bytes(b'{"acl": ["g"]}')
    [lf] = [f for f in LocalSource(local, SourceSettings()).list() if f.rel_path == "a.md"]
    assert source.content_hash(files[0]) == LocalSource.content_hash(lf)

    with pytest.raises(ConfigurationError, match="source not found"):
        open_source(f"memory://{root}/nothing", SourceSettings()).check()
    with pytest.raises(ConfigurationError, match="gs:// sources need"):
        open_source("gs://bucket/docs", SourceSettings())
    assert isinstance(open_source(f"file://{local}", SourceSettings()), LocalSource)
    assert isinstance(open_source(str(local), SourceSettings()), LocalSource)
    with pytest.raises(ConfigurationError, match="absolute path"):
        open_source("file://relative/docs", SourceSettings())
