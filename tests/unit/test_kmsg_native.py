"""The facts the kmsg mount's C program (native/mokkafs_kmsg.c, native/kmsg_relay.h) keeps a
copy of (a C program cannot import them) agree with their definitions in the package: the
stream file's size, relay.py's formats and operations (its NOTIFY too), and the mount options
mokkafs.fuse.mount gives."""

from __future__ import annotations

import re
from pathlib import Path

from mokkafs.fuse import attrs, relay
from mokkafs.fuse.mount import options
from tests.helpers.mounts import REPO

SOURCE = "".join((REPO / "native" / name).read_text() for name in ("mokkafs_kmsg.c",
                                                                     "kmsg_relay.h"))


def defined(name: str) -> str:
    m = re.search(rf"^#define {name} (.+?)(?:\s*/\*.*)?$", SOURCE, re.M)
    assert m, f"the kmsg mount's C program defines no {name}"
    return m[1].strip()


def value(name: str) -> int:
    base, _, shift = defined(name).strip("()").replace("LL", "").partition(" << ")
    return int(base) << int(shift) if shift else int(base)


def test_the_sizes_and_bounds_are_the_packages() -> None:
    assert value("STREAM_SIZE") == attrs.STREAM_SIZE
    assert value("LARGEST") == relay.LARGEST
    assert value("REQUEST_SIZE") == relay.REQUEST.size and relay.REQUEST.format == "<QBqqqq"
    assert value("REPLY_SIZE") == relay.REPLY.size and relay.REPLY.format == "<Qiq"


def test_the_operations_are_relays() -> None:
    ops = re.search(r"enum \{ (.+?) \};", SOURCE)
    assert ops
    numbered = dict(part.split(" = ") for part in ops[1].split(", "))
    assert {name: int(n) for name, n in numbered.items()} == {
        "MOUNTED": relay.MOUNTED, "OPEN": relay.OPEN, "READ": relay.READ,
        "RELEASE": relay.RELEASE, "INTERRUPT": relay.INTERRUPT, "POLL": relay.POLL}
    assert value("NOTIFY") == relay.NOTIFY


def test_the_mount_options_are_the_views() -> None:
    path = Path("/run/mokkafs/node/dev/kmsg")
    given = defined("OPTIONS").strip('"') + str(path)
    assert set(given.split(",")) == options(path)
