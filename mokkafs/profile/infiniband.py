"""The InfiniBand HCAs: where they sit, what they are called, and their ports' identities and
traffic.

Placement: where ``infiniband.devices`` puts them (named ``mlx5_N`` in PCI order unless named
there); else HCA i (``hca_count``, else GPUs x ``hcas_per_gpu``) pairs with GPU ``i*G//H``
and takes the next free bus after it inside that GPU's root complex, as on HGX boards where
each GPU and its NIC share a PCIe switch (beyond 8 HCAs per GPU, further ones are more
functions on those buses, so one switch still holds them all). GUIDs and LIDs: made as
``mokkafs.model.identity`` says, or as ``devices[].ports`` gives them (a capture's).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, replace

from mokkafs.model import identity
from mokkafs.model.bdf import Bdf, RootId
from mokkafs.profile import vpd
from mokkafs.profile.devices import Gpu
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import InfiniBand
from mokkafs.state import IB_ERROR_COUNTERS, Hca, IbPort, PciFunction, Traffic

# A bound on what the InfiniBand surface may cost: files per HCA and per port besides the GID
# and P_Key tables (counted in surfaces/infiniband.py), and the most a node may have in all
# (256 HCAs with the default tables are about 31,000).
HCA_NODES = 40
PORT_NODES = 60
MAX_IB_NODES = 150_000
BUSES_PER_GPU = 8  # HCAs placed beside a GPU take at most this many buses (then share them)


@dataclass(frozen=True)
class Placed:
    bdf: Bdf
    name: str | None
    where: YamlPath


def check(ib: InfiniBand, count: int, problems: Problems) -> None:
    """What the counts and the traffic model may be."""
    if count == 0:
        problems.add(("infiniband", "hca_count"), "InfiniBand is enabled but there are 0 "
                     "HCAs; set hca_count or hcas_per_gpu >= 1, or enabled: false")
    elif count * ib.ports_per_hca > identity.SLOTS_PER_NODE:
        problems.add(("infiniband", "hca_count"),
                     f"{count} HCAs x {ib.ports_per_hca} ports exceed the "
                     f"{identity.SLOTS_PER_NODE} port identities a node has")
    per_hca = HCA_NODES + ib.ports_per_hca * (
        PORT_NODES + 3 * ib.gid_table_len + ib.pkey_table_len)
    if count * per_hca > MAX_IB_NODES:
        problems.add(("infiniband", "gid_table_len"),
                     f"{count} HCAs with {ib.ports_per_hca} port(s), {ib.gid_table_len} "
                     f"GIDs and {ib.pkey_table_len} P_Keys each would make about "
                     f"{count * per_hca:,} files; at most {MAX_IB_NODES:,} are served. "
                     "Lower gid_table_len, pkey_table_len or the HCA count")
    for name in ib.traffic.errors_per_sec:
        if name not in IB_ERROR_COUNTERS:
            problems.add(("infiniband", "traffic", "errors_per_sec", name),
                         f"not an error counter; expected one of {', '.join(IB_ERROR_COUNTERS)}")
    _check_pinned(ib, count, problems)


def _check_pinned(ib: InfiniBand, count: int, problems: Problems) -> None:
    """Ports given as they are (``devices[i].ports``): on every HCA or none, one per port,
    no GUID twice and no assigned LID twice."""
    pinned = [(i, d.ports) for i, d in enumerate(ib.devices) if d.ports is not None]
    if not pinned:
        return
    if len(pinned) != count:
        problems.add(("infiniband", "devices"),
                     f"{len(pinned)} of {count} HCAs give their ports' GUIDs and LIDs: give "
                     "them for every HCA in devices, or for none (then they are made)")
    guids: set[int] = set()
    lids: set[int] = set()
    for i, ports in pinned:
        where: YamlPath = ("infiniband", "devices", i, "ports")
        if len(ports) != ib.ports_per_hca:
            problems.add(where, f"{len(ports)} ports given; ports_per_hca is "
                         f"{ib.ports_per_hca}: give one entry per port")
        for n, port in enumerate(ports):
            if port.guid in guids:
                problems.add((*where, n, "guid"),
                             f"{identity.format_guid(port.guid)} is another port's GUID")
            if port.lid and port.lid in lids:
                problems.add((*where, n, "lid"), f"LID {port.lid:#x} is another port's")
            guids.add(port.guid)
            lids.add(port.lid)


def declared(ib: InfiniBand) -> list[Placed]:
    return [Placed(d.bus_id, d.name, ("infiniband", "devices", i))
            for i, d in enumerate(ib.devices)]


def beside_gpus(count: int, gpus: list[Gpu], placement: dict[Bdf, RootId],
                taken: set[Bdf], roots: list[RootId]) -> list[Placed]:
    """HCAs placed next to their GPUs. Raises ValueError when a root has no slot left."""
    used = {(b.domain, b.bus, b.device) for b in taken}
    buses = {(b.domain, b.bus) for b in taken}
    own: dict[Bdf, list[int]] = {}  # the buses each GPU's HCAs took
    out: list[Placed] = []
    for i in range(count):
        gpu = gpus[i * len(gpus) // count]
        root = placement[gpu.bdf]
        end = min((r.bus for r in roots if r.domain == root.domain and r.bus > root.bus),
                  default=0x100)
        order = [*range(gpu.bdf.bus + 1, end), *range(root.bus + 1, gpu.bdf.bus)]
        mine = own.setdefault(gpu.bdf, [])
        if len(mine) < BUSES_PER_GPU:  # a bus of its own first, as a card in a slot has
            order = [b for b in order if (root.domain, b) not in buses] + order
        else:  # then further functions on those buses, so one switch still holds them
            order = mine
        slot = next(((bus, dev) for bus in order for dev in range(32)
                     if (root.domain, bus, dev) not in used), None)
        if slot is None:
            raise ValueError(f"no free PCI slot left under {root} for HCA {i}")
        used.add((root.domain, *slot))
        buses.add((root.domain, slot[0]))
        if slot[0] not in mine:
            mine.append(slot[0])
        out.append(Placed(gpu.bdf.on(slot[0], slot[1]), None, ("infiniband", "hca_count")))
    return out


def names(placed: list[Placed], problems: Problems) -> list[str]:
    """Every HCA's RDMA name, in PCI order: its own, else the lowest mlx5_N not taken."""
    given = {p.name for p in placed if p.name}
    seen: dict[str, YamlPath] = {}
    for p in placed:
        if p.name and p.name in seen:
            problems.add((*p.where, "name"), f"{p.name} is already the name of another HCA")
        elif p.name:
            seen[p.name] = p.where
    free = (f"mlx5_{n}" for n in range(10_000) if f"mlx5_{n}" not in given)
    return [p.name or next(free) for p in placed]


