"""The CDI directory as a daemon holds it: opened once (never through a symbolic link), each
spec written there by name relative to that descriptor, and removed only when it still holds
the very bytes the daemon wrote (``SpecRef``, what the daemon's record keeps of it).

A directory swapped for another (or for a link) while the daemon serves is noticed before
every write, which is then refused; the spec is still retracted from the directory it was
published to, wherever that now is.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from mokkafs.errors import CdiError

log = logging.getLogger(__name__)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class SpecRef:
    """A spec a daemon wrote: its path, its directory's (st_dev, st_ino), and the SHA-256
    of each content it may hold (two while one replaces the other)."""

    path: str
    dir: tuple[int, int]
    sha256: tuple[str, ...]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _open_dir(path: Path) -> int:
    try:
        return os.open(path, _DIR)
    except OSError as exc:
        raise CdiError(f"CDI directory {path}: {exc.strerror} (a symbolic link is never "
                       "followed); give --cdi-dir a directory the runtime reads "
                       "(/etc/cdi or /var/run/cdi)") from None


class SpecDir:
    """The directory of one spec path, held open."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)

    @classmethod
    def open(cls, path: Path) -> SpecDir:
        """Open (creating it, mode 0755, if missing) the directory of the spec ``path``.
        Raises ``CdiError``."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CdiError(f"CDI directory {path.parent}: {exc.strerror}; give --cdi-dir a "
                           "directory the runtime reads (/etc/cdi or /var/run/cdi)") from None
        return cls(path, _open_dir(path.parent))

    @classmethod
    def reopen(cls, ref: SpecRef) -> SpecDir | None:
        """The directory ``ref`` was written to, if its path still names it."""
        try:
            held = cls(Path(ref.path), os.open(Path(ref.path).parent, _DIR))
        except OSError:
            return None
        if held.identity != ref.dir:
            held.close()
            return None
        return held

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def current(self) -> str | None:
        """The SHA-256 of what the spec's name holds now (None: nothing; "": not a file)."""
        try:
            fd = os.open(self.path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError:
            return ""  # a link, or something else that cannot be read as a spec
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return ""
            with os.fdopen(os.dup(fd), "rb") as f:
                return digest(f.read())
        finally:
            os.close(fd)

    def check_path(self, what: str) -> None:
        """Raise ``CdiError`` (``what`` first) unless the directory's path still names this
        directory."""
        try:
            st = os.stat(self.path.parent, follow_symlinks=False)
        except OSError as exc:
            raise CdiError(f"{what}: {self.path.parent}: {exc.strerror}") from None
        if (st.st_dev, st.st_ino) != self.identity:
            raise CdiError(f"{what}: {self.path.parent} is no longer the directory mokkafs "
                           "published to (it was replaced, or by a symbolic link); nothing "
                           "is written there")

    def write(self, data: bytes) -> None:
        """Write ``data`` under a fresh name and rename it onto the spec's (a runtime sees
        the old spec or the new one, never half of one). Raises ``OSError``."""
        tmp = f".mokkafs-{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        try:
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(data)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        try:
            os.rename(tmp, self.path.name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError:
            os.unlink(tmp, dir_fd=self.fd)
            raise

    def remove_if(self, sha256: tuple[str, ...]) -> bool:
        """Remove the spec if it holds one of these contents; True when it did."""
        now = self.current()
        if now is None or now not in sha256:
            if now is not None:
                log.warning("left %s: it is not the spec this daemon wrote", self.path)
            return False
        os.unlink(self.path.name, dir_fd=self.fd)
        return True
