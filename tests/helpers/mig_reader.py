"""A reader of one GPU's MIG capabilities that loops until told to stop (the swap tests run it
beside profile swaps): each pass walks ``ROOT/proc/driver/nvidia/capabilities/gpu<N>/mig`` and
lists ``ROOT/dev/nvidia-caps``, reading every access file, and writes one JSON line: when the
pass began and ended, each file's bytes (or its errno) and the cap nodes' minors.

    python -m tests.helpers.mig_reader ROOT GPU OUT STOP
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def walk(top: str, files: dict[str, str]) -> None:
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError as exc:
        files[top] = f"errno {exc.errno}"
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            walk(entry.path, files)
            continue
        try:
            with open(entry.path, "rb") as f:
                files[entry.path] = f.read().decode()
        except OSError as exc:
            files[entry.path] = f"errno {exc.errno}"


def one_pass(root: str, gpu: int) -> dict[str, object]:
    start = time.monotonic()
    files: dict[str, str] = {}
    walk(f"{root}/proc/driver/nvidia/capabilities/gpu{gpu}/mig", files)
    minors = []
    for entry in os.scandir(f"{root}/dev/nvidia-caps"):
        try:
            minors.append(os.minor(entry.stat(follow_symlinks=False).st_rdev))
        except OSError:
            minors.append(-1)
    return {"start": start, "end": time.monotonic(),
            "files": {os.path.relpath(k, root): v for k, v in files.items()},
            "minors": sorted(minors)}


def passed_since(out: Path, when: float) -> bool:
    """Whether the reader wrote a pass that began at ``when`` or later."""
    for line in out.read_text().splitlines()[::-1]:
        try:
            if json.loads(line)["start"] >= when:
                return True
        except ValueError:  # (a line being written)
            continue
    return False


def main() -> None:
    root, gpu, out, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(out, "w") as f:
        while not os.path.exists(stop):
            f.write(json.dumps(one_pass(root, gpu)) + "\n")
            f.flush()  # (a test waits for a pass that began after each change)


if __name__ == "__main__":
    main()
