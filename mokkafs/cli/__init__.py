"""The ``mokkafs`` command: the parser, dispatch to a command, and exit statuses; the work
happens elsewhere. Each command is a module of ``mokkafs.cli.commands``, registered there by
name. ``tree``, ``render`` and ``profiles`` never import pyfuse3."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mokkafs import __version__
from mokkafs.cli.arguments import sentence
from mokkafs.cli.commands import COMMANDS, load
from mokkafs.errors import (
    EXIT_INTERRUPTED,
    EXIT_STATUS_HEAD,
    MokkafsError,
    exit_status_text,
)
from mokkafs.serve.process import setup_logging

DESCRIPTION = ("A simulated GPU node (DGX/HGX/GB200) as seen from inside: its /sys (PCIe, "
               "InfiniBand, DMI, CPUs and NUMA nodes, modules), its /proc (devices, cpuinfo, "
               "meminfo, modules, driver/nvidia) and its /dev/nvidia* nodes, served over FUSE "
               "and computed live from a YAML hardware profile.")


class _Help(argparse.HelpFormatter):
    """Help text wrapped as argparse wraps it, but the exit statuses' lines kept as made."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXIT_STATUS_HEAD):
            return text
        return super()._fill_text(text, width, indent)


def parser() -> argparse.ArgumentParser:
    epilog = exit_status_text()
    top = argparse.ArgumentParser(prog="mokkafs", description=DESCRIPTION, epilog=epilog,
                                  formatter_class=_Help)
    top.add_argument("--version", action="version", version=f"mokkafs {__version__}")
    top.add_argument("--debug", action="store_true", help="log at debug level")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND",
                             help="one of these (each has its own --help):")
    for name in COMMANDS:
        command = load(name)
        p = sub.add_parser(command.NAME, help=command.HELP, description=sentence(command.HELP),
                           epilog=epilog, formatter_class=_Help)
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
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `mokkafs tree | head`
        sys.stdout = None
        return 0


if __name__ == "__main__":
    sys.exit(main())
