"""``mokkafs tree``: print the view (or a subtree) without mounting it."""

from __future__ import annotations

import argparse
import time

from mokkafs.cli.arguments import profile_args
from mokkafs.cli.served import served_tree
from mokkafs.delivery.render import mode_string
from mokkafs.errors import UsageError
from mokkafs.tree.follow import PathError, follow
from mokkafs.tree.nodes import File, Symlink

NAME = "tree"
HELP = "print the view (or a subtree) without mounting"


def arguments(parser: argparse.ArgumentParser) -> None:
    profile_args(parser)
    parser.add_argument("path", nargs="?", default="",
                        help="mount-relative path, e.g. sys/bus/pci; symbolic links in it "
                             "are followed, as through the mount")
    parser.add_argument("--cat", action="store_true", help="print the content of text files")


def run(args: argparse.Namespace) -> int:
    tree = served_tree(args)
    try:  # links in the path followed, as through the mount
        prefix = follow(tree, args.path)
    except PathError as exc:
        raise UsageError(str(exc)) from None
    shown = args.path.strip("/")  # paths below it are printed below the path as given
    now = time.monotonic()
    for path, entry in tree.walk():
        if prefix and path != prefix and not path.startswith(prefix + "/"):
            continue
        name = shown + path[len(prefix):] if prefix else "/".join(filter(None, (shown, path)))
        line = f"{mode_string(entry.mode)} {name or '.'}"
        node = entry.node
        if isinstance(node, Symlink):
            line += f" -> {node.target}"
        elif isinstance(node, File) and args.cat and not node.error:
            data = node.read(now)
            if data.isascii():
                line += " = " + data.decode().rstrip("\n").replace("\n", "\\n")
            else:
                line += f" = <{len(data)} bytes of binary>"
        print(line)
    return 0
