"""The ``mokkafs`` command: the parser, dispatch to a command, and exit statuses; the work
happens elsewhere. Each command is a module of ``mokkafs.cli.commands``, registered there by
name. ``tree``, ``render`` and ``profiles`` never import pyfuse3."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mokkafs import __version__
from mokkafs.cli.commands import COMMANDS, load
from mokkafs.errors import MokkafsError
from mokkafs.serve.process import setup_logging

DESCRIPTION = ("A simulated GPU node's sysfs and /proc/devices, served over FUSE and computed "
               "live from a hardware profile.")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="mokkafs", description=DESCRIPTION)
    top.add_argument("--version", action="version", version=f"mokkafs {__version__}")
    top.add_argument("--debug", action="store_true", help="log at debug level")
    sub = top.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        command = load(name)
        p = sub.add_parser(command.NAME, help=command.HELP)
        command.arguments(p)
        p.set_defaults(run=command.run)
    return top


def parse_mount(argv: Sequence[str]) -> argparse.Namespace:
    """``mokkafs mount``'s arguments (``argv`` without the ``mount``)."""
    return parser().parse_args(["mount", *argv])


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    setup_logging(args.debug)
    try:
        status: int = args.run(args)
        return status
    except MokkafsError as exc:
        print(f"mokkafs: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mokkafs tree | head`
        sys.stdout = None
        return 0


if __name__ == "__main__":
    sys.exit(main())
