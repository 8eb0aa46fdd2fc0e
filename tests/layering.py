"""The static import graph of ``decoding/``, read with ``ast`` (no module is imported).

Used by ``tests/test_layering.py`` (no import cycle; the guard never reaches the C
extension) and by the import-linter contract type in ``tests/importlinter_contracts.py``.

Invariants of :func:`import_graph`:

- nodes are the package's modules: every ``.py`` file (``pkg/__init__.py`` is ``pkg``) and
  every compiled extension (``.so``/``.pyd``, or its ``.pyi`` stub when not built), so
  ``from decoding import _native`` is an import of ``decoding._native``;
- an edge ``a -> b`` is an ``import``/``from ... import`` statement anywhere in ``a``
  (module level, inside functions, under ``TYPE_CHECKING``) naming module ``b`` of the
  package; ``from p import name`` where ``name`` is not a module is an import of ``p``;
- parent packages are not implied (as in grimp): :func:`runtime_closure` adds them.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["PACKAGE_DIR", "modules", "import_graph", "find_cycle", "cycles", "runtime_closure", "chain"]

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "decoding"
_EXTENSION_SUFFIXES = (".so", ".pyd", ".pyi")


def modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path | None]:
    """Module name -> source file (None for a compiled extension)."""
    root = package_dir.name
    found: dict[str, Path | None] = {}
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir)
        if any(not part.isidentifier() for part in rel.parts[:-1]):
            continue                                   # __pycache__ and the like
        parts = [root, *rel.parts[:-1]]
        if path.suffix == ".py":
            stem = path.stem
            if stem != "__init__":
                parts.append(stem)
            found[".".join(parts)] = path
        elif path.suffix in _EXTENSION_SUFFIXES:
            name = ".".join([*parts, path.name.split(".", 1)[0]])
            found.setdefault(name, None)
    # a .py wins over a stub or build product of the same name; packages need __init__.py
    return {m: p for m, p in found.items()
            if m == root or all(".".join(m.split(".")[:i]) in found for i in range(1, m.count(".") + 1))}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom | ast.Import,
             known: dict[str, Path | None]) -> list[str]:
    def longest_known(name: str) -> str | None:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in known:
                return candidate
        return None

    out: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = longest_known(alias.name)
            if target is not None:
                out.append(target)
        return out
    if node.level:
        base = importer.split(".")
        if not is_package:
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    for alias in node.names:
        sub = f"{module}.{alias.name}"
        if sub in known:
            out.append(sub)
        else:
            target = longest_known(module)
            if target is not None:
                out.append(target)
    return out


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, dict[str, int]]:
    """``graph[a][b]`` = first line where module ``a`` imports module ``b`` (see module doc)."""
    known = modules(package_dir)
    graph: dict[str, dict[str, int]] = {m: {} for m in known}
    for name, path in known.items():
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(name, is_package, node, known):
                    if target != name:
                        graph[name].setdefault(target, node.lineno)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle ``[a, b, ..., a]`` if the graph has any, else None (iterative DFS)."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if color[start] != WHITE:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        color[start] = GREY
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                color[path.pop()] = BLACK
                stack.pop()
            elif color.get(nxt, BLACK) == GREY:
                return path[path.index(nxt):] + [nxt]
            elif color.get(nxt) == WHITE:
                color[nxt] = GREY
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                out.append(comp)
    return out


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (all the
    independent knots in the graph), each ``[a, b, ..., a]``."""
    out = []
    for comp in _strongly_connected(graph):
        if len(comp) > 1:
            sub = {m: {t: ln for t, ln in graph[m].items() if t in comp} for m in comp}
            out.append(find_cycle(sub))
    return sorted(out)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def runtime_closure(graph: dict[str, dict[str, int]], start: str) -> dict[str, str | None]:
    """Every module that ``import start`` may execute: imports, transitively, plus the parent
    packages Python runs first.  Maps each module to the module that pulled it in."""
    seen: dict[str, str | None] = {}
    todo: list[tuple[str, str | None]] = [(m, None) for m in _with_parents(start)]
    while todo:
        module, via = todo.pop()
        if module in seen or module not in graph:
            continue
        seen[module] = via
        for target in graph[module]:
            for m in _with_parents(target):
                if m not in seen:
                    todo.append((m, module))
    return seen


def chain(closure: dict[str, str | None], module: str) -> list[str]:
    """The import chain ``[start, ..., module]`` recorded by :func:`runtime_closure`."""
    out = [module]
    while closure[out[-1]] is not None:
        out.append(closure[out[-1]])
    return out[::-1]
