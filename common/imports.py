"""Imports with optional heavy packages made unimportable for one thread."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
from types import ModuleType
from typing import Any


class _Unimportable(importlib.abc.MetaPathFinder):
    """Makes the packages a thread names unimportable, for that thread only.

    One finder, put on ``sys.meta_path`` once when this module is imported and never
    taken off: importlib walks that list while other threads import, and inserting or
    removing a finder during the walk can make it skip one (a run's first documents
    failed with ``No module named 'langdetect.detector_factory'`` that way).
    """

    def __init__(self) -> None:
        self.local = threading.local()

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        blocked: tuple[str, ...] = getattr(self.local, "packages", ())
        if blocked and name.partition(".")[0] in blocked:
            raise ImportError(f"{name} is not imported here (corpusflow import_without)", name=name)
        return None


_GUARD = _Unimportable()
sys.meta_path.insert(0, _GUARD)


def import_without(module: str, *packages: str) -> ModuleType:
    """Import ``module`` with ``packages`` unimportable for this thread.

    For libraries that import an optional heavy package at import time only to probe for
    it or to annotate a type: docling's VLM options and docling-core's HuggingFace
    tokenizer wrapper import transformers (~2-5 s of CPU per process, ~10 s with the
    torch it imports) for features corpusflow does not use. Those modules record the package as missing, which
    matters only to the features that use it; other threads import normally, nothing is
    blocked once a package is loaded, and if ``module`` turns out to need one it is
    imported again without the block.
    """
    # Through importlib even when the module is in sys.modules: while another thread is
    # still executing it, importlib waits for that thread (the module's import lock), where
    # sys.modules would hand out the half-initialised module. Concurrent imports of one
    # module (the first documents of a run on several threads) are thus safe.
    blocked = tuple(p for p in packages if p not in sys.modules)
    if module in sys.modules or not blocked:
        return importlib.import_module(module)
    before = getattr(_GUARD.local, "packages", ())
    _GUARD.local.packages = before + blocked
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in blocked:
            raise
    finally:
        _GUARD.local.packages = before
    return importlib.import_module(module)  # it needs them after all
