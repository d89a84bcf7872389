"""The NVML topology level two GPUs should have, computed from what lspci shows of a view:
its tree (``lspci -tv``: who sits below whom) and each function's port type and NUMA node
(``lspci -D -vv``), independently of the library's own reading of the sysfs links.

The levels (nvmlGpuTopologyLevel_t): the same GPU INTERNAL (0); one PCIe switch between them
SINGLE (10), more MULTIPLE (20); only their host bridge HOSTBRIDGE (30); two host bridges of
one NUMA node NODE (40); else SYSTEM (50)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.tools import require_tool

INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM = 0, 10, 20, 30, 40, 50
LEVELS = (INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM)
ENTRY = re.compile(r"\[(?P<domain>[0-9a-f]{4}):(?P<rootbus>[0-9a-f]{2})\]"
                   r"|(?P<devfn>[0-9a-f]{2}\.[0-7])(?:-\[(?P<secondary>[0-9a-f]{2}))?")


@dataclass(frozen=True)
class Entry:
    chain: tuple[str, ...]  # the root bus ("0000:15"), the bridges, then this function
    domain: str
    secondary: str  # the bus below it (a root bus's own number)
    parent: Entry | None


def tree(text: str) -> dict[str, tuple[str, ...]]:
    """``lspci -tv``'s tree: each function's chain from its root bus down to it. A function's
    parent is the entry left of it on its line, or, first on a line, its sibling's above."""
    at_column: dict[int, Entry] = {}
    chains: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        line = re.sub(r"(?<=\.[0-7])  \S.*$", "", line)  # the device's name
        left: Entry | None = None
        for m in ENTRY.finditer(line):
            col = m.start()
            if m["domain"]:
                entry = Entry((f"{m['domain']}:{m['rootbus']}",), m["domain"], m["rootbus"],
                              None)
            else:
                parent = left if left is not None else at_column[col].parent
                assert parent is not None, line
                bdf = f"{parent.domain}:{parent.secondary}:{m['devfn']}"
                chains[bdf] = (*parent.chain, bdf)
                entry = Entry(chains[bdf], parent.domain, m["secondary"] or "", parent)
            at_column[col] = left = entry
    return chains


def functions(text: str) -> dict[str, tuple[bool, int]]:
    """``lspci -D -vv``: whether each function is a switch's upstream port, its NUMA node."""
    out = {}
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        numa = re.search(r"NUMA node: (-?\d+)", block)
        out[block.split(" ", 1)[0]] = ("Upstream Port" in block, int(numa[1]) if numa else -1)
    return out


@dataclass(frozen=True)
class Lspci:
    chains: dict[str, tuple[str, ...]]
    facts: dict[str, tuple[bool, int]]

    def level(self, a: str, b: str) -> int:
        if a == b:
            return INTERNAL
        ca, cb = self.chains[a], self.chains[b]
        if ca[0] != cb[0]:
            na, nb = self.facts[a][1], self.facts[b][1]
            return NODE if na >= 0 and na == nb else SYSTEM
        common = 0
        while ca[common + 1] == cb[common + 1]:
            common += 1
        if common == 0:
            return HOSTBRIDGE
        path = set(ca[common:-1]) | set(cb[common:-1])  # the LCA and the bridges below it
        switches = sum(self.facts[bdf][0] for bdf in path)
        return SINGLE if switches <= 1 else MULTIPLE


def lspci_of(root: Path) -> Lspci:
    exe = require_tool("lspci")
    base = [exe, "-A", "linux-sysfs", "-O", f"sysfs.path={root}/sys/bus/pci"]
    shown = [subprocess.run([*base, *args], capture_output=True, text=True, check=True,
                            timeout=60).stdout for args in (["-tv"], ["-D", "-vv"])]
    return Lspci(tree(shown[0]), functions(shown[1]))
