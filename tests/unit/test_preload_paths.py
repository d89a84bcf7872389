"""The shim redirects exactly what the view simulates: every file, link and device node of
every profile's view lies below a prefix compiled into the shim (native/path_prefixes.h, made
from mokkafs.delivery.preload.REDIRECTED), and the host's own entries beside them do not.
NVML's own place (run/mokkafs-nvml) is no kernel path: the shim leaves it alone, since mokkafs's
NVML reads it below MOKKAFS_ROOT itself."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from mokkafs.delivery import preload
from mokkafs.surfaces import nvml
from mokkafs.tree.nodes import Dir
from tests.helpers.mounts import REPO
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of, tree_of


@pytest.fixture(scope="module")
def redirected() -> ctypes._NamedFuncPointer:
    shim = ctypes.CDLL(str(preload.library()))  # RTLD_LOCAL: it hooks nothing in this process
    fn = shim.mokkafs_redirected
    fn.argtypes, fn.restype = [ctypes.c_char_p], ctypes.c_int
    return fn


def test_the_compiled_header_is_generated_from_the_python_list() -> None:
    assert (REPO / "native/path_prefixes.h").read_text() == preload.header(), (
        "run: python -m mokkafs.delivery.preload > native/path_prefixes.h")


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_every_simulated_path_is_redirected(path: Path,
                                            redirected: ctypes._NamedFuncPointer) -> None:
    tree = tree_of(state_of(path))
    for rel, entry in tree.walk():
        logical = f"/{rel}"
        if rel == "run" or rel.startswith(f"{nvml.ROOT}"):
            assert not redirected(logical.encode()), logical
            continue
        if redirected(logical.encode()):
            continue
        # Not redirected: only a directory the host has too, on the way to simulated ones.
        assert isinstance(entry.node, Dir), logical
        assert any(p.startswith(f"{logical}/") for p in preload.REDIRECTED) \
            or logical in ("/", "/sys/devices"), logical


@pytest.mark.parametrize("logical", [
    "/sys/module/fuse", "/sys/module/nvidia_drm", "/sys/class/misc/fuse", "/proc/driver/rtc",
    "/proc/stat", "/sys/devices/virtual/net/lo", "/sys/devices/system/memory",
    "/sys/class/infiniband_cm", "/sys/kernel/mm", "/proc/modules2", "/sys/devices/pci0000:zz",
    "/dev/nvidia", "/dev/nvidia0x", "/dev/nvidia-nvswitch", "/dev/nvidia-uvmx", "/dev/nvram",
])
def test_the_hosts_own_entries_are_not(logical: str,
                                       redirected: ctypes._NamedFuncPointer) -> None:
    assert redirected(logical.encode()) == 0
