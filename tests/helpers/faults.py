"""Faults in tests: an h100 State with faults, a port's file in a tree, and a real node on a
clock the test drives with its control socket and ``mokkafs fault``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mokkafs.state import State
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File
from tests.helpers.cli import mokkafs
from tests.helpers.clocked import clocked_command, set_clock
from tests.helpers.live import Live, live_mount, profile_text, rename_over
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import state_of

H100 = (SHIPPED_PROFILES / "h100.yaml").read_text()
START = 5000.0  # where a FaultNode's clock starts


def with_faults(tmp_path: Path, faults: str, node: str = "node-a") -> State:
    path = tmp_path / "faulty.yaml"
    path.write_text(H100 + "faults:\n" + faults)
    return state_of(path, node_name=node)


def port_file(tree: Tree, state: State, name: str, hca: str = "mlx5_0", now: float = 0.0,
              ) -> str:
    h = next(h for h in state.hcas if h.name == hca)
    base = f"{state.function(h.bdf).path}/infiniband/{hca}/ports/1"
    entry = tree.resolve(f"{base}/{name}")
    assert entry is not None and isinstance(entry.node, File), name
    return entry.node.read(now).decode()


@dataclass
class FaultNode:
    """A live mount on a clock the test drives (from ``START``), with its control socket."""

    live: Live
    clock: Path
    control: Path

    def at(self, seconds: float) -> None:
        set_clock(self.clock, START + seconds)

    def port(self, name: str, hca: str = "mlx5_0") -> str:
        return (self.live.mount.sys / f"class/infiniband/{hca}/ports/1/{name}").read_text()

    def fault(self, *args: str) -> subprocess.CompletedProcess[str]:
        return mokkafs("fault", "--control", str(self.control), *args)

    def states(self) -> dict[str, str]:
        out = self.fault("list")
        assert out.returncode == 0, out.stderr
        return {line.split("\t")[0]: line.split("\t")[3] for line in out.stdout.splitlines()}


@contextmanager
def fault_node(tmp_path: Path, faults: str = "", profile: str = "h100",
               expect: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> Iterator[FaultNode]:
    """A FaultNode of a shipped profile; ``faults`` (a YAML list's items) are added to it by
    a swap to generation 2 before it is given."""
    clock = tmp_path / "clock"
    set_clock(clock, START)
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, profile, ["--control", str(control),
                                        "--counter-staleness-ms", "0", *extra],
                    command=clocked_command(clock), expect=expect) as live:
        if faults:
            rename_over(live, profile_text(profile) + faults)
            live.wait_generation(2)
        yield FaultNode(live, clock, control)
