"""Process set-up done once by the CLI before Prefect is imported, and handing freed
memory back to the operating system during a long run."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import Any


def configure_environment() -> None:
    """Quiet, offline-safe defaults; anything the user set explicitly wins."""
    defaults = {
        # Prefect without a server: an ephemeral API on SQLite in PREFECT_HOME.
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
        # The ephemeral API's default 20 s start-up budget is too tight on a busy 2-core box.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        # Never reach for the Hugging Face Hub at run time.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)


# Run by the watchdog child: ask the kernel for SIGTERM when its parent dies
# (PR_SET_PDEATHSIG, set by the child on itself, so the parent needs no fork-time hook),
# then stop the server; exits at once when the parent is already gone.
_WATCHDOG = """
import ctypes, os, signal, sys, time
pid, parent = int(sys.argv[1]), int(sys.argv[2])
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
def stop(*_):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                sys.exit(0)
            time.sleep(0.1)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
if os.getppid() != parent:
    stop()
while True:
    signal.pause()
"""


def start_prefect_api() -> None:
    """Start Prefect's ephemeral API now (unless PREFECT_API_URL names a server) and make
    sure it dies with this process, even when this process is SIGKILLed (an OOM killer,
    an operator): Prefect stops it only from an atexit hook, which a kill skips, and the
    orphaned uvicorn (~260 MB) would outlive the run. Linux only; elsewhere a no-op."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return

    server = SubprocessASGIServer()
    server.start()
    process = server.server_process
    if process is None or getattr(server, "_corpusflow_watchdog", None) is not None:
        return
    server._corpusflow_watchdog = subprocess.Popen(  # type: ignore[attr-defined]
        # No preexec_fn: that would fork this process (lancedb warns, rightly, about
        # forking its runtime); the child sets its parent-death signal itself.
        [sys.executable, "-S", "-c", _WATCHDOG, str(process.pid), str(os.getpid())],
        stdin=subprocess.DEVNULL,
    )


_trim: Any = None


def release_free_memory() -> None:
    """Return memory that is free inside the allocator to the operating system.

    glibc keeps what a thread frees in that thread's arena, and a long run spreads its
    allocations over many threads (parser waiters, Prefect task runs, the embedder), so
    the process grew ~1.6 MB per document while its live Python objects grew ~4 KB
    (docs/benchmarks.md, "Where the growth was"). ``malloc_trim(0)`` gives the free
    pages of every arena back; elsewhere than glibc this does nothing.
    """
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):  # musl: no malloc_trim
                _trim = ctypes.CDLL("libc.so.6").malloc_trim
    if _trim:
        _trim(0)
