"""What a daemon started now would serve, without mounting it: for ``tree`` and ``render``."""

from __future__ import annotations

import argparse
import time

from mokkafs.faults.effects import applied, at
from mokkafs.profile.resolve import read_text, resolve
from mokkafs.serve.wiring import compiler, options
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.build import Tree


def served_state(args: argparse.Namespace) -> State:
    """The profile's State with its faults applied now, as a daemon started now serves it."""
    path = resolve(args.profile)
    now = time.monotonic()
    compile_profile = compiler(options(args, lambda: now))
    return at(applied(compile_profile(read_text(path), str(path)), now), now)


def served_tree(args: argparse.Namespace) -> Tree:
    return Assembler(SURFACES).build(served_state(args))[0]
