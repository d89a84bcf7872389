"""Serve the h100 view plus one file whose content function raises: ``python -m
tests.helpers.serve_broken MOUNTPOINT``. The adapter must answer EIO for that file alone."""

from __future__ import annotations

import sys
from itertools import chain
from pathlib import Path

import trio

from mokkafs.daemon import serve
from mokkafs.fuse.adapter import TreeHolder
from mokkafs.surfaces import describe
from mokkafs.tree.build import build
from mokkafs.tree.nodes import File
from tests.conftest import state_of


def explode(now: float) -> bytes:
    raise ZeroDivisionError("a surface bug")


def main() -> None:
    state = state_of("h100")
    tree = build(chain(describe(state), [File("broken", explode)]), 1, 0)
    holder = TreeHolder(tree)
    trio.run(lambda: serve(holder, Path(sys.argv[1]), announce="mokkafs: serving a broken file"))


if __name__ == "__main__":
    main()
