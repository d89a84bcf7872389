"""The mount process: one trio nursery owns the FUSE loop and the signal handler.

Lifecycle: check the mountpoint -> ``pyfuse3.init`` (the mount exists from here) -> announce
readiness (stderr line, and ``READY=1`` to systemd when ``NOTIFY_SOCKET`` is set) -> serve until
SIGINT/SIGTERM -> unmount under a shielded, time-bounded scope.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pyfuse3
import trio

from mokkafs.fuse.adapter import Operations, TreeHolder, mount_options
from mokkafs.fuse.mount import lazy_unmount, prepare_mountpoint

log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 2.0


def sd_notify(message: str) -> None:
    """Tell systemd (or any manager listening on ``NOTIFY_SOCKET``) about our state."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(message.encode(), addr)
        except OSError as exc:
            log.warning("NOTIFY_SOCKET %s: %s", addr, exc)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def _signals(on_stop: Callable[[], None]) -> None:
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            log.info("received %s; unmounting", signal.Signals(signum).name)
            on_stop()
            return


async def serve(holder: TreeHolder, mountpoint: Path, *, announce: str,
                extra_options: tuple[str, ...] = ()) -> None:
    """Mount ``holder``'s tree at ``mountpoint`` and serve it until a stop signal."""
    prepare_mountpoint(mountpoint)
    ops = Operations(holder)
    # From the moment a mount exists, a stop signal must lead to an unmount, never to a death
    # that leaves a dead mount behind: the receiver handles them while serving, and its exit
    # restores SIG_IGN (not the default action) for the shutdown window, so a second SIGTERM
    # from a supervisor cannot interrupt pyfuse3.close().
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    pyfuse3.init(ops, str(mountpoint), mount_options(extra_options))
    mounted = True
    try:
        async with trio.open_nursery() as nursery:

            def stop() -> None:
                sd_notify("STOPPING=1")
                pyfuse3.terminate()

            nursery.start_soon(_signals, stop, name="signals")
            print(announce, file=sys.stderr, flush=True)
            sd_notify("READY=1")
            await pyfuse3.main()
            nursery.cancel_scope.cancel()
    finally:
        try:
            pyfuse3.close(unmount=True)
            mounted = False
        except Exception:
            log.exception("pyfuse3.close failed")
        if mounted:
            lazy_unmount(mountpoint)
