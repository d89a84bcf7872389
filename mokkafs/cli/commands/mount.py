"""``mokkafs mount``: serve the view until a stop signal (mokkafs.serve.daemon); the command
turns a refusal raised inside the daemon's nurseries back into that refusal and its status."""

from __future__ import annotations

import argparse
from pathlib import Path

from mokkafs.cli.arguments import cdi_args, profile_args, runtime_arg, seconds, seconds_or_never
from mokkafs.delivery.cdi import DEFAULT_VERSION
from mokkafs.errors import MokkafsError
from mokkafs.serve.wiring import CACHE_MODE_ENV

NAME = "mount"
HELP = ("serve the view at MOUNTPOINT until SIGINT/SIGTERM; profile edits and SIGHUP swap the "
        "view live")


def arguments(parser: argparse.ArgumentParser) -> None:
    mount = parser
    profile_args(mount)
    mount.add_argument("--host-sysfs", choices=("auto", "none"), default="auto",
                       help="auto: pass the host's sysfs through beneath the simulated nodes "
                            "(a sysfs instance of the daemon's own, without the filesystems "
                            "mounted below /sys), so the view can be a container's whole /sys; "
                            "none: simulated nodes only")
    runtime_arg(mount)
    mount.add_argument("--metrics", metavar="HOST:PORT", default=None,
                       help="serve /metrics, /healthz and /readyz there (off by default; "
                            "e.g. 127.0.0.1:9464)")
    mount.add_argument("--compile-timeout", type=seconds, default=None, metavar="SECONDS",
                       help="a compile (in a child process: the first one, and each profile "
                            "change's) that takes longer is killed, the last good view kept; "
                            "at start nothing is mounted (default: 30)")
    mount.add_argument("--compile-idle", type=seconds_or_never, default=None,
                       metavar="SECONDS|never",
                       help="the compiling process ends once no change came for this long; "
                            "the next change starts another and waits for it to import the "
                            "compiler (default: 60). never: the first compile's process is "
                            "kept, so every change compiles at once, for some 26 MiB more")
    mount.add_argument("--health", metavar="HOST:PORT", default=None,
                       help="serve /healthz and /readyz alone there, for liveness and "
                            "readiness probes: clients of the metrics port cannot take its "
                            "connection slots (e.g. 127.0.0.1:9465)")
    mount.add_argument("--control", type=Path, default=None, metavar="PATH",
                       help="serve a control socket there (mode 0600, in a directory only "
                            "root may write) for `mokkafs fault`")
    mount.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                       help="keep what changes at run time (faults applied over the control "
                            "socket) there, for the next daemon, in <the mountpoint, "
                            "systemd-escaped>.json (a directory only root may write; default: "
                            "the control socket's directory)")
    cdi_args(mount)
    mount.add_argument("--cdi-version", default=None,
                       help=f"CDI version of that spec (default {DEFAULT_VERSION})")
    mount.add_argument("--cdi-hook", default=None, metavar="PATH",
                       help="the createContainer hook as the runtime sees it (default: the "
                            "one built into the package; a DaemonSet copies it to the node)")
    mount.add_argument("--cdi-nvml", default=None, metavar="PATH",
                       help="mokkafs's NVML library as the runtime sees it, for the spec's "
                            "nvml device (default: the one built into the package; a "
                            "DaemonSet copies it to the node)")
    mount.add_argument("--cache-mode", choices=("auto", "no-open", "keep-cache"),
                       default=None,
                       help="how the kernel caches the view: no-open (reads served by the "
                            "kernel; needs the patched pyfuse3), keep-cache (every open "
                            f"reaches the daemon), or auto: no-open when possible (default: "
                            f"${CACHE_MODE_ENV} or auto)")
    mount.add_argument("--writable", action="store_true",
                       help="take sysfs writes where the kernel takes them (sriov_numvfs; "
                            "docs/writes.md); read-only otherwise")
    mount.add_argument("--nonempty", action="store_true",
                       help="mount over a directory that holds files, hiding them (refused "
                            "by default, exit status 3)")
    mount.add_argument("--host-dev", action="store_true",
                       help="also make the NVIDIA driver's device nodes (/dev/nvidia*) in the "
                            "node's own /dev while serving; removed at stop")
    mount.add_argument("--host-dev-root", type=Path, default=Path("/dev"),
                       help="where --host-dev finds the node's /dev (default /dev; in a pod, "
                            "the node's /dev mounted elsewhere)")
    mount.add_argument("mountpoint", type=Path,
                       help="an empty directory to serve the view at; a missing one is made "
                            "(mode 0755) where its parent is root's alone, and removed at stop")


def run(args: argparse.Namespace) -> int:
    import trio

    from mokkafs.serve.daemon import serve
    from mokkafs.serve.process import raise_fd_limit
    from mokkafs.serve.wiring import wire

    config, wiring = wire(args)
    raise_fd_limit()
    try:
        trio.run(serve, config, wiring)
    except BaseExceptionGroup as group:
        # A refusal raised inside the daemon's nurseries (the metrics address taken, the
        # control socket impossible) comes wrapped; it is still that refusal, with its status.
        refusal, rest = group.split(MokkafsError)
        if refusal is None or rest is not None:
            raise
        raise _first(refusal) from None
    return 0


def _first(group: BaseExceptionGroup[MokkafsError]) -> MokkafsError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
