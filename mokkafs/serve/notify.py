"""Telling systemd (or any manager listening on ``NOTIFY_SOCKET``) how the daemon stands:
``READY=1`` once the mount serves, ``STOPPING=1`` when it stops."""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


def sd_notify(message: str) -> None:
    """Send ``message`` to the manager, if one listens; a failure is logged, never raised."""
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
