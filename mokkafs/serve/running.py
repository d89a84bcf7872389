"""The tasks beside the FUSE loop while the daemon serves, and their ordered stop.

One nursery runs the source, the swapper (with the fault scheduler and the control socket,
which change the view through it), what the cache mode runs in the background, the signal
handler, the readiness step and the kmsg mount's process. A stop
(the first SIGINT/SIGTERM) is bounded by ``Config.shutdown_seconds``."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import pyfuse3
import trio

from mokkafs.clock import SleepUntil, real_sleep_until
from mokkafs.delivery.publisher import Publisher
from mokkafs.delivery.reattach import reattach
from mokkafs.obs.status import Status
from mokkafs.serve.config import Config, Wiring
from mokkafs.serve.control import serve_control
from mokkafs.serve.faults import FaultScheduler
from mokkafs.serve.kmsg import KmsgMount
from mokkafs.serve.notify import sd_notify
from mokkafs.serve.publish import publish_spec
from mokkafs.serve.swap import Swapper
from mokkafs.source import Update
from mokkafs.state import State
from mokkafs.tree.build import Tree

log = logging.getLogger(__name__)


class Running:
    """The tasks beside the FUSE loop, and the ordered stop."""

    def __init__(self, config: Config, wiring: Wiring, status: Status,
                 publisher: Publisher | None, swapper: Swapper) -> None:
        self.config = config
        self.wiring = wiring
        self.source = wiring.source
        self.status = status
        self.publisher = publisher
        self.swapper = swapper
        self.failure: Exception | None = None
        self._source_scope = trio.CancelScope()
        self._swapper_scope = trio.CancelScope()
        self._swapper_done = trio.Event()
        self._background_scope = trio.CancelScope()
        self._background_done = trio.Event()
        self._changers_ready = trio.Event()
        self._stopping = False
        self.kmsg: KmsgMount | None = None  # dev/kmsg's own mount
        # How tasks wait for a time on the daemon's clock (tests drive their own).
        self.sleep_until = wiring.sleep_until or functools.partial(real_sleep_until,
                                                                   wiring.clock)

    def start(self, nursery: trio.Nursery, state: State, tree: Tree,
              background: Callable[[SleepUntil], Awaitable[None]],
              signals: AsyncIterator[int]) -> None:
        """``background``: what the cache mode runs beside the loop (rounds ahead of hot
        counters); it may talk to the kernel, so it stops before the loop does. ``signals``:
        the stop signals and SIGHUP, from a receiver that outlives the mount."""
        send, recv = trio.open_memory_channel[Update](64)
        nursery.start_soon(self._run_source, send, name="source")
        nursery.start_soon(self._run_swapper, recv, name="swapper")
        nursery.start_soon(self._run_background, background, name="background")
        nursery.start_soon(self._signals, signals, name="signals")
        nursery.start_soon(self._ready, state, tree, name="ready")
        if self.kmsg is not None:
            nursery.start_soon(self.kmsg.run, name="kmsg")

    async def _run_source(self, send: trio.MemorySendChannel[Update]) -> None:
        async with send:
            with self._source_scope:
                await self.source.run(send)

    async def _run_swapper(self, recv: trio.MemoryReceiveChannel[Update]) -> None:
        """Everything that changes the view, stopped together: profile updates, fault
        transitions, the control socket."""
        clock = self.wiring.clock
        try:
            with self._swapper_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self.swapper.run, recv)
                    nursery.start_soon(FaultScheduler(self.swapper, clock, self.sleep_until).run)
                    if self.config.control is not None:
                        await nursery.start(serve_control, self.config.control, self.swapper)
                    self._changers_ready.set()
        finally:
            self._changers_ready.set()
            self._swapper_done.set()

    async def _run_background(self, background: Callable[[SleepUntil], Awaitable[None]]
                              ) -> None:
        try:
            with self._background_scope:
                await background(self.sleep_until)
        finally:
            self._background_done.set()

    async def _signals(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            if signum == signal.SIGHUP:
                log.info("received SIGHUP; re-reading the profile")
                self.source.reload()
                continue
            log.info("received %s; unmounting", signal.Signals(signum).name)
            await self.stop()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.status.serving = False
        sd_notify("STOPPING=1")
        if self.publisher is not None:  # no new container may be given a mount about to go
            self.publisher.retract()
        with trio.move_on_after(self.config.shutdown_seconds) as scope:
            scope.shield = True
            self._source_scope.cancel()
            self._swapper_scope.cancel()
            # A store into the page cache the loop must help finish (a READ holding the
            # page's lock): both end while the loop still answers.
            self._background_scope.cancel()
            await self._swapper_done.wait()
            await self.swapper.teller.settled()  # the kernel hears the last changes
            await self._background_done.wait()
            if self.kmsg is not None:  # unmounted while the view's loop still answers; its
                await self.kmsg.stop()  # waiting reads end (ENOTCONN), whatever readers do
        if scope.cancelled_caught:
            log.warning("the swapper or the rounds did not stop within %.1fs; unmounting "
                        "anyway", self.config.shutdown_seconds)
        pyfuse3.terminate()

    async def _ready(self, state: State, tree: Tree) -> None:
        """Announce readiness once the mount answers a request (a stat from a worker thread,
        which only the running FUSE loop can satisfy), after the CDI spec."""
        # Abandoned if a stop comes first: then no loop may ever answer this stat, and
        # waiting for it would keep the mount from being unmounted.
        await trio.to_thread.run_sync(os.stat, self.config.mountpoint / "proc",
                                      abandon_on_cancel=True)
        await self._changers_ready.wait()
        if self.kmsg is not None:
            await self.kmsg.first.wait()
        if self._stopping:
            return
        if self.publisher is not None:
            try:
                effective = self.swapper.effective
                publish_spec(self.publisher, effective)
            except Exception as exc:
                # Asked to give containers the mount and unable to: stop cleanly, loudly.
                self.failure = exc
                log.error("cannot publish the CDI spec: %s; unmounting", exc)
                await self.stop()
                return
            await trio.to_thread.run_sync(reattach, self.config.mountpoint, abandon_on_cancel=True)
        if self._stopping:  # a stop came meanwhile: never announce a mount about to go
            return
        self.status.serving = True
        print(self.wiring.announce(state, tree, self.config.mountpoint, self.config.cache_mode),
              file=sys.stderr, flush=True)
        sd_notify("READY=1")
