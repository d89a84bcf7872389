"""``mokkafs writes --control PATH list|clear``: the sysfs writes a serving daemon took
(docs/writes.md), one line each, or all of them undone at once."""

from __future__ import annotations

import argparse

from mokkafs.cli.arguments import add_verbs, control_arg

NAME = "writes"
HELP = ("list or clear the sysfs writes a serving daemon took (its --control socket); see "
        "docs/writes.md")


def arguments(writes: argparse.ArgumentParser) -> None:
    control_arg(writes)
    add_verbs(writes, {"list": "one line per write: function, attribute, value",
                       "clear": "undo every write: the profile's values serve again"})


def run(args: argparse.Namespace) -> int:
    from mokkafs.serve.control import request

    op = "clear-writes" if args.verb == "clear" else "writes"
    answer = request(args.control, {"op": op})
    if args.verb == "clear":
        print(f"cleared {answer['cleared']} writes")
    for w in answer["writes"]:
        print(f"{w['target']}\t{w['attribute']}\t{w['value']}")
    return 0
