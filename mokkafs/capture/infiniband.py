"""The InfiniBand section of a captured node: its HCAs (``sys/class/infiniband``: names,
firmware, board ids, GUIDs) and their ports (state, rate, link layer, tables), as the
``infiniband:`` section gives them. A profile gives every HCA the same settings: where HCAs
differ, the first one's are kept and the notes say so. Counters are per read: the profile's
traffic model makes them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mokkafs.capture.guarded import Root
from mokkafs.capture.notes import Notes
from mokkafs.capture.pci import Function
from mokkafs.capture.profile_writer import Hex
from mokkafs.capture.reader import Unreadable
from mokkafs.model.identity import NodeIdentity, format_guid, name_hash32
from mokkafs.surfaces import infiniband, modules

CLASS = f"{infiniband.SYS_CLASS}/infiniband"


def _names(root: Root, notes: Notes) -> dict[str, str]:
    """bdf -> RDMA device name."""
    out: dict[str, str] = {}
    try:
        entries = root.listdir(CLASS)
    except Unreadable:
        return out
    for e in entries:
        try:
            bdf = root.readlink(f"{CLASS}/{e.name}/device").rstrip("/").rsplit("/", 1)[-1]
        except Unreadable as exc:
            notes.add(f"RDMA devices skipped: {exc.reason}", f"{CLASS}/{e.name}")
            continue
        out[bdf] = e.name
    return out


def _t(root: Root, path: str) -> str | None:
    try:
        return root.text(path)
    except Unreadable:
        return None


def _hca(root: Root, name: str, node_name: str) -> dict[str, Any]:
    d = f"{CLASS}/{name}"
    out: dict[str, Any] = {}
    for key, attr in (("hca_type", "hca_type"), ("fw_version", "fw_ver"), ("hw_rev", "hw_rev"),
                      ("board_id", "board_id")):
        value = _t(root, f"{d}/{attr}")
        if value:
            out[key] = value
    desc = _t(root, f"{d}/node_desc")
    if desc:
        number = name.removeprefix("mlx5_")
        template = desc.replace(node_name, "{node_name}", 1) if node_name else desc
        out["node_desc_template"] = re.sub(rf"(?<=mlx5_){number}$", "{idx}", template)
    guid = (_t(root, f"{d}/node_guid") or "").replace(":", "")
    if re.fullmatch(r"[0-9a-f]{16}", guid):
        out["guid_prefix"] = guid[:6]
    try:
        ports = sorted((e.name for e in root.listdir(f"{d}/ports") if e.name.isdigit()),
                       key=int)
    except Unreadable:
        ports = []
    out["ports_per_hca"] = max(1, min(len(ports), 2))
    if ports:
        p = f"{d}/ports/{ports[0]}"
        rate = re.match(r"(\d+)", _t(root, f"{p}/rate") or "")
        if rate:
            out["rate_gbps"] = int(rate.group(1))
        for key, attr in (("port_state", "state"), ("phys_state", "phys_state")):
            value = _t(root, f"{p}/{attr}")
            if value and ": " in value:
                out[key] = value.split(": ", 1)[1]
        layer = _t(root, f"{p}/link_layer")
        if layer:
            out["link_layer"] = layer
        for key, sub in (("gid_table_len", "gids"), ("pkey_table_len", "pkeys")):
            with contextlib.suppress(Unreadable):
                out[key] = len(root.listdir(f"{p}/{sub}"))
    return out


def _port_ids(root: Root, name: str) -> list[tuple[int, int]] | None:
    """(GUID, LID) of each of an HCA's ports, in port order: the GUID is the lower half of
    GID 0; None where one cannot be read."""
    d = f"{CLASS}/{name}/ports"
    try:
        ports = sorted((e.name for e in root.listdir(d) if e.name.isdigit()), key=int)
    except Unreadable:
        return None
    out = []
    for port in ports:
        gid = (_t(root, f"{d}/{port}/gids/0") or "").replace(":", "")
        lid = _t(root, f"{d}/{port}/lid") or ""
        if not (re.fullmatch(r"[0-9a-f]{32}", gid) and re.fullmatch(r"0x[0-9a-f]{1,4}", lid)):
            return None
        out.append((int(gid[16:], 16), int(lid, 16)))
    return out or None


@dataclass(frozen=True)
class IbIdentity:
    """How a profile reproduces the HCAs' port GUIDs and LIDs: made from the node's name
    (``index`` None) or from ``index``, or, where neither makes them, kept as they are."""

    index: int | None = None
    keep: bool = False


def port_identity(ids: Sequence[list[tuple[int, int]] | None], prefix: str | None, node_name: str,
                  ports: int) -> IbIdentity | None:
    """``ids``: each HCA's ports' (GUID, LID), PCI order; None when they could not be read."""
    if prefix is None or any(i is None or len(i) != ports for i in ids):
        return None
    node_id = ids[0][0][0] >> 8 & 0xFFFF_FFFF if ids[0] else 0
    index = None if node_id == name_hash32(node_name) else node_id
    try:
        made = NodeIdentity.derive(node_name, index, prefix, len(ids) * ports)
    except ValueError:  # an index out of the LID space: no index makes them
        return IbIdentity(keep=True)
    slots = [(made.guid(s), made.lid(s)) for s in range(len(ids) * ports)]
    found = [p for i in ids for p in i or []]
    return IbIdentity(index) if found == slots else IbIdentity(keep=True)


def section(root: Root, hcas: list[Function], node_name: str, notes: Notes
            ) -> dict[str, Any] | None:
    if not hcas:
        return None
    names = _names(root, notes)
    if not all(fn.bdf in names for fn in hcas):
        notes.add("HCAs without an RDMA device: kept as PCI functions only",
                  next(fn.bdf for fn in hcas if fn.bdf not in names))
        return None
    settings = [_hca(root, names[fn.bdf], node_name) for fn in hcas]
    first = settings[0]
    for s, fn in zip(settings[1:], hcas[1:], strict=True):
        if s != first:
            notes.add("HCA settings that differ from the first HCA's: the profile gives every "
                      "HCA the first one's", names[fn.bdf])
    out: dict[str, Any] = {"enabled": True, **first}
    sub = hcas[0].number("subsystem_device") << 16 | hcas[0].number("subsystem_vendor")
    out["subsystem_id"] = Hex(sub)
    ofed = _t(root, f"{modules.MODULES}/mlx5_core/version")
    if ofed:
        out["ofed_version"] = ofed
    out["devices"] = [{"bus_id": fn.bdf, "name": names[fn.bdf],
                       **({"role": "nvlink-management"} if b"SW_MNG" in fn.vpd else {})}
                      for fn in hcas]
    ids = [_port_ids(root, names[fn.bdf]) for fn in hcas]
    how = port_identity(ids, first.get("guid_prefix"), node_name, first["ports_per_hca"])
    if how is None:
        notes.add("port GUIDs and LIDs not captured: made by mokkafs from the GUID prefix and "
                  "the node's name", CLASS)
    elif how.keep:
        for device, ports in zip(out["devices"], ids, strict=True):
            device["ports"] = [{"guid": format_guid(g), "lid": Hex(lid)} for g, lid in ports or []]
        notes.add("port GUIDs and LIDs: kept as they are (devices[].ports): every node that "
                  "mounts the profile shows them", CLASS)
    else:
        if how.index is not None:
            out["index"] = how.index
        notes.add("port GUIDs and LIDs: made by mokkafs from the GUID prefix and the node's "
                  "name (or node.index), as they were: mount with --node-name set to node.name",
                  CLASS)
    notes.add("InfiniBand counters: per read (the profile's traffic model makes them)", CLASS)
    return out
