"""The mount process. One trio nursery owns the FUSE loop, the source, the swapper, the
metrics endpoint and the signal handler.

Start: load the first State (a bad profile exits before anything is mounted) -> check the
mountpoint -> ``pyfuse3.init`` (the mount exists from here) -> once it answers, publish the CDI
spec (``--cdi-dir``) -> readiness: a stderr line, and ``READY=1`` to systemd when
``NOTIFY_SOCKET`` is set.

Stop (SIGINT/SIGTERM), in order, in a shielded scope bounded by ``SHUTDOWN_SECONDS``: stop the
source, let a swap in progress finish its invalidations (they need the FUSE loop alive), mark
not ready, retract the CDI spec, end the FUSE loop, unmount.
SIGHUP re-reads the profile.
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

from mokkafs.cdi import Publisher
from mokkafs.errors import MokkafsError
from mokkafs.fuse.adapter import Operations, TreeHolder, mount_options
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.modes import CacheMode
from mokkafs.fuse.mount import lazy_unmount, prepare_mountpoint
from mokkafs.fuse.netns import NetnsSysfs
from mokkafs.fuse.passthrough import HostView
from mokkafs.obs.http import serve_http
from mokkafs.obs.metrics import Health, Metrics
from mokkafs.repair import fsname, repair, share_parent
from mokkafs.source import Source, Update
from mokkafs.state import State
from mokkafs.surfaces.infiniband import device_numbers
from mokkafs.swap import Swapper, build_tree
from mokkafs.tree.build import Tree

log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 1.5
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

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


def default_announce(state: State, tree: Tree, mountpoint: Path, mode: CacheMode) -> str:
    return (f"mokkafs: serving {state.source} as node {state.node_name} at {mountpoint} "
            f"(generation {state.generation}, {len(tree.entries)} inodes, "
            f"{mode.value} cache mode)")


class Daemon:
    def __init__(self, source: Source, mountpoint: Path, *, metrics_address: str | None = None,
                 runtime_dir: Path = Path("/run/mokkafs-runtime"),
                 cdi: Publisher | None = None,
                 cache_mode: CacheMode = CacheMode.KEEP_CACHE,
                 announce: Callable[[State, Tree, Path, CacheMode], str] = default_announce,
                 ) -> None:
        self.cache_mode = cache_mode
        self.source = source
        self.mountpoint = mountpoint
        self.metrics_address = metrics_address
        self.announce = announce
        self.runtime_dir = runtime_dir
        self.cdi = cdi
        self.metrics = Metrics()
        self.health = Health()
        self.metrics_port: int | None = None
        self._source_scope = trio.CancelScope()
        self.failure: MokkafsError | None = None
        self._swaps_done = trio.Event()

    async def _run_source(self, send: trio.MemorySendChannel[Update]) -> None:
        async with send:
            with self._source_scope:
                await self.source.run(send)

    async def _apply_updates(self, recv: trio.MemoryReceiveChannel[Update],
                             swapper: Swapper) -> None:
        try:
            async with recv:
                async for update in recv:
                    await swapper.apply(update)
        finally:
            self._swaps_done.set()

    async def _shutdown(self) -> None:
        with trio.move_on_after(SHUTDOWN_SECONDS) as scope:
            scope.shield = True
            self._source_scope.cancel()
            await self._swaps_done.wait()
            self.health.serving = False
            sd_notify("STOPPING=1")
            if self.cdi:  # no new container may be given a mount that is about to go
                await trio.to_thread.run_sync(self.cdi.retract)
        if scope.cancelled_caught:
            log.warning("shutdown steps took over %.1fs; unmounting anyway", SHUTDOWN_SECONDS)
        pyfuse3.terminate()

    async def _signals(self) -> None:
        with trio.open_signal_receiver(*STOP_SIGNALS, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("received SIGHUP; re-reading the profile")
                    self.source.reload()
                    continue
                log.info("received %s; unmounting", signal.Signals(signum).name)
                await self._shutdown()
                return

    async def _publish(self, state: State) -> None:
        if self.cdi:
            await trio.to_thread.run_sync(self.cdi.publish, device_numbers(state))

    async def _ready(self, state: State, tree: Tree) -> None:
        """Announce readiness once the mount answers a request (a stat of its root from a
        worker thread, which only the running FUSE loop can satisfy), after the CDI spec."""
        await trio.to_thread.run_sync(os.stat, self.mountpoint / "proc")
        try:
            await self._publish(state)
        except (MokkafsError, OSError) as exc:
            # Asked to give containers the mount and unable to: stop cleanly, loudly.
            self.failure = MokkafsError(f"cannot publish the CDI spec: {exc}")
            log.error("%s; unmounting", self.failure)
            await self._shutdown()
            return
        if self.cdi:  # containers that outlived a previous daemon: attach them again
            await trio.to_thread.run_sync(repair, self.mountpoint)
        self.health.serving = True
        print(self.announce(state, tree, self.mountpoint, self.cache_mode), file=sys.stderr,
              flush=True)
        sd_notify("READY=1")

    async def serve(self) -> None:
        """Mount, serve until a stop signal, unmount. Raises ``MokkafsError`` before mounting
        if the first State cannot be loaded or the mountpoint cannot be used."""
        state = self.source.initial()
        tree, counts = build_tree(state)
        holder = TreeHolder(tree)
        prepare_mountpoint(self.mountpoint)
        netns = NetnsSysfs(state.host.sysfs, self.runtime_dir) if state.host.sysfs else None
        ops = Operations(holder, observe=self.metrics.observe_request,
                         host=HostView(netns) if netns else None, mode=self.cache_mode)
        self.metrics.cache_mode.labels(self.cache_mode.value).set(1)
        # From the moment a mount exists, a stop signal must lead to an unmount, never to a
        # death that leaves a dead mount behind: the receiver handles them while serving, and
        # its exit restores SIG_IGN (not the default action) for the unmount itself, so a
        # second SIGTERM from a supervisor cannot interrupt pyfuse3.close().
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        if self.cdi:
            share_parent(self.mountpoint)  # before mounting: the mount must propagate
        pyfuse3.init(ops, str(self.mountpoint),
                     mount_options(fsname(self.mountpoint)))
        swapper = Swapper(holder, state, Invalidator(), self.metrics, self.health,
                          after_swap=self._publish if self.cdi else None)
        swapper.record_success(state, counts)
        mounted = True
        try:
            async with trio.open_nursery() as nursery:
                if self.metrics_address:
                    self.metrics_port = await nursery.start(
                        serve_http, self.metrics_address, self.metrics, self.health)
                send, recv = trio.open_memory_channel[Update](16)
                nursery.start_soon(self._run_source, send, name="source")
                nursery.start_soon(self._apply_updates, recv, swapper, name="swapper")
                nursery.start_soon(self._signals, name="signals")
                nursery.start_soon(self._ready, state, tree, name="ready")
                await pyfuse3.main()
                nursery.cancel_scope.cancel()
        finally:
            self.health.serving = False
            try:
                pyfuse3.close(unmount=True)
                mounted = False
                log.info("unmounted %s", self.mountpoint)
            except Exception:
                log.exception("pyfuse3.close failed")
            if mounted:
                lazy_unmount(self.mountpoint)
            if netns:
                netns.close()
        if self.failure:
            raise self.failure
