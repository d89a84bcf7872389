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
beside the FUSE loop (the metrics endpoint runs in an outer one, started first). It also
runs the kmsg mount's process (``mokkafs.serve.kmsg``): readiness waits for its mount over
``dev/kmsg``.
Those tasks and the ordered stop are ``mokkafs.serve.running.Running``.

Stop (SIGINT/SIGTERM), in a shielded scope bounded by ``Config.shutdown_seconds``: not ready,
retract the CDI spec, stop the source and the swapper (a compile or build in a worker thread is
abandoned; a batch of kernel invalidations being sent is finished), unmount the kmsg mount
(its waiting reads get ENOTCONN), end the FUSE loop; then the
exit stack unmounts, un-shares the parent (unless containers hold it), closes the sysfs
instances and the metrics endpoint, and the lock is dropped with a record of what is left
(a share containers hold). A second stop signal changes nothing. SIGHUP re-reads the
profile.
"""

from __future__ import annotations

import contextlib
import logging
import signal

import pyfuse3
import trio

from mokkafs.delivery.mounts import check_parent
from mokkafs.delivery.publisher import Publisher
from mokkafs.delivery.share import ParentShare
from mokkafs.faults.effects import applied, at
from mokkafs.fuse.adapter import Operations
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.mount import Session, prepare_mountpoint, refuse_link
from mokkafs.fuse.passthrough import HostView
from mokkafs.fuse.policies import cache_policy
from mokkafs.fuse.stream import Streams
from mokkafs.fuse.view import TreeHolder, View
from mokkafs.host.netns import NetnsSysfs
from mokkafs.obs.http import serve_http
from mokkafs.obs.metrics import Metrics
from mokkafs.serve.config import Config, Wiring
from mokkafs.serve.control import check_apart, check_place
from mokkafs.serve.durable import StateFile, restore_at_start
from mokkafs.serve.kmsg import kmsg_for
from mokkafs.serve.owned import Owned, fuse_mount_id
from mokkafs.serve.pipeline import builder
from mokkafs.serve.process import settle_heap
from mokkafs.serve.publish import host_dev_nodes, publish_to
from mokkafs.serve.running import Running
from mokkafs.serve.swap import Swapper
from mokkafs.serve.writes import Writer

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
        for line in owned.remove_made_dir():  # once unmounted, and the share released
            log.info("%s", line)
        owned.close()


async def _serve(config: Config, wiring: Wiring, owned: Owned) -> None:
    status = wiring.status
    status.cache_mode = config.cache_mode.value
    status.watch = wiring.source
    metrics = Metrics(status)
    now = wiring.clock()
    profile = applied(await wiring.source.initial(), now)  # its faults' timing starts now
    made = prepare_mountpoint(config.mountpoint, config.nonempty)
    if made is not None:
        owned.update(made_dir=made)
    if config.control is not None:
        check_apart(config.control, config.mountpoint)
        check_place(config.control)
    state_file = None
    if config.state_dir is not None:
        state_file = StateFile.prepare(config.state_dir, config.mountpoint, wiring.proc)
    build = builder(wiring.surfaces)
    state, layers, (tree, counts) = restore_at_start(
        state_file, profile, now, status, lambda s: build(at(s, now), None))
    settle_heap()
    publisher = None
    if config.cdi is not None:
        check_parent(config.mountpoint)
        publisher = Publisher(config.cdi.dir, config.mountpoint, config.cdi.version,
                              config.cdi.kind, config.cdi.hook,
                              record=lambda ref: owned.update(spec=ref),
                              nvml_library=config.cdi.nvml)
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
        policy = cache_policy(config.cache_mode, view, invalidator)
        policy.prepare(tree)
        # From before the mount exists until after it is gone, stop signals and SIGHUP are
        # taken by this receiver, never by their default action (a death that leaves a dead
        # mount behind): one that comes while mounting waits in it for ``Running._signals``, and one
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
            host_sync = host_dev_nodes(stack, config.host_dev, at(state, now), owned)
        swapper = Swapper(
            holder, profile, counts, build=policy.prepared(build), invalidator=invalidator,
            status=status, metrics=metrics, clock=wiring.clock, shown_at=now, layers=layers,
            state=state, publish=publish_to(publisher, host_sync),
            persist=state_file.save if state_file is not None else None)
        # sysfs writes go to the swapper's writes book (docs/writes.md)
        ops = Operations(view, policy, metrics.observe_request, Writer(swapper))
        stack.callback(owned.update, mount_id=None)
        stack.enter_context(Session(ops, config.mountpoint, config.writable))
        owned.update(mount_id=fuse_mount_id(config.mountpoint))
        if publisher is not None:
            stack.callback(publisher.retract)  # whatever ends the loop, before the unmount
        running = Running(config, wiring, status, publisher, swapper)
        # dev/kmsg is served by a mount of its own over it (docs/kmsg.md)
        streams = Streams(holder, wiring.clock, running.sleep_until)
        status.kmsg = streams.report
        running.kmsg = kmsg_for(config.mountpoint, streams, holder)
        inner = await stack.enter_async_context(trio.open_nursery())
        stack.callback(inner.cancel_scope.cancel)
        running.start(inner, state, tree, policy.background, signals)
        await pyfuse3.main()
    if running.failure is not None:
        raise running.failure
