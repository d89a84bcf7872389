"""Writers and readers of one PF and one GPU at once, as issue 37's reviewer ran them:
``python -m tests.helpers.write_stress MOUNT ROUNDS``. Four threads each write a PF's
``sriov_numvfs`` (4, 0), its ``sriov_drivers_autoprobe`` (0, 1) and a GPU's ``driver_override``
(a name, nothing), ``ROUNDS`` times; two threads list both directories and read the PF's
attributes until the writers end. Every operation done prints one byte to stdout, so a caller
sees progress stop; the exit status is 0 once every thread ended (an errno a write gets is
the write's answer, not a failure: a numvfs of 4 over 4 set by another thread is EBUSY)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

PF = "sys/bus/pci/devices/0000:18:00.0"
GPU_DRIVER = "sys/bus/pci/drivers/nvidia"


def main(mount: Path, rounds: int) -> int:
    pf = mount / PF
    gpu = sorted(p for p in (mount / GPU_DRIVER).iterdir() if p.name.startswith("0000:"))[0]
    lock = threading.Lock()
    failures: list[BaseException] = []

    def tick() -> None:
        with lock:
            os.write(1, b".")

    def write(path: Path, values: tuple[bytes, ...]) -> None:
        for _ in range(rounds):
            for value in values:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, value)
                except OSError:
                    pass
                finally:
                    os.close(fd)
                tick()

    writers = [threading.Thread(target=write, args=(path, values)) for _ in range(4)
               for path, values in ((pf / "sriov_numvfs", (b"4\n", b"0\n")),
                                    (pf / "sriov_drivers_autoprobe", (b"0\n", b"1\n")),
                                    (gpu / "driver_override", (b"vfio-pci\n", b"\n")))]
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            os.listdir(pf)
            (pf / "sriov_numvfs").read_bytes()
            (pf / "sriov_drivers_autoprobe").read_bytes()
            os.listdir(gpu)
            tick()

    def guarded(fn: threading.Thread) -> threading.Thread:
        target = fn.run

        def run() -> None:
            try:
                target()
            except BaseException as exc:
                failures.append(exc)
        fn.run = run  # type: ignore[method-assign]
        return fn

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in (*writers, *readers):
        guarded(thread).start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in readers:
        thread.join()
    for exc in failures:
        print(f"\n{type(exc).__name__}: {exc}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
