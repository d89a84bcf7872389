"""Network interfaces (net/core/net-sysfs.c): the netdev mlx5 makes for each HCA function, PF
and VF, at ``<pci function>/net/<ifname>/`` with a ``sys/class/net/<ifname>`` link to it.

Names are what udev's predictable naming gives on Debian 12 (systemd 252,
udev-builtin-net_id.c): ``ib`` for IPoIB, ``en`` for Ethernet (RoCE); ``P<domain>`` where the
domain is not 0; ``p<bus>s<slot>``; ``f<function>`` where the device has several functions;
an Ethernet PF's ``np<port>`` (mlx5's uplink ``phys_port_name``, ``p0``); a VF the name of
its PF (without ``np``) and ``v<index>`` (the SR-IOV naming of systemd 249 on).

``phys_port_name`` and ``phys_switch_id`` read as mlx5 in legacy (not switchdev) eswitch mode
answers: an Ethernet PF's port name ``p0``, EOPNOTSUPP for the rest (IPoIB has neither).
Where the host's sysfs shows through (a container given the view), ``sys/class/net`` stays the
reader's own namespace's, as the kernel shows it; the netdevs are then found under their PCI
functions only (docs/writes.md, "Netdevs and network namespaces").
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

from mokkafs.state import Hca, PciFunction, State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

CLASS_NET = "sys/class/net"
ARPHRD_ETHER, ARPHRD_INFINIBAND = 1, 32
IPOIB_MTU, ETH_MTU = 4092, 1500  # IPoIB datagram mode on a 4K IB MTU; Ethernet's default
IPOIB_QPN_FLAGS = "00:00:10:87"  # the 4 bytes before the port GID in an IPoIB address
IPOIB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
IFF_UP_BROADCAST_MULTICAST = 0x1003
NET_NAME_RENAMED = 4  # renamed by udev
IFINDEX_BASE = 10  # after lo and the host's own interfaces a node boots with


def _split(bdf: str) -> tuple[int, int, int, int]:
    domain, bus, rest = bdf.split(":")
    dev, fn = rest.split(".")
    return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def _path_name(fn: PciFunction, multi: bool) -> str:
    domain, bus, slot, func = _split(fn.bdf)
    prefix = f"P{domain}" if domain else ""
    return f"{prefix}p{bus}s{slot}" + (f"f{func}" if multi else "")


def names(state: State) -> dict[str, str]:
    """Each HCA function's netdev name, by its address."""
    functions = {fn.bdf: fn for fn in state.functions}
    devices: dict[str, int] = {}
    for each in state.functions:
        if each.physfn is None:
            key = each.bdf.rpartition(".")[0]
            devices[key] = devices.get(key, 0) + 1
    layer = {h.bdf: h.ports[0].link_layer for h in state.hcas if h.ports}
    out: dict[str, str] = {}
    for hca in state.hcas:
        fn = functions.get(hca.bdf)
        if fn is None or not hca.ports:
            continue
        pf: PciFunction | None = functions.get(fn.physfn) if fn.physfn else fn
        if pf is None:
            continue
        ib = layer.get(pf.bdf, hca.ports[0].link_layer) == "InfiniBand"
        base = ("ib" if ib else "en") + _path_name(pf, devices.get(pf.bdf.rpartition(".")[0],
                                                                    1) > 1)
        if fn.physfn is not None:
            out[fn.bdf] = f"{base}v{fn.vf_index}"
        else:
            out[fn.bdf] = base if ib else f"{base}np0"
    return out


def _guid_bytes(guid: int) -> list[str]:
    return [f"{b:02x}" for b in guid.to_bytes(8, "big")]


def _unsupported(path: str) -> File:
    return File(path, b"", 0o444, error=errno.EOPNOTSUPP)


def _netdev(fn: PciFunction, hca: Hca, name: str, listed: bool) -> Iterator[Node]:
    port = hca.ports[0]
    ib = port.link_layer == "InfiniBand"
    d = f"{fn.path}/net/{name}"
    up = port.state == "ACTIVE"
    guid = _guid_bytes(port.guid)
    if ib:
        address = ":".join([IPOIB_QPN_FLAGS, "fe:80:00:00:00:00:00:00", *guid])
    else:  # the MAC mlx5 firmware derives from the port GUID: OUI and the low 3 bytes
        address = ":".join([*guid[:3], *guid[5:]])
    ifindex = IFINDEX_BASE + hca.index
    yield Dir(d)
    yield text(f"{d}/address", address)
    yield text(f"{d}/broadcast", IPOIB_BROADCAST if ib else "ff:ff:ff:ff:ff:ff")
    yield text(f"{d}/addr_len", 20 if ib else 6)
    yield text(f"{d}/addr_assign_type", 0)
    yield text(f"{d}/type", ARPHRD_INFINIBAND if ib else ARPHRD_ETHER)
    yield text(f"{d}/mtu", IPOIB_MTU if ib else ETH_MTU, 0o644)
    yield text(f"{d}/ifindex", ifindex)
    yield text(f"{d}/iflink", ifindex)
    yield text(f"{d}/ifalias", "", 0o644)
    yield text(f"{d}/dev_id", "0x0")
    yield text(f"{d}/dev_port", port.number - 1)
    yield text(f"{d}/operstate", "up" if up else "down")
    yield text(f"{d}/carrier", int(up), 0o644)
    yield text(f"{d}/speed", port.rate_gbps * 1000 if up else -1)
    yield text(f"{d}/duplex", "full" if up else "unknown")
    yield text(f"{d}/flags", f"0x{IFF_UP_BROADCAST_MULTICAST:x}", 0o644)
    yield text(f"{d}/link_mode", 0, 0o644)
    yield text(f"{d}/name_assign_type", NET_NAME_RENAMED)
    yield text(f"{d}/netdev_group", 0, 0o644)
    yield text(f"{d}/tx_queue_len", 256 if ib else 1000, 0o644)
    yield text(f"{d}/uevent", f"INTERFACE={name}\nIFINDEX={ifindex}", 0o644)
    if ib or fn.physfn is not None:
        yield _unsupported(f"{d}/phys_port_name")
    else:
        yield text(f"{d}/phys_port_name", f"p{port.number - 1}")
    yield _unsupported(f"{d}/phys_switch_id")
    yield relative_link(f"{d}/device", fn.path)
    yield relative_link(f"{d}/subsystem", CLASS_NET)
    if listed:
        yield relative_link(f"{CLASS_NET}/{name}", d)


def nodes(state: State) -> Iterator[Node]:
    named = names(state)
    if not named:
        return
    listed = not state.host.sysfs  # else class/net is the reader's netns's (host_sysfs)
    if listed:
        yield Dir(CLASS_NET)
    functions = {fn.bdf: fn for fn in state.functions}
    for hca in state.hcas:
        name = named.get(hca.bdf)
        if name is not None:
            yield Dir(f"{functions[hca.bdf].path}/net")
            yield from _netdev(functions[hca.bdf], hca, name, listed)


# (the class holds the view's netdevs, and beside them the host's where its sysfs shows)
SURFACE = stateless("net", nodes, ("functions", "hcas", "host"), (kernel(CLASS_NET),))
