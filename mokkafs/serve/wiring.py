"""The daemon's wiring: what ``mokkafs mount ARGS`` serves, and with what. The one place its
collaborators are made; a test builds the same from the same arguments, and may change them.
The compile's options and the compiler are the pipeline's (``mokkafs.serve.pipeline``).
``CACHE_MODE_ENV``, the variable that gives ``--cache-mode`` its default, is named here for
``mount``'s help."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mokkafs.clock import Clock
from mokkafs.delivery.cdi import DEFAULT_VERSION
from mokkafs.fuse.cache_mode import CACHE_MODE_ENV as CACHE_MODE_ENV
from mokkafs.fuse.cache_mode import choose
from mokkafs.serve.pipeline import compiler, options, profile_path

if TYPE_CHECKING:
    from mokkafs.serve.config import Config, Wiring


def wire(args: argparse.Namespace, clock: Clock = time.monotonic) -> tuple[Config, Wiring]:
    """``mokkafs mount ARGS``'s Config and Wiring. ``clock`` is the time dynamic content
    follows."""
    from mokkafs.serve.config import CdiConfig, Config, Wiring
    from mokkafs.source.child import CompileChild
    from mokkafs.source.file import FileSource

    # Absolute, but symlinks kept: a ConfigMap's node.yaml -> ..data/node.yaml must be watched
    # where it is, not where its target happens to be today.
    path = Path(os.path.abspath(profile_path(args.profile)))
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
