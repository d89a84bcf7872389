"""``python -m tests.helpers.serve_broken MOUNT-ARGS...``: ``mokkafs mount`` with the same
arguments and one broken surface added through the daemon's wiring, as any collaborator can be:

- ``broken``: a file whose content function raises (the adapter answers EIO for it alone);
- a State with exactly 4 GPUs (the t4 profile) makes the surface raise while the tree is
  built, and one with 2 GPUs makes it block for ``BLOCK_SECONDS`` (a build the daemon must
  abandon at shutdown); it writes ``building`` two levels above the mountpoint when it
  starts blocking.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import trio

from mokkafs.cli import parse_mount
from mokkafs.serve.daemon import serve
from mokkafs.serve.process import raise_fd_limit, setup_logging
from mokkafs.serve.wiring import wire
from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import File, Node

BLOCK_SECONDS = 600.0


def explode(now: float) -> bytes:
    raise ZeroDivisionError("a surface bug")


def main() -> None:
    setup_logging()
    config, wiring = wire(parse_mount(sys.argv[1:]))
    marker = config.mountpoint.parent.parent / "building"

    def broken_surface(state: State) -> Iterator[Node]:
        gpus = sum(1 for f in state.functions if f.kind == "gpu")
        if gpus == 4:
            raise ZeroDivisionError("a surface bug while building")
        if gpus == 2:
            marker.touch()
            time.sleep(BLOCK_SECONDS)
        yield File("broken", explode)

    wiring.surfaces = (*wiring.surfaces, stateless("broken", broken_surface, ("functions",), ()))
    raise_fd_limit()
    trio.run(serve, config, wiring)


if __name__ == "__main__":
    main()
