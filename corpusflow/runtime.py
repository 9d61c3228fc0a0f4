"""Process set-up: the CLI's environment, the run's Prefect API, imports that skip an
optional heavy package, and handing freed memory back to the operating system."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from common.settings import RunSettings


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
        # Arrow on the system allocator (read when pyarrow is imported, and by the
        # processes this one starts): Arrow's jemalloc pool kept the pages of the tables a
        # run builds and drops per batch, so a long run's flow process grew with the corpus
        # by memory no allocator figure showed (docs/benchmarks.md, "Freed memory kept").
        # With the system pool they go to glibc, whose free pages ``malloc_trim`` (after
        # every commit) returns. (glibc's mmap threshold, fixed small, cut the growth
        # further but made embedding ~20% slower, so it is left to glibc.)
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None and os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system":
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())  # imported already: switch now


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


class PrefectAPI:
    """The run's ephemeral Prefect API, or nothing when PREFECT_API_URL names a server.

    Prefect's own ephemeral mode (``SubprocessASGIServer``) imports Prefect's whole server
    package into this process just to start it (~3-4 s of CPU) and then blocks until it
    answers (~5-9 s). This starts the same uvicorn command (same factory, same settings:
    no UI, ephemeral, SQLite in PREFECT_HOME) without either: ``start_prefect_api``
    returns as soon as the process is spawned, so the caller starts its parser processes
    while the server imports, and ``serving()`` waits for it and points Prefect at it.

    The server dies with this process even when this process is SIGKILLed (an OOM killer,
    an operator): a watchdog child with a parent-death signal stops it, where Prefect's
    own atexit hook would be skipped and the orphaned uvicorn (~260 MB) outlive the run.
    """

    def __init__(self) -> None:
        self.process: Any = None
        self.watchdog: Any = None
        self.url = ""

    def start(self) -> PrefectAPI:
        import socket
        import subprocess

        from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

        if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
            return self  # a configured server, or ephemeral mode switched off: Prefect's call
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        import prefect

        self.url = f"http://127.0.0.1:{port}/api"
        from common import lifeline

        env = {
            **lifeline.child_env(),  # this process's reaper kills it if the watchdog cannot
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
        }
        self.process = lifeline.spawn(
            lambda: subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--app-dir",
                    str(prefect.__module_path__.parent),
                    "--factory",
                    "prefect.server.api.server:create_app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--log-level",
                    "error",
                    "--lifespan",
                    "on",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
            )
        )
        if sys.platform.startswith("linux"):
            # No preexec_fn: that would fork this process (lancedb warns, rightly, about
            # forking its runtime); the child sets its parent-death signal itself. Started
            # on the long-lived spawn thread, to which the kernel ties that signal.
            self.watchdog = lifeline.spawn(
                lambda: subprocess.Popen(
                    [
                        sys.executable,
                        "-S",
                        "-c",
                        _WATCHDOG,
                        str(self.process.pid),
                        str(os.getpid()),
                    ],
                    stdin=subprocess.DEVNULL,
                )
            )
        return self

    def wait(self) -> None:
        """Block until the server answers; a clear error if it exits or never does."""
        if self.process is None:
            return
        import time
        import urllib.error
        import urllib.request

        from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

        from common.errors import ConfigurationError

        deadline = time.monotonic() + float(
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
        )
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigurationError(
                    f"the ephemeral Prefect API exited with code {self.process.returncode} "
                    "while starting; set PREFECT_API_URL to a running server, or see its "
                    "output above"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise ConfigurationError(
            "the ephemeral Prefect API did not answer within "
            f"{PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()} s "
            "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); set PREFECT_API_URL to a "
            "running server"
        )

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Wait for the server, run the body against it, then stop it."""
        if self.process is None:
            yield
            return
        from prefect.settings import PREFECT_API_URL, temporary_settings

        try:
            self.wait()
            # Child processes started in the body (a local Dask cluster's workers) find
            # the API through the environment; this process through its settings.
            os.environ["PREFECT_API_URL"] = self.url
            with temporary_settings(updates={PREFECT_API_URL: self.url}):
                yield
        finally:
            os.environ.pop("PREFECT_API_URL", None)
            self.stop()

    def stop(self) -> None:
        for proc in (self.process, self.watchdog):
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except Exception:
                proc.kill()
                proc.wait()


def runs_under_prefect(run: RunSettings, documents: int) -> bool:
    """Whether a CLI run with ``documents`` to process goes through a Prefect flow run.

    Always with a configured server (the run shows in its UI) or a Dask cluster (the
    cluster is Prefect's task runner). Otherwise the flow run needs an ephemeral API, whose
    start costs ~9 s of CPU, more than a few documents take to process: below
    ``run.ephemeral_api_min_documents`` the engine runs in this process instead, with the
    same retries, failure isolation and run record.
    """
    if run.task_runner == "dask":
        return True
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value()) or documents >= run.ephemeral_api_min_documents


def start_prefect_api() -> PrefectAPI:
    """Spawn the run's ephemeral Prefect API (unless a server is configured) and return at
    once; ``with api.serving():`` around the flow call waits for it and stops it after."""
    return PrefectAPI().start()


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
