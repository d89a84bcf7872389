"""``proc/devices``: the host's character and block majors plus the simulated drivers'.

Host lines for a simulated driver's name are replaced by the simulated major, so the DRA
driver's parser (``Character devices:`` ... ``(\\d+) <name>\\n`` ... ``Block devices:``) finds
exactly one. Lines are ordered by major, as the kernel lists them.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import File, Node
from mokkafs.tree.roots import bound

PATH = "proc/devices"


def _sections(host: str) -> tuple[list[tuple[int, str]], str]:
    """(character lines as (major, name), the block section verbatim)."""
    head, sep, block = host.partition("Block devices:")
    chars: list[tuple[int, str]] = []
    for line in head.replace("Character devices:", "").splitlines():
        major, _, name = line.strip().partition(" ")
        if major.isdigit() and name:
            chars.append((int(major), name.strip()))
    return chars, (sep + block) if sep else "Block devices:\n"


def host_majors(state: State) -> set[int]:
    """The character majors the host's own drivers registered (its /proc/devices at load)."""
    return {major for major, _ in _sections(state.host.proc_devices)[0]}


def render(state: State) -> bytes:
    chars, block = _sections(state.host.proc_devices)
    simulated = {c.name for c in state.char_majors}
    merged = [c for c in chars if c[1] not in simulated]
    merged += [(c.major, c.name) for c in state.char_majors]
    merged.sort(key=lambda c: c[0])  # stable: host order within a major, then simulated
    lines = "".join(f"{major:3d} {name}\n" for major, name in merged)
    return f"Character devices:\n{lines}\n{block}".encode()


def nodes(state: State) -> Iterator[Node]:
    yield File(PATH, render(state), 0o444)


SURFACE = stateless("proc_devices", nodes, ("host", "char_majors"), (bound(PATH),))
