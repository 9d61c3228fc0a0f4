"""Every source kind through the conformance suite (sources.testing): a local folder,
ZIP archive members, an S3 bucket (moto on loopback) and an fsspec filesystem."""

from __future__ import annotations

import io
import os
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.settings import SourceSettings
from sources.base import Source, open_source
from sources.testing import SIDECAR_SUFFIX, SourceConformance
from tests.helpers.servers import fake_aws_credentials


class TestLocalSource(SourceConformance):
    def make(self, tmp_path: Path, files: dict[str, bytes]) -> Source:
        root = tmp_path / "docs"
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        return open_source(str(root), SourceSettings())

    def change(self, source: Source, name: str, data: bytes) -> None:
        path = Path(source.root) / name
        mtime = path.stat().st_mtime
        path.write_bytes(data)
        os.utime(path, (mtime + 2, mtime + 2))  # a coarse clock still sees the edit


class _ContainerMembers(SourceConformance):
    """Members of one container file in a local folder; its sidecar is every member's."""

    metadata_is_shared = True
    container = ""

    def pack(self, files: dict[str, bytes]) -> bytes:
        raise NotImplementedError

    def make(self, tmp_path: Path, files: dict[str, bytes]) -> Source:
        root = tmp_path / "docs"
        root.mkdir()
        members = {n: d for n, d in files.items() if not n.endswith(SIDECAR_SUFFIX)}
        (root / self.container).write_bytes(self.pack(members))
        for name, data in files.items():
            if name.endswith(SIDECAR_SUFFIX):
                (root / f"{self.container}{SIDECAR_SUFFIX}").write_bytes(data)
        self._members = members
        return open_source(str(root), SourceSettings(listing_cache="off"))

    def change(self, source: Source, name: str, data: bytes) -> None:
        self._members[name] = data
        (Path(source.root) / self.container).write_bytes(self.pack(self._members))


class TestArchiveMembers(_ContainerMembers):
    """Members of a ZIP."""

    container = "bundle.zip"

    def pack(self, files: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                zf.writestr(name, data)
        return out.getvalue()

    def listed_as(self, name: str) -> str:
        return f"bundle.zip/{name}"


class TestMessageAttachments(_ContainerMembers):
    """Attachments of an e-mail message (named by their paths, e.g. ``sites/aalborg.csv``,
    which a message keeps as its last part ``aalborg.csv``); each names its message, and
    the message's body is a document too."""

    container = "mail.eml"
    inherited_keys = frozenset({"attached_to"})
    also_listed = frozenset({"mail.eml"})

    def pack(self, files: dict[str, bytes]) -> bytes:
        from email.message import EmailMessage

        msg = EmailMessage()
        msg["Subject"] = "Conformance"
        msg.set_content("The documents are attached.")
        for name, data in files.items():
            msg.add_attachment(data, "application", "octet-stream", filename=name)
        return msg.as_bytes()

    def listed_as(self, name: str) -> str:
        return f"mail.eml/{name.rsplit('/', 1)[-1]}"


BUCKET = "conformance"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on loopback, as the object-storage tests use it."""
    import boto3
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        fake_aws_credentials(mp)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
            yield endpoint
        finally:
            server.stop()


class TestS3Source(SourceConformance):
    @pytest.fixture(autouse=True)
    def _s3(self, s3_endpoint: str) -> None:
        import boto3

        self.client = boto3.client("s3", endpoint_url=s3_endpoint)
        self.endpoint = s3_endpoint

    def make(self, tmp_path: Path, files: dict[str, bytes]) -> Source:
        self.prefix = tmp_path.name
        for name, data in files.items():
            self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{name}", Body=data)
        settings = SourceSettings(storage_options={"endpoint_url": self.endpoint})
        return open_source(f"s3://{BUCKET}/{self.prefix}", settings)

    def change(self, source: Source, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{name}", Body=data)


class TestFsspecMemorySource(SourceConformance):
    def make(self, tmp_path: Path, files: dict[str, bytes]) -> Source:
        import fsspec

        self.fs = fsspec.filesystem("memory")
        self.root = f"/cf-{os.getpid()}-{time.monotonic_ns()}"
        for name, data in files.items():
            self.fs.pipe(f"{self.root}/{name}", data)
        return open_source(f"memory://{self.root}", SourceSettings())

    def change(self, source: Source, name: str, data: bytes) -> None:
        self.fs.pipe(f"{self.root}/{name}", data)
