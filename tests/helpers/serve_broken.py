"""Serve the h100 view plus one file whose content function raises: ``python -m
tests.helpers.serve_broken MOUNTPOINT``. The adapter must answer EIO for that file alone."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import trio

import mokkafs.surfaces
from mokkafs.daemon import Daemon
from mokkafs.source.file import FileSource
from mokkafs.state import State
from mokkafs.tree.nodes import File, Node
from tests.conftest import state_of
from tests.helpers.mounts import SHIPPED_PROFILES


def explode(now: float) -> bytes:
    raise ZeroDivisionError("a surface bug")


def broken_surface(state: State) -> Iterator[Node]:
    yield File("broken", explode)


def main() -> None:
    mokkafs.surfaces.SURFACES = (*mokkafs.surfaces.SURFACES, ("broken", broken_surface))
    source = FileSource(SHIPPED_PROFILES / "h100.yaml", lambda path, gen: state_of(path))
    daemon = Daemon(source, Path(sys.argv[1]),
                    announce=lambda *_: "mokkafs: serving a broken file")
    trio.run(daemon.serve)


if __name__ == "__main__":
    main()
