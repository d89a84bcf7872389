"""A capture of a real node: its GPUs and HCAs are described by their sections and still look
as they did. A copy of a DGX H100 mount stands in for the node, changed where real hardware
differs from what mokkafs makes: each GPU's, HCA's and PCIe switch port's config space (another
capability list, other BAR addresses), its IRQ and its ``resource``, and each GPU's and HCA's
IOMMU group (another number, as a real node's firmware gives), and each HCA's GUIDs and LID
(burnt in by the vendor, given by the subnet manager). The capture describes the
8 GPUs and 12 HCAs by ``devices`` and ``infiniband``, keeps their captured attributes in
``pci_functions`` overrides, and the mount of the captured profile shows ``lspci -vvv -nn``
and ``lspci -tv`` as the tree does, byte for byte, while the NVIDIA driver's and the RDMA
stack's files are served, with the HCAs' GUIDs and LIDs as they were."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.captures import mounted, run_capture
from tests.helpers.tools import require_tool

NODE = ["--node-name", "node-a"]
BUS = "sys/bus/pci/devices"
PM_CAP = 0x60  # a Power Management capability mokkafs never makes, chained after PCIe's
GROUPS = "sys/kernel/iommu_groups"
REAL_GROUP = 500  # a GPU's or HCA's group on the "real" node: 500 + its place in the list
REAL_GUID = 0xB83F_D203_00A1_0000  # HCA n's: + 0x137 * n (no slot layout of mokkafs's)
REAL_LID = 0x100  # HCA n's: + 7 * n, as a subnet manager hands them out
IB = "sys/class/infiniband"


def lspci(sysfs: Path, *args: str) -> str:
    return subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                           f"sysfs.path={sysfs}/bus/pci", *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def _copy_file(src: str, dst: str) -> None:
    """Copy what reads; what does not (write-only attributes) is left out, as a capture
    leaves it out."""
    with contextlib.suppress(OSError):
        shutil.copy2(src, dst)


def _copy(mount: Path, tree: Path) -> None:
    for top in ("sys", "proc"):
        shutil.copytree(mount / top, tree / top, symlinks=True, copy_function=_copy_file,
                        ignore=shutil.ignore_patterns("kmsg"))


def _as_real(d: Path, n: int) -> None:
    """Change a function's directory where a real one differs from mokkafs's."""
    config = bytearray((d / "config").read_bytes())
    config[0x41] = PM_CAP  # the PCI Express capability's next pointer
    config[PM_CAP:PM_CAP + 8] = bytes([0x01, 0x00, 0x03, 0x5A, 0x08, 0x00, 0x00, 0x00])
    config[0x3C] = (200 + n) & 0xFF  # interrupt line
    bar0 = int.from_bytes(config[0x10:0x14], "little")
    if bar0 & ~0xF:  # move BAR 0 by 16 MiB, in config space and in ``resource``
        config[0x10:0x14] = (bar0 + 0x0100_0000).to_bytes(4, "little")
        rows = (d / "resource").read_text().splitlines()
        start, end, flags = (int(x, 16) for x in rows[0].split())
        rows[0] = f"0x{start + 0x0100_0000:016x} 0x{end + 0x0100_0000:016x} 0x{flags:016x}"
        (d / "resource").write_text("\n".join(rows) + "\n")
    (d / "config").write_bytes(bytes(config))
    (d / "irq").write_text(f"{200 + n}\n")


def _regroup(tree: Path, bdf: str, group: int) -> None:
    """Move a function to IOMMU group ``group``: both links, as the kernel makes them."""
    d = (tree / BUS / bdf).resolve()
    old = (d / "iommu_group").resolve()
    (old / "devices" / bdf).unlink()
    new = tree / GROUPS / str(group) / "devices"
    new.mkdir(parents=True)
    (new / bdf).symlink_to(os.path.relpath(d, new))
    (d / "iommu_group").unlink()
    (d / "iommu_group").symlink_to(os.path.relpath(new.parent, d))


def _realize(tree: Path) -> tuple[list[str], list[str]]:
    """The GPUs' and HCAs' addresses, once they and the bridges above them are changed."""
    gpus: list[str] = []
    hcas: list[str] = []
    bridges: set[str] = set()
    for link in sorted((tree / BUS).iterdir()):
        d = link.resolve()
        vendor, cls = (d / "vendor").read_text().strip(), (d / "class").read_text().strip()
        if vendor == "0x10de" and cls.startswith("0x03"):
            gpus.append(link.name)
        elif vendor == "0x15b3" and (d / "infiniband").is_dir():
            hcas.append(link.name)
        else:
            continue
        bridges.update(p.name for p in d.parents if p.parent.name.startswith("pci"))
        bridges.update(p.name for p in d.parents if (p / "secondary_bus_number").exists())
    for n, bdf in enumerate(gpus + hcas + sorted(bridges)):
        _as_real((tree / BUS / bdf).resolve(), n)
    for n, bdf in enumerate(gpus + hcas):
        _regroup(tree, bdf, REAL_GROUP + n)
    for n, name in enumerate(sorted((tree / IB).iterdir(), key=lambda p: int(p.name[5:]))):
        _real_guid(name, n)
    return gpus, hcas


def _real_guid(hca: Path, n: int) -> None:
    """Give an HCA a vendor's GUID and a subnet manager's LID (its one port's)."""
    h = f"{REAL_GUID + 0x137 * n:016x}"
    guid = f"{h[0:4]}:{h[4:8]}:{h[8:12]}:{h[12:16]}"
    for attr in ("node_guid", "sys_image_guid"):
        (hca / attr).write_text(guid + "\n")
    (hca / "ports/1/gids/0").write_text(f"fe80:0000:0000:0000:{guid}\n")
    (hca / "ports/1/lid").write_text(f"0x{REAL_LID + 7 * n:x}\n")


def _node(tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    tree = tmp_path / "node"
    with mounted("h100", tmp_path / "a", *NODE) as first:
        _copy(first.path, tree)
    gpus, hcas = _realize(tree)
    assert len(gpus) == 8 and len(hcas) == 12
    return tree, gpus, hcas


def _capture(tree: Path, captured: Path) -> tuple[dict[str, Any], str]:
    done = run_capture("--root", str(tree), *NODE, "--output", str(captured))
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(captured.read_text()), done.stderr


def test_a_capture_of_a_real_like_node_describes_its_gpus_and_hcas_as_they_were(
        tmp_path: Path) -> None:
    tree, gpus, hcas = _node(tmp_path)
    captured = tmp_path / "node.yaml"
    doc, stderr = _capture(tree, captured)
    assert sorted(d["pci"]["bus_id"] for d in doc["devices"]) == gpus
    assert sorted(d["bus_id"] for d in doc["infiniband"]["devices"]) == hcas
    overridden = {e["bdf"] for e in doc["pci_functions"] if e.get("overrides")}
    assert set(gpus) | set(hcas) <= overridden
    assert "kept verbatim" not in stderr, stderr
    with mounted(captured, tmp_path / "b", *NODE) as second:
        for args in (("-vvv", "-nn"), ("-tv",)):
            assert lspci(second.sys, *args) == lspci(tree / "sys", *args)
        shown = lspci(second.sys, "-vvv", "-nn")
        changed = len(gpus) + len(hcas)  # and the bridges above them
        assert shown.count(f"Capabilities: [{PM_CAP:x}] Power Management") > changed
        for n, bdf in enumerate(gpus):
            assert f"{bdf[5:]} 3D controller" in shown and f"IRQ {200 + n}" in shown
        for n, bdf in enumerate(gpus + hcas):
            assert f"IOMMU group: {REAL_GROUP + n}\n" in shown
            group = second.sys / f"kernel/iommu_groups/{REAL_GROUP + n}/devices/{bdf}"
            assert group.resolve() == (second.path / BUS / bdf).resolve()
        for n, bdf in enumerate(gpus):
            info = (second.path / f"proc/driver/nvidia/gpus/{bdf}/information").read_text()
            assert f"Bus Location: \t {bdf}" in info and f"IRQ:   \t\t {200 + n}" in info
            assert (second.path / f"dev/nvidia{n}").exists()
        names = sorted(p.name for p in (second.sys / "class/infiniband").iterdir())
        assert names == sorted(f"mlx5_{i}" for i in range(12))
        for name in names:
            device = (second.sys / f"class/infiniband/{name}/device").resolve()
            assert device.name in hcas
            for attr in ("node_guid", "sys_image_guid", "ports/1/gids/0", "ports/1/lid"):
                assert (second.path / IB / name / attr).read_text() == \
                    (tree / IB / name / attr).read_text(), (name, attr)


def test_a_gpu_the_sections_put_elsewhere_is_kept_verbatim_and_the_others_described(
        tmp_path: Path) -> None:
    tree, gpus, hcas = _node(tmp_path)
    last = (tree / BUS / gpus[-1]).resolve()
    (last / "numa_node").write_text("0\n")  # a BIOS that puts it on another node than its root
    captured = tmp_path / "node.yaml"
    doc, stderr = _capture(tree, captured)
    assert "kept verbatim one by one" in stderr and gpus[-1] in stderr, stderr
    described = sorted(d["pci"]["bus_id"] for d in doc["devices"])
    assert described == gpus[:-1]
    entries = {e["bdf"]: e for e in doc["pci_functions"]}
    assert not entries[gpus[-1]].get("overrides") and entries[gpus[-1]]["driver"] == "nvidia"
    ib = sorted(d["bus_id"] for d in doc["infiniband"]["devices"])
    assert ib and set(ib) < set(hcas)  # the HCAs on the GPU's root complex are kept too
    with mounted(captured, tmp_path / "b", *NODE) as second:
        for args in (("-vvv", "-nn"), ("-tv",)):
            assert lspci(second.sys, *args) == lspci(tree / "sys", *args)
        gpu_dirs = sorted(p.name for p in (second.path / "proc/driver/nvidia/gpus").iterdir())
        assert gpu_dirs == gpus[:-1]
        names = {(second.sys / f"class/infiniband/{n}/device").resolve().name
                 for n in (p.name for p in (second.sys / "class/infiniband").iterdir())}
        assert names == set(ib)
