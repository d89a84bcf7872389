"""The functions of a captured node that mokkafs's own sections make: GPUs (``devices``),
NVSwitches (``nvlink.switches``), ConnectX HCAs (``infiniband.devices``) and the root ports
and switches above them (``pcie_topology``). The sections are written, the profile compiled,
and every function it makes compared with the captured one (``mokkafs.capture.overrides``).
Each whose attributes or config space differ (a real node's) keeps its captured ones in a
``pci_functions`` override. A GPU, NVSwitch or HCA the sections put elsewhere (or below a
bridge they put elsewhere) is left to be kept verbatim, the notes say why, and the sections
are written again without it."""

from __future__ import annotations

import copy
from typing import Any

from mokkafs.capture import infiniband, overrides
from mokkafs.capture.guarded import Root
from mokkafs.capture.ident import gpu_information
from mokkafs.capture.notes import Notes
from mokkafs.capture.pci import Function
from mokkafs.capture.profile_writer import Hex
from mokkafs.errors import ProfileError
from mokkafs.model.pci import LINK_GENERATIONS
from mokkafs.profile.compile import Options, compile_profile
from mokkafs.profile.schema import Profile
from mokkafs.state import State

NVIDIA, MELLANOX = 0x10DE, 0x15B3


def _is_gpu(fn: Function) -> bool:
    return fn.number("vendor") == NVIDIA and fn.number("class") >> 16 == 0x03


def _is_nvswitch(fn: Function) -> bool:
    return fn.number("vendor") == NVIDIA and fn.number("class") == 0x068000


def _is_hca(fn: Function) -> bool:
    return (fn.number("vendor") == MELLANOX and fn.driver == "mlx5_core"
            and fn.number("class") >> 8 in (0x0207, 0x0200))


def _ids(fn: Function) -> dict[str, int]:
    return {"device_id": Hex(fn.number("device") << 16 | fn.number("vendor")),
            "subsystem_id": Hex(fn.number("subsystem_device") << 16
                                | fn.number("subsystem_vendor"))}


def _gpu(root: Root, fn: Function, index: int) -> dict[str, Any]:
    info = gpu_information(root, fn.bdf)
    ids = _ids(fn)
    entry: dict[str, Any] = {"index": index, "pci": {**ids, "bus_id": fn.bdf,
                                                     "revision": Hex(fn.number("revision"))}}
    link = {"max_link_gen": LINK_GENERATIONS.get(fn.attr("max_link_speed"), 4),
            "current_link_gen": LINK_GENERATIONS.get(fn.attr("current_link_speed"), 4),
            "max_link_width": fn.number("max_link_width", 16),
            "current_link_width": fn.number("current_link_width", 16)}
    entry["pcie"] = link
    rows = fn.attr("resource").splitlines()
    if len(rows) > 1:
        start, end = (int(x, 16) for x in rows[1].split()[:2])
        if end > start:
            entry["bar1_memory"] = {"total_bytes": end - start + 1}
    if info:
        entry["name"] = info.get("Model")
        entry["vbios_version"] = info.get("Video BIOS")
        entry["uuid"] = info.get("GPU UUID")
        if info.get("Device Minor", "").isdigit():
            entry["minor_number"] = int(info["Device Minor"])
        entry["architecture"] = "hopper" if info.get("DMA Size") == "52 bits" else "ampere"
    return {k: v for k, v in entry.items() if v is not None}


def _topology(fns: list[Function], members: list[Function], doc: dict[str, Any]) -> None:
    by_bdf = {fn.bdf: fn for fn in fns}
    topo = doc["pcie_topology"]
    for rc in topo["root_complexes"]:
        mine = [m for m in members if m.root == rc["id"]]
        rc["devices"] = [m.bdf for m in mine]
        switches: dict[str, list[str]] = {}
        for m in mine:
            if len(m.chain) == 3:
                switches.setdefault(m.chain[1], []).append(m.bdf)
        rc["switches"] = [{"devices": d} for _, d in sorted(switches.items())]
    bridges = {b for m in members for b in m.chain}
    root_ports = [by_bdf[b] for b in sorted(bridges) if b in by_bdf and not by_bdf[b].chain]
    others = [by_bdf[b] for b in sorted(bridges) if b in by_bdf and by_bdf[b].chain]
    if root_ports:
        topo["root_port"] = _ids(root_ports[0])
        topo["first_root_port"] = min(int(b.bdf[8:10], 16) for b in root_ports)
        for rc in topo["root_complexes"]:  # a root whose ports are another kind (Grace's)
            own = {str(_ids(p)) for p in root_ports if p.root == rc["id"]}
            if len(own) == 1 and own != {str(topo["root_port"])}:
                rc["root_port"] = next(_ids(p) for p in root_ports if p.root == rc["id"])
    if others:
        topo["switch"] = _ids(others[0])


ROUNDS = 8  # times the sections are rewritten without the functions they put elsewhere
ALL_KEPT = "GPUs, NVSwitches and HCAs kept verbatim"


