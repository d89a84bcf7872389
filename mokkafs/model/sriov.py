"""SR-IOV: which physical functions can have virtual functions, and the VFs a PF has.

``capable`` marks the ConnectX-7 and ConnectX-8 functions of a State as SR-IOV physical
functions, with the capability their firmware shows out of the box (``mlxconfig`` defaults:
``SRIOV_EN`` True, ``NUM_OF_VFS`` 8; NVIDIA MLNX_OFED documentation, "Single Root IO
Virtualization (SR-IOV)", "Configuring SR-IOV for ConnectX-4 Onward"). A PF whose VFs' PCI
addresses would take another function's is left without the capability.

``with_vfs`` makes each PF's ``numvfs`` VFs: PCI functions at the routing IDs offset and stride
give (PCIe base spec, 9.3.3.10-11), device ``101e`` (mlx5's "ConnectX Family mlx5Gen Virtual
Function"), beside their PF (same bridge, NUMA node and local CPUs), each in an IOMMU group of
its own, bound to the PF's driver when autoprobe was on as they were made, and for an HCA the
RDMA device mlx5 makes for it, with GUIDs of its own. Everything is a pure function of the PF
and the VF's index: VF k of a PF has the same address, group, name and GUIDs whenever it
exists.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from mokkafs.state import Bar, Hca, IbPort, PciFunction, Sriov, State, Traffic

MELLANOX = 0x15B3
PF_DEVICES = {0x1021: "ConnectX-7", 0x1023: "ConnectX-8"}
VF_DEVICE = 0x101E
TOTAL_VFS = 8  # firmware default NUM_OF_VFS
VF_MSIX = 64  # MSI-X vectors a VF may be given (sriov_vf_total_msix is the pool for all)
VF_BAR_SIZE = 1 << 20  # each VF's BAR 0, carved from the PF's VF BAR after its own BARs
IOV_RESOURCES = 7  # the first of a PF's resources that are its VF BARs (after 6 BARs, the ROM)
MAX_PF_SLOTS = 4096  # PFs a node may hold: the RDMA names and groups of VFs come after


def _split(bdf: str) -> tuple[str, int, int]:
    """``0000:18:00.1`` -> (``0000``, bus, devfn)."""
    domain, bus, rest = bdf.split(":")
    dev, fn = rest.split(".")
    return domain, int(bus, 16), int(dev, 16) << 3 | int(fn, 16)


def vf_bdf(pf: PciFunction, index: int) -> str:
    """The address of the PF's VF ``index`` (from 0): its routing ID plus offset and stride."""
    assert pf.sriov is not None
    domain, bus, devfn = _split(pf.bdf)
    rid = (bus << 8 | devfn) + pf.sriov.offset + pf.sriov.stride * index
    return f"{domain}:{rid >> 8 & 0xFF:02x}:{rid >> 3 & 0x1F:02x}.{rid & 7}"


def capable(functions: tuple[PciFunction, ...]) -> tuple[PciFunction, ...]:
    """``functions`` with every ConnectX-7/8 function an SR-IOV PF. A device's PFs are its
    functions in order; with ``n`` of them, PF ``k``'s VFs start ``n - k + k * total``
    routing IDs after it, so all VFs of the device follow all of its PFs (as mlx5 firmware
    lays them out)."""
    taken = {fn.bdf for fn in functions}
    by_device: dict[str, list[PciFunction]] = {}
    for fn in functions:
        if fn.kind == "hca" and fn.vendor == MELLANOX and fn.device in PF_DEVICES:
            by_device.setdefault(fn.bdf.rpartition(".")[0], []).append(fn)
    made: dict[str, PciFunction] = {}
    slot = 0
    for pfs in by_device.values():
        n = len(pfs)
        for k, fn in enumerate(sorted(pfs, key=lambda f: f.bdf)):
            cap = Sriov(total=TOTAL_VFS, offset=n - k + k * TOTAL_VFS, stride=1,
                        vf_device=VF_DEVICE, total_msix=TOTAL_VFS * VF_MSIX, slot=slot)
            pf = replace(fn, sriov=cap)
            addresses = {vf_bdf(pf, i) for i in range(TOTAL_VFS)}
            if addresses & taken or len(addresses) != TOTAL_VFS or slot >= MAX_PF_SLOTS:
                continue
            taken |= addresses
            made[fn.bdf] = pf
            slot += 1
    return tuple(made.get(fn.bdf, fn) for fn in functions) if made else functions


def with_numvfs(state: State, bdf: str, numvfs: int, *, autoprobe: bool | None = None,
                probed: bool | None = None) -> State:
    """``state`` with the PF at ``bdf`` having ``numvfs`` VFs, bound to its driver if
    ``probed`` (default: as autoprobe is), and its autoprobe setting ``autoprobe`` if given."""
    def edit(fn: PciFunction) -> PciFunction:
        if fn.bdf != bdf or fn.sriov is None:
            return fn
        cap = fn.sriov
        if autoprobe is not None:
            cap = replace(cap, autoprobe=autoprobe)
        cap = replace(cap, numvfs=numvfs, probed=cap.autoprobe if probed is None else probed)
        return replace(fn, sriov=cap)
    return replace(state, functions=tuple(edit(fn) for fn in state.functions))


