"""The control socket: ``mokkafs mount --control PATH`` serves it, ``mokkafs fault --control
PATH apply|clear|list`` talks to it.

A Unix stream socket, mode 0600, in a directory no one but its owner may write (a socket in a
shared directory could be replaced under the daemon); callers other than root and the daemon's
own user are refused by their credentials too. One request per connection, one JSON line each
way: ``{"op": "apply", "file": NAME, "text": YAML}``, ``{"op": "clear", "names": [...]}``,
``{"op": "list"}`` (``mokkafs writes``: ``{"op": "writes"}``, ``{"op": "clear-writes"}``); the
answer is ``{"ok": true, "faults": [...]}`` or ``{"ok": false,
"error": MESSAGE, "exit": STATUS}``. Like the metrics endpoint it cannot starve the daemon:
a few connections at once, each bounded in size and time.
"""

from __future__ import annotations

import errno
import importlib
import json
import logging
import os
import socket
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from mokkafs.errors import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    ControlError,
    MokkafsError,
    ProfileError,
    UsageError,
    internal_error,
)
from mokkafs.faults.book import FaultBook
from mokkafs.faults.schedule import remaining
from mokkafs.profile.resolve import MAX_PROFILE_BYTES
from mokkafs.serve import writes
from mokkafs.serve.swap import Swapper
from mokkafs.state import State

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 4
REQUEST_TIMEOUT = 10.0
MAX_REQUEST = MAX_PROFILE_BYTES + 4096  # a fault file is bounded like a profile


def check_apart(path: Path, mountpoint: Path, flag: str = "--control") -> None:
    """Refuse a socket (or a state file) inside the mountpoint (the view covers it; checking
    it would ask the daemon itself) or beside it: a CDI spec binds the mountpoint's directory
    into every container given the view, and a container's root is root to the socket too.
    (With ``--cdi-dir``, ``check_parent`` refuses anything else in that directory; the socket
    would only appear after that check.)"""
    mnt = Path(os.path.abspath(mountpoint))
    if Path(os.path.abspath(path)).is_relative_to(mnt):
        raise ControlError(f"{flag} {path}: inside the mountpoint, which the view covers "
                           "once mounted; put it in a directory of its own (e.g. "
                           "/run/mokkafs-control/socket)")
    shared = mnt.parent
    if Path(os.path.abspath(path.parent)) == shared:
        raise ControlError(f"{flag} {path}: beside the mountpoint, in the directory "
                           "containers given the view are handed; put it in a directory of its "
                           "own (e.g. /run/mokkafs-control/socket)")


def check_private_dir(directory: Path, what: str) -> None:
    """Refuse a directory others may write (what is in it could be replaced under the
    daemon); a missing one is created, mode 0700. ``what`` names it in the error."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(directory)
    except OSError as exc:
        raise ControlError(f"{what}: its directory cannot be used: {exc.strerror}") from None
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ControlError(f"{what}: {directory} may be written by others; use a directory "
                           "only root can write (e.g. /run/mokkafs)")


def check_place(path: Path) -> None:
    """Refuse a socket path whose directory others may write, or that holds something else.
    A missing directory is created, mode 0700."""
    check_private_dir(path.parent, f"--control {path}")
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode):
        raise ControlError(f"--control {path}: something other than a socket is there")
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:  # nobody listens: a killed daemon's socket
            os.unlink(path)
            return
    raise ControlError(f"--control {path}: another daemon answers on it")


class Refused(MokkafsError):
    """What the daemon answered a request it did not carry out, with the status to exit."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


async def _listen(path: Path) -> trio.socket.SocketType:
    """The listening socket, 0600 before anyone may connect."""
    check_place(path)
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(MAX_CONNECTIONS)
    except OSError as exc:
        sock.close()
        raise ControlError(f"--control {path}: {exc.strerror or exc}") from None
    return sock


def _peer_uid(sock: trio.socket.SocketType) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def listing(swapper: Swapper) -> list[dict[str, Any]]:
    """The node's faults as served, each with the seconds until it ends as of now (None:
    until cleared)."""
    now, specs = swapper.clock(), {f.name: f for f in swapper.state.faults}
    return [{**f, "remaining": remaining(specs[str(f["name"])], now)
             if f["name"] in specs else None} for f in swapper.status.faults]


