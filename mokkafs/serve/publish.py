"""What each new view is handed on to, beside the mount: the CDI spec (``Publisher``) and the
``--host-dev`` nodes in the node's own /dev."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from mokkafs.delivery import host_dev
from mokkafs.delivery.publisher import Publisher
from mokkafs.serve.owned import Owned
from mokkafs.state import State
from mokkafs.surfaces import nvidia_dev, nvml
from mokkafs.surfaces.dev import char_devices
from mokkafs.surfaces.proc_devices import host_majors

log = logging.getLogger(__name__)


def host_dev_nodes(stack: contextlib.AsyncExitStack, root: Path, state: State,
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
    # (what a dead daemon made that could not be removed stays on the record, first)
    host_dev.make(root, nvidia_dev.device_numbers(state), host_majors(state), record,
                  owned.record.host_dev)
    return sync


def publish_to(publisher: Publisher | None, host_sync: Callable[[State], None] | None,
               ) -> Callable[[State], None] | None:
    """What each swap's new view is handed on to: the CDI spec, the --host-dev nodes."""
    if publisher is None and host_sync is None:
        return None

    def publish(state: State) -> None:
        if host_sync is not None:
            host_sync(state)
        if publisher is not None:
            publish_spec(publisher, state)
    return publish


def publish_spec(publisher: Publisher, state: State) -> None:
    """The CDI spec of the view of ``state``. Raises ``CdiError``."""
    publisher.publish(spec_nodes(state), state.machine.shown,
                      state.driver.version if nvml.served(state) else None)


def spec_nodes(state: State) -> list[tuple[str, int, int, int]]:
    return [(path, major, minor, mode) for path, major, minor, mode in char_devices(state)]
