"""A small trio HTTP endpoint: /metrics, /healthz (liveness) and /readyz (readiness).

/healthz answers 200 while the process runs, whatever the profile says; /readyz answers 200
only while the mount serves and follows its profile. A client on the node (a loopback peer)
gets the facts as JSON; any other (a kubelet's probe, a neighbour on the pod network) only
``{"ready": ...}``: paths and errors are the node's business. HTTP is parsed by
h11. The endpoint can never starve the view of file descriptors or the loop of time: at most
``MAX_CONNECTIONS`` are open at once, each has ``REQUEST_TIMEOUT`` seconds from its accept to
its answer (one deadline, which no byte a client sends extends), its request head at most
``HEAD_BYTES``, and metrics are rendered in a worker thread.

Slow clients cannot silence the scraper (``Connections``): when every slot is taken, a new
connection closes the oldest one still sending its request head. A scraper sends its request at
once, so it is answered whatever other local clients hold open, as a Go exporter's would be.

The probes' own listener (``--health``) serves /healthz and /readyz alone, with slots of its
own: whatever clients do to the metrics port, the kubelet's probes never share its slots.
"""

from __future__ import annotations

import contextlib
import http
import ipaddress
import json
import logging
from dataclasses import dataclass, field

import h11
import trio

from mokkafs.errors import MetricsError
from mokkafs.obs.metrics import CONTENT_TYPE, Metrics
from mokkafs.obs.status import Status

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256  # open at once, per listener (a descriptor each)
REQUEST_TIMEOUT = 2.0
HEAD_BYTES = 8192  # a request head larger is refused (400): memory per connection is bounded
ACCEPT_BACKOFF = 0.1  # seconds between tries while accepting fails


def parse_address(text: str, flag: str = "--metrics") -> tuple[str, int]:
    """``127.0.0.1:9464``, ``[::1]:9464`` or ``:9464`` (loopback)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise MetricsError(f"{flag} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_local(peer: object) -> bool:
    """Whether a socket's peer address (``getpeername()``) is on this node: loopback, IPv4
    or IPv6 (an IPv4 peer of a dual-stack socket included)."""
    if not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
        return False
    try:
        address = ipaddress.ip_address(peer[0].split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


async def _answer(target: bytes, metrics: Metrics | None, status: Status,
                  local: bool) -> tuple[int, bytes, bytes]:
    """(status code, body, content type) for a GET of ``target`` by a client on the node
    (``local``) or elsewhere; no /metrics without ``metrics`` (the probes' listener)."""
    path = target.split(b"?", 1)[0]
    if path == b"/metrics" and metrics is not None:
        body = await trio.to_thread.run_sync(metrics.exposition)
        return 200, body, CONTENT_TYPE.encode()
    if path == b"/healthz":
        return 200, b"ok\n", b"text/plain"
    if path == b"/readyz":
        report = status.report() if local else {"ready": status.ready}
        return (200 if report["ready"] else 503, json.dumps(report, indent=1).encode() + b"\n",
                b"application/json")
    if metrics is None:
        return 404, b"try /healthz, /readyz\n", b"text/plain"
    return 404, b"try /metrics, /healthz, /readyz\n", b"text/plain"


@dataclass(eq=False)
class Slot:
    """One open connection: its deadline (``scope``) and whether its request is whole."""

    scope: trio.CancelScope
    answering: bool = False


@dataclass
class Connections:
    """The connections a listener has open, oldest first, at most ``cap``. A connection that
    comes when all are taken closes the oldest one still sending its request head (the oldest
    of all when every one is being answered): slow clients delay nobody who sends a request at
    once, and no client can hold more than the cap of descriptors."""

    cap: int = MAX_CONNECTIONS
    open: dict[Slot, None] = field(default_factory=dict)  # in the order of their accepts

    def admit(self, deadline: float) -> Slot:
        if len(self.open) >= self.cap:
            oldest = next((s for s in self.open if not s.answering), next(iter(self.open)))
            self.release(oldest)
            oldest.scope.cancel()  # its task closes it
        slot = Slot(trio.CancelScope(deadline=deadline))
        self.open[slot] = None
        return slot

    def release(self, slot: Slot) -> None:
        self.open.pop(slot, None)


async def _serve_one(stream: trio.SocketStream, metrics: Metrics | None, status: Status,
                     slot: Slot) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_BYTES)
    try:
        local = is_local(stream.socket.getpeername())
    except OSError:  # gone already
        return
    with slot.scope:
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(4096))
                    continue
                if not isinstance(event, h11.Request):
                    return  # closed before a whole request came
                break
            slot.answering = True
            if event.method in (b"GET", b"HEAD"):
                code, body, kind = await _answer(event.target, metrics, status, local)
            else:
                code, body, kind = 405, b"GET or HEAD only\n", b"text/plain"
            await _send(stream, conn, code, body, kind, head=event.method == b"HEAD")
        except h11.RemoteProtocolError:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await _send(stream, conn, 400, b"bad request\n", b"text/plain")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def _send(stream: trio.SocketStream, conn: h11.Connection, code: int, body: bytes,
                kind: bytes, head: bool = False) -> None:
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    reason = http.HTTPStatus(code).phrase.encode()
    out = conn.send(h11.Response(status_code=code, headers=headers, reason=reason)) or b""
    if not head:
        out += conn.send(h11.Data(data=body)) or b""
    out += conn.send(h11.EndOfMessage()) or b""
    await stream.send_all(out)


async def _accept(listener: trio.SocketListener, metrics: Metrics | None, status: Status,
                  connections: Connections, nursery: trio.Nursery) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:  # out of descriptors, say: the view needs them more
            log.warning("metrics endpoint cannot accept a connection: %s", exc)
            await trio.sleep(ACCEPT_BACKOFF)
            continue
        # The deadline runs from the accept, whatever follows.
        slot = connections.admit(trio.current_time() + REQUEST_TIMEOUT)
        nursery.start_soon(_connection, stream, metrics, status, connections, slot)


async def _connection(stream: trio.SocketStream, metrics: Metrics | None, status: Status,
                      connections: Connections, slot: Slot) -> None:
    try:
        await _serve_one(stream, metrics, status, slot)
    except Exception:  # a connection's failure ends that connection, never the daemon
        log.exception("metrics endpoint: a connection failed")
    finally:
        connections.release(slot)
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def serve_http(address: str, metrics: Metrics | None, status: Status, *,
                     max_connections: int = MAX_CONNECTIONS,
                     task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``. Without
    ``metrics`` this is the probes' listener (``--health``): /healthz and /readyz only. Raises
    ``MetricsError`` when the address cannot be bound."""
    flag = "--metrics" if metrics is not None else "--health"
    host, port = parse_address(address, flag)
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise MetricsError(f"{flag} {address}: cannot listen there: {exc.strerror}") from None
    bound = listeners[0].socket.getsockname()[1]
    what = "metrics and health" if metrics is not None else "health probes"
    log.info("%s on http://%s:%d/", what, host, bound)
    connections = Connections(max_connections)
    try:
        async with trio.open_nursery() as nursery:
            task_status.started(bound)  # the listeners are bound: connections queue from here
            for listener in listeners:
                nursery.start_soon(_accept, listener, metrics, status, connections, nursery)
    finally:
        with trio.CancelScope(shield=True):
            for listener in listeners:
                await listener.aclose()
