"""InfiniBand: ``sys/class/infiniband{,_verbs,_mad}``, the devices under their PCI functions, and
``dev/infiniband/*`` (stat-only device nodes, for the preload shim's consumers).

Kernel layout (drivers/infiniband/core/sysfs.c, device.c, uverbs_main.c, user_mad.c): each RDMA
device lives at ``<pci function>/infiniband/mlx5_N`` and the class directory holds a relative
link to it; the verbs and MAD character devices live beside it under the same PCI function.
Counter files are dynamic: their content is computed from the State and the time of the read.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass

from mokkafs import counters
from mokkafs.model.identity import format_guid
from mokkafs.state import IB_HW_COUNTERS, Hca, IbPort, State, Traffic
from mokkafs.surfaces import rdma_cm
from mokkafs.tree.assemble import Surface
from mokkafs.tree.nodes import CharDevice, Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

SYS_CLASS = "sys/class"
CLASSES = ("infiniband", "infiniband_verbs", "infiniband_mad")
DEV = "dev/infiniband"  # the verbs and MAD nodes, and rdma_cm's

PORT_STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
PHYS_STATES = {"Polling": (2, "Polling"), "Disabled": (3, "Disabled"),
               "Training": (4, "PortConfigurationTraining"), "LinkUp": (5, "LinkUp"),
               "LinkErrorRecovery": (6, "LinkErrorRecovery"), "Phy Test": (7, "Phy Test")}
# 4X link rate in Gb/s -> the speed name ib_core prints (per-lane SDR ... XDR)
RATE_NAMES = {10: "SDR", 20: "DDR", 40: "QDR", 56: "FDR", 100: "EDR", 200: "HDR",
              400: "NDR", 800: "XDR"}
CAP_MASK = 0xA651E848  # a ConnectX port's capability mask as ibstat shows it
# Character device numbers (include/rdma: 231 is IB_UVERBS_MAJOR and IB_UMAD_MAJOR). The
# kernel has 32 fixed uverbs minors from 192 and 64 fixed umad/issm minors; devices beyond
# those take minors of a dynamic region, simulated here above 256 on the same major.
UVERBS_BASE, UVERBS_FIXED = 192, 32
UMAD_FIXED, ISSM_BASE = 64, 64


def uverbs_minor(index: int) -> int:
    return UVERBS_BASE + index if index < UVERBS_FIXED else 256 + index


def umad_minor(port_index: int) -> int:
    return port_index if port_index < UMAD_FIXED else 512 + 2 * port_index


def issm_minor(port_index: int) -> int:
    return ISSM_BASE + port_index if port_index < UMAD_FIXED else 513 + 2 * port_index


def rate_text(gbps: int, width: int = 4) -> str:
    """ib_core's ``rate``: the total, then the width and the per-lane speed's name."""
    name = RATE_NAMES.get(gbps * 4 // width) if gbps * 4 % width == 0 else None
    return f"{gbps} Gb/sec ({width}X {name})" if name else f"{gbps} Gb/sec ({width}X)"


def gid0(port: IbPort) -> str:
    return f"fe80:0000:0000:0000:{format_guid(port.guid)}"


@dataclass(frozen=True, slots=True)
class CounterText:
    """The content of one counter file at a given time. A value, not a closure, so two builds
    of an unchanged port compare equal and a swap leaves its counters alone."""

    traffic: Traffic
    name: str
    started_at: float
    quantum: float

    def __call__(self, now: float) -> bytes:
        t = counters.elapsed(now, self.started_at, self.quantum)
        value = counters.counters_at(self.traffic, t).get(self.name)
        if value is None:  # a counter this traffic never moves
            value = counters.counter(self.traffic, self.name, t)
        return f"{value}\n".encode()


def _counter_file(path: str, port: IbPort, name: str, moving: frozenset[str],
                  started_at: float, quantum: float) -> File:
    """A counter the traffic moves is computed when read; any other is a fixed file (most
    error counters: nothing recomputes them, and the kernel keeps them like any attribute)."""
    if name not in moving:
        return text(path, counters.constant(port.traffic, name))
    return File(path, CounterText(port.traffic, name, started_at, quantum), quantum=quantum)


# What a port's subtree is made of: the HCA's directory, its GID and P_Key table lengths, the
# port, and the State's started_at and counter quantum (the counters' clock).
PortInputs = tuple[str, int, int, IbPort, float, float]


class PortCache:
    """The port subtrees of the surface's last run, by their inputs. A port's subtree is most
    of this surface (some hundred nodes), and most swaps leave ports alone: a firmware version
    changes every HCA and no port, a fault one port of one HCA. A run reuses the subtrees of
    ports whose inputs are the same. One run only, so no subtree outlives the tree that holds
    it by more than a swap; runs in two threads at once at worst miss each other's. Its owner
    (the assembler, ``mokkafs.tree.assemble``) passes it to every run."""

    def __init__(self) -> None:
        self.last: dict[PortInputs, tuple[Node, ...]] = {}


def _port(base: str, gid_table_len: int, pkey_table_len: int, port: IbPort,
          started_at: float, quantum: float) -> Iterator[Node]:
    p = f"{base}/ports/{port.number}"
    yield Dir(p, unit=True)  # a scrape's walk to counters/ and counters_ext/: one request
    yield text(f"{p}/state", f"{PORT_STATES[port.state]}: {port.state}")
    number, name = PHYS_STATES[port.phys_state]
    yield text(f"{p}/phys_state", f"{number}: {name}")
    yield text(f"{p}/rate", rate_text(port.rate_gbps, port.width))
    yield text(f"{p}/lid", f"0x{port.lid:x}")
    yield text(f"{p}/lid_mask_count", 0)
    yield text(f"{p}/sm_lid", f"0x{port.sm_lid:x}")
    yield text(f"{p}/sm_sl", 0)
    yield text(f"{p}/cap_mask", f"0x{CAP_MASK:08x}")
    yield text(f"{p}/link_layer", port.link_layer)
    zero_gid = ":".join(["0000"] * 8)
    for i in range(gid_table_len):
        yield text(f"{p}/gids/{i}", gid0(port) if i == 0 else zero_gid)
        kind = "IB/RoCE v1" if port.link_layer == "InfiniBand" else "RoCE v2"
        types = f"{p}/gid_attrs/types/{i}"
        yield text(types, kind) if i == 0 else File(types, b"", 0o444, error=errno.EINVAL)
        # No netdev stands behind a simulated port: the kernel answers EINVAL.
        yield File(f"{p}/gid_attrs/ndevs/{i}", b"", 0o444, error=errno.EINVAL)
    for i in range(pkey_table_len):
        yield text(f"{p}/pkeys/{i}", "0xffff" if i == 0 else "0x0000")
    moving = counters.moving(port.traffic)
    for name in counters.COUNTERS:
        yield _counter_file(f"{p}/counters/{name}", port, name, moving, started_at, quantum)
    for ext, name in counters.COUNTERS_EXT.items():
        yield _counter_file(f"{p}/counters_ext/{ext}", port, name, moving, started_at,
                            quantum)
    yield Dir(f"{p}/hw_counters")
    for name in IB_HW_COUNTERS:  # 0 unless a fault drives it
        yield _counter_file(f"{p}/hw_counters/{name}", port, name, moving, started_at, quantum)
    yield text(f"{p}/hw_counters/lifespan", 10, 0o644)


def _hca(hca: Hca, state: State, last: dict[PortInputs, tuple[Node, ...]],
         made: dict[PortInputs, tuple[Node, ...]]) -> Iterator[Node]:
    """An HCA's nodes; its ports' subtrees are taken from ``last`` where their inputs are
    the same, and every port's put in ``made``."""
    pci = state.function(hca.bdf).path
    base = f"{pci}/infiniband/{hca.name}"
    yield Dir(base)
    yield text(f"{base}/node_type", "1: CA")
    yield text(f"{base}/node_guid", format_guid(hca.node_guid))
    yield text(f"{base}/sys_image_guid", format_guid(hca.sys_image_guid))
    yield text(f"{base}/fw_ver", hca.fw_ver)
    yield text(f"{base}/hw_rev", hca.hw_rev)
    yield text(f"{base}/hca_type", hca.hca_type)
    yield text(f"{base}/board_id", hca.board_id)
    yield text(f"{base}/node_desc", hca.node_desc, 0o644)
    yield text(f"{base}/uevent", f"NAME={hca.name}", 0o644)
    yield relative_link(f"{base}/device", pci)
    yield relative_link(f"{base}/subsystem", f"{SYS_CLASS}/infiniband")
    yield Dir(f"{base}/ports")
    for port in hca.ports:
        key = (base, hca.gid_table_len, hca.pkey_table_len, port, state.started_at,
               state.counter_quantum)
        subtree = last.get(key)
        if subtree is None:
            subtree = tuple(_port(*key))
        made[key] = subtree
        yield from subtree
    yield relative_link(f"{SYS_CLASS}/infiniband/{hca.name}", base)

    major = state.major("infiniband_verbs")
    verbs = f"{pci}/infiniband_verbs/uverbs{hca.index}"
    yield from _chardev(verbs, pci, "infiniband_verbs", major, uverbs_minor(hca.index),
                        f"infiniband/uverbs{hca.index}")
    yield text(f"{verbs}/ibdev", hca.name)
    yield text(f"{verbs}/abi_version", 1)
    for port in hca.ports:
        for kind, minor in (("umad", umad_minor(port.umad_index)),
                            ("issm", issm_minor(port.umad_index))):
            name = f"{kind}{port.umad_index}"
            d = f"{pci}/infiniband_mad/{name}"
            yield from _chardev(d, pci, "infiniband_mad", major, minor, f"infiniband/{name}")
            yield text(f"{d}/ibdev", hca.name)
            yield text(f"{d}/port", port.number)