def _sections(root: Root, fns: list[Function], doc: dict[str, Any], node_name: str,
              members: tuple[list[Function], list[Function], list[Function]],
              notes: Notes) -> tuple[dict[str, Any], list[Function]]:
    """``doc`` with the sections that make ``members`` (GPUs, NVSwitches, HCAs); the members
    they make (HCAs without an RDMA device are not)."""
    gpus, nvswitches, hcas = members
    cand = copy.deepcopy(doc)
    entries = [_gpu(root, fn, i) for i, fn in enumerate(gpus)]
    order = sorted(range(len(gpus)), key=lambda i: (entries[i].get("minor_number", i), i))
    for index, i in enumerate(order):
        entries[i]["index"] = index
    cand["devices"] = sorted(entries, key=lambda e: e["index"])
    cand["system"]["num_devices"] = len(gpus)
    if nvswitches:
        cand["nvlink"] = {"switches": [{"bdf": fn.bdf, "device_id": Hex(fn.number("device"))}
                                       for fn in nvswitches]}
    ib = infiniband.section(root, hcas, node_name, notes)
    if ib is not None:
        cand["infiniband"] = ib
        if "index" in ib:
            cand["node"]["index"] = ib.pop("index")
    else:
        hcas = []
    _topology(fns, gpus + nvswitches + hcas, cand)
    return cand, gpus + nvswitches + hcas


def _merge(into: Notes, notes: Notes) -> None:
    for kind, items in notes.kinds.items():
        for item in items:
            into.add(kind, item)


def _elsewhere(state: State, made: list[Function], by_bdf: dict[str, Function]
               ) -> dict[str, str] | None:
    """Members whose place the sections do not reproduce -> why (at which function), or
    None when the sections reproduce every function they make."""
    wrong = {fn.bdf: why for fn in state.functions
             if (why := overrides.unplaced(fn, by_bdf.get(fn.bdf))) is not None}
    if not wrong:
        return None
    out = {}
    for member in made:
        hit = next((p for p in state.function(member.bdf).path.split("/")[3:] if p in wrong),
                   None)
        if hit is not None:
            out[member.bdf] = f"{wrong[hit]}: {hit}"
    return out


def describe(root: Root, fns: list[Function], doc: dict[str, Any], node_name: str,
             notes: Notes) -> set[str]:
    """Write the sections that make the node's GPUs, NVSwitches, HCAs and their bridges into
    ``doc`` where they reproduce their place, and an override for each whose attributes
    differ; the addresses of the functions they make. A member the sections put elsewhere
    (or below a bridge they put elsewhere) is left to be kept verbatim and the sections are
    written again without it."""
    members = ([fn for fn in fns if _is_gpu(fn)], [fn for fn in fns if _is_nvswitch(fn)],
               [fn for fn in fns if _is_hca(fn)])
    if not any(members):
        return set()
    by_bdf = {fn.bdf: fn for fn in fns}
    one_by_one = Notes()  # said only if the sections then make the rest
    for _ in range(ROUNDS):
        scratch = Notes()
        cand, made = _sections(root, fns, doc, node_name, members, scratch)
        try:
            profile = Profile.model_validate(cand)
            state = compile_profile(profile, {}, "capture", Options(node_name=node_name))
        except (ProfileError, ValueError) as exc:
            _merge(notes, scratch)
            notes.add(f"{ALL_KEPT}: no profile section makes them (their driver's files are "
                      "not served)", str(exc).splitlines()[0])
            return set()
        elsewhere = _elsewhere(state, made, by_bdf)
        if elsewhere is None:
            _merge(notes, one_by_one)
            _merge(notes, scratch)
            break
        if not elsewhere or len(elsewhere) == len(made):
            _merge(notes, scratch)
            why = next(iter(elsewhere.values()), "another place")
            notes.add(f"{ALL_KEPT}: mokkafs's layout does not reproduce them ({why}; their "
                      "driver's files are not served)", next(iter(elsewhere), "all"))
            return set()
        for bdf, why in elsewhere.items():
            one_by_one.add("GPUs, NVSwitches and HCAs kept verbatim one by one: mokkafs's layout "
                           "does not reproduce their place (their driver's files are not "
                           "served)", f"{bdf} ({why})")
        gpus, nvswitches, hcas = ([fn for fn in group if fn.bdf not in elsewhere]
                                  for group in members)
        members = (gpus, nvswitches, hcas)
    else:
        notes.add(f"{ALL_KEPT}: mokkafs's layout does not reproduce their places", "all")
        return set()
    files = overrides.made_files(state)
    changed = [overrides.override(by_bdf[fn.bdf], files[fn.path]) for fn in state.functions
               if overrides.differs(files[fn.path], by_bdf[fn.bdf],
                                    fn.iommu_group if state.iommu else None)]
    if changed:
        cand["pci_functions"] = changed
    doc.clear()
    doc.update(cand)
    return {fn.bdf for fn in state.functions}
