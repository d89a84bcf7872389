"""rdma_ucm's misc device (drivers/infiniband/core/ucma.c): ``/dev/infiniband/rdma_cm``, the
node through which librdmacm makes connections, on the misc major 10 with a dynamic minor,
and its class device ``sys/devices/virtual/misc/rdma_cm`` (``sys/class/misc/rdma_cm``).

Present with InfiniBand. The RDMA shared device plugin hands /dev/infiniband/rdma_cm to every
pod when it exists; CDI specs carry it with the verbs and MAD nodes.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.surfaces import power
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import CharDevice, Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

MISC_MAJOR = 10
# The minor the kernel handed out on the systems whose /dev/infiniband listings are published
# (k8s-rdma-shared-dev-plugin#98, sriov-network-device-plugin#342); dynamic in truth.
MINOR = 56
DEV = "dev/infiniband/rdma_cm"
DEVICE = "sys/devices/virtual/misc/rdma_cm"
MISC_CLASS = "sys/class/misc"
ABI_VERSION = 4  # RDMA_USER_CM_ABI_VERSION


def device_number() -> tuple[str, int, int]:
    """(/dev path, major, minor) of the node."""
    return f"/{DEV}", MISC_MAJOR, MINOR


def nodes(state: State) -> Iterator[Node]:
    if not state.rdma_loaded:
        return
    yield CharDevice(DEV, MISC_MAJOR, MINOR)
    yield Dir(DEVICE)
    yield text(f"{DEVICE}/dev", f"{MISC_MAJOR}:{MINOR}")
    yield text(f"{DEVICE}/abi_version", ABI_VERSION)
    yield File(f"{DEVICE}/uevent", f"MAJOR={MISC_MAJOR}\nMINOR={MINOR}\nDEVNAME=infiniband/"
               "rdma_cm\nDEVMODE=0666\n".encode(), 0o644)
    yield from power.of_class_device(DEVICE)
    yield relative_link(f"{DEVICE}/subsystem", MISC_CLASS)
    yield relative_link(f"{MISC_CLASS}/rdma_cm", DEVICE)


# (its node, dev/infiniband/rdma_cm, lies below the InfiniBand surface's dev/infiniband)
SURFACE = stateless("rdma_cm", nodes, ("rdma_loaded",),
                    (kernel(DEVICE), kernel(f"{MISC_CLASS}/rdma_cm")))