def _import_schema() -> None:
    """The profile's schema, pydantic with it, and what checks faults and MIG layouts: a
    daemon at rest never holds them, its first fault or MIG change imports them. Run in a
    worker thread, so that the loop serves requests meanwhile."""
    for module in ("mokkafs.profile.load", "mokkafs.profile.faults", "mokkafs.profile.mig"):
        importlib.import_module(module)


async def handle(request: dict[str, Any], swapper: Swapper) -> dict[str, Any]:
    op = request.get("op")
    if op == "list":
        return {"ok": True, "faults": listing(swapper), "writes": swapper.layers.writes.listing()}
    if op in ("mig", "apply"):
        await trio.to_thread.run_sync(_import_schema)
    if op == "mig":  # mokkafs mig (mokkafs.serve.mig)
        from mokkafs.serve.mig import handle as mig_handle
        return await mig_handle(request, swapper)
    if op in ("writes", "clear-writes"):  # mokkafs writes list|clear (docs/writes.md)
        cleared = await writes.clear(swapper) if op == "clear-writes" else 0
        return {"ok": True, "writes": swapper.layers.writes.listing(), "cleared": cleared}
    if op == "apply":
        from mokkafs.profile.load import parse_as  # imported by _import_schema
        from mokkafs.profile.schema import FaultFile

        filename = str(request.get("file", "the fault file"))
        document, _ = parse_as(FaultFile, str(request.get("text", "")), filename)

        def add(book: FaultBook, profile: State) -> None:
            book.apply(document.faults, profile, filename)

        await swapper.refault(add)
    elif op == "clear":
        names = [str(n) for n in request.get("names", [])]

        def clear(book: FaultBook, profile: State) -> None:
            book.clear(names, profile)

        await swapper.refault(clear)
    else:
        return {"ok": False, "error": f"unknown request {op!r}", "exit": EXIT_USAGE}
    return {"ok": True, "faults": listing(swapper)}


async def _serve_one(conn: trio.socket.SocketType, swapper: Swapper) -> None:
    with conn:
        if _peer_uid(conn) not in (0, os.geteuid()):
            return
        data = b""
        with trio.move_on_after(REQUEST_TIMEOUT):
            while not data.endswith(b"\n") and len(data) <= MAX_REQUEST:
                chunk = await conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        if not data.endswith(b"\n"):
            return
        try:
            answer = await handle(json.loads(data), swapper)
        except (ProfileError, UsageError) as exc:
            answer = {"ok": False, "error": str(exc), "exit": exc.exit_code}
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            answer = {"ok": False, "error": f"malformed request: {exc}", "exit": EXIT_USAGE}
        except Exception as exc:  # a bug: this request fails, the daemon serves on
            log.exception("a control request failed")
            answer = {"ok": False, "error": str(internal_error("the control request", exc)),
                      "exit": EXIT_INTERNAL}
        out = json.dumps(answer).encode() + b"\n"
        with trio.move_on_after(REQUEST_TIMEOUT):
            while out:
                out = out[await conn.send(out):]


async def serve_control(path: Path, swapper: Swapper,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    listener = await _listen(path)
    with listener, _removed_after(path):
        log.info("control socket at %s", path)
        task_status.started()
        slots = trio.Semaphore(MAX_CONNECTIONS)
        async with trio.open_nursery() as nursery:
            while True:
                conn, _ = await listener.accept()
                if slots.value == 0:
                    conn.close()
                    continue

                async def one(c: trio.socket.SocketType = conn) -> None:
                    async with slots:
                        try:
                            await _serve_one(c, swapper)
                        except OSError as exc:  # the client went away
                            log.info("a control client went away: %s", exc)

                nursery.start_soon(one)


@contextmanager
def _removed_after(path: Path) -> Iterator[None]:
    try:
        yield
    finally:
        with suppress(FileNotFoundError):
            os.unlink(path)


def request(path: Path, message: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """One request to a daemon's control socket (the client side, blocking)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
            sock.sendall(json.dumps(message).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            reason = "no daemon serves it" if exc.errno in (errno.ENOENT, errno.ECONNREFUSED) \
                else exc.strerror or str(exc)
            raise ControlError(f"--control {path}: {reason}") from None
    try:
        answer: dict[str, Any] = json.loads(data)
    except ValueError:
        raise ControlError(f"--control {path}: the daemon gave no answer") from None
    if not answer.get("ok"):
        raise Refused(str(answer.get("error")), int(answer.get("exit", EXIT_USAGE)))
    return answer
