"""Reading the view's kernel log in tests: an h100 node with a control socket, a follower
process (kmsg_follow.py) or util-linux ``dmesg`` over a mount's ``dev/kmsg``, faults applied
over the control socket, and the Xid records their lines hold."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from mokkafs.host.mountinfo import MountEntry, mounted_at
from mokkafs.serve.kmsg import BINARY
from tests.helpers.live import Live, live_mount
from tests.helpers.mounts import REPO, wait_for

RECORD = re.compile(r"(\d+),(\d+),(\d+),[-c];(.*)")
XID = re.compile(r"NVRM: Xid \(PCI:(\w{4}:\w\w:\w\w)\): (\d+), pid='<unknown>', "
                 r"name=<unknown>, ")


@contextmanager
def node(tmp_path: Path, mode: str | None = None, expect: Sequence[str] = ()
         ) -> Iterator[tuple[Live, Path]]:
    """An h100 node with a control socket, in ``mode`` (None: the suite's)."""
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    pinned = [] if mode is None else ["--cache-mode", mode]
    with live_mount(tmp_path, "h100", ["--control", str(control), *pinned],
                    expect=expect) as live:
        yield live, control


def kmsg_mount_of(mnt: Path) -> MountEntry | None:
    """The mount of its own over ``dev/kmsg``, if one is there."""
    stack = mounted_at(os.path.abspath(mnt / "dev/kmsg"))
    return stack[-1] if stack else None


def blocked_in_read(pid: int) -> bool:
    """Whether process ``pid`` (its main thread) waits in read(2) (x86_64's number 0)."""
    return _blocked_in(pid, {"0"})


def blocked_in_poll(pid: int) -> bool:
    """Whether process ``pid`` (its main thread) waits in poll(2) or ppoll(2) (x86_64's 7,
    271)."""
    return _blocked_in(pid, {"7", "271"})


def _blocked_in(pid: int, calls: set[str]) -> bool:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split(" ", 1)[0] in calls
    except OSError:
        return False


def forked_reader(fd: int) -> int:
    """A child process that reads ``fd`` (its parent's open file) once, then exits: its PID."""
    child = os.fork()
    if child == 0:  # pragma: no cover (the child)
        try:
            os.read(fd, 8192)
        finally:
            os._exit(0)
    return child


class Lines:
    """A process's output lines, read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._q.put(line.rstrip("\n"))

    def until(self, done: Callable[[list[str]], bool], what: str,
              timeout: float = 30) -> list[str]:
        def more() -> bool:
            while not self._q.empty():
                self.lines.append(self._q.get())
            return done(self.lines)
        wait_for(more, timeout, what)
        return self.lines


@contextmanager
def running(*argv: str) -> Iterator[Lines]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=REPO)
    lines = Lines(process)
    try:
        yield lines
    finally:
        process.terminate()  # a read waiting in the daemon answers EINTR: it ends
        process.wait(timeout=30)
        lines.pump.join(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


def follower(mount: Path, where: str = "end") -> AbstractContextManager[Lines]:
    return running(sys.executable, "-m", "tests.helpers.kmsg_follow", str(mount / "dev/kmsg"),
                   where)


def dmesg(mount: Path, *args: str) -> list[str]:
    """util-linux dmesg, reading /dev/kmsg: the view's, bound over it in a namespace."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$0/dev/kmsg" /dev/kmsg && exec dmesg "$@"', str(mount), *args]


def apply(control: Path, tmp: Path, faults: str) -> None:
    path = tmp / f"faults-{abs(hash(faults))}.yaml"
    path.write_text("faults:\n" + faults)
    out = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control", str(control),
                          "apply", str(path)], capture_output=True, text=True, cwd=REPO,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def field(record: str, i: int) -> int:
    """Field ``i`` of a kmsg record (1: seq, 2: usec)."""
    m = RECORD.fullmatch(record.rstrip("\n"))
    assert m, record
    return int(m[i + 1])


def xids(lines: list[str]) -> list[tuple[str, int]]:
    return [(m[1], int(m[2])) for line in lines if (m := XID.search(line))]


def kmsg_processes(daemon: int) -> list[int]:
    """The PIDs of daemon ``daemon``'s kmsg mount processes (serve.kmsg)."""
    out = []
    for task in Path(f"/proc/{daemon}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue  # ended meanwhile
            if cmdline[0] == str(BINARY).encode():
                out.append(int(pid))
    return out
