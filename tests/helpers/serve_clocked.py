"""``python -m tests.helpers.serve_clocked CLOCK-FILE [--stepped-dir-timeout S] MOUNT-ARGS...``:
``mokkafs mount`` with the same arguments, on a clock the test drives: every reading of the
daemon's clock is the number in CLOCK-FILE (seconds), so counters and fault transitions are
exact functions of the time the test sets, and no test waits for real time to pass. (The daemon
waits for a fault transition by looking at the file every few milliseconds: only here, where
time is the test's.) The kernel's attribute timeouts run on real time: ``--stepped-dir-timeout``
shortens the one of directories of counters (``mokkafs.fuse.refresh.STEPPED_DIR_TIMEOUT``) so a
test can see it end."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import trio

from mokkafs.cli import parse_mount
from mokkafs.fuse import refresh
from mokkafs.serve.daemon import serve
from mokkafs.serve.process import setup_logging
from mokkafs.serve.wiring import wire


def main() -> None:
    setup_logging()
    clock_file = Path(sys.argv[1])
    args = sys.argv[2:]
    if args[:1] == ["--stepped-dir-timeout"]:
        refresh.STEPPED_DIR_TIMEOUT = float(args[1])
        args = args[2:]

    def clock() -> float:
        while True:  # a test rewriting the file may be caught half way: read it again
            try:
                return float(clock_file.read_text())
            except ValueError:
                continue

    async def sleep_until(when: float) -> None:
        while clock() < when:  # noqa: ASYNC110 (the file changes under us; no event to wait on)
            await trio.sleep(0.005)

    config, wiring = wire(parse_mount(args), clock=clock)
    trio.run(serve, config, replace(wiring, sleep_until=sleep_until))


if __name__ == "__main__":
    main()
