"""What each endpoint is, before the hierarchy says where it sits: its identity (vendor,
device, class, driver), its own PCIe link, and the BARs it takes."""

from __future__ import annotations

from dataclasses import dataclass

from mokkafs.model.bdf import Bdf
from mokkafs.profile import devices, infiniband
from mokkafs.profile.schema import InfiniBand
from mokkafs.state import PcieLink, PciIdentity

MELLANOX = 0x15B3
CLASS_INFINIBAND = 0x020700
CLASS_ETHERNET = 0x020000
# PCIe generation of a ConnectX part, by PCI device id (its MTxxxx number).
HCA_PCIE_GEN = {0x1017: 3, 0x1019: 4, 0x101B: 4, 0x101D: 4, 0x1021: 5, 0x1023: 6}


@dataclass
class Endpoint:
    """What a function is, before the hierarchy says where: identity, link, BARs to take."""

    identity: PciIdentity
    link: PcieLink
    bars: list[tuple[int, int, bool, bool]]
    gpu: devices.Gpu | None = None


def identities(gpus: list[devices.Gpu], switches: list[devices.NvSwitch],
               placed: list[infiniband.Placed], ib: InfiniBand) -> dict[Bdf, Endpoint]:
    out: dict[Bdf, Endpoint] = {}
    for gpu in gpus:
        out[gpu.bdf] = Endpoint(
            PciIdentity("gpu", gpu.vendor, gpu.device, gpu.subsystem_vendor,
                        gpu.subsystem_device, devices.CLASS_3D, gpu.revision, "nvidia"),
            gpu.link, gpu.bars(), gpu)
    for sw in switches:
        # nvidia.ko binds NVSwitches with a PCI driver of their own (linux_nvswitch.c)
        out[sw.bdf] = Endpoint(
            PciIdentity("nvswitch", devices.NVIDIA, sw.device, devices.NVIDIA, 0,
                        devices.CLASS_BRIDGE_OTHER, 0xA1, "nvidia-nvswitch"),
            devices.NVSWITCH_LINK, [(0, 32 * devices.MIB, False, False)])
    hca_device = int(ib.hca_type[2:])
    sub = ib.subsystem_id if ib.subsystem_id is not None else MELLANOX
    gen = HCA_PCIE_GEN.get(hca_device, 5)
    for p in placed:
        out[p.bdf] = Endpoint(
            PciIdentity("hca", MELLANOX, hca_device, sub & 0xFFFF or MELLANOX, sub >> 16,
                        CLASS_ETHERNET if ib.link_layer == "Ethernet" else CLASS_INFINIBAND,
                        0x00, "mlx5_core"),
            PcieLink(gen, 16, gen, 16), [(0, 32 * devices.MIB, True, True)])
    return out
