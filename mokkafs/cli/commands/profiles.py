"""``mokkafs profiles``: the shipped profiles, one line each."""

from __future__ import annotations

import argparse

from mokkafs.profile.resolve import describe_shipped, shipped_profiles

NAME = "profiles"
HELP = "list the shipped profiles"


def arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    for name, path in shipped_profiles().items():
        print(f"{name:8} {describe_shipped(path)}")
    return 0
