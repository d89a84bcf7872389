"""``mokkafs writes --control PATH list|clear``: the sysfs writes a serving daemon took
(docs/writes.md), one line each, or all of them undone at once."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "writes"
HELP = ("list or clear the sysfs writes a serving daemon took (its --control socket); see "
        "docs/writes.md")


def arguments(writes: argparse.ArgumentParser) -> None:
    writes.add_argument("--control", type=Path, required=True, metavar="PATH")
    verbs = writes.add_subparsers(dest="verb", required=True)
    verbs.add_parser("list", help="one line per write: function, attribute, value")
    verbs.add_parser("clear", help="undo every write: the profile's values serve again")


def run(args: argparse.Namespace) -> int:
    from mokkafs.serve.control import request

    op = "clear-writes" if args.verb == "clear" else "writes"
    answer = request(args.control, {"op": op})
    if args.verb == "clear":
        print(f"cleared {answer['cleared']} writes")
    for w in answer["writes"]:
        print(f"{w['target']}\t{w['attribute']}\t{w['value']}")
    return 0
