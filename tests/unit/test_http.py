"""The metrics and health endpoint, in trio on a loopback port: the answers, HEAD, bad
requests, and the cap on connections (slow clients: test_http_slow_clients.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import pytest
import trio

from mokkafs.errors import MetricsError
from mokkafs.obs.http import Connections, _answer, _connection, is_local, parse_address, serve_http
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status


@asynccontextmanager
async def endpoint(status: Status, max_connections: int = 16,
                   probes_only: bool = False) -> AsyncIterator[int]:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: serve_http(
            "127.0.0.1:0", None if probes_only else Metrics(status), status,
            max_connections=max_connections, task_status=task_status))
        yield port
        nursery.cancel_scope.cancel()


async def exchange(port: int, request: bytes) -> bytes:
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            data = b""
            while chunk := await stream.receive_some(65536):
                data += chunk
            return data


def head_and_body(reply: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def test_answers() -> None:
    status = Status(serving=True, generation=7, cache_mode="no-open", surfaces={"pci": 3})

    async def main() -> None:
        async with endpoint(status) as port:
            line, headers, body = head_and_body(
                await exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 200 OK" and headers["content-type"].startswith("text/plain")
            assert "mokkafs_generation 7.0" in body.decode()
            assert 'mokkafs_cache_mode_info{mode="no-open"} 1.0' in body.decode()
            assert int(headers["content-length"]) == len(body)
            line, headers, body = head_and_body(
                await exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 200 OK" and int(headers["content-length"]) > 100
            assert body == b""
            line, _, body = head_and_body(
                await exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 200 OK" and json.loads(body)["generation"] == 7
            status.serving = False
            line, _, body = head_and_body(
                await exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 503 Service Unavailable"
            assert json.loads(body)["ready"] is False
            line, _, body = head_and_body(
                await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert (line, body) == ("HTTP/1.1 200 OK", b"ok\n")  # liveness, whatever else
            line, _, _ = head_and_body(
                await exchange(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Length: 0\r\n\r\n"))
            assert line == "HTTP/1.1 405 Method Not Allowed"
            line, _, _ = head_and_body(
                await exchange(port, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 404 Not Found"
            line, _, _ = head_and_body(await exchange(port, b"\x00\x01 garbage\r\n\r\n"))
            assert line == "HTTP/1.1 400 Bad Request"

    trio.run(main)


def test_the_probes_listener_serves_the_probes_alone() -> None:
    """``--health``: /healthz and /readyz, and no /metrics (scrapes stay on their own port)."""
    status = Status(serving=True, generation=3)

    async def main() -> None:
        async with endpoint(status, probes_only=True) as port:
            line, _, body = head_and_body(
                await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert (line, body) == ("HTTP/1.1 200 OK", b"ok\n")
            line, _, body = head_and_body(
                await exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert line == "HTTP/1.1 200 OK" and json.loads(body)["generation"] == 3
            line, _, body = head_and_body(
                await exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert (line, body) == ("HTTP/1.1 404 Not Found", b"try /healthz, /readyz\n")

    trio.run(main)


def test_a_connection_beyond_the_cap_closes_the_oldest_idle_one() -> None:
    """The cap holds: a third connection to two slots is answered, and the oldest of the two
    that sent nothing is closed to make room for it."""
    status = Status(serving=True)

    async def main() -> None:
        async with endpoint(status, max_connections=2) as port:
            idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
            reply = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert reply.startswith(b"HTTP/1.1 200 OK")  # accepted after both idle ones
            with trio.fail_after(10):
                assert await idle[0].receive_some(10) == b""  # the oldest, closed
            for stream in idle:
                await stream.aclose()

    trio.run(main)


@pytest.mark.parametrize("text", ["9464", "host:", "host:99999", "[::1]"])
def test_bad_addresses_are_metrics_errors(text: str) -> None:
    with pytest.raises(MetricsError, match="expected HOST:PORT"):
        parse_address(text)
    assert parse_address(":9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    with pytest.raises(MetricsError, match=r"^--health '9465': expected HOST:PORT"):
        parse_address("9465", "--health")


def test_an_address_in_use_is_a_metrics_error() -> None:
    async def main() -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        try:
            with pytest.raises(MetricsError, match=r"^--metrics .*cannot listen there"):
                await serve_http(f"127.0.0.1:{port}", Metrics(Status()), Status())
            with pytest.raises(MetricsError, match=r"^--health .*cannot listen there"):
                await serve_http(f"127.0.0.1:{port}", None, Status())
        finally:
            for listener in listeners:
                await listener.aclose()

    trio.run(main)


def test_request_durations_fall_in_prometheus_buckets() -> None:
    """A duration on a bound counts in that bucket (``le``), buckets are cumulative, and the
    count of requests is what the buckets hold."""
    from mokkafs.obs.metrics import FUSE_BUCKETS
    from mokkafs.testing import samples

    metrics = Metrics(Status())
    for seconds in (FUSE_BUCKETS[0], FUSE_BUCKETS[0] * 1.01, FUSE_BUCKETS[-1] * 2, 0.0):
        metrics.observe_request("lookup", seconds)
    metrics.observe_request("getattr", FUSE_BUCKETS[3])
    got = samples(metrics.exposition().decode())
    bucket = 'mokkafs_fuse_request_duration_seconds_bucket{le="%s",op="%s"}'
    assert got['mokkafs_fuse_requests_total{op="lookup"}'] == 4
    assert got[bucket % (FUSE_BUCKETS[0], "lookup")] == 2  # 0 and the bound itself
    assert got[bucket % (FUSE_BUCKETS[1], "lookup")] == 3
    assert got[bucket % (FUSE_BUCKETS[-1], "lookup")] == 3
    assert got[bucket % ("+Inf", "lookup")] == 4
    assert got['mokkafs_fuse_request_duration_seconds_count{op="lookup"}'] == 4
    assert got['mokkafs_fuse_request_duration_seconds_sum{op="lookup"}'] == pytest.approx(
        FUSE_BUCKETS[0] * 2.01 + FUSE_BUCKETS[-1] * 2)
    assert got[bucket % (FUSE_BUCKETS[2], "getattr")] == 0
    assert got[bucket % (FUSE_BUCKETS[3], "getattr")] == 1


class Reset:
    """A client that sent garbage and reset the connection before the answer."""

    def __init__(self, fail_receive: BaseException | None = None) -> None:
        self.fail_receive = fail_receive
        self.sent = 0
        self.socket = self  # its own socket, as far as the peer's address goes

    def getpeername(self) -> tuple[str, int]:
        return "127.0.0.1", 40000

    async def receive_some(self, max_bytes: int) -> bytes:
        if self.fail_receive is not None:
            raise self.fail_receive
        return b"\x00garbage\r\n\r\n"

    async def send_all(self, data: bytes) -> None:
        self.sent += 1
        raise trio.BrokenResourceError("Connection reset by peer")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("client", ["reset before the 400", "a bug on the way"])
def test_a_connection_that_fails_ends_alone(client: str, expected_logs: list[str]) -> None:
    """Whatever happens on one connection (the 400 for garbage meeting a reset, or anything
    unforeseen) ends that connection: it must not reach the nursery that owns the mount."""
    status = Status(serving=True)
    stream = Reset() if client.startswith("reset") else Reset(RuntimeError("unforeseen"))
    expected_logs.append("a connection failed")  # the unforeseen, with its traceback

    async def main() -> None:
        connections = Connections(1)
        slot = connections.admit(trio.current_time() + 10)
        await _connection(cast(trio.SocketStream, stream), Metrics(status), status,
                          connections, slot)
        assert not connections.open  # its slot is given back
        async with endpoint(status) as port:  # and the endpoint serves on
            assert head_and_body(await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                                      b"\r\n"))[0] == "HTTP/1.1 200 OK"

    trio.run(main)
    assert stream.sent == (1 if client.startswith("reset") else 0)


@pytest.mark.parametrize(("peer", "local"), [
    (("127.0.0.1", 5), True), (("127.8.9.1", 5), True), (("::1", 5, 0, 0), True),
    (("::ffff:127.0.0.1", 5, 0, 0), True), (("10.0.0.7", 5), False),
    (("::ffff:10.0.0.7", 5, 0, 0), False), (("fe80::1%eth0", 5, 0, 2), False), ("", False)])
def test_which_peers_are_on_the_node(peer: object, local: bool) -> None:
    assert is_local(peer) is local


def test_readyz_tells_a_peer_off_the_node_only_whether_it_is_ready() -> None:
    status = Status(serving=True, generation=7, source="/etc/mokkafs/node.yaml")
    status.failed("invalid profile /etc/mokkafs/node.yaml: ...")

    async def main() -> None:
        code, body, _ = await _answer(b"/readyz", Metrics(status), status, local=False)
        assert (code, json.loads(body)) == (200, {"ready": True})
        status.serving = False
        code, body, _ = await _answer(b"/readyz", Metrics(status), status, local=False)
        assert (code, json.loads(body)) == (503, {"ready": False})
        code, body, _ = await _answer(b"/readyz", Metrics(status), status, local=True)
        assert code == 503 and json.loads(body)["last_error"].startswith("invalid profile")

    trio.run(main)