def vf_bar_base(pf: PciFunction) -> int:
    """Where the PF's VF BAR (its VFs' BAR 0s, one after another) starts: aligned, after the
    PF's own BARs."""
    own_end = max((b.address + b.size for b in pf.bars), default=0)
    return -(-own_end // VF_BAR_SIZE) * VF_BAR_SIZE


def iov_bar(pf: PciFunction) -> Bar | None:
    """The PF's VF BAR 0 region, its IOV resource (``resource`` line 7, PCI_IOV_RESOURCES):
    room for every VF's BAR 0, one VF BAR size each, whether VFs are enabled or not."""
    if pf.sriov is None:
        return None
    return Bar(IOV_RESOURCES, vf_bar_base(pf), VF_BAR_SIZE * pf.sriov.total, is_64bit=True,
               prefetchable=True)


def vf_bar(pf: PciFunction, index: int) -> Bar:
    """VF ``index``'s BAR 0: its slice of the PF's VF BAR region."""
    return Bar(0, vf_bar_base(pf) + index * VF_BAR_SIZE, VF_BAR_SIZE, is_64bit=True,
               prefetchable=True)


def _first_free(values: list[int]) -> int:
    return max(values, default=-1) + 1


def _vf(pf: PciFunction, index: int, group_base: int) -> PciFunction:
    assert pf.sriov is not None
    bdf = vf_bdf(pf, index)
    directory = pf.path.rpartition("/")[0]
    bar = vf_bar(pf, index)
    group = group_base + pf.sriov.slot * pf.sriov.total + index
    return replace(pf, bdf=bdf, path=f"{directory}/{bdf}", device=pf.sriov.vf_device,
                   driver=pf.driver if pf.sriov.probed else "", irq=0, bars=(bar,),
                   iommu_group=group if pf.iommu_group is not None else None,
                   vpd=b"", sriov=None, physfn=pf.bdf, vf_index=index, bridge=None, gpu=None)


def vf_guid(pf_guid: int, index: int) -> int:
    """A VF's port and node GUID: the PF's OUI (its top 24 bits) and 40 bits of a digest of
    the PF's GUID and the index, so unique wherever the PF's is, and the same at every start."""
    digest = hashlib.sha256(f"{pf_guid:016x}/vf{index}".encode()).digest()
    return (pf_guid & ~((1 << 40) - 1)) | int.from_bytes(digest[:5], "big")


def _name_number(name: str) -> int:
    tail = name.rpartition("_")[2]
    return int(tail) if tail.isdigit() else -1


def with_vfs(state: State) -> State:
    """``state`` with the VFs its PFs' ``numvfs`` ask for (and their RDMA devices)."""
    pfs = [fn for fn in state.functions if fn.sriov is not None and fn.sriov.numvfs]
    if not pfs:
        return state
    group_base = _first_free([fn.iommu_group for fn in state.functions
                              if fn.iommu_group is not None])
    name_base = _first_free([_name_number(h.name) for h in state.hcas])
    umad_base = _first_free([p.umad_index for h in state.hcas for p in h.ports])
    hca_of = {h.bdf: h for h in state.hcas}
    functions: list[PciFunction] = []
    hcas = list(state.hcas)
    for fn in state.functions:
        functions.append(fn)
        if fn.sriov is None or not fn.sriov.numvfs:
            continue
        for i in range(fn.sriov.numvfs):
            vf = _vf(fn, i, group_base)
            functions.append(vf)
            pf_hca = hca_of.get(fn.bdf)
            if pf_hca is not None and vf.driver:
                slot = fn.sriov.slot * fn.sriov.total + i
                hcas.append(_vf_hca_at(pf_hca, vf, name_base + slot, umad_base + slot))
    return replace(state, functions=tuple(functions), hcas=tuple(hcas))


def _vf_hca_at(pf_hca: Hca, vf: PciFunction, number: int, umad: int) -> Hca:
    pf = pf_hca.ports[0]
    guid = vf_guid(pf.guid, vf.vf_index)
    traffic = Traffic(0.0, 0.0, pf.traffic.mean_packet_bytes, 0.0, 0.0, ())
    port = IbPort(number=1, guid=guid, lid=pf.lid, sm_lid=pf.sm_lid, state=pf.state,
                  phys_state=pf.phys_state, rate_gbps=pf.rate_gbps, link_layer=pf.link_layer,
                  umad_index=umad, traffic=traffic, width=pf.width)
    return replace(pf_hca, name=f"mlx5_{number}", index=number, bdf=vf.bdf, node_guid=guid,
                   sys_image_guid=pf_hca.sys_image_guid, ports=(port,))
