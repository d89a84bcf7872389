"""The shim redirects exactly what the view simulates: every file, link and device node of
every profile's view (and of a view that writes changed) lies below a root the shim maps
(native/path_prefixes.h, generated from the surfaces' roots by mokkafs.delivery.prefixes), and
the host's own entries beside them do not. The daemon's own places (NVML's run/mokkafs-nvml) are
no kernel paths: the shim leaves them alone, since mokkafs's NVML reads them below MOKKAFS_ROOT
itself."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import pytest

from mokkafs.delivery import prefixes, preload
from mokkafs.state import State
from mokkafs.surfaces import ROOTS
from mokkafs.tree.nodes import Dir
from mokkafs.tree.roots import Root, own
from tests.helpers.live import profile_text
from tests.helpers.mounts import REPO
from tests.helpers.profiles import ALL_PROFILES, H100_GPU0, profile_id, state_of, tree_of
from tests.helpers.write_book import written

Redirected = Callable[[bytes], int]  # the shim's mokkafs_redirected
OWN = tuple(root.path for root in ROOTS if root.own)
MAPPED = (*prefixes.redirected("path"), *prefixes.redirected("numbered"),
          *prefixes.redirected("bus"))


@pytest.fixture(scope="module")
def redirected() -> Redirected:
    shim = ctypes.CDLL(str(preload.library()))  # RTLD_LOCAL: it hooks nothing in this process
    fn = shim.mokkafs_redirected
    fn.argtypes, fn.restype = [ctypes.c_char_p], ctypes.c_int
    return fn


def test_the_compiled_header_is_generated_from_the_surfaces_roots() -> None:
    assert (REPO / "native/path_prefixes.h").read_text() == prefixes.header(), (
        f"run: {prefixes.COMMAND}")


def test_a_root_outside_the_kernels_paths_is_refused_unless_own() -> None:
    """The shim looks only below /sys, /proc and /dev: a root elsewhere must say it is the
    daemon's own, or the generator refuses it."""
    with pytest.raises(ValueError, match=r"run/elsewhere: the shim maps kernel paths only"):
        prefixes.header((*ROOTS, Root("run/elsewhere")))
    assert prefixes.header((*ROOTS, own("run/elsewhere"))) == prefixes.header()
    assert OWN == ("run/mokkafs-nvml",)


def test_no_two_surfaces_declare_one_root() -> None:
    paths = [root.path for root in ROOTS]
    assert len(paths) == len(set(paths))


def check_view(state: State, redirected: Redirected) -> None:
    tree = tree_of(state)
    for rel, entry in tree.walk():
        logical = f"/{rel}"
        if any(rel == p or rel.startswith(f"{p}/") for p in OWN) or \
                any(p.startswith(f"{rel}/") for p in OWN):  # run/ and below
            assert not redirected(logical.encode()), logical
            continue
        if redirected(logical.encode()):
            continue
        # Not redirected: only a directory the host has too, on the way to simulated ones.
        assert isinstance(entry.node, Dir), logical
        assert any(p.startswith(f"{logical}/") for p in MAPPED) or logical == "/", logical


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_every_simulated_path_is_redirected(path: Path, redirected: Redirected) -> None:
    check_view(state_of(path), redirected)


def test_a_function_bound_to_vfio_pci_is_redirected(tmp_path: Path,
                                                    redirected: Redirected) -> None:
    """vfio-pci's class devices (sys/class/vfio-dev) are the view's, as its dev/vfio is."""
    text = profile_text("h100").replace('  driver_version: "550.163.01"\n',
                                        '  driver_version: "550.163.01"\n  vfio_pci: true\n')
    (tmp_path / "vfio.yaml").write_text(text)
    _, served = written(state_of(tmp_path / "vfio.yaml"),
                        (H100_GPU0, "driver_override", "vfio-pci\n"),
                        ("nvidia", "unbind", H100_GPU0), ("pci", "drivers_probe", H100_GPU0))
    group = served.function(H100_GPU0).iommu_group
    assert tree_of(served).resolve(f"sys/class/vfio-dev/vfio{group}") is not None
    check_view(served, redirected)


@pytest.mark.parametrize("logical", [
    "/sys/module/fuse", "/sys/module/nvidia_drm", "/sys/class/misc/fuse", "/proc/driver/rtc",
    "/proc/driver", "/proc/stat", "/sys/devices/virtual/net/lo", "/sys/devices/system/memory",
    "/sys/class/infiniband_cm", "/sys/kernel/mm", "/proc/modules2", "/sys/devices/pci0000:zz",
    "/sys/devices/pci0000:188", "/dev/nvidia", "/dev/nvidia0x", "/dev/nvidia-nvswitch",
    "/dev/nvidia-uvmx", "/dev/nvram", "/run/mokkafs-nvml",
])
def test_the_hosts_own_entries_are_not(logical: str, redirected: Redirected) -> None:
    assert redirected(logical.encode()) == 0


@pytest.mark.parametrize("logical", [
    "/sys/devices/pci0000:18", "/sys/devices/pci0000:18/0000:18:00.0/vendor", "/dev/nvidia0",
    "/dev/nvidia12", "/dev/nvidia-nvswitch3", "/proc/driver/nvidia/version", "/proc/devices",
    "/sys/class/vfio-dev/vfio7",
])
def test_the_views_own_entries_are(logical: str, redirected: Redirected) -> None:
    assert redirected(logical.encode()) == 1
