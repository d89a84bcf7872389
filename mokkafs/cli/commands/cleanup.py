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
    from mokkafs.fuse.mount import refuse_link
    from mokkafs.serve.owned import Owned

    refuse_link(args.mountpoint)
    owned = Owned.acquire(args.runtime_dir, args.mountpoint)  # refused while a daemon lives
    try:
        left = owned.left
        if left is None:
            print(f"mokkafs: no daemon left a record of {owned.mountpoint} in "
                  f"{args.runtime_dir}; nothing to undo", file=sys.stderr)
            return 0
        if args.cdi_dir and left.spec is not None and Path(left.spec.path) != Path(
                os.path.abspath(args.cdi_dir)) / spec_file_name(args.cdi_kind):
            print(f"mokkafs: the record names the CDI spec {left.spec.path}, which is the "
                  "one undone", file=sys.stderr)
        for line in owned.undo(release_share=True):
            print(f"mokkafs: {line}", file=sys.stderr)
    finally:
        owned.close()
    return 0
