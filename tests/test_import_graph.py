"""The import graph of ``ragen_envs``, ``ragen_bench`` and ``ragen_train``.

Every module is parsed with :mod:`ast` (nothing is imported), and each ``import`` /
``from ... import`` of one of our own modules becomes an edge. Two graphs are checked:

* the *module-level* graph (imports that run when the module is imported; those under
  ``if TYPE_CHECKING:`` never run and are left out) must have no cycle, so every module
  can be imported first without meeting a half-initialised one;
* the *full* graph also counts imports inside functions; its cycles are listed against
  an empty allowance, so a lazy import cannot quietly hide a cycle either.

The layering holds in both: ``ragen_envs`` imports nothing from ``ragen_bench`` or
``ragen_train``, and ``ragen_bench`` nothing from ``ragen_train``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ragen_envs", "ragen_bench", "ragen_train")
#: Which of our packages each package may import (the layers, bottom first).
MAY_IMPORT = {
    "ragen_envs": {"ragen_envs"},
    "ragen_bench": {"ragen_envs", "ragen_bench"},
    "ragen_train": {"ragen_envs", "ragen_bench", "ragen_train"},
}


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``target`` at ``line``; ``lazy``: inside a function."""

    importer: str
    target: str
    line: int
    lazy: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import node with ``lazy`` (inside a function body); ``if TYPE_CHECKING:``
    bodies are skipped."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, lazy))
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, lazy)
            return
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def _ours(name: str) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of our modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in MODULES:
            return prefix
    return None


def _edges(module: str, path: Path) -> list[Edge]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges: list[Edge] = []
    for node, lazy in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # ``from pkg import sub`` imports the module ``pkg.sub`` when it is one
            names = [
                f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source
                for a in node.names
            ]
        for name in names:
            target = _ours(name)
            if target is not None and target != module:
                edges.append(Edge(module, target, node.lineno, lazy))
    return edges


EDGES = [e for module, path in MODULES.items() for e in _edges(module, path)]


def _cycles(edges: list[Edge]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected component of more than
    one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in edges:
        graph[e.importer].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp: set[str] = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    components.append(comp)
    return [_a_cycle(comp, graph) for comp in components]


def _a_cycle(comp: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the smallest module of ``comp`` (breadth-first)."""
    start = min(comp)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & comp):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start]
                if child not in parent:
                    parent[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no cycle in the component {sorted(comp)}")


def _describe(cycle: list[str], edges: list[Edge]) -> str:
    where = {(e.importer, e.target): e for e in edges}
    hops = []
    for a, b in zip(cycle, cycle[1:], strict=False):
        e = where[(a, b)]
        hops.append(f"{a} -> {b} (line {e.line}{', in a function' if e.lazy else ''})")
    return "; ".join(hops)


def test_the_parser_sees_the_known_edges() -> None:
    """The graph is not empty by mistake: edges every version of the code has."""
    pairs = {(e.importer, e.target) for e in EDGES if not e.lazy}
    assert ("ragen_bench.runner", "ragen_bench.rollout") in pairs
    assert ("ragen_train.trainer", "ragen_bench.rollout") in pairs
    assert ("ragen_bench.rollout", "ragen_bench.policies.base") in pairs  # from .policies.base
    assert len(MODULES) > 100 and len(EDGES) > 300


def test_cycle_finder_finds_a_planted_cycle() -> None:
    """Tarjan + breadth-first search on a graph whose answer is known."""
    a, b, c = sorted(MODULES)[:3]
    planted = [Edge(a, b, 1, False), Edge(b, c, 2, False), Edge(c, a, 3, True)]
    assert _cycles(planted) == [[a, b, c, a]]
    assert _cycles(planted[:2]) == []
    assert "in a function" in _describe([a, b, c, a], planted)


def test_no_cycle_among_module_level_imports() -> None:
    top = [e for e in EDGES if not e.lazy]
    cycles = [_describe(c, top) for c in _cycles(top)]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_no_cycle_hidden_by_a_lazy_import() -> None:
    cycles = [_describe(c, EDGES) for c in _cycles(EDGES)]
    assert cycles == [], "import cycles (counting imports inside functions):\n" + "\n".join(cycles)


@pytest.mark.parametrize("package", PACKAGES)
def test_layering(package: str) -> None:
    upward = [
        f"{e.importer} imports {e.target} (line {e.line})"
        for e in EDGES
        if e.importer.split(".")[0] == package and e.target.split(".")[0] not in MAY_IMPORT[package]
    ]
    assert upward == [], f"{package} imports a layer above it:\n" + "\n".join(upward)
