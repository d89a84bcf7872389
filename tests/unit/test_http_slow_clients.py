"""Slow clients of the metrics port cannot silence its scraper: the real endpoint on a loopback
port, many clients each dripping a byte of an endless request head every half second (and
connecting again whenever they are closed), and scrapes with Prometheus's bound on the answer."""

from __future__ import annotations

import pytest
import trio

from mokkafs.obs.http import MAX_CONNECTIONS
from mokkafs.obs.status import Status
from tests.unit.test_http import endpoint, exchange, head_and_body

DRIP = b"GET /metrics HTTP/1.1\r\nX-Slow: "
SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
SCRAPE_TIMEOUT = 2.0  # the scrape's own client timeout, as a scraper configured for 2 s has


async def drip(port: int, connects: list[int],
               task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Send a byte every half second, forever; connect again half a second after being closed.
    Started once its first connection is made."""
    started = False
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await trio.sleep(0.5)
            continue
        connects.append(1)
        if not started:
            task_status.started()
            started = True
        async with stream:
            try:
                await stream.send_all(DRIP)
                while True:
                    with trio.move_on_after(0.5) as waiting:
                        await stream.receive_some(1)  # returns once the endpoint closes it
                    if not waiting.cancelled_caught:
                        break
                    await stream.send_all(b"a")
            except trio.BrokenResourceError:
                pass
        await trio.sleep(0.5)


async def scrape(port: int) -> tuple[str, bytes]:
    """A scrape's status line and body; a failed one is a line of its own."""
    try:
        with trio.fail_after(SCRAPE_TIMEOUT):
            line, _, body = head_and_body(await exchange(port, SCRAPE))
    except trio.TooSlowError:
        return "timed out", b""
    except OSError as exc:
        return f"refused: {exc}", b""
    return line or "closed unanswered", body


@pytest.mark.parametrize(("clients", "cap"), [
    (40, MAX_CONNECTIONS), (200, MAX_CONNECTIONS), (64, 32)])
def test_the_scraper_is_answered_while_slow_clients_drip(clients: int, cap: int) -> None:
    """Every scrape succeeds while ``clients`` drip, through rounds of the endpoint's deadline
    (each client closed and back at least once on average): with slots to spare, and when the
    drippers outnumber the slots (the oldest of them is closed to make room)."""
    status = Status(serving=True, generation=5)

    async def main() -> None:
        connects: list[int] = []
        async with endpoint(status, max_connections=cap) as port, \
                trio.open_nursery() as flood:
            with trio.fail_after(60):
                for _ in range(clients):
                    await flood.start(drip, port, connects)
                answers: list[str] = []
                while len(connects) < 2 * clients or len(answers) < 5:
                    line, body = await scrape(port)
                    answers.append(line)
                    assert line != "HTTP/1.1 200 OK" or b"mokkafs_generation 5.0" in body
                    await trio.sleep(0.2)
            flood.cancel_scope.cancel()
        assert set(answers) == {"HTTP/1.1 200 OK"}, answers

    trio.run(main)