def hcas(ib: InfiniBand, bdfs: list[Bdf], hca_names: list[str], node_name: str,
         node_index: int | None) -> tuple[Hca, ...]:
    """The HCAs at ``bdfs`` (PCI order), with node-unique port GUIDs and LIDs, or those
    ``devices`` gives (``check`` made sure every HCA has them then). Raises ValueError when
    the node index does not fit the LID space."""
    ports = ib.ports_per_hca
    ids = _port_ids(ib, bdfs, node_name, node_index)
    t = ib.traffic
    traffic = Traffic(t.xmit_bytes_per_sec, t.rcv_bytes_per_sec, t.mean_packet_bytes,
                      t.multicast_fraction, t.xmit_wait_per_sec,
                      tuple(sorted(t.errors_per_sec.items())), origin=-t.uptime_seconds)
    out = []
    for i, (bdf, name) in enumerate(zip(bdfs, hca_names, strict=True)):
        port_list = tuple(
            IbPort(number=p, guid=ids[i][p - 1][0], lid=ids[i][p - 1][1],
                   sm_lid=identity.SM_LID, state=ib.port_state, phys_state=ib.phys_state,
                   rate_gbps=ib.rate_gbps, link_layer=ib.link_layer,
                   umad_index=i * ports + p - 1, traffic=traffic)
            for p in range(1, ports + 1))
        number = re.sub(r"^mlx5_", "", name)
        desc = ib.node_desc_template.replace("{node_name}", node_name).replace("{idx}", number)
        out.append(Hca(
            name=name, index=i, bdf=str(bdf), node_guid=port_list[0].guid,
            sys_image_guid=port_list[0].guid, hca_type=ib.hca_type, fw_ver=ib.fw_version,
            hw_rev=ib.hw_rev, board_id=ib.board_id, node_desc=desc, ports=port_list,
            gid_table_len=ib.gid_table_len, pkey_table_len=ib.pkey_table_len))
    return tuple(out)


def _port_ids(ib: InfiniBand, bdfs: list[Bdf], node_name: str, node_index: int | None
              ) -> list[list[tuple[int, int]]]:
    """Each HCA's ports' (GUID, LID): as ``devices`` gives them, else made for the node."""
    ports = ib.ports_per_hca
    given = {str(d.bus_id): d.ports for d in ib.devices if d.ports is not None}
    if given:
        pinned = [given.get(str(bdf)) or [] for bdf in bdfs]
        if any(len(p) != ports for p in pinned):  # check() names the field
            raise ValueError("devices: give every HCA's ports' GUIDs and LIDs, one per port")
        return [[(q.guid, q.lid) for q in p] for p in pinned]
    ident = identity.NodeIdentity.derive(node_name, node_index, ib.guid_prefix,
                                         len(bdfs) * ports)
    return [[(ident.guid(i * ports + p), ident.lid(i * ports + p)) for p in range(ports)]
            for i in range(len(bdfs))]


def with_vpd(functions: tuple[PciFunction, ...], ib: InfiniBand, node_name: str,
             ) -> tuple[PciFunction, ...]:
    """``functions`` with the VPD of every HCA ``infiniband.devices`` names an
    ``nvlink-management`` port (a serial of the node's and the bus's own). Only a declared
    HCA has a role, and a node serving no InfiniBand has no HCA function."""
    roles = {str(d.bus_id): d.role for d in ib.devices}
    out = []
    for fn in functions:
        if fn.kind == "hca" and roles.get(fn.bdf) == "nvlink-management":
            serial = f"MT{zlib.crc32(f'{node_name}/{fn.bdf}'.encode()) % 10**10:010d}"
            fn = replace(fn, vpd=vpd.nvlink_management(serial))
        out.append(fn)
    return tuple(out)
