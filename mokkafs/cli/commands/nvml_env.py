"""``mokkafs nvml-env``: shell exports that point NVML consumers at a serving mount."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mokkafs.cli.arguments import served_arg
from mokkafs.delivery.mounts import require_serving

NAME = "nvml-env"
HELP = ("print shell exports that point NVML consumers (pynvml, gpustat, nvitop) at a "
        "serving mount (mokkafs's libnvidia-ml)")


def arguments(parser: argparse.ArgumentParser) -> None:
    served_arg(parser)
    parser.add_argument("--control", type=Path, default=None, metavar="PATH",
                        help="the daemon's control socket (its mount --control): NVML's MIG "
                        "changes go through it (MOKKAFS_CONTROL)")


def run(args: argparse.Namespace) -> int:
    from mokkafs.delivery.nvml import environment
    from mokkafs.delivery.preload import shell_exports

    require_serving(args.mountpoint)
    print(shell_exports(environment(args.mountpoint, os.environ.get("LD_LIBRARY_PATH", ""),
                                    args.control)), end="")
    return 0
