"""Loopback servers started by tests: a free port and a wait-until-healthy loop."""

from __future__ import annotations

import socket
import time

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
