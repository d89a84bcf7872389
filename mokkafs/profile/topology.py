"""Where functions sit: host bridges with their NUMA node and CPUs, which host bridge each
endpoint is below, and the bridges between them: root ports and PCIe switches, with the bus
numbers a kernel would find.

Placement (kept from nvml-mock where it had a rule, from the kernel where it did not): an
endpoint a root complex lists sits below it; one no root lists sits below the declared root
whose bus range covers its address (as the kernel enumerates it), else below ``pciDDDD:BB`` of
its own address with NUMA node -1. No topology at all: one root ``pciDDDD:00`` per domain.

Bridges, per host bridge, in bus order:
- A switch (declared in ``switches``, or derived: endpoints whose buses lie within
  ``CLUSTER_GAP`` of each other, NVSwitches apart from the rest) is a root port on the root bus
  (secondary U), the switch's upstream port on bus U (secondary D), and one downstream port on
  bus D per endpoint bus, whose secondary is that bus. So U = lowest endpoint bus - 2 and
  D = lowest - 1 must be free, above the root bus and above the previous group's buses; a
  derived switch without that room falls back to root ports, a declared one is an error.
- Any other endpoint bus gets a root port of its own (a PCIe card in a slot); an endpoint on
  the root bus itself sits right below the host bridge.
Every bridge forwards exactly the buses below it (secondary..subordinate), so the buses nest
as the kernel's enumeration makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mokkafs.model.bdf import Bdf, RootId
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import Profile
from mokkafs.state import PortType

CLUSTER_GAP = 2  # buses apart for endpoints to share a derived switch
Category = Literal["nvswitch", "other"]


@dataclass(frozen=True)
class Root:
    id: RootId
    numa_node: int
    cpu_affinity: str | None
    where: YamlPath
    switches: tuple[tuple[Bdf, ...], ...] | None  # None: derive


@dataclass(frozen=True)
class BridgeSpec:
    bdf: Bdf
    root: RootId
    parent: Bdf | None
    port: PortType
    secondary: int
    subordinate: int
    port_number: int


@dataclass
class Layout:
    """The bridges of every host bridge, and every function's parent (None: on a root bus)."""

    bridges: list[BridgeSpec] = field(default_factory=list)
    parent: dict[Bdf, Bdf | None] = field(default_factory=dict)

    def ancestors(self, bdf: Bdf) -> list[Bdf]:
        """The bridges from the root bus down to ``bdf``'s parent."""
        chain: list[Bdf] = []
        up = self.parent.get(bdf)
        while up is not None:
            chain.append(up)
            up = self.parent.get(up)
        return chain[::-1]


def roots(profile: Profile, problems: Problems, members: dict[Bdf, YamlPath],
          ) -> tuple[dict[RootId, Root], dict[Bdf, RootId]]:
    """The host bridges, and the one each member (GPU, NVSwitch, placed HCA) sits below."""
    found: dict[RootId, Root] = {}
    placement: dict[Bdf, RootId] = {}
    topo = profile.pcie_topology
    if topo is None or not topo.root_complexes:
        for bdf in members:
            rid = RootId(bdf.domain, 0)
            found.setdefault(rid, Root(rid, 0, None, (), None))
            placement[bdf] = rid
        return found, placement
    for ri, rc in enumerate(topo.root_complexes):
        rpath: YamlPath = ("pcie_topology", "root_complexes", ri)
        if rc.id in found:
            problems.add((*rpath, "id"), f"root complex {rc.id} is declared twice")
            continue
        switches = None if rc.switches is None else tuple(tuple(s.devices) for s in rc.switches)
        found[rc.id] = Root(rc.id, rc.numa_node, rc.cpu_affinity, rpath, switches)
        for di, bdf in enumerate(rc.devices):
            dpath = (*rpath, "devices", di)
            if bdf in placement:
                problems.add(dpath, f"{bdf} is already listed under {placement[bdf]}; "
                             "a device sits under exactly one root complex")
            elif bdf not in members:
                problems.add(dpath, f"{bdf} is not a GPU in devices[], an NVSwitch in "
                             "nvlink.switches[] nor an HCA in infiniband.devices[]; declare it "
                             "there or remove it here")
            elif not rc.id.holds(bdf):
                problems.add(dpath, f"{bdf} cannot sit under {rc.id}: a root complex holds "
                             "buses of its own domain from its own bus number up")
            else:
                placement[bdf] = rc.id
    declared = sorted(found)
    for bdf in members:
        if bdf in placement:
            continue
        covering = [r for r in declared if r.holds(bdf)]  # the kernel's enumeration
        if covering:
            placement[bdf] = covering[-1]
        else:
            rid = RootId(bdf.domain, bdf.bus)
            found.setdefault(rid, Root(rid, -1, None, (), None))
            placement[bdf] = rid
    return found, placement


