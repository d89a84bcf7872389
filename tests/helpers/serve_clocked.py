"""``python -m tests.helpers.serve_clocked CLOCK-FILE MOUNT-ARGS...``: ``mokkafs mount`` with the
same arguments, on a clock the test drives: every reading of the daemon's clock is the number
in CLOCK-FILE (seconds), so counters are exact functions of the time the test sets, and no
test waits for real time to pass."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from mokkafs.cli import parse_mount, setup_logging, wire
from mokkafs.serve.daemon import serve


def main() -> None:
    setup_logging()
    clock_file = Path(sys.argv[1])

    def clock() -> float:
        return float(clock_file.read_text())

    config, wiring = wire(parse_mount(sys.argv[2:]), clock=clock)
    trio.run(serve, config, wiring)


if __name__ == "__main__":
    main()
