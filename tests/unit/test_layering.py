"""The shape of the code, pinned: which package may import which, and which stay pure.

Data flows one way, profile -> State -> surfaces -> tree -> FUSE; the import graph follows it.
A module may import its own package and anything of a lower rank, never a higher one:

    0  errors, state, model, clock,     the vocabulary: the State and its models; the clock
       bin, __init__                    types; the package's data
    1  counters, tree, profile          pure data: the counter model, the node model and its
                                        assembly, the profile compiler
    2  surfaces, faults, host, writes   views of a State, and the State under its faults at a
                                        time or its sysfs writes; the host's side (Linux calls,
                                        sysfs)
    3  source, fuse, obs                where States come from; the FUSE edge; health/metrics
    4  delivery                         consumers of the tree: CDI, re-attaching, preload, render
    5  serve                            the process: daemon skeleton, applying updates
    6  cli, entry, __main__, testing    the command; starting daemons for tests and bench/

Every package and top-level module has a rank, and every rank names one that exists. The
pipeline's pure parts (state, counters, tree, surfaces, faults, the profile compiler) do no
I/O: they import neither trio, pyfuse3 nor the modules that reach the system. Nothing below
serve/ keeps module-global state: no ``global`` statement, no mutable container bound at
module level to a name that is not a constant's (upper case). A cache is an object its owner
holds and passes in.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.mounts import REPO

PACKAGE = REPO / "mokkafs"

RANKS = {"errors": 0, "state": 0, "model": 0, "clock": 0, "bin": 0, "__init__": 0,
         "counters": 1, "tree": 1, "profile": 1,
         "surfaces": 2, "faults": 2, "host": 2, "writes": 2,
         "source": 3, "fuse": 3, "obs": 3,
         "delivery": 4, "capture": 4,
         "serve": 5,
         "cli": 6, "entry": 6, "__main__": 6, "testing": 6}
PURE = ("state", "model", "counters", "tree", "surfaces", "faults", "writes", "profile/schema",
        "profile/values", "profile/load", "profile/compile", "profile/faults",
        "profile/identity", "profile/sections")
IMPURE = {"trio", "pyfuse3", "os", "socket", "subprocess", "threading", "ctypes", "time",
          "shutil", "tempfile", "signal"}
STATELESS_BELOW = RANKS["serve"]  # the ranks that keep no module-global state
CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*|__all__")
MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
MUTABLE_CALLS = {"dict", "list", "set", "bytearray", "OrderedDict", "defaultdict", "deque",
                 "Counter"}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def part_of(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package)
    return rel.parts[0].removesuffix(".py")


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def upward(path: Path, mine: str) -> list[str]:
    """The imports of ``path`` (in part ``mine``) that run up the layers."""
    out = []
    for name in sorted(imports(path)):
        parts = name.split(".")
        if parts[0] != "mokkafs" or len(parts) < 2 or parts[1] not in RANKS:
            continue
        if parts[1] != mine and RANKS[parts[1]] > RANKS[mine]:
            out.append(f"imports {name}")
    return out


def impure(path: Path) -> list[str]:
    """The imports of ``path`` that reach the system."""
    return [f"imports {name}" for name in sorted(imports(path)) if name.split(".")[0] in IMPURE]


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


def is_pure(path: Path) -> bool:
    rel = str(path.relative_to(PACKAGE).with_suffix(""))
    return any(rel == p or rel.startswith(p + "/") for p in PURE)


def test_every_part_has_a_rank() -> None:
    """Every package and top-level module is ranked, and every rank names one that exists."""
    parts = {part_of(p) for p in modules()}
    assert parts == set(RANKS), (parts - set(RANKS), set(RANKS) - parts)


def test_no_import_runs_up_the_layers() -> None:
    found = [f"{p.relative_to(REPO)} {why}" for p in modules() for why in upward(p, part_of(p))]
    assert not found, found


def test_the_pure_parts_do_no_io() -> None:
    found = [f"{p.relative_to(REPO)} {why}" for p in modules() if is_pure(p)
             for why in impure(p)]
    assert not found, found


def test_nothing_below_serve_keeps_module_global_state() -> None:
    found: dict[str, set[str]] = {}
    for path in modules():
        if RANKS[part_of(path)] < STATELESS_BELOW and (state := module_state(path)):
            found[str(path.relative_to(REPO))] = set(state)
    assert not found, found


def test_the_rule_catches_what_it_names(tmp_path: Path) -> None:
    """Each rule above, run on a bad module, finds what is wrong with it: an unranked part,
    an upward import, an impure import, and module-global state of both kinds."""
    package = tmp_path / "mokkafs"
    (package / "surfaces").mkdir(parents=True)
    bad = package / "surfaces" / "bad.py"
    bad.write_text("import trio\n"
                   "from mokkafs.serve.daemon import serve\n"
                   "from mokkafs.tree.nodes import Dir\n"
                   "TABLE = {1: 2}\n"
                   "_last: dict[int, int] = {}\n"
                   "seen = set()\n"
                   "def f() -> None:\n"
                   "    global _last\n")
    stray = package / "unranked.py"
    stray.write_text("")
    assert {part_of(p, package) for p in (bad, stray)} - set(RANKS) == {"unranked"}
    assert part_of(bad, package) == "surfaces"
    assert upward(bad, "surfaces") == ["imports mokkafs.serve.daemon",
                                       "imports mokkafs.serve.daemon.serve"]
    assert impure(bad) == ["imports trio"]
    assert module_state(bad) == ["global _last", "module-level _last", "module-level seen"]
    good = package / "surfaces" / "good.py"
    good.write_text("from mokkafs.tree.nodes import Dir\nNAMES = {'a': 1}\n")
    assert upward(good, "surfaces") == impure(good) == module_state(good) == []
