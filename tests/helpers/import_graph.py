"""The import graph of a package, read with ``ast``: which module imports which, and how.

Every import counts: at module level, inside a function (a lazy import still joins the two
modules), and under ``if TYPE_CHECKING:`` (a type still names the module). Each edge says which
it is, for the rules that ask only what a module loads when it is imported. ``from P import n``
imports the module ``P.n`` when there is one, else ``P`` (its name ``n``); a package a module
sits in is not an edge of its own (Python loads it first, but nothing is taken from it).
Names outside the package are kept by their top-level name (``pydantic``, ``yaml``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    target: str  # a module of the package (dotted), or an outside top-level name
    lazy: bool  # inside a function: runs at its first call, not at import
    typing: bool  # under ``if TYPE_CHECKING:``: never runs

    @property
    def at_import(self) -> bool:
        """Whether importing the module runs this import."""
        return not (self.lazy or self.typing)


Graph = dict[str, set[Edge]]


def module_name(path: Path, root: Path) -> str:
    """``root/mokkafs/serve/mig.py`` -> ``mokkafs.serve.mig`` (a package: its name)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, lazy: bool = False,
             typing: bool = False) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement under ``tree``, with whether it is lazy and type-only."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy, typing
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module([child], []), lazy, True)
            for child in node.orelse:
                yield from _imports(ast.Module([child], []), lazy, typing)
        else:
            inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from _imports(node, inner, typing)


def _resolve(name: str, modules: set[str]) -> str:
    """The module a dotted name is (or is in); an outside name's top level."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return parts[0]


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_package: bool,
             modules: set[str]) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from (_resolve(a.name, modules) for a in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from this module's package, up level - 1
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join([*package, *([base] if base else [])])
    for alias in node.names:
        full = f"{base}.{alias.name}"
        yield full if full in modules else _resolve(base, modules)


def graph(package: Path) -> Graph:
    """Every module of ``package`` (a directory) and the imports it makes."""
    root = package.parent
    paths = {module_name(p, root): p for p in sorted(package.rglob("*.py"))}
    modules = set(paths)
    out: Graph = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        out[name] = {Edge(target, lazy, typing)
                     for node, lazy, typing in _imports(tree)
                     for target in _targets(node, name, path.name == "__init__.py", modules)
                     if target != name}
    return out


def reach(g: Graph, start: str, keep: Callable[[Edge], bool] = lambda e: True) -> dict[str, str]:
    """Every module ``start`` reaches through edges ``keep`` accepts, each with the module
    it was first reached from (for ``chain``)."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        here = todo.pop(0)
        for edge in sorted(g.get(here, ()), key=lambda e: e.target):
            if keep(edge) and edge.target not in seen and edge.target != start:
                seen[edge.target] = here
                todo.append(edge.target)
    return seen


def chain(start: str, end: str, seen: dict[str, str]) -> str:
    """The path ``reach`` found from ``start`` to ``end``: ``a -> b -> c``."""
    path = [end]
    while path[-1] != start:
        path.append(seen[path[-1]])
    return " -> ".join(reversed(path))


def circles(g: Graph) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan's),
    sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted({e.target for e in g[root] if e.target in g})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        members.append(top)
                        if top == node:
                            break
                    if len(members) > 1:
                        found.append(sorted(members))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted({e.target for e in g[child] if e.target in g}))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)
