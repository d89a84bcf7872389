"""The control socket: ``mokkafs mount --control PATH`` serves it, ``mokkafs fault``, ``mokkafs
mig`` and ``mokkafs writes`` (``--control PATH``) talk to it.

A Unix stream socket, mode 0600, in a directory no one but its owner may write (a socket in a
shared directory could be replaced under the daemon); callers other than root and the daemon's
own user are refused by their credentials too. One request per connection, one JSON line each
way. ``{"op": "list"}`` lists the layers that say so (the faults and the writes); every other
request is a run-time layer's (``Layer.ops``, found through ``mokkafs.layers.registry``):
``{"op": "apply", "file": NAME, "text": YAML}``, ``{"op": "clear", "names": [...]}`` (the
faults), ``{"op": "mig", "action": ..., ...}`` (``mokkafs mig``: list, cgi with optional
``starts``, dgi, cci, dci, and mode), ``{"op": "writes"}``,
``{"op": "clear-writes"}`` (``mokkafs writes``). The answer is ``{"ok": true, LAYER: [...]}``
(``"faults"``, ``"mig"``, ``"writes"``: the layer's listing after the change) or ``{"ok":
false, "error": MESSAGE, "exit": STATUS}``. Like the metrics endpoint it cannot starve the
daemon: a few connections at once, each bounded in size and time.
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
from mokkafs.layers.registry import LAYERS
from mokkafs.profile.resolve import MAX_PROFILE_BYTES
from mokkafs.serve.swap import Swapper
from mokkafs.serve.tell import told

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


def _import_schema() -> None:
    """The profile's schema, pydantic with it, and what checks faults and MIG layouts: a
    daemon at rest never holds them, its first fault or MIG change imports them. Run in a
    worker thread, so that the loop serves requests meanwhile."""
    for module in ("mokkafs.profile.load", "mokkafs.profile.faults", "mokkafs.profile.mig"):
        importlib.import_module(module)


async def handle(request: dict[str, Any], swapper: Swapper) -> dict[str, Any]:
    op = request.get("op")
    if op == "list":  # mokkafs fault list
        return {"ok": True, **{layer.name: layer.listing(swapper.layers[layer], swapper)
                               for layer in LAYERS if layer.listed}}
    layer = next((la for la in LAYERS if isinstance(op, str) and op in la.ops), None)
    if layer is None or not isinstance(op, str):
        return {"ok": False, "error": f"unknown request {op!r}", "exit": EXIT_USAGE}
    if layer.ops[op].compiles:
        await trio.to_thread.run_sync(_import_schema)
    answer: dict[str, Any] = {"ok": True}
    edit = layer.asked(op, request, answer)
    if edit is not None:
        await told(await swapper.change(layer, edit, layer.ops[op].reason))
    answer[layer.name] = layer.listing(swapper.layers[layer], swapper)
    return answer


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
        # MAX_CONNECTIONS are served at once; the next caller waits in the listen backlog
        # for a slot (each request is bounded in time) instead of being hung up on, which a
        # client could not tell from a refusal of its credentials.
        slots = trio.Semaphore(MAX_CONNECTIONS)
        async with trio.open_nursery() as nursery:
            while True:
                await slots.acquire()
                try:
                    conn, _ = await listener.accept()
                except BaseException:
                    slots.release()
                    raise

                async def one(c: trio.socket.SocketType = conn) -> None:
                    try:
                        await _serve_one(c, swapper)
                    except OSError as exc:  # the client went away
                        log.info("a control client went away: %s", exc)
                    finally:
                        slots.release()

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
