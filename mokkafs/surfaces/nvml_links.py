"""A GPU's NVLink and fabric keys in NVML's own place (``run/mokkafs-nvml/gpus/<bdf>``,
``mokkafs.surfaces.nvml``), computed from the State; docs/nvml.md names them.

- ``nvlink_links``: how many links the GPU has (NVML: INVALID_ARGUMENT beyond);
- ``nvlink.<n>.state``, ``.version`` (nvmlNvlinkVersion_t), ``.remote_type`` (an NVSwitch),
  and ``.remote_bus_id`` where the NVSwitch is a PCI function of the node (HGX boards up to
  Hopper). The links are spread over the node's NVSwitches in bus order, in blocks as even
  as the count allows (link n reaches switch n * switches // links). Where the switches are
  not on the node's bus (HGX B200's baseboard, GB200's NVL72 switch trays) the key is left
  out: NVML answers NOT_SUPPORTED for the remote's PCI info.
- A link is down when the GPU's ``down`` says so or its NVSwitch fell off the bus.
- ``fabric_*``: the GPU's nvmlGpuFabricInfo fields; its health mask says the bandwidth is
  degraded while any link is down.
"""

from __future__ import annotations

from mokkafs.model.nvlink import NVML_VERSIONS, REMOTE_SWITCH
from mokkafs.model.nvml import GpuNvml
from mokkafs.state import PciFunction

# NVML_GPU_FABRIC_HEALTH_MASK_*: the degraded-bandwidth field (bits 0-1: 1 true, 2 false), then
# route recovery, route unhealthy and access-timeout recovery all "false" (2 in bits 2-3,
# 4-5, 6-7) and the configuration correct (1 in bits 8-11)
HEALTH_DEGRADED, HEALTH_FULL = 1, 2
HEALTH_REST = 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8
SUMMARY_HEALTHY, SUMMARY_LIMITED = 1, 3  # NVML_GPU_FABRIC_HEALTH_SUMMARY_*


def links_down(nvml: GpuNvml, switches: tuple[PciFunction, ...]) -> frozenset[int]:
    """The GPU's links that are down: named so, or reaching a switch that fell off the bus."""
    links = nvml.nvlink
    if links is None:
        return frozenset()
    lost = {i for i, sw in enumerate(switches) if sw.lost}
    return frozenset(n for n in range(links.count)
                     if n in links.down or (switches and n * len(switches) // links.count
                                            in lost))


def link_values(nvml: GpuNvml, switches: tuple[PciFunction, ...]) -> list[tuple[str, object]]:
    """The NVLink keys of a GPU, given the node's NVSwitch functions in bus order."""
    links = nvml.nvlink
    if links is None:
        return []
    down = links_down(nvml, switches)
    out: list[tuple[str, object]] = [("nvlink_links", links.count)]
    for n in range(links.count):
        remote = switches[n * len(switches) // links.count].bdf if switches else None
        out += [(f"nvlink.{n}.state", int(n not in down)),
                (f"nvlink.{n}.version", NVML_VERSIONS[links.generation]),
                (f"nvlink.{n}.remote_type", REMOTE_SWITCH),
                (f"nvlink.{n}.remote_bus_id", remote)]
    return out


def fabric_values(nvml: GpuNvml, switches: tuple[PciFunction, ...]) -> list[tuple[str, object]]:
    fabric = nvml.fabric
    if fabric is None:
        return []
    degraded = bool(links_down(nvml, switches))
    return [("fabric_cluster_uuid", fabric.cluster_uuid), ("fabric_clique_id", fabric.clique_id),
            ("fabric_state", fabric.state), ("fabric_status", 0),
            ("fabric_health_mask", (HEALTH_DEGRADED if degraded else HEALTH_FULL) | HEALTH_REST),
            ("fabric_health_summary", SUMMARY_LIMITED if degraded else SUMMARY_HEALTHY)]
