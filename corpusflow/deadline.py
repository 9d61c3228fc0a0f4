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
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeadlineExceeded(Exception):
    """Raised in a thread whose ``thread_deadline`` expired."""


def _set_async_exc(ident: int, exc: type[BaseException] | None) -> int:
    return int(
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ident), ctypes.py_object(exc) if exc is not None else None
        )
    )


@contextmanager
def thread_deadline(seconds: float) -> Iterator[None]:
    """Raise ``DeadlineExceeded`` in this thread if the block runs longer than
    ``seconds`` (0 or less: no deadline). Nothing is raised once the block has left."""
    if seconds <= 0:
        yield
        return
    ident = threading.get_ident()
    lock = threading.Lock()
    state = {"inside": True, "fired": False}

    def expire() -> None:
        with lock:
            if state["inside"]:
                state["fired"] = _set_async_exc(ident, DeadlineExceeded) == 1

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["inside"] = False
            if state["fired"]:
                # Fired, but perhaps not yet delivered: never let it land after the block.
                _set_async_exc(ident, None)
