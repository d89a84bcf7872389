"""A /dev/kmsg follower, as a log monitor reads the kernel log (node-problem-detector's
kmsg watcher, pkg/systemlogmonitor/logwatchers/kmsg; NVSentinel's syslog health monitor):
open blocking, seek (``end``: SEEK_END, to follow what comes; ``start``: SEEK_DATA), then one
read per record. Prints ``ready`` once seeked, then for each record the clock reading
(CLOCK_MONOTONIC, the clock the record's usec counts on) and the record; ``EPIPE`` when the
ring overtook it; the errno's name, and exit status 1, when a read fails otherwise.
Usage: python -m tests.helpers.kmsg_follow PATH end|start"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time


def main() -> None:
    path, where = sys.argv[1], sys.argv[2]
    # Ended by SIGTERM even as a container's PID 1 (which ignores signals it has no handler
    # for): a read waiting in the daemon answers EINTR, then the handler runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    fd = os.open(path, os.O_RDONLY)
    os.lseek(fd, 0, os.SEEK_END if where == "end" else os.SEEK_DATA)
    print("ready", flush=True)
    while True:
        try:
            record = os.read(fd, 8192)
        except BrokenPipeError:
            print("EPIPE", flush=True)
            continue
        except OSError as exc:
            print(errno.errorcode.get(exc.errno or 0, str(exc)), flush=True)
            sys.exit(1)
        if not record:
            print("EOF", flush=True)
            return
        print(f"{time.monotonic():.6f} {record.decode().rstrip()}", flush=True)


if __name__ == "__main__":
    main()
