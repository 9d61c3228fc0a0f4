"""Import lancedb without its REST namespace client until something uses it.

``import lancedb`` imports ``lance_namespace``, which imports the generated REST client
``lance_namespace_urllib3_client``; that package's ``__init__`` imports every API module
of the client (1.0–1.9 s of CPU here, about half of the whole lancedb import). A local
or object-store database never calls it, and every CLI command pays it, so the package
is registered with its real ``__init__`` deferred: its submodules (``.models``, which
lance_namespace re-exports) import normally, and the first lookup of anything else on
the package runs the real ``__init__`` in place. Nothing changes for a program that
uses the REST client, except when it pays the import.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

_NAME = "lance_namespace_urllib3_client"


class _DeferredPackage(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # introspection (copy, pickle, inspect) loads nothing
        spec = self.__spec__
        self.__class__ = types.ModuleType  # type: ignore[assignment]  # a plain module from now on
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, attr)


def defer_rest_client() -> None:
    if _NAME in sys.modules or "lancedb" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(_NAME)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or no longer a package: nothing to defer
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    sys.modules[_NAME] = module


defer_rest_client()  # on import: storage/__init__ imports this module first
