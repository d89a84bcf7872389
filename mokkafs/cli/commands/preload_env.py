"""``mokkafs preload-env``: shell exports that point libc consumers at a serving mount."""

from __future__ import annotations

import argparse
import os

from mokkafs.cli.arguments import served_arg
from mokkafs.delivery.mounts import require_serving

NAME = "preload-env"
HELP = ("print shell exports that point libc consumers at a serving mount (LD_PRELOAD shim)")


def arguments(parser: argparse.ArgumentParser) -> None:
    served_arg(parser)


def run(args: argparse.Namespace) -> int:
    from mokkafs.delivery.preload import environment, shell_exports

    require_serving(args.mountpoint)
    print(shell_exports(environment(args.mountpoint, os.environ.get("LD_PRELOAD", ""))), end="")
    return 0