def layout(found: dict[RootId, Root], placement: dict[Bdf, RootId],
           category: dict[Bdf, Category], problems: Problems, first_port: int = 1) -> Layout:
    """The bridges between every host bridge and its endpoints (see the module docstring);
    root ports take device numbers from ``first_port`` up."""
    out = Layout()
    for rid, root in sorted(found.items()):
        endpoints = sorted(b for b, r in placement.items() if r == rid)
        _lay_out_root(root, endpoints, category, problems, out, first_port)
    return out


def _derived_groups(endpoints: list[Bdf], category: dict[Bdf, Category]) -> list[list[Bdf]]:
    groups: list[list[Bdf]] = []
    for bdf in endpoints:
        last = groups[-1][-1] if groups else None
        if last is not None and bdf.bus - last.bus <= CLUSTER_GAP \
                and category[bdf] == category[last]:
            groups[-1].append(bdf)
        else:
            groups.append([bdf])
    return groups


def _lay_out_root(root: Root, endpoints: list[Bdf], category: dict[Bdf, Category],
                  problems: Problems, out: Layout, first_port: int) -> None:
    rid = root.id
    switch_path = (*root.where, "switches")
    # (members, behind a switch, the switch's index in ``switches`` when declared)
    groups: list[tuple[list[Bdf], bool, int | None]] = []
    if root.switches is not None:
        in_switch: dict[Bdf, int] = {}
        for si, declared_members in enumerate(root.switches):
            for di, bdf in enumerate(declared_members):
                if bdf not in endpoints:
                    problems.add((*switch_path, si, "devices", di),
                                 f"{bdf} is not a device below {rid}")
                elif bdf in in_switch:
                    problems.add((*switch_path, si, "devices", di),
                                 f"{bdf} is already on switch {in_switch[bdf]} of {rid}")
                else:
                    in_switch[bdf] = si
            groups.append((sorted(b for b in declared_members if in_switch.get(b) == si), True,
                           si))
        alone: dict[int, list[Bdf]] = {}  # a card's functions share its root port
        for b in endpoints:
            if b not in in_switch:
                alone.setdefault(b.bus, []).append(b)
        groups += [(members, False, None) for members in alone.values()]
    else:
        groups = [(g, len({b.bus for b in g}) > 1, None)
                  for g in _derived_groups(endpoints, category)]
    groups = [g for g in groups if g[0]]
    groups.sort(key=lambda g: g[0][0])
    taken_buses = {b.bus for b in endpoints}
    devices_on_root = {b.device for b in endpoints if b.bus == rid.bus}
    free_devices = iter(d for d in range(first_port, 32) if d not in devices_on_root)
    above = rid.bus  # the highest bus given out so far
    for group, is_switch, declared_index in groups:
        members = list(group)
        buses = sorted({b.bus for b in members})
        on_root = [b for b in members if b.bus == rid.bus]
        for bdf in on_root:
            out.parent[bdf] = None  # right below the host bridge
        buses = [b for b in buses if b != rid.bus]
        if not buses:
            continue
        if is_switch:
            up, down = buses[0] - 2, buses[0] - 1
            if up > above and up not in taken_buses and down not in taken_buses:
                port = next(free_devices, None)
                if port is None:
                    problems.add(root.where, f"{rid} has no device number left for another "
                                 "root port (31 at most)")
                    return
                _switch(rid, rid.bdf_on(port), up, down, members, buses, out)
                above = buses[-1]
                continue
            if declared_index is not None:
                problems.add((*switch_path, declared_index), "no bus numbers left for this "
                             f"switch below {rid}: its root port and upstream port need the two "
                             f"buses below its lowest endpoint's ({buses[0]:#04x}) free and "
                             f"above {above:#04x}")
                continue
        for bus in buses:  # a root port each
            if bus <= above:
                problems.add(root.where, f"bus {bus:#04x} below {rid} lies inside another "
                             f"group's buses; a switch's endpoints must not interleave with "
                             "others'")
                continue
            port = next(free_devices, None)
            if port is None:
                problems.add(root.where, f"{rid} has no device number left for another root "
                             "port (31 at most)")
                return
            rp = rid.bdf_on(port)
            out.bridges.append(BridgeSpec(rp, rid, None, "root", bus, bus, port))
            out.parent[rp] = None
            for bdf in members:
                if bdf.bus == bus:
                    out.parent[bdf] = rp
            above = bus


def _switch(rid: RootId, rp: Bdf, up: int, down: int, members: list[Bdf], buses: list[int],
            out: Layout) -> None:
    last = buses[-1]
    upstream = rp.on(up)
    out.bridges.append(BridgeSpec(rp, rid, None, "root", up, last, rp.device))
    out.parent[rp] = None
    out.bridges.append(BridgeSpec(upstream, rid, rp, "upstream", down, last, 0))
    out.parent[upstream] = rp
    for i, bus in enumerate(buses):
        port = rp.on(down, i)
        out.bridges.append(BridgeSpec(port, rid, upstream, "downstream", bus, bus, i))
        out.parent[port] = upstream
        for bdf in members:
            if bdf.bus == bus:
                out.parent[bdf] = port
