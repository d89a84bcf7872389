"""The commands of ``mokkafs``, one module each, listed in the order ``--help`` shows them.

A command's module holds ``NAME``, ``HELP``, ``arguments(parser)`` (its
options) and ``run(args) -> exit status``; it imports what only it needs inside ``run``.
Adding a command is one module here and one line in ``COMMANDS``."""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Protocol, cast

COMMANDS = (
    "profiles",
    "mount",
    "cleanup",
    "cdi",
    "tree",
    "preload_env",
    "nvml_env",
    "fault",
    "mig",
    "writes",
    "render",
    "capture",
)


class Command(Protocol):
    NAME: str
    HELP: str

    def arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def load(name: str) -> Command:
    return cast(Command, import_module(f"{__name__}.{name}"))
