"""The shape of the code, pinned: which package may import which, and which stay pure.

Data flows one way, profile -> State -> surfaces -> tree -> FUSE; the import graph follows it.
A module may import its own package and anything of a lower rank, never a higher one:

    0  errors, state, model, clock,     the vocabulary: the State, its models and their
       bin, __init__                    arithmetic; the clock types; the package's data
    1  counters, tree, profile          pure data: the counter model, the node model and its
                                        assembly, the profile compiler
    2  surfaces, faults, host, writes   views of a State, and the State under its faults at a
                                        time or its sysfs writes; the host's side (Linux calls,
                                        sysfs)
    3  source, compile_process, frames, where States come from (and the compiling process,
       fuse, obs                        the frames on its pipe); the FUSE edge; health/metrics
    4  delivery                         consumers of the tree: CDI, re-attaching, preload, render
    5  layers                           the run-time layers over the profile's State (MIG
                                        layouts, faults, writes) in their one order, and what
                                        the control socket and the state file do with each
    6  serve                            the process: daemon skeleton, applying updates
    7  cli, entry, __main__, testing    the command; starting daemons for tests and bench/

Every package and top-level module has a rank, and every rank names one that exists. The
pipeline's pure parts (state, counters, tree, surfaces, faults, the profile compiler) do no
I/O: they import neither trio, pyfuse3 nor the modules that reach the system. Nothing below
serve/ keeps module-global state: no ``global`` statement, no mutable container bound at
module level to a name that is not a constant's (upper case). A cache is an object its owner
holds and passes in; a decorator cache (``functools.lru_cache``, ``functools.cache``) below
serve/ may only memoize a pure function: a module-level function whose result is immutable
(its annotation says bytes, str, int, float, bool, tuple, frozenset or MappingProxyType), bounded
(``lru_cache(maxsize=N)``) unless it takes no arguments (a constant made at its first use).

Ranks say what may be imported directly; the import graph (tests/helpers/import_graph.py, every
import counted, function-level and type-only ones too) pins the rest: no import circle
anywhere, pairs of parts one must never reach from the other by any chain of imports
(``NEVER_REACHES``), pairs one must not import itself (``NEVER_IMPORTS``: it reaches the other
only through serve/), and who may import the compile (``COMPILE_CALLERS``). What breaks a rule
today and is to be paid by a later step of issue 38 is listed in ``DEBTS``, with its item: a new
breach fails, and so does a debt paid but still listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.import_graph import Graph, circles, graph
from tests.helpers.layering import breaches, decorator_caches, loads_at_start, module_state
from tests.helpers.mounts import REPO

PACKAGE = REPO / "mokkafs"

RANKS = {"errors": 0, "state": 0, "model": 0, "clock": 0, "bin": 0, "lib": 0, "__init__": 0,
         "counters": 1, "tree": 1, "profile": 1,
         "surfaces": 2, "faults": 2, "host": 2, "writes": 2,
         "source": 3, "compile_process": 3, "frames": 3, "fuse": 3, "obs": 3,
         "delivery": 4, "capture": 4,
         "layers": 5,
         "serve": 6,
         "cli": 7, "entry": 7, "__main__": 7, "testing": 7}
PURE = ("state", "model", "counters", "tree", "surfaces", "faults", "writes", "layers",
        "profile/schema",
        "profile/values", "profile/load", "profile/compile", "profile/faults",
        "profile/sections")
IMPURE = {"trio", "pyfuse3", "os", "socket", "subprocess", "threading", "ctypes", "time",
          "shutil", "tempfile", "signal"}
STATELESS_BELOW = RANKS["serve"]  # the ranks that keep no module-global state

# The compile: profile/, YAML (a profile, a fault file, a MIG request) into the domain. Outside
# it, only its callers import it: those that run a compile (source/: reading a profile;
# compile_process: the child that compiles it; serve/pipeline: the one place the pipeline is
# assembled, for the daemon's first compile and the commands that need no mount; capture/: a
# profile written and checked), and those that check what the control socket and the state
# file bring at run time (faults/book, serve/control, and the layers': layers/faults,
# layers/mig_change, layers/kept). Those the daemon holds at start import its schema only at
# first use, in a worker thread (test_the_daemon_starts_without_the_schema).
COMPILE = "profile"
COMPILE_CALLERS = ("source", "compile_process", "serve.pipeline", "capture", "faults.book",
                   "serve.control", "layers.faults", "layers.mig_change", "layers.kept")
# What the daemon imports to start: the command line (its parser loads every command's
# module), and what ``mokkafs mount`` imports to serve.
START = ("entry", "cli", "cli.commands", "serve.daemon", "serve.wiring")
SCHEMA = {"pydantic", "yaml"}  # what the compile's schema and its YAML parser load

# (a, b): no module of ``a`` reaches ``b`` by any chain of imports.
NEVER_REACHES = {
    # The FUSE edge serves a tree and forwards writes; it makes neither a view nor a State.
    ("fuse", "writes"), ("fuse", "profile"), ("fuse", "surfaces"),
    # The domain, its views and its run-time layers never read a profile.
    ("model", "profile"), ("state", "profile"), ("counters", "profile"), ("tree", "profile"),
    ("surfaces", "profile"), ("writes", "profile"),
    # The run-time layers are State arithmetic; surfaces serve what they make, not the reverse.
    ("faults", "surfaces"), ("writes", "surfaces"),
    # So is what the daemon does with them: no view, no tree, no FUSE.
    ("layers", "surfaces"), ("layers", "tree"), ("layers", "fuse"),
}
# (a, b): no module of ``a`` imports ``b`` itself; it goes through serve/ (or delivery/).
# The command line parses and calls serve/ or delivery/ (capture/ for ``capture``), nothing
# ranked below them but errors (the exit statuses it maps) and the package's version and data;
# the pipeline's parts it reaches through serve/pipeline.py. serve/ reaches the fault book, the
# MIG book and the state file's sections only through the layers' registry (layers/registry:
# ``LAYERS``, ``Layers``).
CLI_MAY_IMPORT = ("errors", "__init__", "bin", "lib")
NEVER_IMPORTS = {("cli", part) for part, rank in RANKS.items()
                 if rank < RANKS["delivery"] and part not in CLI_MAY_IMPORT} | {
                     ("serve", "faults.book"), ("serve", "layers.mig"), ("serve", "layers.kept")}

DEBTS: dict[tuple[str, str], str] = {
}


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


def is_pure(path: Path) -> bool:
    rel = str(path.relative_to(PACKAGE).with_suffix(""))
    return any(rel == p or rel.startswith(p + "/") for p in PURE)


@pytest.fixture(scope="module")
def imports_graph() -> Graph:
    return graph(PACKAGE)


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
        if RANKS[part_of(path)] < STATELESS_BELOW and \
                (state := module_state(path) + decorator_caches(path)):
            found[str(path.relative_to(REPO))] = set(state)
    assert not found, found


def test_no_import_circle(imports_graph: Graph) -> None:
    assert circles(imports_graph) == []


def test_no_part_reaches_what_it_must_not(imports_graph: Graph) -> None:
    """The pairs and the compile's callers hold, but for the debts a later step pays."""
    found = breaches(imports_graph, NEVER_REACHES, NEVER_IMPORTS, COMPILE, COMPILE_CALLERS)
    new = {pair: why for pair, why in found.items() if pair not in DEBTS}
    assert not new, new
    paid = set(DEBTS) - set(found)
    assert not paid, f"debts paid: take them out of DEBTS: {sorted(paid)}"


