"""The package dependency rule of docs/architecture.md, checked with Python's ast.

Usage: python scripts/import_graph.py [--root DIR]

ground (``common``) <- stages (``sources``, ``parsers``, ``chunking``, ``embedding``,
``storage``) <- engine (``corpusflow``) <- faces (``corpusflow.cli``, the package's
``search`` facade, ``flows``). A module may import its own layer or a lower one, never a
higher one, and no modules may import each other in a circle. Every ``import`` and
``from ... import`` counts, at any depth (inside functions and ``TYPE_CHECKING`` blocks
too: a lazy import is still a dependency). Nothing is imported. Prints each upward
import and each circle and exits 1 when there is one (tests/test_layers.py runs it).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

LAYERS = {
    "common": 0,
    "sources": 1,
    "parsers": 1,
    "chunking": 1,
    "embedding": 1,
    "storage": 1,
    "corpusflow": 2,
    "flows": 3,
}
FACES = {"corpusflow", "corpusflow.cli"}  # the package facade (corpusflow.search) and the CLI


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    return 3 if module in FACES else LAYERS[module.split(".")[0]]


def graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (a name imported from a package that
    is itself a module counts as that module)."""
    files = sorted(f for pkg in LAYERS if (root / pkg).is_dir() for f in (root / pkg).rglob("*.py"))
    modules = {module_name(f, root) for f in files}
    edges: dict[str, set[str]] = {}
    for path in files:
        here = module_name(path, root)
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" for a in node.names] or [base]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != here:
                    out.add(name)
        edges[here] = out
    return edges


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, deps in edges.items() for d in deps if layer(d) > layer(m))


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
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    edges = graph(ap.parse_args(argv).root)
    bad = upward(edges)
    for line in bad:
        print(f"upward import: {line}")
    circles = cycles(edges)
    for comp in circles:
        print(f"import circle of {len(comp)} modules: {', '.join(comp)}")
    if not bad and not circles:
        print(f"{len(edges)} modules: no upward import, no import circle")
    return 1 if bad or circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
