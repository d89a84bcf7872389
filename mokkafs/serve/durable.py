"""The state file: what a daemon changed at run time (faults applied over the control socket,
profile faults cleared, MIG modes and layouts, sysfs writes), kept so the next daemon (after a
kill, an OOM kill, an upgrade, a reboot) goes on from there. The document is
``mokkafs.serve.record``'s; this is the file.

It lives in ``--state-dir`` (default: the control socket's directory), a directory only root
may write, as ``<the mountpoint, escaped as systemd-escape --path does>.json``:
``/run/mokkafs/node`` keeps ``run-mokkafs-node.json``. Written atomically (a temporary file,
fsync, rename, fsync of the directory), mode 0600. Read only if it is a regular file (no
symlink, no FIFO), owned by root (or the daemon's user), written by its owner alone, and
small; a file that fails any check, or whose content is not a state file this mokkafs reads,
is refused: renamed aside to ``<name>.refused.<UTC time>`` (so it is neither lost nor read
again; the ``MAX_REFUSED`` newest are kept), with a warning, and the daemon starts from the
profile alone. So is a file whose layers do not apply to the profile at start (a MIG layout
``mokkafs mig`` could not have made, or anything else that fails to build): a state file never
stops a start.

The document's schema (pydantic) is imported at the first read or write of a file: a daemon
with no state to keep never loads it.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from mokkafs.faults.schedule import remaining
from mokkafs.layers.layer import StateFileError
from mokkafs.layers.registry import Layers, Restored
from mokkafs.obs.status import Status
from mokkafs.serve.control import check_apart, check_private_dir
from mokkafs.state import State

log = logging.getLogger(__name__)

MAX_BYTES = 4 << 20  # a full book of the largest faults is well under a megabyte
MAX_REFUSED = 8  # refused files kept beside the state file, the newest
SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def file_name(mountpoint: Path) -> str:
    """The state file's name for a mountpoint: its absolute path as ``systemd-escape --path``
    writes it, then ``.json``."""
    path = os.path.normpath(os.path.abspath(mountpoint)).strip("/")
    escaped = "".join("-" if c == "/" else c if c in SAFE and not (i == 0 and c == ".")
                      else "".join(f"\\x{b:02x}" for b in c.encode())
                      for i, c in enumerate(path))
    return f"{escaped or '-'}.json"


def boot_id(proc: Path) -> str:
    try:
        return (proc / "sys/kernel/random/boot_id").read_text().strip()[:64]
    except OSError:
        return ""  # unknown: every restore is then taken as after a reboot


def read_safely(path: Path) -> str | None:
    """The file's text; None when there is none. Raises ``StateFileError`` for a file that is
    not safe to believe."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError("a symbolic link; the state file is a regular file") from None
        raise StateFileError(f"cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError("not a regular file")
        if st.st_uid not in (0, os.geteuid()):
            raise StateFileError(f"owned by uid {st.st_uid}, not root")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise StateFileError(f"mode {stat.S_IMODE(st.st_mode):04o}: others may write it")
        if st.st_size > MAX_BYTES:
            raise StateFileError(f"{st.st_size} bytes, more than the {MAX_BYTES} a state "
                                 "file holds")
        data = b""
        while len(data) <= MAX_BYTES and (chunk := os.read(fd, 1 << 20)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise StateFileError(f"more than the {MAX_BYTES} bytes a state file holds")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise StateFileError("not UTF-8 text") from None


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, mode 0600: whole or not at all, and on disk when it
    returns."""
    tmp = path.with_name(f".{path.name}.tmp")
    with suppress(FileNotFoundError):
        os.unlink(tmp)  # a killed daemon's
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dirfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


@dataclass
class StateFile:
    """One daemon's state file. Times are on the daemon's clock (CLOCK_MONOTONIC, unless a
    test drives its own)."""

    path: Path
    boot_id: str
    _written: str | None = None  # the last text written, without its time

    @classmethod
    def prepare(cls, state_dir: Path, mountpoint: Path, proc: Path) -> StateFile:
        """Check (or make, 0700) the directory; raises ``ControlError`` if others may write
        it."""
        check_apart(state_dir / file_name(mountpoint), mountpoint, "--state-dir")
        check_private_dir(state_dir, f"--state-dir {state_dir}")
        return cls(state_dir / file_name(mountpoint), boot_id(proc))

    def load(self, clock: float) -> tuple[Restored | None, str | None]:
        """What the file keeps (None: no file, or refused), and why it was refused."""
        try:
            text = read_safely(self.path)
            if text is None:
                return None, None
            from mokkafs.serve.record import restore

            restored = restore(text, self.boot_id, clock, time.time())
        except StateFileError as exc:
            return None, self.set_aside(str(exc))
        return restored, None

    def set_aside(self, why: str) -> str:
        """Rename the file aside, never over one set aside before (the oldest go beyond
        ``MAX_REFUSED``), and log ``why``; returns the log line."""
        prefix = f"{self.path.name}.refused"
        try:
            older = sorted(n for n in os.listdir(self.path.parent)
                           if n == prefix or n.startswith(prefix + "."))
            for name in older[:max(0, len(older) - MAX_REFUSED + 1)]:
                os.unlink(self.path.parent / name)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            aside = self.path.with_name(f"{prefix}.{stamp}")
            while os.path.lexists(aside):
                aside = aside.with_name(aside.name + "+")
            os.rename(self.path, aside)
            kept = f"renamed to {aside.name}"
        except OSError as err:
            kept = f"left in place ({err.strerror})"
        line = f"state file {self.path} refused: {why}; {kept}; serving the profile alone"
        log.warning("%s", line)
        return line

    def save(self, layers: Layers, state: State, clock: float) -> None:
        """Keep ``layers`` (with its faults' origins as ``state`` has them), if they changed.
        Layers that keep nothing leave no file: the next daemon then has nothing to read (and
        never loads the document's schema)."""
        if layers.empty:
            with suppress(FileNotFoundError):
                os.unlink(self.path)
            self._written = None
            return
        from mokkafs.serve.record import record

        unchanged = record(layers, state, self.boot_id, 0.0, 0.0)
        if unchanged == self._written:
            return
        write_atomically(self.path, record(layers, state, self.boot_id, clock, time.time()))
        self._written = unchanged


Built = TypeVar("Built")


def restore_at_start(state_file: StateFile | None, profile: State, now: float,
                     status: Status, build: Callable[[State], Built],
                     ) -> tuple[State, Layers | None, Built]:
    """``profile`` with what the state file keeps from the daemon before, its layers, and
    what ``build`` makes of it; each fault it restores logged and recorded in ``status``, as
    is a refusal. A file whose layers fail to apply (or to build) is set aside, and the
    profile alone is built."""
    if state_file is None:
        return profile, None, build(profile)
    status.state_file = str(state_file.path)
    restored, refused = state_file.load(now)
    if restored is not None:
        from mokkafs.serve.record import restored_state

        try:
            state = restored_state(profile, restored, now)
            built = build(state)
        except StateFileError as exc:
            restored, refused = None, state_file.set_aside(str(exc))
        except Exception as exc:  # a layer the checks let by: the start goes on without it
            log.debug("the state file's layers do not build", exc_info=True)
            restored, refused = None, state_file.set_aside(
                f"its layers do not apply to the profile ({type(exc).__name__}: {exc})")
    if refused is not None:
        status.state_refused = refused
        status.failed(refused)
    if restored is None:
        return profile, None, build(profile)
    after = " after a reboot" if restored.rebooted else ""
    for line in restored.ended:
        log.info("not restored from %s: %s", state_file.path, line)
    layouts, writes = len(restored.layers.mig.layouts), len(restored.layers.writes.writes)
    if layouts or writes:
        log.info("restored %d MIG layouts and %d sysfs writes from %s", layouts, writes,
                 state_file.path)
    if restored.layers.mig.modes:
        log.info("restored %d MIG modes from %s", len(restored.layers.mig.modes),
                 state_file.path)
    for f in state.faults:
        if f.restored:
            left = remaining(f, now)
            log.info("restored fault %s (%s on %s) from %s%s: %s", f.name, f.kind, f.target,
                     state_file.path, after,
                     "until cleared" if left is None else f"{left:.0f} s left")
            status.restored.append(f.name)
    try:
        state_file.save(restored.layers, state, now)  # as of this boot and this clock
    except OSError as exc:
        log.error("the state file cannot be written: %s", exc)
        status.failed(f"the restored faults serve, but the state file cannot be written: {exc}")
    return state, restored.layers, built