def test_the_daemon_starts_without_the_schema(imports_graph: Graph) -> None:
    """A daemon at rest holds neither pydantic nor the YAML parser: its compiles run in a
    child process, and faults, MIG changes and the state file import the compile at first use,
    in a worker thread."""
    assert loads_at_start(imports_graph, START, SCHEMA) == []


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


def test_a_decorator_cache_is_a_bounded_memo_of_an_immutable_value(tmp_path: Path) -> None:
    module = tmp_path / "caches.py"
    module.write_text("import functools\nfrom functools import cache, lru_cache\n"
                      "@functools.lru_cache(maxsize=64)\ndef line(t: str) -> bytes: ...\n"
                      "@functools.cache\ndef table() -> tuple[int, ...]: ...\n"
                      "@lru_cache(maxsize=8)\ndef view(t: int) -> MappingProxyType[str, int]: ...\n"
                      "@lru_cache(maxsize=8)\ndef shared(t: int) -> dict[str, int]: ...\n"
                      "@cache\ndef grows(t: int) -> str: ...\n"
                      "@lru_cache(None)\ndef also(t: int) -> str: ...\n"
                      "class Owner:\n    @functools.lru_cache\n"
                      "    def held(self) -> int: ...\n")
    assert decorator_caches(module) == [
        "shared: returns dict[str, int], not an immutable value", "grows: unbounded",
        "also: unbounded", "held: not a module-level function"]


