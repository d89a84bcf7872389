"""The daemon's wiring: what ``mokkafs mount ARGS`` serves, and with what. The one place its
collaborators are made; a test builds the same from the same arguments, and may change them.
Nothing here imports pyfuse3, so the commands that only compile (``tree``, ``render``) use it
too."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mokkafs.clock import Clock
from mokkafs.delivery.cdi import DEFAULT_VERSION
from mokkafs.host.facts import default_node_name, read_host_facts
from mokkafs.profile.options import Options
from mokkafs.profile.resolve import resolve
from mokkafs.state import State

if TYPE_CHECKING:
    from mokkafs.profile.compile import PciCache
    from mokkafs.serve.config import Config, Wiring


def options(args: argparse.Namespace, clock: Clock = time.monotonic) -> Callable[[], Options]:
    """A compile's options at each moment: the same node, started once (on ``clock``)."""
    node_name = args.node_name or default_node_name()
    started_at = clock()
    host_sysfs = getattr(args, "host_sysfs", "none") == "auto"

    def at_this_moment() -> Options:
        return Options(
            node_name=node_name,
            node_index=args.node_index,
            loaded_at=time.time(),
            started_at=started_at,
            counter_quantum=max(args.counter_staleness_ms, 0.0) / 1000.0,
            host=read_host_facts(sysfs=host_sysfs),
            infiniband=not args.no_infiniband,
            machine=not args.no_machine,
        )

    return at_this_moment


def compiler(options: Callable[[], Options]) -> Callable[[str, str], State]:
    """Compile a profile's text, in this process (each compile reusing what it can of the
    one before). The compiler is imported at the first compile."""
    caches: list[PciCache] = []

    def compile_profile(text: str, filename: str) -> State:
        from mokkafs.profile.compile import PciCache
        from mokkafs.profile.resolve import compile_text

        if not caches:
            caches.append(PciCache())
        return compile_text(text, filename, options(), caches[0])

    return compile_profile


def wire(args: argparse.Namespace, clock: Clock = time.monotonic) -> tuple[Config, Wiring]:
    """``mokkafs mount ARGS``'s Config and Wiring. ``clock`` is the time dynamic content
    follows."""
    from mokkafs.fuse.cache_mode import choose
    from mokkafs.serve.config import CdiConfig, Config, Wiring
    from mokkafs.source.child import CompileChild
    from mokkafs.source.file import FileSource

    # Absolute, but symlinks kept: a ConfigMap's node.yaml -> ..data/node.yaml must be watched
    # where it is, not where its target happens to be today.
    path = Path(os.path.abspath(resolve(args.profile)))
    config = Config(
        mountpoint=args.mountpoint, cache_mode=choose(args.cache_mode), metrics=args.metrics,
        health=args.health, control=args.control,
        state_dir=args.state_dir or (args.control.parent if args.control else None),
        cdi=CdiConfig(args.cdi_dir, args.cdi_version or DEFAULT_VERSION, args.cdi_kind,
                      args.cdi_hook, args.cdi_nvml) if args.cdi_dir else None,
        runtime_dir=args.runtime_dir, nonempty=args.nonempty, writable=args.writable,
        host_dev=args.host_dev_root if args.host_dev else None)
    at_this_moment = options(args, clock)
    # Every compile runs in a child process, off the serving process's GIL and outside its
    # memory: the first before the mount (that child then ends), each later one in a child
    # started at the first change and ended when idle (source/child.py).
    bounds = {"seconds": args.compile_timeout, "idle": args.compile_idle}
    child = CompileChild(at_this_moment, **{k: v for k, v in bounds.items() if v is not None})
    return config, Wiring(FileSource(path, compiler(at_this_moment), remote=child), clock=clock)
