"""Import cycles inside a package, found with Python's ast (nothing is imported).

Usage: python scripts/import_graph.py [PACKAGE ...]   (default: parsers sources)

Every ``import`` and ``from ... import`` of a module of the package counts, at any
depth (inside functions and ``TYPE_CHECKING`` blocks too: a lazy import is still a
dependency). Prints each strongly connected component of more than one module and
exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, package: str, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (a name imported from a package
    that is itself a module counts as that module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = module_name(path)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".") if is_pkg else here.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != here and name.split(".")[0] == package:
                out.add(name)
    return out


def graph(package: str) -> dict[str, set[str]]:
    files = sorted((ROOT / package).rglob("*.py"))
    modules = {module_name(f) for f in files}
    return {module_name(f): imports_of(f, package, modules) for f in files}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    bad = 0
    for package in argv or ["parsers", "sources"]:
        for comp in cycles(graph(package)):
            bad += 1
            print(f"{package}: import cycle of {len(comp)} modules: {', '.join(comp)}")
    if not bad:
        print("no import cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
