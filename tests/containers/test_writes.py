"""Writes from inside CDI containers (docs/writes.md): a privileged container's root makes VFs
with ``echo 4 > sriov_numvfs`` and sees them at once, as the SR-IOV config daemon does; an
unprivileged container's root is refused with EROFS, as its read-only /sys refuses it on a
real node, and changes nothing."""

from __future__ import annotations

from tests.helpers.containers import Node

NUMVFS = "/sys/bus/pci/devices/0000:18:00.0/sriov_numvfs"


def test_a_privileged_container_writes_and_an_unprivileged_one_cannot(
        writable_h100_node: Node) -> None:
    refused = writable_h100_node.run(f"sh -c 'echo 2 > {NUMVFS}' 2>&1; cat {NUMVFS}; "
                            "ls /sys/bus/pci/devices | grep -c 0000:18:00")
    lines = refused.splitlines()
    assert lines[0].endswith("Read-only file system") and lines[1:] == ["0", "1"], refused
    out = writable_h100_node.run(f"echo 4 > {NUMVFS}; echo rc=$?; cat {NUMVFS}; "
                        "ls /sys/bus/pci/devices | grep -c 0000:18:00; "
                        "basename $(readlink /sys/bus/pci/devices/0000:18:00.3/physfn); "
                        "ls /sys/bus/pci/devices/0000:18:00.*/net | grep -c ibp24s0v",
                        "--privileged")
    assert out.split() == ["rc=0", "4", "5", "0000:18:00.0", "4"], out
