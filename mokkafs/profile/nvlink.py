"""A GPU's NVLinks and NVLink fabric in a profile: ``nvlink.version`` and nvml-mock's
``nvlink.links_per_gpu`` and ``device_defaults.fabric`` (docs/nvml.md), with the checks that
keep the fabric consistent with the links and with the driver's IMEX channels."""

from __future__ import annotations

from mokkafs.model.mig import Imex
from mokkafs.model.nvlink import FABRIC_STATES, LINKS_PER_GPU, Fabric, NvLinks
from mokkafs.profile.problems import Problems
from mokkafs.profile.sections.devices import NvLink
from mokkafs.profile.sections.nvml import Fabric as FabricKeys
from mokkafs.state import PciFunction


def nvlinks(section: NvLink, architecture: str, problems: Problems) -> NvLinks | None:
    """The links of a GPU of ``architecture``: None where the profile states no NVLink."""
    if section.version is None:
        return None
    count = section.links_per_gpu or LINKS_PER_GPU.get(architecture)
    if count is None:
        where, message = ("nvlink", "links_per_gpu"), (
            f"{architecture or 'this'} architecture has no known NVLink count; "
            "state how many links each GPU has")
        if not any(p.message == message for p in problems.items):  # once, not per GPU
            problems.add(where, message)
        return None
    return NvLinks(section.version, count)


def fabric(keys: FabricKeys | None) -> Fabric | None:
    if keys is None:
        return None
    return Fabric(keys.cluster_uuid.hex, keys.clique_id, FABRIC_STATES[keys.state])


def check_fabric(gpus: tuple[PciFunction, ...], imex: Imex, problems: Problems) -> None:
    """A GPU joins an NVLink fabric over its NVLinks; the node's GPUs are in one cluster and
    one clique (the DRA driver refuses a node whose GPUs disagree); a node in a fabric gets
    IMEX channels from its driver (the compute domain hands them out)."""
    where = ("device_defaults", "fabric")
    found = [fn.gpu.nvml for fn in gpus if fn.gpu is not None and fn.gpu.nvml.fabric]
    if any(n.nvlink is None for n in found):
        problems.add(where, "a GPU joins an NVLink fabric over NVLink: state nvlink.version, "
                     "or leave fabric out")
    cliques = {(n.fabric.cluster_uuid, n.fabric.clique_id) for n in found if n.fabric}
    if len(cliques) > 1:
        problems.add(where, "the GPUs of one node name different clusters or cliques "
                     f"({len(cliques)}); give every GPU the same cluster_uuid and clique_id")
    if imex.channel_count == 0 and any(n.fabric and n.fabric.attached() for n in found):
        problems.add(("system", "imex", "channel_count"),
                     "a node in an NVLink fabric needs IMEX channels for its compute "
                     "domains; raise channel_count above 0, or leave fabric out")
