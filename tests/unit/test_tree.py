"""Tree snapshots: stable inodes across generations, kernel-shaped relative links."""

from __future__ import annotations

import pytest

from mokkafs.tree.build import ROOT_INODE, TreeError, build, inode_of
from mokkafs.tree.nodes import Dir, File, relative_link, text
from tests.helpers.profiles import H100_GPU0, device_path, state_of, tree_of


def test_inodes_are_stable_across_generations_and_profiles() -> None:
    h100, h200 = tree_of(state_of("h100")), tree_of(state_of("h200"))
    path = f"{device_path(H100_GPU0)}/vendor"  # DGX H100 and H200 share their layout
    assert h100.resolve(path).inode == h200.resolve(path).inode  # type: ignore[union-attr]
    assert h100.resolve("").inode == ROOT_INODE  # type: ignore[union-attr]
    assert h100.resolve(path).inode == inode_of(path, "f")  # type: ignore[union-attr]
    # Numbers a daemon of an earlier release gave these paths: a restarted or upgraded daemon
    # must give the same ones.
    assert inode_of("sys/devices/pci0000:15/0000:1b:00.0/vendor", "f") == 4238456817034517747
    assert inode_of("sys/bus/pci/devices/0000:1b:00.0", "l") == 5490276425814602694
    assert inode_of("sys/class", "d") == 1673453934066802547


def test_relative_link() -> None:
    link = relative_link("sys/class/infiniband/mlx5_0",
                         "sys/devices/pci0000:15/0000:1c:00.0/infiniband/mlx5_0")
    assert link.target == "../../devices/pci0000:15/0000:1c:00.0/infiniband/mlx5_0"


def test_duplicate_path_is_an_error() -> None:
    with pytest.raises(TreeError, match="two surfaces"):
        build([text("a/b", 1), text("a/b", 2)], 1, 0)


def test_implied_parent_can_be_described_later() -> None:
    tree = build([text("a/b/c", 1), Dir("a/b", 0o700)], 1, 0)
    assert tree.resolve("a/b").node == Dir("a/b", 0o700)  # type: ignore[union-attr]


def test_node_below_a_file_is_an_error() -> None:
    with pytest.raises(TreeError, match="not a directory"):
        build([File("a", b"x"), text("a/b", 1)], 1, 0)


def test_walk_lists_parents_first_in_name_order() -> None:
    tree = build([text("b/y", 1), text("b/x", 1), text("a", 1)], 1, 0)
    assert [p for p, _ in tree.walk()] == ["", "a", "b", "b/x", "b/y"]
