"""A deadline for Python work on the calling thread.

Parsing runs in a child process that is killed at its deadline. Chunking runs on a
worker thread of the flow process (it needs the run's tokenizer, and the LLM
contextualizer's cache), where nothing can be killed; a pathological input there would
hold the run until it ends. ``thread_deadline`` raises ``DeadlineExceeded`` inside the
thread when the time is up (CPython's ``PyThreadState_SetAsyncExc``), so the document
fails and its thread is free for the next. The exception arrives at the thread's next
Python bytecode: pure-Python loops (docling-core's chunker, semchunk, langdetect) are
stopped within milliseconds; one long call into C is stopped when it returns.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class DeadlineExceeded(Exception):
    """Raised in a thread whose ``thread_deadline`` expired."""


def _set_async_exc(ident: int, exc: type[BaseException] | None) -> int:
    return int(
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ident), ctypes.py_object(exc) if exc is not None else None
        )
    )


@dataclass(slots=True, eq=False)  # compared by identity: one object per block
class _Armed:
    """One block under a deadline: its thread, and whether it is still inside."""

    ident: int
    inside: bool = True
    fired: bool = False


class _Watchdog:
    """One daemon thread that fires every deadline of the process, earliest first.

    A ``threading.Timer`` per block would start and join a thread per document chunked
    (tens of microseconds each, 10^7 times in a large run); here arming is a heap push
    under a lock. A disarmed block's entry is dropped when it reaches the top of the
    heap, or all at once when they outnumber the armed ones, so the heap holds at most
    about twice the blocks in flight.

    Threads that can receive the exception take the lock with ``with self._lock`` (a C
    lock's ``__enter__``), never through ``Condition.__enter__``: that is Python code,
    and an exception delivered right after it acquired the lock would leave the lock held
    for good, hanging every thread that arms a deadline after it."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        """Fresh state (also in a forked child, where the parent's thread does not run
        and its lock may have been held at the fork)."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, _Armed]] = []
        self._open: dict[int, _Armed] = {}  # thread ident -> its open block
        self._seq = itertools.count()
        self._disarmed = 0
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> _Armed:
        ident = threading.get_ident()
        armed = _Armed(ident)
        with self._lock:
            open_block = self._open.get(ident)
            if open_block is not None and not open_block.fired:
                # Only a thread's own open block fires into it, and a fired block is
                # off the heap: with one block per thread, nothing can arrive while
                # the bookkeeping here runs. (A fired block still listed is one whose
                # exception was delivered inside disarm, as its block ended.)
                raise RuntimeError("thread_deadline blocks do not nest")
            self._open[ident] = armed
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), armed))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="corpusflow-deadline", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return armed

    def disarm(self, armed: _Armed) -> None:
        with self._lock:
            armed.inside = False
            # Only the thread's current block, from that thread: a block whose generator
            # is finalised later (by the garbage collector, on any thread) must not
            # drop, or clear the pending exception of, the block running there now.
            if self._open.get(armed.ident) is armed:
                del self._open[armed.ident]
                if armed.fired and threading.get_ident() == armed.ident:
                    # Fired, perhaps not yet delivered: never let it land after the block.
                    _set_async_exc(armed.ident, None)
            if armed.fired:
                return  # already off the heap
            self._disarmed += 1
            if self._disarmed * 2 > len(self._heap):
                self._heap = [e for e in self._heap if e[2].inside]
                heapq.heapify(self._heap)
                self._disarmed = 0

    def _run(self) -> None:
        with self._cond:  # this thread never receives the exception
            while True:
                while self._heap and not self._heap[0][2].inside:
                    heapq.heappop(self._heap)
                    self._disarmed = max(self._disarmed - 1, 0)
                if not self._heap:
                    self._cond.wait()
                    continue
                due = self._heap[0][0] - time.monotonic()
                if due > 0:
                    self._cond.wait(min(due, threading.TIMEOUT_MAX))
                    continue
                armed = heapq.heappop(self._heap)[2]
                armed.fired = _set_async_exc(armed.ident, DeadlineExceeded) == 1


_watchdog = _Watchdog()


@contextmanager
def thread_deadline(seconds: float) -> Iterator[None]:
    """Raise ``DeadlineExceeded`` in this thread if the block runs longer than
    ``seconds`` (0 or less: no deadline). Nothing is raised once the block has left.
    One block per thread at a time: a nested one raises RuntimeError.

    Like any asynchronous exception, it can land between a library's ``lock.acquire()``
    and its ``try`` (logging's handler lock is taken that way), leaving that lock held:
    keep the guarded work free of shared locks taken in Python; chunking is pure
    computation on its own document."""
    if not seconds > 0:  # 0, negative or NaN: no deadline
        yield
        return
    armed = _watchdog.arm(seconds)
    try:
        yield
    finally:
        _watchdog.disarm(armed)
