"""The shape of the code, pinned: which package may import which, and which stay pure.

Data flows one way, profile -> State -> surfaces -> tree -> FUSE; the import graph follows it.
A module may import its own package and anything of a lower rank, never a higher one:

    0  errors, state                    the vocabulary
    1  tree, profile                    pure data: the node model, the profile compiler
    2  surfaces, faults, host, writes   views of a State, and the State under its faults at a
                                        time or its sysfs writes; the host's side (Linux calls,
                                        sysfs)
    3  source, fuse, obs                where States come from; the FUSE edge; health/metrics
    4  delivery                         consumers of the tree: CDI, re-attaching, preload, render
    5  serve                            the process: daemon skeleton, applying updates
    6  cli, cli_writes, entry, __main__ the command

and the pipeline's pure parts (state, tree, surfaces, the profile compiler) do no I/O: they
import neither trio, pyfuse3 nor the modules that reach the system.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.mounts import REPO

PACKAGE = REPO / "mokkafs"
RANKS = {"errors": 0, "state": 0, "tree": 1, "profile": 1, "surfaces": 2, "faults": 2, "host": 2,
         "writes": 2, "cli_writes": 6,
         "source": 3, "fuse": 3, "obs": 3, "delivery": 4, "serve": 5, "cli": 6, "entry": 6,
         "__main__": 6, "__init__": 0, "testing": 6, "bin": 0}
PURE = ("state", "tree", "surfaces", "faults", "profile/schema", "profile/values", "profile/load",
        "writes", "profile/compile", "profile/faults", "profile/identity")
IMPURE = {"trio", "pyfuse3", "os", "socket", "subprocess", "threading", "ctypes", "time",
          "shutil", "tempfile", "signal"}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def part_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
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


def test_every_part_has_a_rank() -> None:
    assert {part_of(p) for p in modules()} <= set(RANKS)


def test_no_import_runs_up_the_layers() -> None:
    upward = []
    for path in modules():
        mine = part_of(path)
        for name in imports(path):
            parts = name.split(".")
            if parts[0] != "mokkafs" or len(parts) < 2 or parts[1] not in RANKS:
                continue
            theirs = parts[1]
            if theirs != mine and RANKS[theirs] > RANKS[mine]:
                upward.append(f"{path.relative_to(REPO)} imports {name}")
    assert not upward, upward


def test_the_pure_parts_do_no_io() -> None:
    impure = []
    for path in modules():
        rel = str(path.relative_to(PACKAGE).with_suffix(""))
        if not any(rel == p or rel.startswith(p + "/") for p in PURE):
            continue
        for name in imports(path):
            if name.split(".")[0] in IMPURE:
                impure.append(f"{rel} imports {name}")
    assert not impure, impure


def test_the_rule_catches_what_it_names(tmp_path: Path) -> None:
    """The checks above see an upward import and an impure one when there is one."""
    bad = tmp_path / "bad.py"
    bad.write_text("import trio\nfrom mokkafs.serve.daemon import serve\n")
    assert imports(bad) == {"trio", "mokkafs.serve.daemon", "mokkafs.serve.daemon.serve"}
