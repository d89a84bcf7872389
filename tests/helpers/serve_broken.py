"""Serve the h100 view plus one file whose content function raises: ``python -m
tests.helpers.serve_broken MOUNTPOINT``. The adapter must answer EIO for that file alone.
The broken surface comes in through the daemon's wiring, as any collaborator can."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import trio

from mokkafs.serve.daemon import Config, Wiring, serve
from mokkafs.source.file import FileSource
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.nodes import File, Node
from tests.conftest import state_of
from tests.helpers.mounts import SHIPPED_PROFILES


def explode(now: float) -> bytes:
    raise ZeroDivisionError("a surface bug")


def broken_surface(state: State) -> Iterator[Node]:
    yield File("broken", explode)


def main() -> None:
    source = FileSource(SHIPPED_PROFILES / "h100.yaml", lambda text, name: state_of(Path(name)))
    wiring = Wiring(source, surfaces=(*SURFACES, ("broken", broken_surface)),
                    announce=lambda *_: "mokkafs: serving a broken file")
    trio.run(serve, Config(Path(sys.argv[1])), wiring)


if __name__ == "__main__":
    main()
