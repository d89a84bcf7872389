"""The pipeline, assembled in one place: a profile in, its State and its Tree out.

profile -> State (the compile, with the command line's ``Options``) -> surfaces -> Tree. The
daemon (``mokkafs.serve.wiring``, ``mokkafs.serve.daemon``), the commands that need no mount
(``tree``, ``render``, ``profiles``, ``fault apply``'s reading), tests and bench/ all take it
from here; none of them puts the parts together itself.

Nothing here imports pyfuse3, and the compiler (with pydantic and the YAML parser) is
imported at the first compile in this process: the daemon's compiles run in a child
(``mokkafs.source.child``), so it never loads them."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mokkafs.clock import Clock
from mokkafs.faults.effects import applied, at
from mokkafs.host.facts import default_node_name, read_host_facts
from mokkafs.profile.options import Options
from mokkafs.profile.resolve import (
    describe_shipped,
    load_state,
    read_text,
    resolve,
    shipped_profiles,
)
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler, Build, Surface
from mokkafs.tree.build import Tree

if TYPE_CHECKING:
    from mokkafs.profile.compile import PciCache


def profile_path(spec: str) -> Path:
    """A shipped profile's name (``h100``) or a path to a YAML file, as a path. Raises
    ``ProfileError`` for neither."""
    return resolve(spec)


def profile_text(path: Path) -> str:
    """A profile's (or a fault file's) text, read as the daemon reads a profile: a regular
    file, bounded, UTF-8. Raises ``ProfileError``."""
    return read_text(path)


def shipped() -> dict[str, str]:
    """The shipped profiles by name, each with its description."""
    return {name: describe_shipped(path) for name, path in shipped_profiles().items()}


def options(args: argparse.Namespace, clock: Clock = time.monotonic) -> Callable[[], Options]:
    """A compile's options at each moment, from the command line's profile options: the same
    node, started once (on ``clock``)."""
    node_name = args.node_name or default_node_name()
    started_at = clock()
    host_sysfs = getattr(args, "host_sysfs", "none") == "auto"

    def at_this_moment() -> Options:
        return Options(
            node_name=node_name,
            node_index=args.node_index,
            loaded_at=time.time(),
            started_at=started_at,
            counter_quantum=max(args.counter_staleness_ms, 0.0) / 1000.0,
            host=read_host_facts(sysfs=host_sysfs),
            infiniband=not args.no_infiniband,
            machine=not args.no_machine,
        )

    return at_this_moment


def compiler(options: Callable[[], Options]) -> Callable[[str, str], State]:
    """Compile a profile's text, in this process (each compile reusing what it can of the
    one before). The compiler is imported at the first compile."""
    caches: list[PciCache] = []

    def compile_profile(text: str, filename: str) -> State:
        from mokkafs.profile.compile import PciCache
        from mokkafs.profile.resolve import compile_text

        if not caches:
            caches.append(PciCache())
        return compile_text(text, filename, options(), caches[0])

    return compile_profile


def compiled(path: Path, options: Options) -> State:
    """Read and compile one profile file, in this process. Raises ``ProfileError``."""
    return load_state(path, options)


def started(state: State, now: float) -> State:
    """``state`` as a daemon started at ``now`` serves it: its faults' timing starts then,
    and they are in effect as of then."""
    return at(applied(state, now), now)


def builder(surfaces: Sequence[Surface[Any]] = SURFACES) -> Build:
    """What makes the Tree of a State (and how many nodes each surface described), reusing
    the Tree before when given one. It holds the surfaces' caches: one per view served."""
    return Assembler(surfaces).build


def tree_of(state: State, surfaces: Sequence[Surface[Any]] = SURFACES) -> Tree:
    """The Tree of ``state``, built whole, as it is (its faults as ``state`` has them)."""
    return builder(surfaces)(state, None)[0]


def served_state(args: argparse.Namespace) -> State:
    """The State a daemon started now with these profile options would serve, compiled in
    this process, its faults in effect as of now."""
    path = profile_path(args.profile)
    now = time.monotonic()
    compile_profile = compiler(options(args, lambda: now))
    return started(compile_profile(profile_text(path), str(path)), now)


def served_tree(args: argparse.Namespace) -> Tree:
    """The Tree a daemon started now with these profile options would serve."""
    return tree_of(served_state(args))