def _chardev(d: str, pci: str, cls: str, major: int, minor: int, devname: str,
             ) -> Iterator[Node]:
    yield Dir(d)
    yield text(f"{d}/dev", f"{major}:{minor}")
    yield text(f"{d}/uevent", f"MAJOR={major}\nMINOR={minor}\nDEVNAME={devname}", 0o644)
    yield relative_link(f"{d}/device", pci)
    yield relative_link(f"{d}/subsystem", f"{SYS_CLASS}/{cls}")
    yield relative_link(f"{SYS_CLASS}/{cls}/{d.rpartition('/')[2]}", d)


def device_numbers(state: State) -> list[tuple[str, int, int]]:
    """(/dev path, major, minor) of every character device the simulated HCAs have, and
    rdma_cm's (mokkafs.surfaces.rdma_cm)."""
    if not state.rdma_loaded:
        return []
    return [*_hca_device_numbers(state), rdma_cm.device_number()]


def _hca_device_numbers(state: State) -> list[tuple[str, int, int]]:
    major = state.major("infiniband_verbs")
    out = []
    for hca in state.hcas:
        out.append((f"/{DEV}/uverbs{hca.index}", major, uverbs_minor(hca.index)))
        for port in hca.ports:
            out.append((f"/{DEV}/umad{port.umad_index}", major,
                        umad_minor(port.umad_index)))
            out.append((f"/{DEV}/issm{port.umad_index}", major,
                        issm_minor(port.umad_index)))
    return out


def nodes(state: State, ports: PortCache) -> Iterator[Node]:
    if not state.hcas:
        ports.last = {}  # nothing kept for a node that may never serve InfiniBand again
    if not state.rdma_loaded:
        return iter(())
    out: list[Node] = [CharDevice(path.lstrip("/"), major, minor)
                       for path, major, minor in _hca_device_numbers(state)]
    out += [Dir(f"{SYS_CLASS}/infiniband"), Dir(f"{SYS_CLASS}/infiniband_verbs"),
            Dir(f"{SYS_CLASS}/infiniband_mad"),
            text(f"{SYS_CLASS}/infiniband_verbs/abi_version", 6),
            text(f"{SYS_CLASS}/infiniband_mad/abi_version", 5)]
    last = ports.last
    made: dict[PortInputs, tuple[Node, ...]] = {}
    for hca in state.hcas:
        out.extend(_hca(hca, state, last, made))
    ports.last = made  # only once the run is whole
    return iter(out)


SURFACE = Surface("infiniband", nodes, ("hcas", "functions", "char_majors", "started_at",
                                        "counter_quantum", "rdma_loaded"),
                  (*(kernel(f"{SYS_CLASS}/{name}") for name in CLASSES), kernel(DEV)),
                  PortCache)
