"""Paths resolved in a tree as the kernel resolves them through the mount
(``mokkafs.tree.follow``): links anywhere in the path, relative to their directory, ``..``
after a link, a bounded number of links, and what leads outside the view named."""

from __future__ import annotations

import pytest

from mokkafs.tree.build import build
from mokkafs.tree.follow import MAX_LINKS, PathError, follow
from mokkafs.tree.nodes import File, Symlink
from tests.helpers.profiles import H100_GPU0, device_path, state_of, tree_of

TREE = build([
    File("sys/devices/pci0000:00/0000:00:01.0/vendor", b"0x10de\n"),
    Symlink("sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0"),
    Symlink("sys/class/x/dev", "../../bus/pci/devices/0000:00:01.0"),  # a link to a link
    Symlink("sys/loop/a", "b"), Symlink("sys/loop/b", "a"),
    Symlink("sys/out/abs", "/etc"), Symlink("sys/out/up", "../../../etc"),
], generation=1, mtime_ns=0)
GPU = "sys/devices/pci0000:00/0000:00:01.0"


@pytest.mark.parametrize(("path", "found"), [
    ("sys/bus/pci/devices/0000:00:01.0/vendor", f"{GPU}/vendor"),
    ("/sys/class/x/dev/vendor", f"{GPU}/vendor"),
    ("sys/class/x/dev/../0000:00:01.0/./vendor", f"{GPU}/vendor"),  # '..' after the link
    ("sys/bus/pci/devices/0000:00:01.0", GPU),
    ("", ""), ("sys//bus/", "sys/bus"),
])
def test_links_in_a_path_are_followed_as_the_kernel_does(path: str, found: str) -> None:
    assert follow(TREE, path) == found


@pytest.mark.parametrize(("path", "said"), [
    ("sys/loop/a/x", f"more than {MAX_LINKS} symbolic links (ELOOP)"),
    ("sys/out/abs/passwd", "sys/out/abs -> /etc: the link leads outside the view"),
    ("sys/out/up", "sys/out/up -> ../../../etc: the link leads outside the view"),
    ("../etc", "'..' leads outside the view"),
    ("sys/nowhere/x", "sys/nowhere: no such path in the view"),
    (f"{GPU}/vendor/x", f"{GPU}/vendor: not a directory"),
])
def test_what_cannot_resolve_is_named(path: str, said: str) -> None:
    with pytest.raises(PathError, match=None) as caught:
        follow(TREE, path)
    assert said in str(caught.value)


def test_a_shipped_views_bus_link_leads_to_its_device() -> None:
    tree = tree_of(state_of("h100"))
    assert follow(tree, f"sys/bus/pci/devices/{H100_GPU0}/vendor") == \
        f"{device_path(H100_GPU0)}/vendor"
