"""``mokkafs cleanup``: undo what a daemon that was killed left, as its record says."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mokkafs.cli.arguments import cdi_args, runtime_arg
from mokkafs.delivery.cdi import spec_file_name

NAME = "cleanup"
HELP = ("undo what a daemon that was killed left, as its record says: its CDI spec, its dead "
        "mount, the share over its parent (for ExecStopPost); refused while a daemon serves "
        "MOUNTPOINT")


def arguments(parser: argparse.ArgumentParser) -> None:
    cdi_args(parser)
    runtime_arg(parser)
    parser.add_argument("mountpoint", type=Path,
                        help="the mountpoint the killed daemon served")


def run(args: argparse.Namespace) -> int:
    from mokkafs.serve.cleanup import cleanup

    spec = Path(os.path.abspath(args.cdi_dir)) / spec_file_name(args.cdi_kind) \
        if args.cdi_dir else None
    cleanup(args.runtime_dir, args.mountpoint, spec,
            lambda line: print(f"mokkafs: {line}", file=sys.stderr))
    return 0
