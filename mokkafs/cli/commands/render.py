"""``mokkafs render``: write the view to a directory as plain files."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mokkafs.cli.arguments import profile_args

NAME = "render"
HELP = "write the view to DEST as plain files"


def arguments(parser: argparse.ArgumentParser) -> None:
    profile_args(parser)
    parser.add_argument("dest", type=Path,
                        help="a directory to make, or an empty one, or one render wrote "
                             "before (replaced in one atomic exchange)")


def run(args: argparse.Namespace) -> int:
    from mokkafs.delivery.render import render
    from mokkafs.serve.pipeline import served_tree

    count = render(served_tree(args), args.dest, time.monotonic())
    print(f"mokkafs: wrote {count} entries to {args.dest}", file=sys.stderr)
    return 0
