"""A GPU's NVLinks and its place in an NVLink fabric, as NVML reports them and no kernel file
holds (served by ``mokkafs.surfaces.nvml_links``; docs/nvml.md). The numbers are NVML's."""

from __future__ import annotations

from dataclasses import dataclass

# NVML_NVLINK_MAX_LINKS of the NVML 13 API: no link index reaches it
MAX_LINKS = 36
# NVLinks per GPU by architecture (NVIDIA's datasheets: A100 12 of NVLink 3, H100 SXM and
# Blackwell 18 of NVLink 4 and 5); a profile states nvlink.links_per_gpu for others
LINKS_PER_GPU = {"ampere": 12, "hopper": 18, "blackwell": 18}
# NVLink generation (the profile's nvlink.version) -> NVML's nvmlNvlinkVersion_t
NVML_VERSIONS = {1: 1, 2: 2, 3: 4, 4: 6, 5: 7, 6: 8}
# NVML's nvmlIntNvLinkDeviceType_t of the far end: every shipped NVLink board is switched
REMOTE_SWITCH = 2
# NVML_GPU_FABRIC_STATE_*, by nvml-mock's names; "auto" (registered once Fabric Manager is
# ready) is completed: mokkafs simulates no Fabric Manager to wait for
FABRIC_STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3,
                 "auto": 3}
FABRIC_COMPLETED = 3


@dataclass(frozen=True, slots=True)
class NvLinks:
    """A GPU's NVLinks: their generation, how many it has, and those down (none unless a
    layer over the profile says so)."""

    generation: int
    count: int
    down: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Fabric:
    """Where the GPU sits in an NVLink fabric (nvmlGpuFabricInfo): the cluster's UUID (32 hex
    digits), the clique's ID and the registration state (NVML_GPU_FABRIC_STATE_*)."""

    cluster_uuid: str
    clique_id: int
    state: int

    def attached(self) -> bool:
        """What go-nvlib's IsFabricAttached says: registered, in a cluster with a UUID."""
        return self.state == FABRIC_COMPLETED and self.cluster_uuid != "0" * 32
