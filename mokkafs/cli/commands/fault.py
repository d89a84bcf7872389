"""``mokkafs fault``: apply, clear or list the faults of a serving daemon, over its control
socket (docs/faults.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mokkafs.cli.arguments import add_verbs, control_arg

NAME = "fault"
HELP = ("apply, clear or list faults of a serving daemon (its --control socket); see "
        "docs/faults.md")


def arguments(parser: argparse.ArgumentParser) -> None:
    control_arg(parser)
    verbs = add_verbs(parser, {
        "apply": "apply the faults of FILE (YAML: a faults: list)",
        "clear": "clear faults by name (none: all of them)",
        "list": "one line per fault: name, kind, target, state, source (restored: kept from "
                "a daemon before), seconds left (-: until cleared)"})
    verbs["apply"].add_argument("file", type=Path, help="a YAML file holding a faults: list")
    verbs["clear"].add_argument("names", nargs="*", help="the faults' names (none: every fault)")


def run(args: argparse.Namespace) -> int:
    from mokkafs.serve.control import request
    from mokkafs.serve.pipeline import profile_text

    if args.verb == "apply":
        path = args.file
        message = {"op": "apply", "file": str(path), "text": profile_text(path)}
    elif args.verb == "clear":
        message = {"op": "clear", "names": args.names}
    else:
        message = {"op": "list"}
    answer = request(args.control, message)
    if args.verb == "list":
        for f in answer["faults"]:
            source = f"{f['source']} (restored)" if f.get("restored") else f["source"]
            left = "-" if f.get("remaining") is None else f"{f['remaining']:.1f}s"
            print(f"{f['name']}\t{f['kind']}\t{f['target']}\t{f['state']}\t{source}\t{left}")
    return 0
