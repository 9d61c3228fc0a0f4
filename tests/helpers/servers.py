"""Loopback servers started by tests (and benchmarks): a free port, a wait-until-healthy
loop, and a counting proxy in front of an OpenAI-compatible server."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, timeout_s: float, what: str) -> None:
    """Poll ``url`` until it answers 200, or fail the test after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"{what} did not start within {timeout_s:g} s")


class CountingProxy:
    """Forwards requests to ``upstream`` (an OpenAI-compatible API root) and counts them:
    the witness for cache hits and for the requests an edit costs."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.count = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                proxy.count += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                resp = httpx.post(
                    proxy.upstream + self.path.removeprefix("/v1"),
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=600,
                )
                self.send_response(resp.status_code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(resp.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def fake_aws_credentials(mp: pytest.MonkeyPatch) -> None:
    """Test credentials for a local S3 server (moto), and none of the caller's own AWS
    profile, endpoint or session leaking in."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        mp.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        mp.delenv(key, raising=False)
