"""``mokkafs capture``: a machine's /sys and /proc (or a tree below ``--root``) into a profile
that replays it (docs/capture.md)."""

from __future__ import annotations

import argparse

NAME = "capture"
HELP = ("write a profile that reproduces this machine (or the tree below --root) to stdout "
        "or --output; see docs/capture.md")


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default="/", help="the machine's tree: / (default), a copy of a "
                                               "node's /sys and /proc, or a mokkafs mount")
    p.add_argument("--output", "-o", default=None,
                   help="write the profile to this new file (default: stdout)")
    p.add_argument("--anonymize", action="store_true",
                   help="replace serial numbers, UUIDs, GUIDs, MACs and host names by stable "
                        "pseudonyms")
    p.add_argument("--node-name", default=None,
                   help="the node's name (default: the tree's host name)")
    p.add_argument("--time-limit", type=float, default=2.0,
                   help="seconds a single file may take to read (default 2)")


def run(args: argparse.Namespace) -> int:
    from mokkafs.capture.command import run as capture

    return capture(args)
