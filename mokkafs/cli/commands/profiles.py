"""``mokkafs profiles``: the shipped profiles, one line each."""

from __future__ import annotations

import argparse

NAME = "profiles"
HELP = "list the shipped profiles"


def arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from mokkafs.serve.pipeline import shipped

    for name, description in shipped().items():
        print(f"{name:8} {description}")
    return 0
