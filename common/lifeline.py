"""Processes a run starts die with it, even when it is SIGKILLed on a busy machine.

Three mechanisms, because no single one reaches every process:

- **Parent-death signal.** A child started through ``spawn`` (on one long-lived daemon
  thread of this process) calls ``die_with_parent`` first thing: the kernel sends it
  SIGKILL when this process dies (``PR_SET_PDEATHSIG``), with no Python code of the
  dying parent needed. The kernel ties that signal to the *thread* that forked the child,
  so children are never started from short-lived threads (a Prefect task thread, a
  parse thread), which would kill them when that thread ends.
- **A tag in the environment.** What a child starts in turn (LibreOffice's ``soffice``,
  which docling runs in its own session and which forks ``soffice.bin``; anything
  double-forked) cannot be given a parent-death signal and is reparented to init when
  its parent dies. Every such process inherits ``_CORPUSFLOW_LIFELINE`` from the child
  that started it, so it can be found by reading ``/proc/PID/environ``.
- **A reaper.** One small process per run-owning process (``python -S``, ~10 MB),
  started on the spawn thread with a parent-death SIGTERM: when this process dies, it
  kills every process that carries this process's tag. A process that runs flows puts
  its tag in its own environment (``tag_descendants``, on ``import flows``), so that what
  Prefect starts for it (the ephemeral API server) carries the tag too.

Off Linux these are no-ops: the children then rely on their pipes' EOF alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

TAG_ENV = "_CORPUSFLOW_LIFELINE"  # not CORPUSFLOW_*: that prefix is the settings'
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LINUX = sys.platform.startswith("linux")


def _prctl(option: int, arg: int) -> bool:
    if not _LINUX:
        return False
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Called by a child first thing: receive ``sig`` when the parent dies; if the parent
    died before this call (the child was reparented already), exit now."""
    _prctl(_PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent_pid:
        os._exit(1)


def adopt_orphans() -> None:
    """Make this process a child subreaper: what its descendants orphan (a double fork,
    a launcher that exits) stays in its tree, where memory accounting and kills find it."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


class _SpawnThread:
    """One daemon thread that lives as long as the process and forks every child."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._loop, name="corpusflow-spawn", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            func, reply = self._jobs.get()
            try:
                reply.put((True, func()))
            except BaseException as exc:  # handed back to the caller
                reply.put((False, exc))

    def call(self, func: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return func()
        reply: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._jobs.put((func, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_lock = threading.Lock()
_spawner: _SpawnThread | None = None
_spawner_pid = 0
_tag = ""
_reaper: subprocess.Popen[bytes] | None = None


def spawn(func: Callable[[], T]) -> T:
    """Run ``func`` (which starts a child process) on the long-lived spawn thread."""
    global _spawner, _spawner_pid
    with _lock:
        if _spawner is None or _spawner_pid != os.getpid():  # none yet, or a forked copy
            _spawner, _spawner_pid = _SpawnThread(), os.getpid()
        spawner = _spawner
    return spawner.call(func)


# The reaper: SIGTERM when its parent (the spawn thread's process) dies, then SIGKILL
# every process whose initial environment carries the tag, until none is left (one that
# forks while being killed is caught by the next round). Zombies have an empty environ.
_REAPER = """
import ctypes, os, signal, sys, time
tag, parent, name = sys.argv[1].encode(), int(sys.argv[2]), sys.argv[3].encode() + b"="
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
def tagged():
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                env = f.read()
        except OSError:
            continue
        for item in env.split(b"\\0"):
            if item.startswith(name) and tag in item[len(name):].split(b":"):
                yield int(entry)
def reap(*_):
    for _ in range(100):
        pids = list(tagged())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    os._exit(0)
signal.signal(signal.SIGTERM, reap)
if os.getppid() != parent:
    reap()
while True:
    signal.pause()
"""


def run_tag() -> str:
    """This process's tag, starting its reaper on first use (Linux only; "" elsewhere)."""
    global _tag, _reaper
    if not _LINUX:
        return ""
    with _lock:
        if _tag and _tag.startswith(f"{os.getpid()}-"):
            return _tag
        tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    env = {k: v for k, v in os.environ.items() if k != TAG_ENV}
    reaper = spawn(
        lambda: subprocess.Popen(
            [sys.executable, "-S", "-c", _REAPER, tag, str(os.getpid()), TAG_ENV],
            env=env,
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
    )
    with _lock:
        _tag, _reaper = tag, reaper
    return tag


def child_tags(*extra: str) -> str:
    """The value of ``TAG_ENV`` for a child: the tags this process inherited (so that the
    reapers of the processes above it find the child too), its own, and ``extra``."""
    inherited = [t for t in os.environ.get(TAG_ENV, "").split(":") if t]
    tags = [*inherited, *(t for t in (run_tag(), *extra) if t)]
    return ":".join(dict.fromkeys(tags))  # once each (``tag_descendants`` adds its own)


def tag_descendants() -> None:
    """Put this process's tag in its own environment, starting its reaper: every process
    it starts from now on carries the tag, also those that a library starts with a copy
    of ``os.environ`` and never stops when this process is SIGKILLed (Prefect's ephemeral
    API server, which a flow called as a plain function starts before its body runs).
    Idempotent; a no-op off Linux."""
    if _LINUX:
        os.environ[TAG_ENV] = child_tags()


def child_env(*extra: str) -> dict[str, str]:
    """``os.environ`` plus the tags, for a ``subprocess.Popen(env=...)``."""
    return {**os.environ, TAG_ENV: child_tags(*extra)}


def tagged_processes(tag: str) -> Iterator[int]:
    """The pids of live processes whose initial environment carries ``tag``."""
    if not tag or not _LINUX:
        return
    name = f"{TAG_ENV}=".encode()
    wanted = tag.encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(name) and wanted in item[len(name) :].split(b":"):
                yield int(entry)
                break


def kill_tagged(tag: str, rounds: int = 20) -> int:
    """SIGKILL every process carrying ``tag`` (repeated while any is found); returns how many."""
    import time

    killed = 0
    for _ in range(rounds):
        pids = list(tagged_processes(tag))
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.02)
    return killed
