"""The checks ``tests/unit/test_layering.py`` runs, each a function of the code and of the
rules it is given (the rules, and why, are the test's)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.import_graph import Graph, chain, reach

CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*|__all__")
MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
MUTABLE_CALLS = {"dict", "list", "set", "bytearray", "OrderedDict", "defaultdict", "deque",
                 "Counter"}
DECORATOR_CACHES = {"lru_cache", "cache"}
IMMUTABLE = {"bytes", "str", "int", "float", "bool", "tuple", "frozenset", "MappingProxyType"}


def module_state(path: Path) -> list[str]:
    """What in ``path`` is module-global state: a ``global`` statement, or a mutable container
    bound at module level to a name that is not a constant's."""
    tree = ast.parse(path.read_text())
    out = [f"global {name}" for node in ast.walk(tree) if isinstance(node, ast.Global)
           for name in node.names]
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        call = value.func if isinstance(value, ast.Call) else None
        called = call.id if isinstance(call, ast.Name) else \
            call.attr if isinstance(call, ast.Attribute) else None
        if isinstance(value, MUTABLE) or called in MUTABLE_CALLS:
            out += [f"module-level {t.id}" for t in targets
                    if isinstance(t, ast.Name) and not CONSTANT.fullmatch(t.id)]
    return out


def _outer(annotation: ast.expr | None) -> str | None:
    """The outer type an annotation names: ``tuple`` of ``tuple[int, ...]``."""
    if isinstance(annotation, ast.Subscript):
        return _outer(annotation.value)
    if isinstance(annotation, ast.Attribute):
        return annotation.attr
    return annotation.id if isinstance(annotation, ast.Name) else None


def decorator_caches(path: Path) -> list[str]:
    """The decorator caches in ``path`` that do more than memoize a pure function, each with
    why: a memo is a module-level function, its result immutable (as its annotation says),
    bounded unless it takes no arguments."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            named = _outer(call.func if call else decorator)
            if named not in DECORATOR_CACHES:
                continue
            sizes = [k.value for k in call.keywords if k.arg == "maxsize"] if call else []
            sizes += call.args[:1] if call else []
            bounded = named == "lru_cache" and not any(
                isinstance(v, ast.Constant) and v.value is None for v in sizes)
            a = node.args
            takes = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
            why = [] if node in tree.body else ["not a module-level function"]
            if _outer(node.returns) not in IMMUTABLE:
                returns = ast.unparse(node.returns) if node.returns else "an unannotated result"
                why.append(f"returns {returns}, not an immutable value")
            if takes and not bounded:
                why.append("unbounded")
            out += [f"{node.name}: {', '.join(why)}"] if why else []
    return out


def within(module: str, part: str) -> bool:
    """Whether ``module`` is ``part`` of the package (``serve.mig``, ``fuse``) or in it."""
    return module == f"mokkafs.{part}" or module.startswith(f"mokkafs.{part}.")


def breaches(g: Graph, never_reaches: set[tuple[str, str]], never_imports: set[tuple[str, str]],
             compile_: str, callers: tuple[str, ...]) -> dict[tuple[str, str], str]:
    """Every (module, part) that breaks a rule, with the chain of imports that does: a pair
    ``never_reaches`` (the module named is the door: the one whose own import leaves its part
    towards the other), a pair ``never_imports``, or an import of ``compile_`` by a module
    neither in it nor one of its ``callers``."""
    found: dict[tuple[str, str], str] = {}
    for module, edges in sorted(g.items()):
        for a, b in never_reaches:
            doors = [e.target for e in edges if e.target in g and not within(e.target, a)] \
                if within(module, a) else []
            for door in doors:
                seen = reach(g, door)
                hit = door if within(door, b) else next(
                    (m for m in sorted(seen) if within(m, b)), None)
                if hit is not None:
                    found[(module, b)] = f"{module} -> {chain(door, hit, seen)}"
        caller = within(module, compile_) or any(within(module, c) for c in callers)
        direct = [*(pair for pair in never_imports if within(module, pair[0])),
                  *([] if caller else [("", compile_)])]
        for _, b in direct:
            for edge in edges:
                if within(edge.target, b):
                    found[(module, b)] = f"{module} -> {edge.target}"
    return found


def loads_at_start(g: Graph, start: tuple[str, ...], heavy: set[str]) -> list[str]:
    """The chains by which importing a module of ``start`` imports one of ``heavy`` (a
    function-level or type-only import runs later, or never, and is not one)."""
    roots = [m for m in sorted(g) if any(m == f"mokkafs.{r}" or
                                         (r == "cli.commands" and within(m, r)) for r in start)]
    out = []
    for root in roots:
        seen = reach(g, root, lambda e: e.at_import)
        for module in [root, *sorted(seen)]:
            out += [f"{chain(root, module, seen)} -> {e.target}" for e in g.get(module, ())
                    if e.at_import and e.target in heavy]
    return sorted(set(out))
