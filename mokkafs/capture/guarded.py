"""The capture's view of a machine's tree below a root directory: the confined walk of
``mokkafs.capture.reader``, run in a disposable reader process (``mokkafs.capture.worker``),
with a time limit on every operation.

Each operation (a lookup, a read, a listing, with the path walk it needs) is one request to
the reader. The capture waits at most ``seconds`` for the answer. Past that, the path is
``Unreadable`` ("a read that took too long", "a listing that took too long"), the reader is
killed, and a fresh one serves the next operation. A FUSE daemon that never answers thus costs
``seconds`` per path it holds, and never hangs the capture. ``kind`` does not raise: the paths
it gave up on are kept in ``stalled`` for the capture's notes.
"""

from __future__ import annotations

import errno
from typing import Any, cast

from mokkafs.capture.reader import PAGE, Entry, Unreadable
from mokkafs.capture.worker import Late, Lost, Readers

READ = "a read that took too long"
LISTING = "a listing that took too long"
LOOKUP = "a lookup that took too long"
DIED = "unreadable (its reader died)"


class Root:
    """A machine's file tree below ``path`` ("/" for the host's own). Raises OSError when
    ``path`` is no directory it can open, or opening it takes longer than ``seconds``."""

    def __init__(self, path: str, limit: int = PAGE, seconds: float = 2.0) -> None:
        self.path = path
        self.limit = limit
        self.seconds = seconds
        self.stalled: list[Unreadable] = []
        self._readers = Readers(limit)
        try:
            self._readers.open(path, seconds)
        except Late:
            self._readers.close()
            raise OSError(errno.ETIMEDOUT, "opening it took too long") from None
        except Lost:
            self._readers.close()
            raise OSError(errno.EIO, "its reader died") from None
        except BaseException:
            self._readers.close()
            raise

    def close(self) -> None:
        self._readers.close()

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, late: str, method: str, rel: str, *args: object) -> Any:
        try:
            return self._readers.call(method, (rel, *args), self.seconds)
        except Late:
            raise Unreadable(rel, late) from None
        except Lost:
            raise Unreadable(rel, DIED) from None

    def resolve(self, rel: str, follow_last: bool = True) -> list[str]:
        """The components of ``rel`` with every symbolic link resolved inside the root.
        Raises Unreadable."""
        return cast(list[str], self._ask(LOOKUP, "resolve", rel, follow_last))

    def readlink(self, rel: str) -> str:
        return cast(str, self._ask(LOOKUP, "readlink", rel))

    def kind(self, rel: str) -> str:
        """"dir", "file", "link" (not followed), "other" or "absent" (also when the lookup
        took too long: then ``rel`` is in ``stalled``)."""
        try:
            return cast(str, self._ask(LOOKUP, "kind", rel))
        except Unreadable as exc:
            self.stalled.append(exc)
            return "absent"

    def listdir(self, rel: str) -> list[Entry]:
        """The entries of a directory, sorted, each with its kind (links not followed)."""
        return cast(list[Entry], self._ask(LISTING, "listdir", rel))

    def read(self, rel: str, limit: int | None = None) -> bytes:
        """At most ``limit`` bytes (default a page) of a regular file. Raises Unreadable:
        absent, not a regular file, larger than the limit, too slow, or not permitted."""
        return cast(bytes, self._ask(READ, "read", rel, self.limit if limit is None else limit))

    def text(self, rel: str) -> str:
        """A text attribute without its trailing newline. Raises Unreadable."""
        return self.read(rel).decode("utf-8", "replace").rstrip("\n")
