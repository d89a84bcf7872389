"""A small trio HTTP endpoint: /metrics, /healthz (liveness) and /readyz (per-surface state).

/healthz answers 200 while the process runs, whatever the profile says; /readyz answers 200
only while the mount serves, with the generation, last success and last error as JSON.
Metrics are rendered in a worker thread so a scrape never holds up the FUSE loop.
"""

from __future__ import annotations

import json
import logging
from functools import partial

import trio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from mokkafs.errors import MokkafsError
from mokkafs.obs.metrics import Health, Metrics

log = logging.getLogger(__name__)

MAX_REQUEST = 8192
REQUEST_TIMEOUT = 5.0


def parse_address(text: str) -> tuple[str, int]:
    """``127.0.0.1:9464``, ``[::1]:9464`` or ``:9464`` (loopback)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise MokkafsError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    return host.strip("[]") or "127.0.0.1", int(port)


def _response(status: str, body: bytes, content_type: str) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


async def _handle(metrics: Metrics, health: Health, stream: trio.SocketStream) -> None:
    try:
        with trio.move_on_after(REQUEST_TIMEOUT):
            data = b""
            while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
            method, _, rest = data.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0].decode(errors="replace")
            if method not in (b"GET", b"HEAD"):
                reply = _response("405 Method Not Allowed", b"GET only\n", "text/plain")
            elif path == "/metrics":
                body = await trio.to_thread.run_sync(generate_latest, metrics.registry)
                reply = _response("200 OK", body, CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                reply = _response("200 OK", b"ok\n", "text/plain")
            elif path == "/readyz":
                report = health.report()
                status = "200 OK" if report["ready"] else "503 Service Unavailable"
                reply = _response(status, json.dumps(report, indent=1).encode() + b"\n",
                                  "application/json")
            else:
                reply = _response("404 Not Found", b"try /metrics, /healthz, /readyz\n",
                                  "text/plain")
            await stream.send_all(reply)
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


async def serve_http(address: str, metrics: Metrics, health: Health, *,
                     task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``."""
    host, port = parse_address(address)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    log.info("metrics and health on http://%s:%d/", host, bound)
    task_status.started(bound)  # the listeners are bound: connections queue from here
    await trio.serve_listeners(partial(_handle, metrics, health), listeners)
