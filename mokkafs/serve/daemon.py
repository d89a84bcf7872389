"""The mount process, on one exit stack that registers each cleanup as its resource is taken.

Start, in order (anything that fails exits before the mount exists, with the status of its
kind): take the mountpoint's lock below ``--runtime-dir`` and undo what a killed daemon's
record names (mokkafs.serve.owned) -> load the first State -> check the mountpoint and the
control socket's place -> the state file's directory, and what the state file keeps from the
daemon before (``serve.durable``; a file refused is set aside, and the profile serves alone)
-> with ``--cdi-dir``, check the directory containers will hold and refuse a spec the daemon
did not write -> the metrics endpoint (its address is bound before anything is mounted) ->
the host's sysfs instance -> share the mountpoint's parent (a read-only tmpfs of its own over
it) -> mount -> once the mount answers, publish the CDI spec and re-attach containers a
previous daemon left -> readiness: a stderr line, and ``READY=1`` to systemd.

While serving, one trio nursery runs the source, the swapper (with the fault scheduler and the
control socket, which change the view through it), the signal handler and the readiness step
beside the FUSE loop (the metrics endpoint runs in an outer one, started first).

Stop (SIGINT/SIGTERM), in a shielded scope bounded by ``Config.shutdown_seconds``: not ready,
retract the CDI spec, stop the source and the swapper (a compile or build in a worker thread is
abandoned; a batch of kernel invalidations being sent is finished), end the FUSE loop; then the
exit stack unmounts, un-shares the parent (unless containers hold it), closes the sysfs
instances and the metrics endpoint, and the lock is dropped with a record of what is left
(a share containers hold). A second stop signal changes nothing. SIGHUP re-reads the
profile.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio

from mokkafs.delivery import host_dev
from mokkafs.delivery.cdi import Publisher, check_parent
from mokkafs.delivery.repair import repair
from mokkafs.delivery.share import ParentShare
from mokkafs.faults.effects import applied, at
from mokkafs.fuse.adapter import Operations
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.modes import serving
from mokkafs.fuse.mount import Session, prepare_mountpoint, refuse_link
from mokkafs.fuse.passthrough import HostView
from mokkafs.fuse.view import TreeHolder, View
from mokkafs.host import linux
from mokkafs.host.netns import NetnsSysfs
from mokkafs.obs.http import serve_http
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status
from mokkafs.serve import READY
from mokkafs.serve.control import check_apart, check_place, serve_control
from mokkafs.serve.durable import StateFile, restore_at_start
from mokkafs.serve.faults import FaultScheduler, real_sleep_until
from mokkafs.serve.owned import Owned, fuse_mount_id
from mokkafs.serve.swap import Swapper
from mokkafs.serve.writes import Writer
from mokkafs.source import Source, Update
from mokkafs.state import State
from mokkafs.surfaces import SURFACES, Surface, build_tree, nvidia_dev
from mokkafs.surfaces.dev import char_devices
from mokkafs.surfaces.proc_devices import host_majors
from mokkafs.tree.build import Tree

log = logging.getLogger(__name__)

SleepUntil = Callable[[float], Awaitable[None]]  # wait until the daemon's clock reads a time

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class CdiConfig:
    dir: Path
    version: str
    kind: str
    hook: str | None = None


@dataclass(frozen=True)
class Config:
    """What the command line decides about the process."""

    mountpoint: Path
    cache_mode: CacheMode = CacheMode.KEEP_CACHE
    metrics: str | None = None
    health: str | None = None  # the probes' own listener: /healthz and /readyz
    control: Path | None = None
    # where run-time changes are kept across restarts (None: nowhere, as without --control
    # nothing changes at run time)
    state_dir: Path | None = None
    cdi: CdiConfig | None = None
    runtime_dir: Path = Path("/run/mokkafs-runtime")
    shutdown_seconds: float = 5.0
    nonempty: bool = False  # mount over a directory that holds files (they are hidden)
    # --host-dev: the directory (the host's /dev) to make the NVIDIA nodes in while serving
    host_dev: Path | None = None


def default_announce(state: State, tree: Tree, mountpoint: Path, mode: CacheMode) -> str:
    return (f"{READY} {state.source} as node {state.node_name} at {mountpoint} "
            f"(generation {state.generation}, {len(tree.entries)} inodes, "
            f"cache mode {mode.value})")


@dataclass
class Wiring:
    """The collaborators the process is built from (``mokkafs.cli.wire`` makes them; a test
    may give others): where State comes from, the surfaces, the clock dynamic files are read
    at, the /proc the host is seen through, the readiness line."""

    source: Source
    surfaces: Sequence[tuple[str, Surface]] = SURFACES
    clock: Callable[[], float] = time.monotonic
    # how to wait for ``clock`` to reach a time (None: sleep for the difference)
    sleep_until: SleepUntil | None = None
    proc: Path = Path("/proc")
    announce: Callable[[State, Tree, Path, CacheMode], str] = default_announce
    status: Status = field(default_factory=Status)


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


async def serve(config: Config, wiring: Wiring) -> None:
    """Mount, serve until a stop signal, unmount. Raises the ``MokkafsError`` of its kind when
    something it needs cannot be had (nothing is left mounted or published then). For its
    whole life the daemon holds its mountpoint's lock below ``--runtime-dir``, and records
    there what it made (mokkafs.serve.owned)."""
    refuse_link(config.mountpoint)
    owned = Owned.acquire(config.runtime_dir, config.mountpoint)
    try:
        owned.undo(release_share=False)  # a share a dead daemon left is adopted instead
        await _serve(config, wiring, owned)
    finally:
        owned.close()


async def _serve(config: Config, wiring: Wiring, owned: Owned) -> None:
    status = wiring.status
    status.cache_mode = config.cache_mode.value
    status.watch = wiring.source
    metrics = Metrics(status)
    now = wiring.clock()
    profile = applied(wiring.source.initial(), now)  # its faults' timing starts now
    prepare_mountpoint(config.mountpoint, config.nonempty)
    if config.control is not None:
        check_apart(config.control, config.mountpoint)
        check_place(config.control)
    state_file = None
    if config.state_dir is not None:
        state_file = StateFile.prepare(config.state_dir, config.mountpoint, wiring.proc)
    state, book = restore_at_start(state_file, profile, now, status)
    build = functools.partial(build_tree, surfaces=wiring.surfaces)
    tree, counts = build(at(state, now), None)
    # What exists now (modules, the schema, the first State and tree) lives as long as the
    # daemon, or is freed by reference counting; left to the cyclic collector, each full
    # collection would walk it all (tens of milliseconds, a swap's whole budget) every few
    # swaps. A swap that moves no path patches this tree, so later collections stay small.
    gc.collect()
    gc.freeze()
    linux.release_free_heap()  # what the compile and the build used and freed (3 MiB at 256 HCAs)
    publisher = None
    if config.cdi is not None:
        check_parent(config.mountpoint)
        publisher = Publisher(config.cdi.dir, config.mountpoint, config.cdi.version,
                              config.cdi.kind, config.cdi.hook,
                              record=lambda ref: owned.update(spec=ref))
        publisher.prepare()

    async with contextlib.AsyncExitStack() as stack:
        outer = await stack.enter_async_context(trio.open_nursery())
        stack.callback(outer.cancel_scope.cancel)
        if config.metrics is not None:
            await outer.start(serve_http, config.metrics, metrics, status)
        if config.health is not None:
            await outer.start(serve_http, config.health, None, status)
        netns = None
        if state.host.sysfs:
            netns = NetnsSysfs(owned.scratch, proc=wiring.proc)
            stack.callback(netns.close)
        holder = TreeHolder(tree)
        view = View(holder, None if netns is None else HostView(netns), clock=wiring.clock)
        invalidator = Invalidator()
        mode = serving(config.cache_mode, view, invalidator)
        ops = Operations(view, mode, metrics.observe_request)
        # From before the mount exists until after it is gone, stop signals and SIGHUP are
        # taken by this receiver, never by their default action (a death that leaves a dead
        # mount behind): one that comes while mounting waits in it for ``_signals``, and one
        # that comes while unmounting (a supervisor's second SIGTERM) is taken and dropped.
        signals = stack.enter_context(trio.open_signal_receiver(*STOP_SIGNALS, signal.SIGHUP))
        if publisher is not None:
            stack.callback(publisher.retract)  # a refusal below: nothing stays published
            share = ParentShare(config.mountpoint, adopt=owned.record.share)
            stack.callback(lambda: owned.update(
                share=None if share.released else share.mount_id))
            stack.enter_context(share)
            owned.update(share=share.mount_id)
        host_sync = None
        if config.host_dev is not None:
            host_sync = _host_dev(stack, config.host_dev, at(state, now), owned)
        stack.callback(owned.update, mount_id=None)
        stack.enter_context(Session(ops, config.mountpoint))
        owned.update(mount_id=fuse_mount_id(config.mountpoint))
        if publisher is not None:
            stack.callback(publisher.retract)  # whatever ends the loop, before the unmount
        running = _Running(config, wiring, status, publisher, Swapper(
            holder, profile, counts, build=build, invalidator=invalidator, status=status,
            metrics=metrics, clock=wiring.clock, shown_at=now, book=book, state=state,
            publish=_publish(publisher, host_sync),
            persist=state_file.save if state_file is not None else None))
        ops.writes.store = Writer(running.swapper)  # sysfs writes (docs/writes.md)
        ops.writes.kernel = invalidator
        inner = await stack.enter_async_context(trio.open_nursery())
        stack.callback(inner.cancel_scope.cancel)
        running.start(inner, state, tree, mode.background, signals)
        await pyfuse3.main()
    if running.failure is not None:
        raise running.failure


def _host_dev(stack: contextlib.AsyncExitStack, root: Path, state: State,
              owned: Owned) -> Callable[[State], None]:
    """Make the NVIDIA driver's nodes in the host's /dev (``--host-dev``), and have the stack
    remove them at stop; the record names each from before it exists. Returns what keeps
    them in step with each new view."""
    def record(made: tuple[host_dev.Made, ...]) -> None:
        owned.update(host_dev=made)

    def undo() -> None:
        removed, kept = host_dev.remove(owned.record.host_dev)
        if removed:
            log.info("--host-dev: removed %d nodes below %s", len(removed), root)
        owned.update(host_dev=kept)

    def sync(new: State) -> None:
        host_dev.sync(root, owned.record.host_dev, nvidia_dev.device_numbers(new),
                      host_majors(new), record)

    stack.callback(undo)
    host_dev.make(root, nvidia_dev.device_numbers(state), host_majors(state), record)
    return sync


def _publish(publisher: Publisher | None, host_sync: Callable[[State], None] | None,
             ) -> Callable[[State], None] | None:
    """What each swap's new view is handed on to: the CDI spec, the --host-dev nodes."""
    if publisher is None and host_sync is None:
        return None

    def publish(state: State) -> None:
        if host_sync is not None:
            host_sync(state)
        if publisher is not None:
            publisher.publish(_spec_nodes(state), state.machine.shown)
    return publish


def _spec_nodes(state: State) -> list[tuple[str, int, int]]:
    return [(path, major, minor) for path, major, minor, _ in char_devices(state)]


class _Running:
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
            await self._background_done.wait()
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
        if self._stopping:
            return
        if self.publisher is not None:
            try:
                effective = self.swapper.effective
                self.publisher.publish(_spec_nodes(effective), effective.machine.shown)
            except Exception as exc:
                # Asked to give containers the mount and unable to: stop cleanly, loudly.
                self.failure = exc
                log.error("cannot publish the CDI spec: %s; unmounting", exc)
                await self.stop()
                return
            await trio.to_thread.run_sync(repair, self.config.mountpoint, abandon_on_cancel=True)
        if self._stopping:  # a stop came meanwhile: never announce a mount about to go
            return
        self.status.serving = True
        print(self.wiring.announce(state, tree, self.config.mountpoint, self.config.cache_mode),
              file=sys.stderr, flush=True)
        sd_notify("READY=1")
