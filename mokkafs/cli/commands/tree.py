"""``mokkafs tree``: print the view (or a subtree) without mounting it."""

from __future__ import annotations

import argparse
import time

from mokkafs.cli.arguments import profile_args

NAME = "tree"
HELP = "print the view (or a subtree) without mounting"


def arguments(parser: argparse.ArgumentParser) -> None:
    profile_args(parser)
    parser.add_argument("path", nargs="?", default="",
                        help="mount-relative path, e.g. sys/bus/pci; symbolic links in it "
                             "are followed, as through the mount")
    parser.add_argument("--cat", action="store_true", help="print the content of text files")


def run(args: argparse.Namespace) -> int:
    from mokkafs.delivery.listing import lines
    from mokkafs.serve.pipeline import served_tree

    for line in lines(served_tree(args), args.path, time.monotonic(), cat=args.cat):
        print(line)
    return 0
