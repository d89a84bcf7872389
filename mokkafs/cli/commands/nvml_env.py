"""``mokkafs nvml-env``: shell exports that point NVML consumers at a serving mount."""

from __future__ import annotations

import argparse
import os

from mokkafs.cli.arguments import served_arg
from mokkafs.delivery.mounts import require_serving

NAME = "nvml-env"
HELP = ("print shell exports that point NVML consumers (pynvml, gpustat, nvitop) at a "
        "serving mount (mokkafs's libnvidia-ml)")


def arguments(parser: argparse.ArgumentParser) -> None:
    served_arg(parser)


def run(args: argparse.Namespace) -> int:
    from mokkafs.delivery.nvml import environment
    from mokkafs.delivery.preload import shell_exports

    require_serving(args.mountpoint)
    print(shell_exports(environment(args.mountpoint, os.environ.get("LD_LIBRARY_PATH", ""))),
          end="")
    return 0
