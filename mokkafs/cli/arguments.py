"""Options more than one command takes."""

from __future__ import annotations

import argparse
from pathlib import Path

from mokkafs.delivery.cdi import KIND

DEFAULT_PROFILE = "h100"


def seconds(text: str) -> float:
    """A length of time in seconds, finite and above 0 (argparse's ``type``)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is no number of seconds above 0")
    return value


def seconds_or_never(text: str) -> float:
    """``seconds``, or ``never`` (infinitely many)."""
    return float("inf") if text == "never" else seconds(text)


def sentence(help_line: str) -> str:
    """A command's one-line help as the description its own --help shows."""
    return help_line[:1].upper() + help_line[1:] + "."


def control_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--control", type=Path, required=True, metavar="PATH",
                   help="the serving daemon's control socket (its mount --control)")


def served_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mountpoint", type=Path, required=True,
                   help="where a mokkafs mount serves (exit status 3 when none does)")


def add_verbs(p: argparse.ArgumentParser, verbs: dict[str, str]
              ) -> dict[str, argparse.ArgumentParser]:
    """A command's verbs (``mokkafs fault apply``), each with its help line and description;
    the one given is ``args.verb``."""
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB",
                           help="what to do (each has its own --help)")
    return {name: sub.add_parser(name, help=text, description=sentence(text))
            for name, text in verbs.items()}


def profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"shipped profile name or YAML file (default: {DEFAULT_PROFILE})")
    p.add_argument("--node-name", default=None,
                   help="node name for GUIDs, LIDs and node_desc (default: the host name)")
    p.add_argument("--node-index", type=int, default=None,
                   help="this node's index in its fleet: makes IB GUIDs and LIDs unique")
    p.add_argument("--no-infiniband", action="store_true",
                   help="serve no InfiniBand surface, whatever the profile declares")
    p.add_argument("--no-machine", action="store_true",
                   help="serve no CPUs, NUMA nodes, /proc/cpuinfo or /proc/meminfo (the "
                        "host's show through), as machine.show: false does")
    p.add_argument("--counter-staleness-ms", type=float, default=100.0,
                   help="IB counters advance in steps of this many ms (0: exact at every read)")


def cdi_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--cdi-dir", type=Path, default=None, required=required,
                   help="the CDI spec directory (e.g. /etc/cdi)")
    p.add_argument("--cdi-kind", default=KIND,
                   help=f"CDI kind of the spec (default {KIND}; one per simulated node "
                        "on a machine)")


def runtime_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime-dir", type=Path, default=Path("/run/mokkafs-runtime"),
                   help="a directory only root can write, where each daemon holds its lock "
                        "and the record of what it made, and mounts sysfs instances for an "
                        "instant")