def write(package: Path, modules: dict[str, str]) -> None:
    for name, text in modules.items():
        path = package.parent.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(package.parent).parents:
            if parent != Path("."):
                (package.parent / parent / "__init__.py").touch()
        path.write_text(text)


def test_the_graph_rules_catch_what_they_name(tmp_path: Path) -> None:
    """A circle made by a function-level import, a pair reached through a third part, an
    import of the compile by a module that is not its caller, and the schema loaded at
    start, each found with its chain; a lazy or type-only import of the schema is no load."""
    package = tmp_path / "mokkafs"
    write(package, {
        "mokkafs.serve.a": "from mokkafs.serve import b\n",
        "mokkafs.serve.b": "def f() -> None:\n    from mokkafs.serve.a import x\n",
        "mokkafs.fuse.edge": "from mokkafs.writes.book import Book\n",
        "mokkafs.writes.book": "from mokkafs.model.sriov import vf\n",
        "mokkafs.model.sriov": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from mokkafs.profile.schema import Fault\n",
        "mokkafs.profile.schema": "import pydantic\n",
        "mokkafs.source.child": "def f() -> None:\n    from mokkafs.profile import schema\n",
        "mokkafs.cli.run": "from mokkafs.source.child import f\nimport mokkafs.surfaces.pci\n",
        "mokkafs.surfaces.pci": "import mokkafs.profile.schema\n"})
    g = graph(package)
    assert circles(g) == [["mokkafs.serve.a", "mokkafs.serve.b"]]
    rules = ({("fuse", "profile"), ("writes", "profile")}, {("cli", "surfaces")})
    assert breaches(g, *rules, "profile", ("source",)) == {
        ("mokkafs.fuse.edge", "profile"):
            "mokkafs.fuse.edge -> mokkafs.writes.book -> mokkafs.model.sriov"
            " -> mokkafs.profile.schema",
        ("mokkafs.writes.book", "profile"):
            "mokkafs.writes.book -> mokkafs.model.sriov -> mokkafs.profile.schema",
        ("mokkafs.model.sriov", "profile"): "mokkafs.model.sriov -> mokkafs.profile.schema",
        ("mokkafs.surfaces.pci", "profile"): "mokkafs.surfaces.pci -> mokkafs.profile.schema",
        ("mokkafs.cli.run", "surfaces"): "mokkafs.cli.run -> mokkafs.surfaces.pci"}
    assert loads_at_start(g, ("cli",), {"pydantic"}) == []
    assert loads_at_start(g, ("fuse.edge",), {"pydantic"}) == []  # type-only at the end
    assert loads_at_start(g, ("cli.run",), {"pydantic"}) == [
        "mokkafs.cli.run -> mokkafs.surfaces.pci -> mokkafs.profile.schema -> pydantic"]
