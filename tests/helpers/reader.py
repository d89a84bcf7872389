"""A reader process for consistency tests: ``python -m tests.helpers.reader LIST OUT STOP``.

Reads every path in LIST (one per line) in a loop until the file STOP exists, and writes one
JSON line per read to OUT: start and end (CLOCK_MONOTONIC), path, and the content (hex) or the
errno.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    paths = [p for p in Path(sys.argv[1]).read_text().splitlines() if p]
    stop = sys.argv[3]
    with open(sys.argv[2], "w") as out:
        while not os.path.exists(stop):
            for path in paths:
                start = time.monotonic()
                try:
                    with open(path, "rb", buffering=0) as f:
                        data = f.read(65536)
                    result = {"data": data.hex()}
                except OSError as exc:
                    result = {"errno": exc.errno}
                out.write(json.dumps({"start": start, "end": time.monotonic(), "path": path,
                                      **result}) + "\n")


if __name__ == "__main__":
    main()
